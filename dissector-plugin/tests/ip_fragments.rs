//! The plugin over IP fragments (issue 23): the plugin relies on
//! Wireshark's own IP reassembly. With the IPv4 and IPv6 "reassemble
//! fragmented datagrams" preferences at their defaults, tshark with the
//! plugin decodes the fixture generator's `ip_fragments.pcap` (MetaRoCE over
//! IPv4 and IPv6, cut by a 1,500-byte MTU: out of order, overlapping, a
//! missing piece) as completely as `ip_fragments_unfragmented.pcap`, the
//! same traffic sent whole without the datagram that cannot be rebuilt.
//! With reassembly turned off, each DATA datagram shows as its first
//! fragment only, a packet cut short and marked trimmed (what the plugin
//! README says).

mod common;

use std::path::{Path, PathBuf};

use common::*;

fn fixture(t: &Tshark, name: &str) -> PathBuf {
    let from = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/generated")
        .join(name);
    let to = t.path(name);
    std::fs::copy(&from, &to).unwrap();
    t.share(&to);
    to
}

/// Every MetaRoCE packet tshark decodes: (type, src_conn, psn, CRC status),
/// sorted (fragments change frame numbers, not packets).
fn packets(t: &Tshark, pcap: &Path, prefs: &[&str]) -> Vec<String> {
    let fields = [
        "metaroce.type",
        "metaroce.src_conn",
        "metaroce.psn",
        "metaroce.crc.status",
    ];
    let mut rows: Vec<String> = t
        .fields_with(pcap, &fields, Some("metaroce"), prefs)
        .into_iter()
        .map(|r| r.join(" "))
        .collect();
    rows.sort();
    rows
}

#[test]
fn fragmented_metaroce_decodes_completely_with_wiresharks_reassembly() {
    let t = Tshark::new();
    let frag = fixture(&t, "ip_fragments.pcap");
    let whole = fixture(&t, "ip_fragments_unfragmented.pcap");
    let expected = packets(&t, &whole, &[]);
    // 9 DATA (one IPv4 datagram lost to a missing fragment) + 10 ACKs, all
    // with a good CRC (Wireshark's checksum status 1).
    assert_eq!(expected.len(), 19, "{expected:#?}");
    assert!(expected.iter().all(|r| r.ends_with(" 1")), "{expected:#?}");
    assert_eq!(packets(&t, &frag, &[]), expected);

    // The reassembled packets are shown in the frame of their last
    // fragment, with Wireshark's reassembly tree.
    let rows = t.fields_with(
        &frag,
        &["ip.fragment.count", "ipv6.fragment.count", "metaroce.psn"],
        Some("metaroce.type == 0"),
        &[],
    );
    assert_eq!(rows.len(), 9, "{rows:?}");
    assert!(
        rows.iter().all(|r| !r[0].is_empty() || !r[1].is_empty()),
        "{rows:?}"
    );
}

#[test]
fn with_reassembly_off_data_shows_as_trimmed_first_fragments() {
    let t = Tshark::new();
    let frag = fixture(&t, "ip_fragments.pcap");
    let off = ["-o", "ip.defragment:FALSE", "-o", "ipv6.defragment:FALSE"];
    let rows = t.fields_with(
        &frag,
        &[
            "metaroce.type",
            "metaroce.psn",
            "metaroce.crc.status",
            "metaroce.analysis.trimmed",
        ],
        Some("metaroce"),
        &off,
    );
    let data: Vec<&Vec<String>> = rows.iter().filter(|r| r[0] == "0").collect();
    // Each DATA datagram's first fragment only (the one whose later piece
    // is missing too), shown as a packet cut short: no CRC trailer, trimmed.
    assert_eq!(data.len(), 10, "{rows:#?}");
    for r in &data {
        assert_eq!((r[2].as_str(), r[3].as_str()), ("3", "1"), "{r:?}");
    }
    assert_eq!(rows.len() - data.len(), 10, "the ACKs: {rows:#?}");
}
