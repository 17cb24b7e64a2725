//! The RoCEv2 invariant CRC (IBTA vol. 1 annex A17.3.3): a CRC-32 (the
//! Ethernet polynomial, as `crc32fast` computes it) over
//!
//! 1. eight bytes of `0xFF` (standing for the masked LRH of native IB),
//! 2. the IP header with its variant fields set to all-ones (IPv4: TOS
//!    (DSCP+ECN), TTL, header checksum; IPv6: traffic class, flow label,
//!    hop limit), IPv4 options or IPv6 extension headers as they are,
//! 3. the UDP header with its checksum set to all-ones,
//! 4. the BTH with its byte 4 (FECN, BECN, resv6a) set to all-ones,
//! 5. everything after the BTH up to the ICRC.
//!
//! The result is stored little-endian (first byte on the wire = least
//! significant byte), as the Linux rxe driver and hardware NICs do; the
//! three real captures confirm it. Wireshark shows the four bytes read
//! big-endian (`infiniband.invariant.crc`), i.e. `stored.swap_bytes()`.

use super::bth;

/// Length of the ICRC trailer.
pub const ICRC_LEN: usize = 4;

/// The outcome of checking a packet's ICRC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IcrcStatus {
    /// The stored ICRC equals the computed one.
    Good,
    /// Both values as CRC-32 numbers (stored read little-endian).
    Bad { stored: u32, computed: u32 },
    /// The capture does not hold the whole packet (snaplen cut), or the IP
    /// header needed for the pseudo-header is missing.
    NotPresent,
    /// Verification was turned off (`DecodeConfig::verify_crc`).
    NotChecked,
}

impl IcrcStatus {
    pub fn is_good(self) -> bool {
        self == IcrcStatus::Good
    }
}

const IPV4_MIN: usize = 20;
const IPV6_FIXED: usize = 40;
const UDP_LEN: usize = 8;

/// Computes the ICRC value.
///
/// * `ip_headers`: every byte from the first byte of the IP header up to the
///   UDP header (IPv4 options and IPv6 extension headers included; the
///   version nibble selects the masking);
/// * `udp_header`: the 8 bytes of the UDP header;
/// * `roce`: the BTH and everything after it, up to (not including) the ICRC.
///
/// Never panics: short inputs are hashed as they are (the result is then
/// simply wrong, which verification reports as `Bad`).
pub fn compute(ip_headers: &[u8], udp_header: &[u8], roce: &[u8]) -> u32 {
    // Fast path: pseudo-LRH, IP headers, UDP header and BTH copied into one
    // stack buffer and masked there (one CRC update for all the small
    // pieces), then the rest of the packet.
    const BUF: usize = 8 + 60 + UDP_LEN + bth::HEADER_LEN;
    let version = ip_headers.first().map_or(0, |b| b >> 4);
    let ip_ok = (version == 4 && ip_headers.len() >= IPV4_MIN)
        || (version == 6 && ip_headers.len() >= IPV6_FIXED);
    let head = 8 + ip_headers.len() + UDP_LEN + bth::HEADER_LEN;
    if ip_ok && udp_header.len() == UDP_LEN && roce.len() >= bth::HEADER_LEN && head <= BUF {
        let mut buf = [0xffu8; BUF];
        let ip = 8..8 + ip_headers.len();
        buf[ip.clone()].copy_from_slice(ip_headers);
        mask_ip(&mut buf[ip.clone()], version);
        let udp = ip.end..ip.end + UDP_LEN;
        buf[udp.start..udp.start + 6].copy_from_slice(&udp_header[..6]);
        let b = udp.end;
        buf[b..b + bth::HEADER_LEN].copy_from_slice(&roce[..bth::HEADER_LEN]);
        buf[b + bth::ICRC_MASKED_BYTE] = 0xff;
        let mut hasher = crc32fast::Hasher::new();
        hasher.update(&buf[..head]);
        hasher.update(&roce[bth::HEADER_LEN..]);
        return hasher.finalize();
    }
    compute_pieces(ip_headers, udp_header, roce)
}

/// Sets the variant fields of a fixed IP header (and whatever follows it)
/// to all-ones.
fn mask_ip(ip: &mut [u8], version: u8) {
    if version == 6 {
        ip[0] |= 0x0f; // traffic class, high nibble
        ip[1] = 0xff; // traffic class low nibble, flow label
        ip[2] = 0xff;
        ip[3] = 0xff;
        ip[7] = 0xff; // hop limit
    } else {
        ip[1] = 0xff; // TOS: DSCP + ECN
        ip[8] = 0xff; // TTL
        ip[10] = 0xff; // header checksum
        ip[11] = 0xff;
    }
}

/// The general path of [`compute`]: any lengths, piece by piece.
fn compute_pieces(ip_headers: &[u8], udp_header: &[u8], roce: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&[0xff; 8]);

    let version = ip_headers.first().map_or(0, |b| b >> 4);
    if version == 6 && ip_headers.len() >= IPV6_FIXED {
        let mut fixed = [0u8; IPV6_FIXED];
        fixed.copy_from_slice(&ip_headers[..IPV6_FIXED]);
        mask_ip(&mut fixed, 6);
        hasher.update(&fixed);
        hasher.update(&ip_headers[IPV6_FIXED..]);
    } else if version == 4 && ip_headers.len() >= IPV4_MIN {
        let mut fixed = [0u8; IPV4_MIN];
        fixed.copy_from_slice(&ip_headers[..IPV4_MIN]);
        mask_ip(&mut fixed, 4);
        hasher.update(&fixed);
        hasher.update(&ip_headers[IPV4_MIN..]);
    } else {
        hasher.update(ip_headers);
    }

    if udp_header.len() >= UDP_LEN {
        let mut udp = [0u8; UDP_LEN];
        udp.copy_from_slice(&udp_header[..UDP_LEN]);
        udp[6] = 0xff;
        udp[7] = 0xff;
        hasher.update(&udp);
        hasher.update(&udp_header[UDP_LEN..]);
    } else {
        hasher.update(udp_header);
    }

    if roce.len() > bth::ICRC_MASKED_BYTE {
        hasher.update(&roce[..bth::ICRC_MASKED_BYTE]);
        hasher.update(&[0xff]);
        hasher.update(&roce[bth::ICRC_MASKED_BYTE + 1..]);
    } else {
        hasher.update(roce);
    }
    hasher.finalize()
}

/// Compares `stored` (the 4 trailer bytes) with the value computed over the
/// other arguments (see [`compute`]).
pub fn verify(ip_headers: &[u8], udp_header: &[u8], roce: &[u8], stored: [u8; 4]) -> IcrcStatus {
    let stored = u32::from_le_bytes(stored);
    let computed = compute(ip_headers, udp_header, roce);
    if stored == computed {
        IcrcStatus::Good
    } else {
        IcrcStatus::Bad { stored, computed }
    }
}

#[cfg(test)]
mod test {
    use super::*;

    /// Frame 5 of montybeatnik_roce_capture_read-write-ecn.pcap (RC ACK over
    /// IPv4), Ethernet header removed: IPv4 (20) / UDP (8) / BTH / AETH / ICRC.
    static ACK_IPV4: [u8; 48] = [
        0x45, 0x00, 0x00, 0x30, 0x5e, 0xce, 0x40, 0x00, 0x40, 0x11, 0xd8, 0x94, 0xc0, 0xa8, 0x41,
        0x04, 0xc0, 0xa8, 0x41, 0x05, 0xdf, 0x94, 0x12, 0xb7, 0x00, 0x1c, 0x00, 0x00, 0x11, 0x00,
        0xff, 0xff, 0x00, 0x00, 0x00, 0x11, 0x00, 0x8c, 0x84, 0xdd, 0x1f, 0x00, 0x00, 0x01, 0xb3,
        0x0c, 0xc2, 0xc0,
    ];

    #[test]
    fn real_ack_verifies() {
        let (ip, rest) = ACK_IPV4.split_at(20);
        let (udp, rest) = rest.split_at(8);
        let (roce, icrc) = rest.split_at(rest.len() - 4);
        let stored = [icrc[0], icrc[1], icrc[2], icrc[3]];
        assert_eq!(verify(ip, udp, roce, stored), IcrcStatus::Good);
        // Wireshark shows 0xb30cc2c0: the bytes read big-endian.
        assert_eq!(compute(ip, udp, roce).swap_bytes(), 0xb30c_c2c0);
    }

    #[test]
    fn masked_fields_do_not_change_the_icrc() {
        let mut bytes = ACK_IPV4;
        bytes[1] = 0x03; // ECN CE
        bytes[8] = 0x01; // TTL
        bytes[10] = 0x12; // checksum
        bytes[26] = 0x55; // UDP checksum
        bytes[28 + 4] = 0xc0; // FECN + BECN
        let (ip, rest) = bytes.split_at(20);
        let (udp, rest) = rest.split_at(8);
        let (roce, _) = rest.split_at(rest.len() - 4);
        assert_eq!(
            compute(ip, udp, roce),
            u32::from_le_bytes([0xb3, 0x0c, 0xc2, 0xc0])
        );
        // but an unmasked one does
        let mut bad = bytes;
        bad[28 + 11] ^= 1; // PSN
        let (ip, rest) = bad.split_at(20);
        let (udp, rest) = rest.split_at(8);
        let (roce, _) = rest.split_at(rest.len() - 4);
        assert!(matches!(
            verify(ip, udp, roce, [0xb3, 0x0c, 0xc2, 0xc0]),
            IcrcStatus::Bad { .. }
        ));
    }

    #[test]
    fn ipv6_masks_traffic_class_flow_label_and_hop_limit() {
        let mut ip6 = [0u8; 40];
        ip6[0] = 0x60;
        ip6[5] = 20; // payload length
        ip6[6] = 17;
        ip6[7] = 64;
        let udp = [0xc0, 0x00, 0x12, 0xb7, 0x00, 0x14, 0x00, 0x00];
        let roce = [
            0x11, 0, 0xff, 0xff, 0, 0, 0, 0x11, 0, 0, 0, 1, 0x1f, 0, 0, 1,
        ];
        let base = compute(&ip6, &udp, &roce);
        let mut other = ip6;
        other[0] = 0x6b;
        other[1] = 0x12;
        other[2] = 0x34;
        other[3] = 0x56;
        other[7] = 1;
        assert_eq!(compute(&other, &udp, &roce), base);
        other[5] = 21;
        assert_ne!(compute(&other, &udp, &roce), base);
    }

    #[test]
    fn fast_path_equals_piecewise_path() {
        let (ip, rest) = ACK_IPV4.split_at(20);
        let (udp, rest) = rest.split_at(8);
        let (roce, _) = rest.split_at(rest.len() - 4);
        assert_eq!(compute(ip, udp, roce), compute_pieces(ip, udp, roce));
        let mut ip6 = [0x5au8; 48]; // 40 + an 8-byte extension header
        ip6[0] = 0x61;
        assert_eq!(compute(&ip6, udp, roce), compute_pieces(&ip6, udp, roce));
        let mut ip4opt = [0x5au8; 60];
        ip4opt[0] = 0x4f;
        assert_eq!(
            compute(&ip4opt, udp, roce),
            compute_pieces(&ip4opt, udp, roce)
        );
        let long6 = [0x60u8; 200]; // beyond the stack buffer
        assert_eq!(
            compute(&long6, udp, roce),
            compute_pieces(&long6, udp, roce)
        );
    }

    #[test]
    fn short_inputs_do_not_panic() {
        let _ = compute(&[], &[], &[]);
        let _ = compute(&[0x45], &[1, 2], &[1, 2, 3, 4, 5]);
        let _ = compute(&[0x60; 39], &[0; 9], &[0; 4]);
    }
}
