//! Shared by the RoCEv2 tests that compare with tshark: reading pcap
//! records with `pcap-parser`, running tshark, and printing our decode in
//! tshark's `-T fields` format.
#![allow(dead_code)]

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use pcap_parser::pcap::{parse_pcap_frame, parse_pcap_frame_be, parse_pcap_header};
use proto_parse::frame::Frame;
use proto_parse::rocev2::Opcode;

/// The tshark fields compared, in order (`frame.number` first).
pub const FIELDS: [&str; 34] = [
    "frame.number",
    "vlan.id",
    "ip.dsfield.dscp",
    "ip.dsfield.ecn",
    "ip.ttl",
    "ipv6.tclass.dscp",
    "ipv6.tclass.ecn",
    "ipv6.flow",
    "ipv6.hlim",
    "udp.srcport",
    "udp.dstport",
    // from here on: InfiniBand (FIRST_IB_FIELD)
    "infiniband.bth.opcode",
    "infiniband.bth.se",
    "infiniband.bth.m",
    "infiniband.bth.padcnt",
    "infiniband.bth.tver",
    "infiniband.bth.p_key",
    "infiniband.bth.destqp",
    "infiniband.bth.a",
    "infiniband.bth.reserved7",
    "infiniband.bth.psn",
    "infiniband.reth.va",
    "infiniband.reth.r_key",
    "infiniband.reth.dmalen",
    "infiniband.atomiceth.swapdt",
    "infiniband.atomiceth.cmpdt",
    "infiniband.aeth.syndrome",
    "infiniband.aeth.msn",
    "infiniband.atomicacketh.origremdt",
    "infiniband.immdt",
    "infiniband.ieth",
    "infiniband.deth.q_key",
    "infiniband.deth.srcqp",
    "infiniband.invariant.crc",
];

/// Index of the first InfiniBand column in a row.
pub const FIRST_IB_FIELD: usize = 11;

/// The link type and the captured bytes of every record.
pub fn read_pcap(path: &Path) -> (u32, Vec<Vec<u8>>) {
    let name = path.display();
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{name}: {e}"));
    let (mut rest, header) = parse_pcap_header(&bytes).expect("pcap header");
    let mut frames = Vec::new();
    while !rest.is_empty() {
        let parsed = if header.is_bigendian() {
            parse_pcap_frame_be(rest)
        } else {
            parse_pcap_frame(rest)
        };
        let (next, block) = parsed.unwrap_or_else(|e| panic!("{name}: record: {e:?}"));
        frames.push(block.data[..block.caplen as usize].to_vec());
        rest = next;
    }
    (header.network.0 as u32, frames)
}

/// tshark's rows, one `|`-separated line per frame, `-d udp.port==69`
/// added because one capture sends RoCEv2 from UDP source port 69.
pub fn tshark_rows(path: &Path) -> Vec<String> {
    let name = path.display();
    let mut cmd = Command::new("tshark");
    cmd.arg("-r")
        .arg(path)
        .args(["-n", "-d", "udp.port==69,infiniband", "-T", "fields"])
        // RPC-over-RDMA's heuristic claims some Send payloads and throws
        .args(["--disable-protocol", "rpcordma"])
        .args(["-E", "separator=|", "-E", "occurrence=f"]);
    for field in FIELDS {
        cmd.args(["-e", field]);
    }
    let out = cmd.output().unwrap_or_else(|e| {
        panic!("tshark is required by this test and could not be run ({e}); install tshark")
    });
    assert!(
        out.status.success(),
        "tshark failed on {name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .lines()
        .map(str::to_owned)
        .collect()
}

pub fn opt<T>(value: Option<T>, f: impl FnOnce(T) -> String) -> String {
    value.map_or_else(String::new, f)
}

/// Our decode of one frame, printed in tshark's `-T fields` format.
pub fn our_row(number: usize, frame: &Frame<'_>) -> String {
    let mut row = number.to_string();
    let udp = frame.udp.as_ref();
    let v4 = frame.ip.as_ref().filter(|ip| !ip.is_ipv6());
    let v6 = frame.ip.as_ref().filter(|ip| ip.is_ipv6());
    let roce = frame.rocev2().and_then(|r| r.packet.as_ref());
    let bth = roce.map(|p| p.bth());
    let b = |v: bool| u8::from(v).to_string();
    // tshark shows the AtomicETH address and key in the RETH fields
    let va_key = roce.and_then(|p| {
        p.reth()
            .map(|r| (r.va(), r.r_key()))
            .or_else(|| p.atomic_eth().map(|a| (a.va, a.r_key)))
    });
    let atomic = roce.and_then(|p| p.atomic_eth());
    let cols = [
        opt(frame.vlans.outer(), |v| v.to_string()),
        opt(v4, |ip| ip.dscp.to_string()),
        opt(v4, |ip| ip.ecn.bits().to_string()),
        opt(v4, |ip| ip.ttl.to_string()),
        opt(v6, |ip| ip.dscp.to_string()),
        opt(v6, |ip| ip.ecn.bits().to_string()),
        opt(v6.and_then(|ip| ip.flow_label), |f| format!("0x{f:06x}")),
        opt(v6, |ip| ip.ttl.to_string()),
        opt(udp, |u| u.src_port.to_string()),
        opt(udp, |u| u.dst_port.to_string()),
        opt(bth, |h| u8::from(h.opcode()).to_string()),
        opt(bth, |h| b(h.solicited())),
        opt(bth, |h| b(h.mig_req())),
        opt(bth, |h| h.pad_count().to_string()),
        opt(bth, |h| h.tver().to_string()),
        opt(bth, |h| h.p_key().to_string()),
        opt(bth, |h| format!("0x{:06x}", h.dest_qp())),
        opt(bth, |h| b(h.ack_req())),
        opt(bth, |h| h.resv7().to_string()),
        opt(bth, |h| h.psn().to_string()),
        opt(va_key, |(va, _)| format!("0x{va:016x}")),
        opt(va_key, |(_, key)| format!("0x{key:08x}")),
        opt(roce.and_then(|p| p.reth()), |r| r.dma_len().to_string()),
        opt(atomic, |a| a.swap_add.to_string()),
        opt(atomic, |a| a.compare.to_string()),
        opt(roce.and_then(|p| p.aeth()), |a| {
            a.syndrome_byte().to_string()
        }),
        opt(roce.and_then(|p| p.aeth()), |a| a.msn().to_string()),
        opt(roce.and_then(|p| p.atomic_ack_eth()), |v| v.to_string()),
        opt(roce.and_then(|p| p.imm_dt()), |i| format!("{i:08x}")),
        opt(roce.and_then(|p| p.ieth()), |i| format!("{i:08x}")),
        opt(roce.and_then(|p| p.deth()), |d| {
            format!("0x{:016x}", d.q_key())
        }),
        opt(roce.and_then(|p| p.deth()), |d| {
            format!("0x{:08x}", d.src_qp())
        }),
        // tshark 4.0 does not know the CNP opcode: it shows the reserved
        // bytes and the ICRC as vendor data, without the ICRC field
        opt(
            roce.filter(|p| p.opcode() != Opcode::Cnp)
                .and_then(|p| p.icrc()),
            |c| format!("0x{:08x}", c.swap_bytes()),
        ),
    ];
    assert_eq!(cols.len() + 1, FIELDS.len());
    for col in cols {
        write!(row, "|{col}").unwrap();
    }
    row
}
