//! The layers after the link header: VLAN tags, IP (its headers in
//! `ip`), then UDP and the protocol its ports choose (MetaRoCE, RoCEv2,
//! VXLAN) or GRE. The frame a mirror carries comes back here from
//! `mirrored`, so a mirrored frame is decoded as if captured plain.

use etherparse::{IpNumber, SingleVlanHeaderSlice, UdpHeaderSlice};

use super::ip::{ipv4, ipv6};
use super::mirrored::{decode_gre, vxlan_mirror};
use super::{
    DecodeConfig, ETH_IPV4, ETH_IPV6, ETH_QINQ, ETH_QINQ_OLD, ETH_VLAN, Frame, PortChoice, RoceV2,
    Transport, UDP_HEADER_LEN, Udp,
};
use crate::link::Next;
use crate::mirror::vxlan;
use crate::rocev2::{self, IcrcStatus, check_len};
use crate::{Error, Layer, LenSource, metaroce};

/// The layers after a link header at `off`: VLAN tags (when the link is
/// Ethernet-like), IP, then UDP (MetaRoCE, RoCEv2, VXLAN) or GRE. A
/// mirror encapsulation comes back here for the frame it carries.
pub(super) fn network<'a>(
    frame: &mut Frame<'a>,
    data: &'a [u8],
    mut off: usize,
    next: Next,
    link_ether: bool,
    cfg: &DecodeConfig,
) -> Result<(), Error> {
    let is_v6 = match next {
        Next::NotIp(_) => return Ok(()),
        Next::IpAny => match data.get(off) {
            Some(b) if b >> 4 == 4 => false,
            Some(b) if b >> 4 == 6 => true,
            Some(b) => {
                return Err(Error::bad_value(
                    Layer::Ipv4,
                    off,
                    "version",
                    u64::from(b >> 4),
                    "4 or 6",
                ));
            }
            None => {
                return Err(Error::truncated(
                    Layer::Ipv4,
                    off,
                    20,
                    0,
                    LenSource::Captured,
                ));
            }
        },
        Next::EtherType(mut ether_type) => {
            while link_ether && matches!(ether_type, ETH_VLAN | ETH_QINQ | ETH_QINQ_OLD) {
                let rest = &data[off..];
                let tag = SingleVlanHeaderSlice::from_slice(rest).map_err(|e| {
                    Error::truncated(
                        Layer::Vlan,
                        off + rest.len(),
                        e.required_len,
                        rest.len(),
                        LenSource::Captured,
                    )
                })?;
                frame.vlans.push(tag.vlan_identifier().value());
                ether_type = tag.ether_type().0;
                off += tag.slice().len();
            }
            frame.ether_type = Some(ether_type);
            match ether_type {
                ETH_IPV4 => false,
                ETH_IPV6 => true,
                _ => return Ok(()),
            }
        }
    };

    // IP layer: `ip_end` is where the IP packet ends on the wire (from its
    // length field), `cap_end` where its captured bytes end.
    let ip_off = off;
    let (ip_end, ip, stop) = if is_v6 {
        ipv6(data, ip_off)?
    } else {
        ipv4(data, ip_off)?
    };
    frame.ip = Some(ip);
    if let Some(err) = stop {
        // the addresses are known, the transport header is not usable
        return Err(err);
    }
    let cap_end = ip_end.min(data.len());
    off = ip_off + ip.headers.len();
    if ip.protocol == IpNumber::GRE.0 {
        return decode_gre(frame, data, off, cap_end, ip_end, &ip, cfg);
    }
    if ip.protocol != IpNumber::UDP.0 {
        return Ok(());
    }

    // UDP
    let udp_off = off;
    check_len(
        Layer::Udp,
        udp_off,
        udp_off + UDP_HEADER_LEN,
        cap_end,
        ip_end,
    )?;
    let hdr = UdpHeaderSlice::from_slice(&data[udp_off..cap_end]).map_err(|e| {
        Error::truncated(
            Layer::Udp,
            cap_end,
            e.required_len,
            cap_end - udp_off,
            LenSource::Captured,
        )
    })?;
    let length = hdr.length();
    if usize::from(length) < UDP_HEADER_LEN {
        return Err(Error::bad_value(
            Layer::Udp,
            udp_off + 4,
            "length",
            u64::from(length),
            ">= 8",
        ));
    }
    let udp_end = udp_off + usize::from(length);
    if udp_end > ip_end {
        return Err(Error::truncated(
            Layer::Udp,
            ip_end,
            usize::from(length),
            ip_end - udp_off,
            LenSource::Header,
        ));
    }
    let payload_offset = udp_off + UDP_HEADER_LEN;
    let payload = &data[payload_offset..udp_end.min(data.len())];
    let payload_wire_len = usize::from(length) - UDP_HEADER_LEN;
    let udp = Udp {
        src_port: hdr.source_port(),
        dst_port: hdr.destination_port(),
        length,
        checksum: hdr.checksum(),
        offset: udp_off,
        header: hdr.slice(),
        payload,
        payload_offset,
        payload_wire_len,
    };
    frame.udp = Some(udp);

    let choice = cfg.port_choice(udp.src_port, udp.dst_port);
    if choice == PortChoice::RoceV2 {
        let lax = rocev2::parse_lax(payload, payload_wire_len);
        let icrc = match (&lax.packet, cfg.verify_crc) {
            (Some(p), true) => p.verify_icrc(ip.headers, udp.header),
            (None, true) => IcrcStatus::NotPresent,
            (_, false) => IcrcStatus::NotChecked,
        };
        frame.payload = Transport::RoceV2(RoceV2 {
            packet: lax.packet,
            icrc,
            ip_headers: ip.headers,
            udp_header: udp.header,
        });
        return lax
            .stop
            .map_or(Ok(()), |e| Err(e.at_offset(payload_offset)));
    }
    if choice == PortChoice::MetaRoce || (cfg.heuristic && metaroce::looks_like(payload)) {
        let lax = metaroce::parse_lax(payload, payload_wire_len);
        let stop = lax.stop.clone();
        frame.payload = Transport::MetaRoce(lax);
        return stop.map_or(Ok(()), |e| Err(e.at_offset(payload_offset)));
    }
    if udp.dst_port == vxlan::UDP_PORT && frame.mirror.is_none() {
        return vxlan_mirror(frame, data, &ip, &udp, udp_end, cfg);
    }
    Ok(())
}
