//! Mirror encapsulations met on the way: GRE (and ERSPAN I/II/III after
//! it) in an IP packet, VXLAN in a UDP datagram. The outer layers become
//! [`super::Frame::mirror`] and the frame they carry goes back through
//! `network`. The hot loops' shortcut for the common mirror
//! ([`super::ipv4_mirror`]) reads the same fields at fixed offsets and is
//! tested against this.

use std::net::IpAddr;

use etherparse::Ethernet2HeaderSlice;

use super::network::network;
use super::{DecodeConfig, ETH_IPV4, ETH_IPV6, Frame, Ip, Udp, Vlans};
use crate::link::Next;
use crate::mirror::{Mirror, MirrorKind, erspan, gre, vxlan};
use crate::{Error, ErrorKind, Layer, LenSource};

/// What a mirror encapsulation carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Inner {
    Ethernet,
    /// An IP packet (GRE 0x0800 / 0x86DD, ERSPAN III frame type 2).
    Ip(Next),
}

/// An encapsulation error at `start` (layer-relative offsets shifted): a
/// length cut by the capture stays a snaplen cut; a header longer than
/// the enclosing packet's length field is a malformation.
fn encap_err(err: Error, start: usize, cut_by_capture: bool) -> Error {
    let mut err = err.at_offset(start);
    if let ErrorKind::Truncated { source, .. } = &mut err.kind
        && !cut_by_capture
    {
        *source = LenSource::Header;
    }
    err
}

/// GRE at `off` (and ERSPAN after it): the mirror it describes and what
/// it carries, at which frame offset.
fn gre_mirror(
    data: &[u8],
    off: usize,
    cap_end: usize,
    ip_end: usize,
    src: IpAddr,
    dst: IpAddr,
) -> Result<(Mirror, usize, Inner), Error> {
    let cut = cap_end < ip_end;
    let packet =
        gre::Packet::new_checked(&data[off..cap_end]).map_err(|e| encap_err(e, off, cut))?;
    let mut mirror = Mirror {
        kind: MirrorKind::Gre,
        src,
        dst,
        session: packet.key().unwrap_or(0),
        gre_key: packet.key(),
        gre_seq: packet.seq(),
        truncated: false,
        switch_time: None,
        offset: off,
        inner_offset: 0,
    };
    let mut inner_off = off + packet.header_len();
    let inner = match packet.protocol() {
        gre::protocol::TEB => Inner::Ethernet,
        gre::protocol::IPV4 => Inner::Ip(Next::EtherType(ETH_IPV4)),
        gre::protocol::IPV6 => Inner::Ip(Next::EtherType(ETH_IPV6)),
        gre::protocol::ERSPAN_II if !packet.seq_present() => {
            mirror.kind = MirrorKind::ErspanI;
            Inner::Ethernet
        }
        gre::protocol::ERSPAN_II | gre::protocol::ERSPAN_III => {
            let e = erspan::Packet::new_checked(&data[inner_off..cap_end])
                .map_err(|e| encap_err(e, inner_off, cut))?;
            mirror.session = u32::from(e.session_id());
            mirror.truncated = e.truncated();
            let (frame_type, header_len) = match e.version() {
                erspan::Version::II => {
                    mirror.kind = MirrorKind::ErspanII;
                    (erspan::frame_type::ETHERNET, erspan::field::II_LEN)
                }
                erspan::Version::III => {
                    mirror.kind = MirrorKind::ErspanIII;
                    mirror.switch_time = e.switch_time();
                    (e.frame_type(), e.header_len())
                }
            };
            let inner = match frame_type {
                erspan::frame_type::ETHERNET => Inner::Ethernet,
                erspan::frame_type::IP => Inner::Ip(Next::IpAny),
                other => {
                    return Err(Error {
                        layer: Layer::Erspan,
                        offset: inner_off + 10,
                        kind: ErrorKind::Unsupported {
                            what: "ERSPAN frame type",
                            value: u64::from(other),
                        },
                    });
                }
            };
            inner_off += header_len;
            inner
        }
        other => {
            return Err(Error {
                layer: Layer::Gre,
                offset: off + gre::field::PROTOCOL.start,
                kind: ErrorKind::Unsupported {
                    what: "GRE protocol type",
                    value: u64::from(other),
                },
            });
        }
    };
    mirror.inner_offset = inner_off;
    Ok((mirror, inner_off, inner))
}

/// The error for an encapsulation inside a mirrored frame.
fn recursion(layer: Layer, offset: usize) -> Error {
    Error {
        layer,
        offset,
        kind: ErrorKind::Unsupported {
            what: "encapsulation inside a mirrored frame (recursion), depth",
            value: 2,
        },
    }
}

/// GRE in the IP packet `ip`, whose header ends at `off`.
pub(super) fn decode_gre<'a>(
    frame: &mut Frame<'a>,
    data: &'a [u8],
    off: usize,
    cap_end: usize,
    ip_end: usize,
    ip: &Ip<'a>,
    cfg: &DecodeConfig,
) -> Result<(), Error> {
    if frame.mirror.is_some() {
        return Err(recursion(Layer::Gre, off));
    }
    let (mirror, inner_off, inner) = gre_mirror(data, off, cap_end, ip_end, ip.src, ip.dst)?;
    mirror_inner(frame, &data[..cap_end], mirror, inner_off, inner, cfg)
}

/// VXLAN in the UDP datagram `udp` (ending at frame offset `udp_end`); a
/// datagram on port 4789 without VXLAN's I flag is left as other UDP.
pub(super) fn vxlan_mirror<'a>(
    frame: &mut Frame<'a>,
    data: &'a [u8],
    ip: &Ip<'a>,
    udp: &Udp<'a>,
    udp_end: usize,
    cfg: &DecodeConfig,
) -> Result<(), Error> {
    let cut = udp.payload.len() < udp.payload_wire_len;
    let packet = match vxlan::Packet::new_checked(udp.payload) {
        Ok(p) => p,
        Err(e) if matches!(e.kind, ErrorKind::BadValue { .. }) => return Ok(()),
        Err(e) => return Err(encap_err(e, udp.payload_offset, cut)),
    };
    let inner_off = udp.payload_offset + vxlan::field::HEADER_LEN;
    let mirror = Mirror {
        kind: MirrorKind::Vxlan,
        src: ip.src,
        dst: ip.dst,
        session: packet.vni(),
        gre_key: None,
        gre_seq: None,
        truncated: false,
        switch_time: None,
        offset: udp.payload_offset,
        inner_offset: inner_off,
    };
    let end = udp_end.min(data.len());
    mirror_inner(frame, &data[..end], mirror, inner_off, Inner::Ethernet, cfg)
}

/// The mirrored frame at `off` (`data` ends where the outer packet does):
/// it replaces the outer layers in `frame`, which keeps them in `mirror`.
fn mirror_inner<'a>(
    frame: &mut Frame<'a>,
    data: &'a [u8],
    mirror: Mirror,
    off: usize,
    inner: Inner,
    cfg: &DecodeConfig,
) -> Result<(), Error> {
    frame.mirror = Some(mirror);
    frame.vlans = Vlans::default();
    frame.ether_type = None;
    frame.ip = None;
    frame.udp = None;
    match inner {
        Inner::Ip(next) => network(frame, data, off, next, false, cfg),
        Inner::Ethernet => {
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
            let next = Next::EtherType(eth.ether_type().0);
            network(frame, data, off + eth.slice().len(), next, true, cfg)
        }
    }
}
