//! tshark with the plugin over captures built with `proto_parse`'s
//! emitters: `-T fields` output compared field by field with what was
//! emitted, display filters, columns, CRC statuses and the preference that
//! disables the check, trimming, malformed packets, the payload handed to
//! the `data` dissector, Decode As, the port preference and the heuristic.

mod common;

use std::path::PathBuf;

use common::*;

fn fixture(t: &Tshark) -> PathBuf {
    write_pcap(t, "fixture.pcap", &fixture_frames())
}

/// Runs `-T fields` and returns one row per frame, by column name.
fn table(t: &Tshark, pcap: &std::path::Path, fields: &[&str], extra: &[&str]) -> Vec<Vec<String>> {
    let mut all = vec!["frame.number"];
    all.extend_from_slice(fields);
    t.fields_with(pcap, &all, None, extra)
}

fn assert_column(rows: &[Vec<String>], col: usize, name: &str, expected: &[&str]) {
    let got: Vec<&str> = rows
        .iter()
        .map(|r| r.get(col).map_or("", String::as_str))
        .collect();
    assert_eq!(got, expected, "column {name}");
}

#[test]
fn base_header_fields_match_the_emitted_packets() {
    let t = Tshark::new();
    let pcap = fixture(&t);
    let fields = [
        "metaroce.version",
        "metaroce.type",
        "metaroce.flags",
        "metaroce.flags.ar",
        "metaroce.flags.som",
        "metaroce.flags.eom",
        "metaroce.flags.ext",
        "metaroce.flags.crc",
        "metaroce.hlen",
        "metaroce.tx_attempt",
        "metaroce.ev",
        "metaroce.path_seq",
        "metaroce.dst_conn",
        "metaroce.src_conn",
        "metaroce.psn",
        "metaroce.tx_ts",
    ];
    let rows = table(&t, &pcap, &fields, &[]);
    assert_eq!(rows.len(), 12);
    let expect: [&[&str]; 16] = [
        &["1"; 12],
        &["6", "0", "0", "1", "2", "3", "4", "5", "0", "0", "0", "0"],
        &[
            "0x00", "0x44", "0xa4", "0x08", "0x00", "0x00", "0x00", "0x00", "0x64", "0x00", "0x28",
            "0x60",
        ],
        &["0", "0", "1", "0", "0", "0", "0", "0", "0", "0", "0", "0"],
        &["0", "1", "0", "0", "0", "0", "0", "0", "1", "0", "0", "1"],
        &["0", "0", "1", "0", "0", "0", "0", "0", "1", "0", "1", "1"],
        &["0", "0", "0", "1", "0", "0", "0", "0", "0", "0", "1", "0"],
        &["0", "1", "1", "0", "0", "0", "0", "0", "1", "0", "0", "0"],
        &[
            "10", "13", "13", "20", "14", "13", "6", "12", "11", "10", "19", "13",
        ],
        &["0", "0", "0", "0", "0", "0", "0", "0", "0", "0", "2", "0"],
        &["0", "3", "5", "3", "5", "3", "9", "9", "4", "4", "6", "3"],
        &["0", "1", "1", "1", "1", "1", "1", "1", "1", "1", "1", "1"],
        &[
            "0x00000000",
            "0x00000022",
            "0x00000022",
            "0x00000011",
            "0x00000011",
            "0x00000011",
            "0x00000022",
            "0x00000011",
            "0x00000022",
            "0x00000022",
            "0x00000022",
            "0x00000022",
        ],
        &[
            "0x00000011",
            "0x00000011",
            "0x00000011",
            "0x00000022",
            "0x00000022",
            "0x00000022",
            "0x00000011",
            "0x00000022",
            "0x00000011",
            "0x00000011",
            "0x00000011",
            "0x00000011",
        ],
        &[
            "0", "1000", "1001", "1001", "1001", "1001", "5", "1001", "1002", "1003", "1001",
            "1004",
        ],
        &["5000"; 12],
    ];
    // Frame 10 carries version 2: the decoded version says so.
    let mut version = expect[0].to_vec();
    version[9] = "2";
    assert_column(&rows, 1, fields[0], &version);
    for (i, e) in expect.iter().enumerate().skip(1) {
        assert_column(&rows, i + 1, fields[i], e);
    }
}

#[test]
fn type_header_fields_match_the_emitted_packets() {
    let t = Tshark::new();
    let pcap = fixture(&t);
    let fields = [
        "metaroce.data.op",
        "metaroce.data.payload_len",
        "metaroce.data.msg_id",
        "metaroce.data.msg_offset",
        "metaroce.data.msg_len",
        "metaroce.data.remote_va",
        "metaroce.data.rkey",
        "metaroce.data.imm_data",
        "metaroce.fb.flags.ece",
        "metaroce.fb.sack_words",
        "metaroce.fb.echo_ev",
        "metaroce.fb.echo_psn",
        "metaroce.fb.echo_tx_ts",
        "metaroce.fb.rx_ts",
        "metaroce.fb.ce_count",
        "metaroce.fb.rx_buf_level",
        "metaroce.fb.fwd_hops",
        "metaroce.fb.credit",
        "metaroce.ack.sack_base",
        "metaroce.ack.sack_bitmap",
        "metaroce.ack.sack_ranges",
        "metaroce.nack.code",
        "metaroce.nack.rnr_timer",
        "metaroce.nack.psn",
        "metaroce.cnp.reason",
        "metaroce.ctrl.op",
        "metaroce.ctrl.cc_algo",
        "metaroce.ctrl.mtu",
        "metaroce.ctrl.init_psn",
        "metaroce.ctrl.features",
        "metaroce.ctrl.ts_unit_ps",
        "metaroce.tlv.type",
        "metaroce.tlv.len",
        "metaroce.tlv.hop.switch_id",
        "metaroce.tlv.hop.hop_latency",
        "metaroce.tlv.path.ev",
        "metaroce.tlv.path.state",
        "metaroce.tlv.ts64",
        "data.len",
    ];
    let rows = table(&t, &pcap, &fields, &[]);
    let col = |name: &str| fields.iter().position(|f| *f == name).unwrap() + 1;
    let cell = |frame: usize, name: &str| rows[frame - 1][col(name)].clone();

    // DATA WRITE (frame 2)
    assert_eq!(cell(2, "metaroce.data.op"), "0x02");
    assert_eq!(cell(2, "metaroce.data.payload_len"), "64");
    assert_eq!(cell(2, "metaroce.data.msg_id"), "7");
    assert_eq!(cell(2, "metaroce.data.msg_offset"), "0");
    assert_eq!(cell(2, "metaroce.data.msg_len"), "128");
    assert_eq!(cell(2, "metaroce.data.remote_va"), "0x0000deadbeef0000");
    assert_eq!(cell(2, "metaroce.data.rkey"), "0x00001234");
    assert_eq!(cell(2, "metaroce.data.imm_data"), "");
    assert_eq!(cell(2, "data.len"), "64");
    // Trimmed WRITE (frame 3): 20 of 64 payload bytes.
    assert_eq!(cell(3, "metaroce.data.msg_offset"), "64");
    assert_eq!(cell(3, "data.len"), "20");
    // SEND_IMM (frame 9).
    assert_eq!(cell(9, "metaroce.data.op"), "0x01");
    assert_eq!(cell(9, "metaroce.data.imm_data"), "0x0000cafe");
    assert_eq!(cell(9, "metaroce.data.remote_va"), "");
    // READ_REQ (frame 12): no payload.
    assert_eq!(cell(12, "metaroce.data.op"), "0x04");
    assert_eq!(cell(12, "metaroce.data.msg_len"), "1048576");
    assert_eq!(cell(12, "data.len"), "");

    // ACK (frame 4).
    assert_eq!(cell(4, "metaroce.fb.flags.ece"), "1");
    assert_eq!(cell(4, "metaroce.fb.sack_words"), "1");
    assert_eq!(cell(4, "metaroce.fb.echo_ev"), "3");
    assert_eq!(cell(4, "metaroce.fb.echo_psn"), "1000");
    assert_eq!(cell(4, "metaroce.fb.echo_tx_ts"), "5000");
    assert_eq!(cell(4, "metaroce.fb.rx_ts"), "7000");
    assert_eq!(cell(4, "metaroce.fb.ce_count"), "2");
    assert_eq!(cell(4, "metaroce.fb.rx_buf_level"), "17");
    assert_eq!(cell(4, "metaroce.fb.fwd_hops"), "3");
    assert_eq!(cell(4, "metaroce.fb.credit"), "4294967295");
    assert_eq!(cell(4, "metaroce.ack.sack_base"), "1001");
    // PSNs 1002, 1003, 1004 and 1006 relative to 1001: bits 1,2,3,5.
    assert_eq!(cell(4, "metaroce.ack.sack_bitmap"), "7400000000000000");
    assert_eq!(cell(4, "metaroce.ack.sack_ranges"), "1002-1004,1006");
    assert_eq!(cell(4, "metaroce.tlv.type"), "1");
    assert_eq!(cell(4, "metaroce.tlv.len"), "5");
    assert_eq!(
        cell(4, "metaroce.tlv.hop.switch_id"),
        "0x0000aa01,0x0000aa02"
    );
    assert_eq!(cell(4, "metaroce.tlv.hop.hop_latency"), "900,450");
    // NACK (frame 5), CNP (frame 6), PROBE_REPLY (frame 8).
    assert_eq!(cell(5, "metaroce.nack.code"), "0x01");
    assert_eq!(cell(5, "metaroce.nack.rnr_timer"), "0");
    assert_eq!(cell(5, "metaroce.nack.psn"), "1001");
    assert_eq!(cell(5, "metaroce.fb.echo_psn"), "1002");
    assert_eq!(cell(6, "metaroce.cnp.reason"), "1");
    assert_eq!(cell(8, "metaroce.fb.echo_psn"), "5");
    assert_eq!(cell(8, "metaroce.fb.echo_ev"), "9");
    assert_eq!(cell(8, "metaroce.fb.sack_words"), "0");
    // CTRL CONNECT (frame 1).
    assert_eq!(cell(1, "metaroce.ctrl.op"), "1");
    assert_eq!(cell(1, "metaroce.ctrl.cc_algo"), "4");
    assert_eq!(cell(1, "metaroce.ctrl.mtu"), "4096");
    assert_eq!(cell(1, "metaroce.ctrl.init_psn"), "1000");
    assert_eq!(cell(1, "metaroce.ctrl.features"), "0x00000003");
    assert_eq!(cell(1, "metaroce.ctrl.ts_unit_ps"), "1000");
    // TLVs of the retransmission (frame 11).
    assert_eq!(cell(11, "metaroce.tlv.type"), "3,2");
    assert_eq!(cell(11, "metaroce.tlv.len"), "3,3");
    assert_eq!(cell(11, "metaroce.tlv.ts64"), "1700000000123456789");
    assert_eq!(cell(11, "metaroce.tlv.path.ev"), "5,6");
    assert_eq!(cell(11, "metaroce.tlv.path.state"), "2,0");
}

#[test]
fn display_filters_select_the_expected_frames() {
    let t = Tshark::new();
    let pcap = fixture(&t);
    let frames = |filter: &str| -> Vec<String> {
        t.fields(&pcap, &["frame.number"], Some(filter))
            .into_iter()
            .map(|r| r[0].clone())
            .collect()
    };
    let cases: &[(&str, &[&str])] = &[
        (
            "metaroce",
            &[
                "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12",
            ],
        ),
        ("metaroce.psn == 1001", &["3", "4", "5", "6", "8", "11"]),
        ("metaroce.ev == 3 && metaroce.type == 0", &["2", "12"]),
        ("metaroce.type == 1", &["4"]),
        ("metaroce.flags.som == 1", &["2", "9", "12"]),
        ("metaroce.flags.ar == 1", &["3"]),
        ("metaroce.tx_attempt > 0", &["11"]),
        ("metaroce.data.op == 4", &["12"]),
        ("metaroce.nack.code == 1", &["5"]),
        ("metaroce.cnp.reason == 1", &["6"]),
        ("metaroce.ctrl.op == 1", &["1"]),
        ("metaroce.fb.flags.ece == 1", &["4"]),
        // A boolean field name alone tests presence (Wireshark 4.0).
        (
            "metaroce.flags.som",
            &[
                "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12",
            ],
        ),
        ("metaroce.fb.echo_psn == 1000", &["4", "6"]),
        ("metaroce.tlv.type == 1", &["4"]),
        ("metaroce.crc.status == 1", &["2"]),
        ("metaroce.crc.status == 0", &["9"]),
        ("metaroce.crc.status == 3", &["3"]),
        ("metaroce.analysis.trimmed", &["3"]),
        ("metaroce.trimmed", &["3"]),
        ("metaroce.crc.bad", &["9"]),
        ("metaroce.malformed", &["10"]),
        ("_ws.expert.group == 0x07000000", &["10"]),
        ("metaroce.src_conn == 0x22", &["4", "5", "6", "8"]),
    ];
    for (filter, expected) in cases {
        assert_eq!(frames(filter), *expected, "filter {filter}");
    }
}

#[test]
fn protocol_and_info_columns() {
    let t = Tshark::new();
    let pcap = fixture(&t);
    let rows = t.fields(&pcap, &["_ws.col.Protocol", "_ws.col.Info"], None);
    assert!(rows.iter().all(|r| r[0] == "MetaRoCE"), "{rows:?}");
    let info: Vec<&str> = rows.iter().map(|r| r[1].as_str()).collect();
    let expected = [
        "CTRL CONNECT 0x11→0x0 init_psn=1000 mtu=4096 cc=hybrid",
        "DATA WRITE 0x11→0x22 PSN=1000 ev=3 msg=7:0/128 len=64 [SOM]",
        "DATA WRITE 0x11→0x22 PSN=1001 ev=5 msg=7:64/128 len=64 [AR,EOM] [TRIMMED]",
        "ACK 0x22→0x11 cack=1001 SACK=1002-1004,1006 echo=1000@ev3 <ECE>",
        "NACK GAP 0x22→0x11 cack=1001 nack_psn=1001 echo=1002@ev5",
        "CNP ECN 0x22→0x11 cack=1001 echo=1000@ev3",
        "PROBE 0x11→0x22 seq=5 ev=9",
        "PROBE_REPLY 0x22→0x11 cack=1001 echo=5@ev9",
        "DATA SEND_IMM 0x11→0x22 PSN=1002 ev=4 msg=8:0/16 len=16 [SOM,EOM]",
        "DATA SEND 0x11→0x22 PSN=1003 ev=4 msg=9:0/0 len=0 [Malformed]",
        // The analyzer's engine: PSN 1001 was sent in frame 3 (trimmed) and
        // NACKed in frame 5.
        "DATA WRITE 0x11→0x22 PSN=1001 ev=6 msg=7:64/128 len=64 try=2 [EOM] [Retransmission]",
        "DATA READ_REQ 0x11→0x22 PSN=1004 ev=3 msg=10:0/1048576 len=0 [SOM,EOM]",
    ];
    assert_eq!(info, expected);
}

#[test]
fn experts_carry_proto_parse_text_and_crc_check_can_be_disabled() {
    let t = Tshark::new();
    let pcap = fixture(&t);
    // The decode's own expert infos (the fixture, one packet of each kind
    // in no real conversation, also breaks lint rules: tests/lint.rs).
    let rows = t.fields_with(
        &pcap,
        &["frame.number", "_ws.expert.message", "_ws.expert.group"],
        Some("_ws.expert"),
        &["-o", "metaroce.lint:FALSE"],
    );
    let by_frame = |n: &str| rows.iter().find(|r| r[0] == n).cloned().unwrap_or_default();
    assert_eq!(by_frame("3")[1], "payload trimmed from 64 to 20 bytes");
    assert_eq!(by_frame("9")[1], "Bad CRC32C [should be 0xffa1f859]");
    assert_eq!(
        by_frame("10")[1],
        "metaroce at byte 42: version is 2, expected 1"
    );
    assert_eq!(
        by_frame("10")[2],
        "117440512",
        "group Malformed (PI_MALFORMED)"
    );
    assert_eq!(by_frame("11")[1], "Retransmission (fast) of frame 3");
    assert_eq!(rows.len(), 4, "{rows:?}");

    let off = t.fields_with(
        &pcap,
        &["frame.number", "metaroce.crc.status"],
        Some("metaroce.crc.status"),
        &["-o", "metaroce.check_crc:FALSE"],
    );
    // 2: unverified, 3: trimmed (not present), 9: unverified (no longer bad).
    assert_eq!(
        off,
        vec![
            vec!["2".to_string(), "2".into()],
            vec!["3".into(), "3".into()],
            vec!["9".into(), "2".into()],
        ]
    );
}

/// The fixture's payloads sent to UDP port 5000 instead of 4794.
fn on_port(t: &Tshark, name: &str, port: u16, keep_source_port: bool) -> PathBuf {
    let frames: Vec<Vec<u8>> = fixture_frames()
        .iter()
        .map(|f| {
            let decoded = proto_parse::frame::decode(
                proto_parse::frame::LinkType::Ethernet,
                f,
                &proto_parse::frame::DecodeConfig::default(),
            );
            let udp = decoded.udp.expect("fixture frames are UDP");
            let sport = if keep_source_port { udp.src_port } else { 1234 };
            udp_frame(udp.payload, sport, port, true)
        })
        .collect();
    write_pcap(t, name, &frames)
}

fn count_metaroce(t: &Tshark, pcap: &std::path::Path, extra: &[&str]) -> usize {
    t.fields_with(pcap, &["frame.number"], Some("metaroce"), extra)
        .len()
}

#[test]
fn decode_as_port_preference_and_heuristic() {
    let t = Tshark::new();
    let p5000 = on_port(&t, "p5000.pcap", 5000, true);
    let no_heur = ["--disable-heuristic", "metaroce_udp"];
    // The heuristic takes the valid packets (not frame 10, version 2, nor
    // frame 9, bad CRC, nor frame 3, trimmed ... which is fully valid).
    let heur: Vec<String> = t
        .fields(&p5000, &["frame.number"], Some("metaroce"))
        .into_iter()
        .map(|r| r[0].clone())
        .collect();
    assert_eq!(heur, ["1", "2", "3", "4", "5", "6", "7", "8", "11", "12"]);
    assert_eq!(count_metaroce(&t, &p5000, &no_heur), 0);
    // Decode As.
    let mut decode_as = no_heur.to_vec();
    decode_as.extend(["-d", "udp.port==5000,metaroce"]);
    assert_eq!(count_metaroce(&t, &p5000, &decode_as), 12);
    // The port preference.
    let mut pref = no_heur.to_vec();
    pref.extend(["-o", "metaroce.udp.port:5000"]);
    assert_eq!(count_metaroce(&t, &p5000, &pref), 12);

    // Without the entropy source port the heuristic declines, unless the
    // preference says not to check it.
    let other_sport = on_port(&t, "sport.pcap", 5000, false);
    assert_eq!(count_metaroce(&t, &other_sport, &[]), 0);
    assert_eq!(
        count_metaroce(
            &t,
            &other_sport,
            &["-o", "metaroce.heuristic_source_port:FALSE"]
        ),
        10
    );
}

#[test]
fn snaplen_cut_packets_are_flagged_not_malformed() {
    let t = Tshark::new();
    let path = t.path("cut.pcap");
    let mut w = proto_parse::capture::PcapWriter::with_options(
        std::io::BufWriter::new(std::fs::File::create(&path).unwrap()),
        proto_parse::capture::PcapOptions {
            snaplen: 80,
            ..Default::default()
        },
    )
    .unwrap();
    for (i, f) in fixture_frames().iter().enumerate() {
        w.write_frame(1_000 * i as u64, f).unwrap();
    }
    w.flush().unwrap();
    drop(w);
    t.share(&path);
    let rows = t.fields(
        &path,
        &["frame.number", "metaroce.psn", "_ws.expert.message"],
        Some("metaroce.capture_truncated"),
    );
    // Frames longer than 80 bytes (all but the PROBE, 66 bytes) are cut;
    // their base header is complete (42 + 24 < 80). Frame 10 (version 2)
    // is malformed whatever was captured.
    let numbers: Vec<&str> = rows.iter().map(|r| r[0].as_str()).collect();
    assert_eq!(
        numbers,
        ["1", "2", "3", "4", "5", "6", "8", "9", "11", "12"]
    );
    // One note per packet: where the capture ends.
    assert!(rows.iter().all(|r| !r[2].contains(',')), "{rows:?}");
    assert!(rows.iter().all(|r| !r[1].is_empty()));
    assert!(
        rows.iter().all(|r| r[2].contains("cut by snaplen")),
        "{rows:?}"
    );
}
