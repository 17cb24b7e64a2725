//! More captures than a byte can number (a job of hundreds of hosts, one
//! capture each): every capture keeps its own identity in the matcher, so
//! the pairs past capture 255 are matched and their clock offsets
//! estimated like the first ones.
//!
//! 320 captures in 160 pairs (2k, 2k+1): host 2k sends one DATA per ms to
//! host 2k+1, which answers each; both directions take 20 us, and capture
//! c's clock runs `c * c * 100` ns ahead, so each pair has its own offset.

mod common;

use analyzer::engine::{Config, MAX_CAPTURES, MergeConfig, MultiEngine, Observation};

const CAPTURES: usize = 320;
// The scale: a job of 1,024 hosts is one matching.
const _: () = assert!(MAX_CAPTURES >= 1024);
const MESSAGES: u32 = 8;
const OWD: u64 = 20_000;

fn clock_ahead(capture: usize) -> u64 {
    (capture * capture) as u64 * 100
}

fn host(capture: usize) -> std::net::IpAddr {
    common::ip(&format!("10.{}.{}.1", capture / 250, capture % 250 + 1))
}

/// (capture, observation) of every capture, in capture-time order.
fn events() -> Vec<(usize, Observation)> {
    let mut events = Vec::new();
    let t0 = 1_000_000_000u64;
    for a in (0..CAPTURES).step_by(2) {
        let b = a + 1;
        let conn = a as u32 + 1;
        for i in 0..MESSAGES {
            let t = t0 + u64::from(i) * 1_000_000;
            let data = common::one_packet_send(conn, conn + 1, i, 1, i as u16 + 1, i);
            let reply = common::one_packet_send(conn + 1, conn, 100 + i, 2, i as u16 + 1, i);
            let sent = |frame, c: usize, ts: u64, from_a: bool, mr| {
                let (src, dst) = if from_a {
                    (host(a), host(b))
                } else {
                    (host(b), host(a))
                };
                let obs = common::metaroce_observation(frame, ts + clock_ahead(c), src, dst, mr);
                (c, obs)
            };
            let frame = u64::from(i) * 2;
            events.push(sent(frame + 1, a, t, true, data));
            events.push(sent(frame + 1, b, t + OWD, true, data));
            events.push(sent(frame + 2, b, t + 100_000, false, reply));
            events.push(sent(frame + 2, a, t + 100_000 + OWD, false, reply));
        }
    }
    events.sort_by_key(|(c, o)| (o.ts_ns, *c));
    events
}

#[test]
fn captures_past_255_are_matched_and_their_offsets_estimated() {
    let mut multi = MultiEngine::new(CAPTURES, Config::default(), MergeConfig::default());
    let mut ends = vec![0u64; CAPTURES];
    for (c, o) in &events() {
        multi.ingest(*c, o);
        ends[*c] = o.ts_ns;
    }
    multi.finish(&ends);
    let between = multi.between();
    let pairs: Vec<(u64, u64)> = between.iter().map(|r| (r.capture_a, r.capture_b)).collect();
    let expected: Vec<(u64, u64)> = (0..CAPTURES as u64)
        .step_by(2)
        .map(|a| (a, a + 1))
        .collect();
    assert_eq!(pairs, expected);
    for r in &between {
        let (a, b) = (r.capture_a as usize, r.capture_b as usize);
        assert_eq!(r.matched_packets, 2 * u64::from(MESSAGES), "pair {a}-{b}");
        assert!(r.offset_estimated, "pair {a}-{b}");
        let offset = clock_ahead(b) as i64 - clock_ahead(a) as i64;
        assert_eq!(r.clock_offset_ns, offset, "pair {a}-{b}");
        for p in &r.paths {
            assert_eq!(p.lost_between, 0, "pair {a}-{b}");
            assert_eq!(p.one_way_delay_ns.max, OWD, "pair {a}-{b}");
        }
    }
    // Each capture's engine saw its own packets only.
    let frames = |c: usize| multi.engine(c).map(|e| e.snapshot().capture.frames);
    assert_eq!(frames(CAPTURES - 1), Some(2 * u64::from(MESSAGES)));
    assert_eq!(frames(300), Some(2 * u64::from(MESSAGES)));
}
