//! Times the plugin's per-packet work outside Wireshark on a capture:
//! `decode::dissect`, the outer-layer decode and the engine ingest.
//! `cargo run --release -p metaroce-dissector --example analysis_cost -- FILE.pcap`

use std::time::Instant;

use metaroce_dissector::analysis::{Analysis, FrameMeta, outer_layers};
use metaroce_dissector::decode::{Options, dissect};
use proto_parse::capture::Reader;
use proto_parse::frame::LinkType;

fn main() {
    let path = std::env::args().nth(1).expect("a pcap file");
    let mut frames = Vec::new();
    let mut reader = Reader::open(&path).expect("open");
    while let Some(rec) = reader.next_record() {
        if let Ok(rec) = rec {
            frames.push((rec.ts_ns, rec.data.to_vec()));
        }
    }
    let n = frames.len() as f64;
    let t = Instant::now();
    let mut items = 0;
    for (_, f) in &frames {
        items += dissect(&f[42..], f.len() - 42, &Options::default())
            .items
            .len();
    }
    let decode = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let mut ok = 0;
    for (_, f) in &frames {
        ok += usize::from(outer_layers(LinkType::Ethernet, f, &f[42..]).is_some());
    }
    let outer = t.elapsed().as_secs_f64();
    let mut a = Analysis::new(analyzer::Config::default());
    let t = Instant::now();
    for (i, (ts, f)) in frames.iter().enumerate() {
        let o = outer_layers(LinkType::Ethernet, f, &f[42..]).unwrap();
        let meta = FrameMeta {
            frame: i as u32 + 1,
            ts_ns: *ts,
            src: o.src,
            dst: o.dst,
            ecn: o.ecn,
            src_port: o.src_port,
            dst_port: o.dst_port,
            flow_label: o.flow_label,
        };
        a.ingest(&meta, &f[42..], f.len() - 42);
    }
    let ingest = t.elapsed().as_secs_f64();
    println!(
        "{n} frames: decode {:.3} us, outer layers {:.3} us, outer+ingest {:.3} us per packet ({items} items, {ok} ok)",
        decode * 1e6 / n,
        outer * 1e6 / n,
        ingest * 1e6 / n
    );
}
