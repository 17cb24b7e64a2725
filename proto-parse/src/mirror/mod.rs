//! Mirror encapsulations: what a switch (or a fabric) wraps a copied frame
//! in before sending it to a collector. GRE ([`gre`]), ERSPAN type I, II
//! and III over GRE ([`erspan`]) and VXLAN ([`vxlan`]) are decapsulated by
//! [`crate::frame::decode`], which then decodes the inner frame through the
//! normal path and names the encapsulation in [`crate::frame::Frame::mirror`].

use std::net::IpAddr;

pub mod erspan;
pub mod gre;
pub mod vxlan;

pub use erspan::{Granularity, SwitchTime};

/// How a frame was mirrored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MirrorKind {
    /// Plain GRE: transparent Ethernet bridging (0x6558) or IP in GRE.
    Gre,
    /// ERSPAN type I: GRE 0x88BE without a sequence number, no header.
    ErspanI,
    ErspanII,
    ErspanIII,
    Vxlan,
}

impl MirrorKind {
    pub const ALL: [MirrorKind; 5] = [
        MirrorKind::Gre,
        MirrorKind::ErspanI,
        MirrorKind::ErspanII,
        MirrorKind::ErspanIII,
        MirrorKind::Vxlan,
    ];

    /// The stable name used in JSON and text.
    pub const fn as_str(self) -> &'static str {
        match self {
            MirrorKind::Gre => "gre",
            MirrorKind::ErspanI => "erspan1",
            MirrorKind::ErspanII => "erspan2",
            MirrorKind::ErspanIII => "erspan3",
            MirrorKind::Vxlan => "vxlan",
        }
    }

    /// How people write it.
    pub const fn title(self) -> &'static str {
        match self {
            MirrorKind::Gre => "GRE",
            MirrorKind::ErspanI => "ERSPAN I",
            MirrorKind::ErspanII => "ERSPAN II",
            MirrorKind::ErspanIII => "ERSPAN III",
            MirrorKind::Vxlan => "VXLAN",
        }
    }
}

impl core::fmt::Display for MirrorKind {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.title())
    }
}

/// The outer layers of a mirrored frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Mirror {
    pub kind: MirrorKind,
    /// The outer IP source (the switch that mirrored the frame) and
    /// destination (the collector).
    pub src: IpAddr,
    pub dst: IpAddr,
    /// The mirror session: ERSPAN's session id, GRE's key (0 without
    /// one), VXLAN's VNI.
    pub session: u32,
    pub gre_key: Option<u32>,
    pub gre_seq: Option<u32>,
    /// ERSPAN's T bit: the switch cut the copy.
    pub truncated: bool,
    /// ERSPAN III: the switch's timestamp.
    pub switch_time: Option<SwitchTime>,
    /// Frame offset of the encapsulation header (GRE or VXLAN).
    pub offset: usize,
    /// Frame offset of the mirrored frame (or IP packet).
    pub inner_offset: usize,
}

impl Mirror {
    /// The capture point this copy was taken at: the mirroring switch's
    /// address and its session.
    pub fn source(&self) -> MirrorSource {
        MirrorSource {
            kind: self.kind,
            switch: self.src,
            session: self.session,
        }
    }
}

/// A mirror session as a capture point: who mirrored (the outer source
/// address), which session, and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MirrorSource {
    pub kind: MirrorKind,
    pub switch: IpAddr,
    pub session: u32,
}

impl core::fmt::Display for MirrorSource {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{} {} session {}", self.kind, self.switch, self.session)
    }
}
