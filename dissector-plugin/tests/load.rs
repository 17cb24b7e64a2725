//! The plugin loads into the installed tshark and registers what spec
//! section 10 names: fields, value strings, expert infos, the UDP port,
//! the heuristic and the preferences.

mod common;

use common::Tshark;

fn g(t: &Tshark, what: &str) -> String {
    t.ok(&["-G", what])
}

#[test]
fn tshark_lists_the_plugin() {
    let t = Tshark::new();
    let plugins = g(&t, "plugins");
    let line = plugins
        .lines()
        .find(|l| l.starts_with("libmetaroce_dissector.so"))
        .unwrap_or_else(|| panic!("the plugin is not loaded; tshark -G plugins:\n{plugins}"));
    let cols: Vec<_> = line.split('\t').collect();
    assert_eq!(cols[1], env!("CARGO_PKG_VERSION"), "{line}");
    assert_eq!(cols[2], "dissector", "{line}");
}

/// Every display-filter name of spec section 10, with its Wireshark type.
const SPEC_FIELDS: &[(&str, &str)] = &[
    ("metaroce.version", "FT_UINT8"),
    ("metaroce.type", "FT_UINT8"),
    ("metaroce.flags", "FT_UINT8"),
    ("metaroce.flags.ar", "FT_BOOLEAN"),
    ("metaroce.flags.som", "FT_BOOLEAN"),
    ("metaroce.flags.eom", "FT_BOOLEAN"),
    ("metaroce.flags.se", "FT_BOOLEAN"),
    ("metaroce.flags.ext", "FT_BOOLEAN"),
    ("metaroce.flags.crc", "FT_BOOLEAN"),
    ("metaroce.hlen", "FT_UINT8"),
    ("metaroce.tx_attempt", "FT_UINT8"),
    ("metaroce.ev", "FT_UINT16"),
    ("metaroce.path_seq", "FT_UINT16"),
    ("metaroce.dst_conn", "FT_UINT32"),
    ("metaroce.src_conn", "FT_UINT32"),
    ("metaroce.psn", "FT_UINT32"),
    ("metaroce.tx_ts", "FT_UINT32"),
    ("metaroce.data.op", "FT_UINT8"),
    ("metaroce.data.payload_len", "FT_UINT16"),
    ("metaroce.data.msg_id", "FT_UINT32"),
    ("metaroce.data.msg_offset", "FT_UINT32"),
    ("metaroce.data.msg_len", "FT_UINT32"),
    ("metaroce.data.remote_va", "FT_UINT64"),
    ("metaroce.data.rkey", "FT_UINT32"),
    ("metaroce.data.imm_data", "FT_UINT32"),
    ("metaroce.fb.flags", "FT_UINT8"),
    ("metaroce.fb.flags.ece", "FT_BOOLEAN"),
    ("metaroce.fb.flags.trim", "FT_BOOLEAN"),
    ("metaroce.fb.flags.dup", "FT_BOOLEAN"),
    ("metaroce.fb.flags.coal", "FT_BOOLEAN"),
    ("metaroce.fb.sack_words", "FT_UINT8"),
    ("metaroce.fb.echo_ev", "FT_UINT16"),
    ("metaroce.fb.echo_psn", "FT_UINT32"),
    ("metaroce.fb.echo_tx_ts", "FT_UINT32"),
    ("metaroce.fb.rx_ts", "FT_UINT32"),
    ("metaroce.fb.ce_count", "FT_UINT16"),
    ("metaroce.fb.rx_buf_level", "FT_UINT8"),
    ("metaroce.fb.fwd_hops", "FT_UINT8"),
    ("metaroce.fb.credit", "FT_UINT32"),
    ("metaroce.ack.sack_base", "FT_UINT32"),
    ("metaroce.ack.sack_bitmap", "FT_BYTES"),
    ("metaroce.nack.code", "FT_UINT8"),
    ("metaroce.nack.rnr_timer", "FT_UINT8"),
    ("metaroce.nack.psn", "FT_UINT32"),
    ("metaroce.cnp.reason", "FT_UINT8"),
    ("metaroce.ctrl.op", "FT_UINT8"),
    ("metaroce.ctrl.cc_algo", "FT_UINT8"),
    ("metaroce.ctrl.mtu", "FT_UINT16"),
    ("metaroce.ctrl.init_psn", "FT_UINT32"),
    ("metaroce.ctrl.features", "FT_UINT32"),
    ("metaroce.ctrl.ts_unit_ps", "FT_UINT32"),
    ("metaroce.tlv.type", "FT_UINT8"),
    ("metaroce.tlv.len", "FT_UINT8"),
    ("metaroce.crc", "FT_UINT32"),
    ("metaroce.crc.status", "FT_UINT8"),
    ("metaroce.analysis.trimmed", "FT_NONE"),
    // Derived by the analyzer's flow engine (spec section 9).
    ("metaroce.analysis.retransmission", "FT_NONE"),
    ("metaroce.analysis.spurious_retransmission", "FT_NONE"),
    ("metaroce.analysis.out_of_order", "FT_UINT32"),
    ("metaroce.analysis.path_loss", "FT_UINT32"),
    ("metaroce.analysis.ce_marked", "FT_NONE"),
    ("metaroce.analysis.ack_rtt", "FT_RELATIVE_TIME"),
    ("metaroce.analysis.fabric_rtt", "FT_RELATIVE_TIME"),
    ("metaroce.analysis.stall", "FT_NONE"),
    ("metaroce.analysis.acked_frame", "FT_FRAMENUM"),
];

#[test]
fn tshark_lists_every_spec_section_10_field() {
    let t = Tshark::new();
    let fields = g(&t, "fields");
    assert!(
        fields.lines().any(|l| l == "P\tMetaRoCE\tmetaroce"),
        "protocol metaroce is not registered"
    );
    let mut missing = Vec::new();
    for (name, ft) in SPEC_FIELDS {
        let found = fields.lines().any(|l| {
            let c: Vec<_> = l.split('\t').collect();
            c.len() > 4 && c[0] == "F" && c[2] == *name && c[3] == *ft && c[4] == "metaroce"
        });
        if !found {
            missing.push(*name);
        }
    }
    assert!(
        missing.is_empty(),
        "fields missing or of the wrong type: {missing:?}"
    );
    // Expert infos are registered as fields too.
    for ei in [
        "metaroce.malformed",
        "metaroce.capture_truncated",
        "metaroce.trimmed",
        "metaroce.crc.bad",
        "metaroce.warning",
        "metaroce.unknown_value",
    ] {
        assert!(
            fields.lines().any(|l| l.split('\t').nth(2) == Some(ei)),
            "expert info {ei} missing"
        );
    }
}

#[test]
fn value_strings_name_types_ops_codes_reasons_and_ctrl() {
    let t = Tshark::new();
    let values = g(&t, "values");
    for (field, value, name) in [
        ("metaroce.type", "0", "DATA"),
        ("metaroce.type", "5", "PROBE_REPLY"),
        ("metaroce.type", "6", "CTRL"),
        ("metaroce.data.op", "0x4", "READ_REQ"),
        ("metaroce.data.op", "0x1", "SEND_IMM"),
        ("metaroce.nack.code", "0x1", "GAP"),
        ("metaroce.nack.code", "0x6", "REMOTE_ACCESS"),
        ("metaroce.cnp.reason", "3", "RX_BUFFER"),
        ("metaroce.ctrl.op", "7", "ABORT"),
        ("metaroce.ctrl.cc_algo", "1", "delay-based"),
        ("metaroce.tlv.type", "1", "HOP_TELEMETRY"),
    ] {
        let line = format!("V\t{field}\t{value}\t{name}");
        assert!(
            values.lines().any(|l| l == line),
            "missing value string {line:?}"
        );
    }
    // Flag fields are bit-masked booleans.
    let fields = g(&t, "fields");
    for (name, mask) in [
        ("metaroce.flags.ar", "0x80"),
        ("metaroce.flags.crc", "0x4"),
        ("metaroce.fb.flags.coal", "0x10"),
        ("metaroce.version", "0xf0"),
        ("metaroce.type", "0xf"),
    ] {
        assert!(
            fields
                .lines()
                .any(|l| l.split('\t').nth(2) == Some(name) && l.split('\t').nth(6) == Some(mask)),
            "{name} should have bit mask {mask}"
        );
    }
}

#[test]
fn port_heuristic_and_preferences_are_registered() {
    let t = Tshark::new();
    let decodes = g(&t, "decodes");
    assert!(
        decodes.lines().any(|l| l == "udp.port\t4794\tmetaroce"),
        "UDP port 4794 is not registered:\n{decodes}"
    );
    let heur = g(&t, "heuristic-decodes");
    // 4.0 prints "udp metaroce T"; 4.4 and later add columns after these.
    assert!(
        heur.lines()
            .any(|l| l == "udp\tmetaroce\tT" || l.starts_with("udp\tmetaroce\tT\t")),
        "the UDP heuristic is not registered (enabled):\n{heur}"
    );
    let prefs = g(&t, "defaultprefs");
    for pref in [
        "#metaroce.check_crc: TRUE",
        "#metaroce.heuristic_source_port: TRUE",
    ] {
        assert!(
            prefs.lines().any(|l| l == pref),
            "preference {pref} missing"
        );
    }
}
