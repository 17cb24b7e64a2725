//! The link header, by link type: where the network layer starts and what
//! it is (an EtherType, or an IP packet of either version). Ethernet is
//! read here with `etherparse`; Linux cooked headers, BSD loopback and ERF
//! records in [`crate::link`].

use etherparse::Ethernet2HeaderSlice;

use super::network::network;
use super::{DecodeConfig, ETH_IPV4, ETH_IPV6, Frame, LinkType};
use crate::link::{self, Next};
use crate::{Error, Layer, LenSource};

/// Decodes `data` into `frame` from its link header on; the error says
/// where and why decoding stopped.
pub(super) fn decode_into<'a>(
    frame: &mut Frame<'a>,
    link: LinkType,
    data: &'a [u8],
    cfg: &DecodeConfig,
) -> Result<(), Error> {
    let (off, next) = match link {
        LinkType::Ethernet => {
            let eth = Ethernet2HeaderSlice::from_slice(data).map_err(|e| {
                Error::truncated(
                    Layer::Ethernet,
                    data.len(),
                    e.required_len,
                    data.len(),
                    LenSource::Captured,
                )
            })?;
            (eth.slice().len(), Next::EtherType(eth.ether_type().0))
        }
        LinkType::LinuxSll => link::sll(data)?,
        LinkType::LinuxSll2 => link::sll2(data)?,
        LinkType::Null => link::null(data, false)?,
        LinkType::Loop => link::null(data, true)?,
        LinkType::Raw | LinkType::RawDlt12 | LinkType::RawDlt14 => (0, Next::IpAny),
        LinkType::Ipv4 => (0, Next::EtherType(ETH_IPV4)),
        LinkType::Ipv6 => (0, Next::EtherType(ETH_IPV6)),
        LinkType::Erf => match link::erf(data)? {
            (off, Some(next)) => (off, next),
            (off, None) => {
                let rest = &data[off..];
                let eth = Ethernet2HeaderSlice::from_slice(rest).map_err(|e| {
                    Error::truncated(
                        Layer::Ethernet,
                        data.len(),
                        e.required_len,
                        rest.len(),
                        LenSource::Captured,
                    )
                })?;
                (off + eth.slice().len(), Next::EtherType(eth.ether_type().0))
            }
        },
        LinkType::Unknown(_) => return Err(link::unsupported(link)),
    };
    let link_ether = matches!(
        link,
        LinkType::Ethernet | LinkType::LinuxSll | LinkType::LinuxSll2 | LinkType::Erf
    );
    network(frame, data, off, next, link_ether, cfg)
}
