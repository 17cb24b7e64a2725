//! The IP header of a frame, IPv4 (options) or IPv6 (extension headers),
//! read with `etherparse`: its fields, where the packet ends on the wire,
//! and the fragment or bad extension header after which the decode stops
//! (fragments are `crate::defrag`'s).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use etherparse::{Ipv4HeaderSlice, Ipv6ExtensionsSlice, Ipv6HeaderSlice};

use super::{Ecn, Ip};
use crate::rocev2::check_len;
use crate::{Error, Layer, LenSource};

/// Maps an etherparse length error of a header starting at `start`.
fn len_err(layer: Layer, start: usize, e: &etherparse::err::LenError) -> Error {
    Error::truncated(
        layer,
        start + e.len,
        e.required_len,
        e.len,
        LenSource::Captured,
    )
}

/// The IP layer at `off`: where the IP packet ends on the wire, its fields,
/// and an error that stops decoding after it (fragments, bad extension
/// headers). `Err` when not even the IP header decoded.
type IpResult<'a> = Result<(usize, Ip<'a>, Option<Error>), Error>;

/// IPv4 at `off`.
pub(super) fn ipv4(data: &[u8], off: usize) -> IpResult<'_> {
    use etherparse::err::ipv4::{HeaderError, HeaderSliceError};
    let hdr = Ipv4HeaderSlice::from_slice(&data[off..]).map_err(|e| match e {
        HeaderSliceError::Len(e) => len_err(Layer::Ipv4, off, &e),
        HeaderSliceError::Content(HeaderError::UnexpectedVersion { version_number }) => {
            Error::bad_value(Layer::Ipv4, off, "version", version_number.into(), "4")
        }
        HeaderSliceError::Content(HeaderError::HeaderLengthSmallerThanHeader { ihl }) => {
            Error::bad_value(Layer::Ipv4, off, "ihl", ihl.into(), ">= 5")
        }
    })?;
    let header_len = hdr.slice().len();
    let total_len = usize::from(hdr.total_len());
    if total_len < header_len {
        return Err(Error::bad_value(
            Layer::Ipv4,
            off + 2,
            "total length",
            total_len as u64,
            ">= header length",
        ));
    }
    let frag = hdr.fragments_offset().value();
    let ip = Ip {
        src: IpAddr::V4(Ipv4Addr::from(hdr.source())),
        dst: IpAddr::V4(Ipv4Addr::from(hdr.destination())),
        ecn: Ecn::from_bits(hdr.ecn().value()),
        dscp: hdr.dcp().value(),
        ttl: hdr.ttl(),
        flow_label: None,
        protocol: hdr.protocol().0,
        offset: off,
        headers: hdr.slice(),
        wire_len: total_len,
    };
    if frag != 0 || hdr.more_fragments() {
        let stop = Some(Error {
            layer: Layer::Ipv4,
            offset: off + 6,
            kind: crate::ErrorKind::Unsupported {
                what: "IPv4 fragment at offset",
                value: u64::from(frag) * 8,
            },
        });
        return Ok((off + total_len, ip, stop));
    }
    Ok((off + total_len, ip, None))
}

/// IPv6 at `off`, with its extension headers.
pub(super) fn ipv6(data: &[u8], off: usize) -> IpResult<'_> {
    use etherparse::err::ipv6::{HeaderError, HeaderSliceError};
    use etherparse::err::ipv6_exts::HeaderSliceError as ExtError;
    let hdr = Ipv6HeaderSlice::from_slice(&data[off..]).map_err(|e| match e {
        HeaderSliceError::Len(e) => len_err(Layer::Ipv6, off, &e),
        HeaderSliceError::Content(HeaderError::UnexpectedVersion { version_number }) => {
            Error::bad_value(Layer::Ipv6, off, "version", version_number.into(), "6")
        }
    })?;
    let fixed = hdr.slice().len();
    let ip_end = off + fixed + usize::from(hdr.payload_length());
    let cap_end = ip_end.min(data.len());
    let ext_start = off + fixed;
    let (exts, next, _rest, ext_err) =
        Ipv6ExtensionsSlice::from_slice_lax(hdr.next_header(), &data[ext_start..cap_end]);
    let headers_len = fixed + exts.slice().len();
    let tc = hdr.traffic_class();
    let ip = Ip {
        src: IpAddr::V6(Ipv6Addr::from(hdr.source())),
        dst: IpAddr::V6(Ipv6Addr::from(hdr.destination())),
        ecn: Ecn::from_bits(tc),
        dscp: tc >> 2,
        ttl: hdr.hop_limit(),
        flow_label: Some(hdr.flow_label().value()),
        protocol: next.0,
        offset: off,
        headers: &data[off..off + headers_len],
        wire_len: ip_end - off,
    };
    if let Some((err, _)) = ext_err {
        let stop = Some(match err {
            ExtError::Len(e) => {
                let at = ext_start + e.layer_start_offset;
                check_len(
                    Layer::Ipv6Extension,
                    at,
                    at + e.required_len,
                    cap_end,
                    ip_end,
                )
                .err()
                .unwrap_or_else(|| len_err(Layer::Ipv6Extension, at, &e))
            }
            ExtError::Content(_) => Error::bad_value(
                Layer::Ipv6Extension,
                ext_start + exts.slice().len(),
                "extension header",
                u64::from(next.0),
                "a well-formed IPv6 extension header",
            ),
        });
        return Ok((ip_end, ip, stop));
    }
    if exts.is_fragmenting_payload() {
        let stop = Some(Error {
            layer: Layer::Ipv6Extension,
            offset: ext_start,
            kind: crate::ErrorKind::Unsupported {
                what: "IPv6 fragment, next header",
                value: u64::from(next.0),
            },
        });
        return Ok((ip_end, ip, stop));
    }
    Ok((ip_end, ip, None))
}
