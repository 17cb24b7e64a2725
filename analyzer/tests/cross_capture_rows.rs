//! The matcher in row mode, partitioned as the Spark reduce partitions it,
//! gives the report of the one matcher that sees every capture: the same
//! matches, offsets, delays (percentiles from bucket counts) and losses,
//! with losses that leave the window early and losses judged at the end.
//!
//! Three captures: A's (0), B's (1, clock 5 ms ahead) and a bystander (2)
//! with traffic of another flow only. A sends one DATA per
//! ms for 200 ms, B acks each; the window is 20 ms, so the DATA lost early
//! (every 17th) leave the window long before the end, those lost in the
//! last 20 ms are judged at the end.

mod common;

use std::collections::BTreeMap;

use analyzer::engine::{
    CrossCapture, FlowPath, Hist, MergeConfig, MrObs, Observation, PathSums, Transmission,
    one_way_delay,
};

const OFFSET: u64 = 5_000_000;

fn obs(frame: u64, ts: u64, from_a: bool, mr: MrObs) -> Observation {
    let (a, b) = (common::ip("10.3.0.1"), common::ip("10.3.0.2"));
    let (src, dst) = if from_a { (a, b) } else { (b, a) };
    common::metaroce_observation(frame, ts, src, dst, mr)
}

/// (capture, observation) in capture-time order.
fn captures() -> Vec<(u16, Observation)> {
    let mut events = Vec::new();
    let t0 = 1_000_000_000u64;
    let mut frame = 0;
    for i in 0..200u32 {
        let t = t0 + u64::from(i) * 1_000_000;
        let ev = 1 + (i % 4) as u16;
        let owd = 20_000 + u64::from(i % 7) * 3_000;
        let d = common::one_packet_send(1, 2, 100 + i, ev, (i / 4 + 1) as u16, i);
        frame += 1;
        events.push((0, obs(frame, t, true, d)));
        if i % 17 != 5 && !(185..190).contains(&i) {
            frame += 1;
            events.push((1, obs(frame, t + owd + OFFSET, true, d)));
        }
        // B's reply (a one-packet SEND back), 20 us to A.
        let r = common::one_packet_send(2, 1, 5000 + i, 9, (i + 1) as u16, 7000 + i);
        frame += 1;
        events.push((1, obs(frame, t + owd + 50_000 + OFFSET, false, r)));
        frame += 1;
        events.push((0, obs(frame, t + owd + 70_000, false, r)));
    }
    // A bystander capture with traffic of its own, off these flows' path.
    for i in 0..50u32 {
        let s = common::one_packet_send(7, 8, i, 3, i as u16 + 1, i);
        frame += 1;
        events.push((2, obs(frame, t0 + u64::from(i) * 3_000_000, true, s)));
    }
    events.sort_by_key(|(c, o)| (o.ts_ns, *c));
    events
}

fn cfg() -> MergeConfig {
    MergeConfig {
        window_ns: 20_000_000,
        ..MergeConfig::default()
    }
}

fn path_of(tx: &Transmission) -> FlowPath {
    FlowPath {
        rocev2: tx.rocev2,
        src: tx.src,
        dst: tx.dst,
        src_conn: tx.src_conn,
        dst_conn: tx.dst_conn,
        ev: tx.ev,
    }
}

type PathKey = (u16, u16, String);

#[test]
fn partitioned_rows_give_the_single_matchers_report() {
    let events = captures();
    // The single matcher.
    let mut one = CrossCapture::new(cfg());
    for (c, o) in &events {
        one.observe(*c, o);
    }
    one.finish();
    let expected = serde_json::to_value(one.report()).unwrap();

    // Spans, as the captures tables give them.
    let mut spans = vec![(u64::MAX, 0u64); 3];
    for (c, o) in &events {
        let s = &mut spans[usize::from(*c)];
        *s = (s.0.min(o.ts_ns), s.1.max(o.ts_ns));
    }
    // Three partitions by transmission, each in capture-time order.
    let mut matched: Vec<(u16, u16, FlowPath, i64)> = Vec::new();
    let mut unmatched = Vec::new();
    for part in 0..3u32 {
        let mut m = CrossCapture::for_rows(cfg(), &spans);
        for (c, o) in &events {
            let Some(tx) = Transmission::of(o) else {
                continue;
            };
            if (tx.psn + u32::from(tx.ev)) % 3 != part {
                continue;
            }
            if let Some(other) = m.observe_transmission(*c, &tx, o.ts_ns, o.frame, o.ecn) {
                let (a, b, delta) = if other.capture < *c {
                    (other.capture, *c, o.ts_ns as i64 - other.ts_ns as i64)
                } else {
                    (*c, other.capture, other.ts_ns as i64 - o.ts_ns as i64)
                };
                matched.push((a, b, path_of(&tx), delta));
            }
        }
        unmatched.extend(m.take_unmatched());
    }
    // Sums per path, then the context the reduce builds from them.
    let key = |a: u16, b: u16, p: &FlowPath| -> PathKey { (a, b, format!("{p:?}")) };
    let mut sums: BTreeMap<PathKey, (FlowPath, u64, i64, i64, i128)> = BTreeMap::new();
    for (a, b, p, d) in &matched {
        let e = sums
            .entry(key(*a, *b, p))
            .or_insert((*p, 0, i64::MAX, i64::MIN, 0));
        e.1 += 1;
        e.2 = e.2.min(*d);
        e.3 = e.3.max(*d);
        e.4 += i128::from(*d);
    }
    let mut ctx = CrossCapture::new(cfg());
    for (c, &(first, last)) in spans.iter().enumerate() {
        ctx.set_span(c as u16, first, last);
    }
    for ((a, b, _), (p, n, min, max, sum)) in &sums {
        let sums = PathSums {
            n: *n,
            min: *min,
            max: *max,
            sum: *sum,
        };
        ctx.add_path(*a, *b, p, sums);
    }
    let offsets = ctx.offsets();
    let mut direction = BTreeMap::new();
    for pair in ctx.report() {
        for p in &pair.paths {
            let path = FlowPath {
                rocev2: p.proto == "rocev2",
                src: p.src,
                dst: p.dst,
                src_conn: p.src_conn,
                dst_conn: p.dst_conn,
                ev: p.ev,
            };
            let a = pair.capture_a as u16;
            direction.insert(
                key(a, pair.capture_b as u16, &path),
                (p.upstream == u64::from(a), pair.clock_offset_ns),
            );
        }
    }
    let mut buckets: BTreeMap<(PathKey, u64), u64> = BTreeMap::new();
    for (a, b, p, d) in &matched {
        let (a_first, offset) = direction[&key(*a, *b, p)];
        let owd = one_way_delay(a_first, *d, offset);
        *buckets
            .entry((key(*a, *b, p), Hist::bucket_lowest(owd)))
            .or_default() += 1;
    }
    for ((k, bucket), n) in &buckets {
        ctx.add_one_way_delays(k.0, k.1, &sums[k].0, *bucket, *n);
    }
    let mut left = 0;
    for (tx, copy, fate) in &unmatched {
        let fate = match fate {
            Some(f) => {
                left += 1;
                Some(*f)
            }
            None => ctx.fate_at_end(&offsets, tx, copy.capture, copy.ts_ns),
        };
        if let Some(f) = fate {
            ctx.add_unmatched(copy.capture, &path_of(tx), f, 1);
        }
    }
    // Losses left the window during the captures (not only at the end).
    assert!(left >= 10, "{left}");
    assert_eq!(serde_json::to_value(ctx.report()).unwrap(), expected);
    // And the comparison means something: losses, unknowns, percentiles.
    let paths = expected[0]["paths"].as_array().unwrap();
    let lost: u64 = paths
        .iter()
        .map(|p| p["lost_between"].as_u64().unwrap())
        .sum();
    assert!(lost >= 10, "{expected}");
    assert!(
        paths
            .iter()
            .any(|p| p["one_way_delay_ns"]["p50"] != p["one_way_delay_ns"]["max"])
    );
}
