//! `metaroce.analysis.*` as tshark shows it: the analyzer's flow engine
//! run by the plugin over a hand-made exchange with loss, reordering, a
//! spurious retransmission, a CE mark, RTT samples and a stall; the same
//! verdicts on a two-pass run (`-2`, frames revisited); none with the
//! analysis preference off.

mod common;

use std::net::SocketAddr;

use common::*;
use proto_parse::build::{ECN_CE, UdpFrameBuilder};
use proto_parse::capture::PcapWriter;
use proto_parse::metaroce::{
    AckRepr, Body, DataRepr, FbFlags, FeedbackRepr, Flags, Op, Repr, SackBitmap, udp_source_port,
};

fn data_pkt(psn: u32, ev: u16, path_seq: u16, tx_attempt: u8, tx_ts: u32) -> Repr<'static> {
    Repr {
        flags: Flags::empty(),
        tx_attempt,
        ev,
        path_seq,
        dst_conn: 0x22,
        src_conn: 0x11,
        psn,
        tx_ts,
        body: Body::Data(DataRepr {
            op: Op::Send,
            payload_len: 64,
            msg_id: 1,
            msg_offset: (psn - 100) * 64,
            msg_len: 64 * 8,
        }),
        tlvs: Vec::new(),
        payload: &PAYLOAD,
        crc: false,
    }
}

fn ack_pkt(cack: u32, echo_psn: u32, echo_ev: u16, echo_tx_ts: u32, tx_ts: u32) -> Repr<'static> {
    Repr {
        flags: Flags::empty(),
        tx_attempt: 0,
        ev: echo_ev,
        path_seq: 0,
        dst_conn: 0x11,
        src_conn: 0x22,
        psn: cack,
        tx_ts,
        body: Body::Ack(AckRepr {
            feedback: FeedbackRepr {
                echo_ev,
                echo_psn,
                echo_tx_ts,
                rx_ts: tx_ts - 1000,
                credit: u32::MAX,
                ..FeedbackRepr::default()
            },
            sack_base: cack,
            sack: SackBitmap::default(),
        }),
        tlvs: Vec::new(),
        payload: &[],
        crc: false,
    }
}

/// (time in us, packet, forward direction, CE)
fn exchange() -> Vec<(u64, Repr<'static>, bool, bool)> {
    let mut first = data_pkt(100, 1, 1, 0, 0);
    first.flags = Flags::SOM;
    vec![
        (0, first, true, false),                                      // 1
        (1, data_pkt(102, 2, 1, 0, 1000), true, false),               // 2: 101 not yet seen
        (2, data_pkt(101, 1, 3, 0, 2000), true, false), // 3: out of order; path_seq 2 of ev 1 lost
        (10, ack_pkt(103, 101, 1, 2000, 9000), false, false), // 4: acks 100..102
        (12, data_pkt(101, 2, 2, 1, 12000), true, false), // 5: spurious retransmission
        (13, data_pkt(103, 1, 4, 0, 13000), true, true), // 6: CE-marked
        (3013, ack_pkt(104, 103, 1, 13000, 3_013_000), false, false), // 7: ends a 3 ms stall
    ]
}

fn write_exchange(t: &Tshark) -> std::path::PathBuf {
    write_script(t, "exchange.pcap", exchange())
}

/// Writes `script` ((time in us, packet, forward direction, CE) as
/// [`exchange`] gives) as the capture `name`.
fn write_script(
    t: &Tshark,
    name: &str,
    script: Vec<(u64, Repr<'static>, bool, bool)>,
) -> std::path::PathBuf {
    let path = t.path(name);
    let mut w = PcapWriter::create(&path).unwrap();
    let a: SocketAddr = ([10, 0, 0, 1], 0).into();
    let b: SocketAddr = ([10, 0, 0, 2], 0).into();
    for (us, repr, forward, ce) in script {
        let (mut src, mut dst) = if forward { (a, b) } else { (b, a) };
        src.set_port(udp_source_port(repr.ev));
        dst.set_port(PORT);
        let mut builder = UdpFrameBuilder::new(src, dst);
        if ce {
            builder = builder.with_ecn(ECN_CE);
        }
        w.write_frame(
            1_700_000_000_000_000_000 + us * 1000,
            &builder.build(&repr.to_vec()),
        )
        .unwrap();
    }
    w.flush().unwrap();
    drop(w);
    t.share(&path);
    path
}

const FIELDS: &[&str] = &[
    "frame.number",
    "metaroce.analysis.flow",
    "metaroce.analysis.retransmission",
    "metaroce.analysis.retransmission.original_frame",
    "metaroce.analysis.retransmission.kind",
    "metaroce.analysis.spurious_retransmission",
    "metaroce.analysis.out_of_order",
    "metaroce.analysis.path_loss",
    "metaroce.analysis.ce_marked",
    "metaroce.analysis.ack_rtt",
    "metaroce.analysis.acked_frame",
    "metaroce.analysis.cum_ack_advance",
    "metaroce.analysis.stall",
    "metaroce.analysis.stall.ended",
];

fn col(name: &str) -> usize {
    FIELDS.iter().position(|f| *f == name).unwrap()
}

fn frames_with(rows: &[Vec<String>], field: &str) -> Vec<String> {
    rows.iter()
        .filter(|r| !r[col(field)].is_empty())
        .map(|r| r[0].clone())
        .collect()
}

#[test]
fn engine_verdicts_are_shown_as_analysis_fields() {
    let t = Tshark::new();
    let pcap = write_exchange(&t);
    let rows = t.fields(&pcap, FIELDS, None);
    assert_eq!(rows.len(), 7);
    let cell = |frame: usize, field: &str| rows[frame - 1][col(field)].clone();

    assert_eq!(frames_with(&rows, "metaroce.analysis.out_of_order"), ["3"]);
    assert_eq!(frames_with(&rows, "metaroce.analysis.path_loss"), ["3"]);
    assert_eq!(cell(3, "metaroce.analysis.path_loss"), "1");
    assert_eq!(
        frames_with(&rows, "metaroce.analysis.spurious_retransmission"),
        ["5"]
    );
    assert_eq!(cell(5, "metaroce.analysis.retransmission.kind"), "spurious");
    assert_eq!(frames_with(&rows, "metaroce.analysis.ce_marked"), ["6"]);
    // ACK of frame 4 echoes frame 3 (captured 8 us earlier).
    assert_eq!(cell(4, "metaroce.analysis.acked_frame"), "3");
    assert_eq!(cell(4, "metaroce.analysis.ack_rtt"), "0.000008000");
    assert_eq!(cell(7, "metaroce.analysis.cum_ack_advance"), "1");
    assert_eq!(cell(7, "metaroce.analysis.acked_frame"), "6");
    // Frame 7 advances the cumulative ack after 3 ms without progress.
    assert!(frames_with(&rows, "metaroce.analysis.stall").contains(&"7".to_string()));
    assert_eq!(cell(7, "metaroce.analysis.stall.ended"), "1");
    // Both directions of one connection: DATA and its feedback share the
    // flow of the acknowledged direction.
    let flows: Vec<&str> = rows
        .iter()
        .map(|r| r[col("metaroce.analysis.flow")].as_str())
        .collect();
    assert!(
        flows.iter().all(|f| *f == flows[0] && !f.is_empty()),
        "{flows:?}"
    );

    // Display filters and expert infos.
    let spurious = t.fields(
        &pcap,
        &["frame.number"],
        Some("metaroce.spurious_retransmission"),
    );
    assert_eq!(spurious, vec![vec!["5".to_string()]]);
    let rtt = t.fields(
        &pcap,
        &["frame.number"],
        Some("metaroce.analysis.ack_rtt > 0.000005"),
    );
    assert!(rtt.iter().any(|r| r[0] == "4"), "{rtt:?}");
    let info = t.fields(&pcap, &["_ws.col.Info"], Some("frame.number == 3"));
    assert!(
        info[0][0].ends_with("[Out-Of-Order] [Path Loss]"),
        "{info:?}"
    );
}

#[test]
fn second_pass_shows_the_first_pass_verdicts_and_the_pref_turns_it_off() {
    let t = Tshark::new();
    let pcap = write_exchange(&t);
    let one = t.fields(&pcap, FIELDS, None);
    let two = t.fields_with(&pcap, FIELDS, None, &["-2"]);
    assert_eq!(one, two, "a revisit must not feed the engine again");

    let off = t.fields_with(&pcap, FIELDS, None, &["-o", "metaroce.analyze:FALSE"]);
    assert!(
        off.iter().all(|r| r[1..].iter().all(String::is_empty)),
        "{off:?}"
    );
    // A 5 ms threshold: no stall.
    let long = t.fields_with(
        &pcap,
        FIELDS,
        None,
        &["-o", "metaroce.stall_threshold_us:5000"],
    );
    assert!(
        frames_with(&long, "metaroce.analysis.stall").is_empty(),
        "{long:?}"
    );
}

/// `ack_pkt` with the DUP flag: the triggering packet had already arrived.
fn dup_ack_pkt(
    cack: u32,
    echo_psn: u32,
    echo_ev: u16,
    echo_tx_ts: u32,
    tx_ts: u32,
) -> Repr<'static> {
    let mut ack = ack_pkt(cack, echo_psn, echo_ev, echo_tx_ts, tx_ts);
    if let Body::Ack(a) = &mut ack.body {
        a.feedback.flags = FbFlags::DUP;
    }
    ack
}

/// Spurious retransmissions of both kinds of spec 11.10: shown by a later
/// DUP feedback (echoing the original, or the retransmission), and
/// already acknowledged when captured.
///
/// ```text
/// 1 t0  D psn100 ev1            2 t1  D psn101 ev1
/// 3 t50 D psn100 att1 ev2 (timeout)
/// 4 t60 ACK cum102 echo100 (3)  5 t70 ACK cum102 echo100 (1) DUP -> 3 spurious
/// 6 t80 D psn101 att1 ev2       -> below the cumulative ack: spurious at capture
/// 7 t90 D psn102 ev1            8 t200 D psn102 att1 ev2 (timeout)
/// 9 t210 ACK cum103 echo102 (8) DUP -> 8 spurious
/// ```
fn dup_exchange() -> Vec<(u64, Repr<'static>, bool, bool)> {
    vec![
        (0, data_pkt(100, 1, 1, 0, 0), true, false),
        (1, data_pkt(101, 1, 2, 0, 1000), true, false),
        (50, data_pkt(100, 2, 1, 1, 50_000), true, false),
        (60, ack_pkt(102, 100, 2, 50_000, 59_000), false, false),
        (70, dup_ack_pkt(102, 100, 1, 0, 69_000), false, false),
        (80, data_pkt(101, 2, 2, 1, 80_000), true, false),
        (90, data_pkt(102, 1, 3, 0, 90_000), true, false),
        (200, data_pkt(102, 2, 3, 1, 200_000), true, false),
        (
            210,
            dup_ack_pkt(103, 102, 2, 200_000, 209_000),
            false,
            false,
        ),
    ]
}

/// What the analyzer CLI reports for `pcap` (the engine's report, as
/// `metaroce-analyze report --json` prints it): spurious retransmissions
/// over every direction; and the frames it counts: spurious when captured,
/// or named by a DUP feedback's `dup_of_frame`.
fn engine_spurious(pcap: &std::path::Path) -> (u64, Vec<u64>) {
    use analyzer::engine::{Config, Engine, Observation};
    use proto_parse::frame::{DecodeConfig, LinkType};
    let mut engine = Engine::new(Config::default());
    let mut reader = proto_parse::capture::Reader::open(pcap).unwrap();
    let cfg = DecodeConfig::default();
    let mut at_capture = Vec::new();
    let mut shown = Vec::new();
    while let Some(rec) = reader.next_record() {
        let rec = rec.unwrap();
        let link = LinkType::from(u32::from(rec.linktype));
        match Observation::decode(rec.index, rec.ts_ns, link, rec.data, &cfg) {
            Some(obs) => {
                let v = engine.ingest(&obs);
                if v.retransmission.is_some_and(|r| r.spurious()) {
                    at_capture.push(v.frame);
                }
                shown.extend(v.dup_of_frame);
            }
            None => engine.ingest_other(rec.ts_ns),
        }
    }
    let report = engine.snapshot();
    let count = report
        .directions
        .iter()
        .map(|d| d.spurious_retransmissions)
        .sum();
    let mut frames = at_capture;
    frames.extend(shown);
    frames.sort_unstable();
    frames.dedup();
    (count, frames)
}

/// The plugin's spurious retransmissions, read with two passes (`-2`, as
/// the GUI reads a file), are the frames the CLI counts, on every scripted
/// scenario: the two exchanges here and the generated fixtures.
#[test]
fn two_pass_spurious_frames_equal_the_clis() {
    let t = Tshark::new();
    let generated = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/generated");
    let mut captures = vec![
        write_exchange(&t),
        write_script(&t, "dup_exchange.pcap", dup_exchange()),
    ];
    for name in ["multipath_loss_sender.pcap", "multipath_loss_receiver.pcap"] {
        let copy = t.path(name);
        std::fs::copy(generated.join(name), &copy).unwrap();
        t.share(&copy);
        captures.push(copy);
    }
    let mut total = 0;
    for pcap in &captures {
        let rows = t.fields_with(
            pcap,
            &["frame.number"],
            Some("metaroce.analysis.spurious_retransmission"),
            &["-2"],
        );
        let plugin: Vec<u64> = rows.iter().map(|r| r[0].parse().unwrap()).collect();
        let (count, frames) = engine_spurious(pcap);
        assert_eq!(plugin, frames, "{}", pcap.display());
        assert_eq!(plugin.len() as u64, count, "{}", pcap.display());
        total += count;
    }
    // The scenarios do have spurious retransmissions of both kinds.
    assert!(total >= 5, "{total}");

    // The DUP exchange: frames 3 and 8 shown spurious by the DUPs in 5
    // and 9 (linked), frame 6 spurious when captured; one pass cannot know
    // the DUPs yet.
    let dup = &captures[1];
    let fields = [
        "frame.number",
        "metaroce.analysis.spurious_retransmission.dup_frame",
        "metaroce.analysis.retransmission.kind",
    ];
    let two = t.fields_with(
        dup,
        &fields,
        Some("metaroce.analysis.spurious_retransmission"),
        &["-2"],
    );
    let want = [
        ["3", "5", "timeout"],
        ["6", "", "spurious"],
        ["8", "9", "timeout"],
    ];
    assert_eq!(two, want.map(|r| r.map(String::from).to_vec()));
    let one = t.fields(
        dup,
        &["frame.number"],
        Some("metaroce.analysis.spurious_retransmission"),
    );
    assert_eq!(one, [["6".to_string()]]);
}
