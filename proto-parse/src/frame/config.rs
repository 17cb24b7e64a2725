//! How frames are decoded: the UDP ports of MetaRoCE and RoCEv2, the
//! MetaRoCE heuristic and the ICRC check, and the port rule every route
//! (the full decode and the hot loops' shortcuts) applies alike.

use crate::rocev2;
#[cfg(doc)]
use crate::{frame::RoceV2, metaroce, rocev2::IcrcStatus};

/// How to decode frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DecodeConfig {
    /// UDP port (source or destination) of MetaRoCE. Default 4794.
    pub metaroce_port: u16,
    /// UDP destination port of RoCEv2. Default 4791.
    pub rocev2_port: u16,
    /// Also try MetaRoCE on other UDP ports ([`metaroce::looks_like`]).
    /// Default false.
    pub heuristic: bool,
    /// Verify the RoCEv2 ICRC while decoding (else
    /// [`IcrcStatus::NotChecked`]; [`RoceV2::verify_icrc`] still works).
    /// Default true. It costs a CRC-32 over the whole IP packet, more than
    /// the rest of `decode` together (`cargo bench -p proto-parse --bench
    /// header_parse`), so bulk analysis may turn it off and call
    /// [`RoceV2::verify_icrc`] only where needed.
    pub verify_crc: bool,
}

impl Default for DecodeConfig {
    fn default() -> Self {
        DecodeConfig {
            metaroce_port: 4794,
            rocev2_port: rocev2::UDP_PORT,
            heuristic: false,
            verify_crc: true,
        }
    }
}

/// What a UDP datagram's ports say it carries (the rule in the module
/// documentation, before any heuristic).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PortChoice {
    RoceV2,
    MetaRoce,
    /// Neither port is configured: the heuristic, when on, decides.
    Unknown,
}

impl DecodeConfig {
    /// The protocol of a UDP datagram by its ports.
    #[inline]
    pub fn port_choice(&self, src_port: u16, dst_port: u16) -> PortChoice {
        if dst_port == self.rocev2_port {
            PortChoice::RoceV2
        } else if dst_port == self.metaroce_port || src_port == self.metaroce_port {
            PortChoice::MetaRoce
        } else {
            PortChoice::Unknown
        }
    }
}
