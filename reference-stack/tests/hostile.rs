//! Malformed and hostile datagrams injected into a live connection are
//! counted and dropped: no panic, and the transfer stays byte-exact.

use proptest::prelude::*;
use rand::Rng;
use reference_stack::sim::{LinkConfig, Pair, WorkOp};
use reference_stack::{Config, RxMeta};

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Random byte strings, and copies of real packets with random bit
    /// flips, truncations and extensions, delivered next to the real ones.
    #[test]
    fn hostile_datagrams_never_corrupt_a_transfer(seed in any::<u64>(), rate in 0.05f64..0.5) {
        let cfg = Config::default();
        let mut p = Pair::new(cfg.clone(), cfg, seed, LinkConfig { loss: 0.01, ..LinkConfig::default() });
        let (c, s) = p.connect();
        p.inject = Some(Box::new(move |rng, _to_server, real: &[u8]| {
            let mut out = Vec::new();
            if rng.random_bool(rate) {
                match rng.random_range(0..4) {
                    0 => {
                        let n = rng.random_range(0..200);
                        out.push((0..n).map(|_| rng.random()).collect());
                    }
                    1 => {
                        let mut v = real.to_vec();
                        for _ in 0..rng.random_range(1..4) {
                            if !v.is_empty() {
                                let i = rng.random_range(0..v.len());
                                v[i] ^= 1 << rng.random_range(0..8);
                            }
                        }
                        out.push(v);
                    }
                    2 => {
                        let mut v = real.to_vec();
                        v.truncate(rng.random_range(0..=v.len()));
                        out.push(v);
                    }
                    _ => {
                        let mut v = real.to_vec();
                        v.extend((0..rng.random_range(1..16)).map(|_| rng.random::<u8>()));
                        out.push(v);
                    }
                }
            }
            out
        }));
        let r = p.run_workload(c, s, WorkOp::Write, 4, 200_000, 10_000_000_000);
        prop_assert!(r.byte_exact && r.exactly_once, "{:?}", r);
        let st = p.server.stats().clone();
        let ct = p.client.stats().clone();
        let refused = st.malformed + st.bad_crc + st.unsupported + st.unknown_conn + st.missing_crc
            + ct.malformed + ct.bad_crc + ct.unsupported + ct.unknown_conn + ct.missing_crc;
        prop_assert!(refused > 0);
    }

    /// Arbitrary bytes straight into both endpoints never panic.
    #[test]
    fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..600)) {
        let cfg = Config::default();
        let mut p = Pair::new(cfg.clone(), cfg, 1, LinkConfig::default());
        let (_c, _s) = p.connect();
        let (now, from) = (p.time, p.client_addr);
        p.server.handle_datagram(now, from, RxMeta::default(), &data);
        p.client.handle_datagram(now, p.server_addr, RxMeta { ce: true }, &data);
        p.step();
    }
}

mod forged {
    use proptest::prelude::*;
    use proto_parse::metaroce::{
        AckRepr, Body, CcAlgo, CtrlOp, CtrlRepr, DataRepr, FbFlags, Features, FeedbackRepr, Flags,
        NackCode, NackRepr, Op, Repr, SackBitmap,
    };
    use reference_stack::sim::{LinkConfig, Pair, pattern};
    use reference_stack::{CompletionKind, Config, Event, RxMeta};

    fn fb(echo_psn: u32) -> FeedbackRepr {
        FeedbackRepr {
            flags: FbFlags::DUP | FbFlags::ECE,
            echo_ev: 1,
            echo_psn,
            echo_tx_ts: 7,
            rx_ts: 9,
            credit: 0,
            ..FeedbackRepr::default()
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

        /// Well-formed packets (valid CRC, the live connection's ids) with
        /// hostile contents: acks beyond what was sent, PSNs far outside the
        /// windows, inconsistent message fields, READ_RESP for no READ,
        /// unknown CTRL ops, NACKs for nothing. They are ignored; the
        /// transfer stays byte-exact and exactly once.
        #[test]
        fn forged_packets_with_live_ids_are_ignored(seed in any::<u64>(), kinds in proptest::collection::vec(0u8..8, 1..40)) {
            let cfg = Config::default();
            let mut p = Pair::new(cfg.clone(), cfg, seed, LinkConfig { loss: 0.01, ..LinkConfig::default() });
            let (c, s) = p.connect();
            let rkey = p.server.memory.register(0x1000, 4 * 100_000);
            let now = p.time;
            for i in 0..4 {
                p.client.conn_mut(c).post_write(now, pattern(i, 100_000), 0x1000 + (i * 100_000) as u64, rkey, None);
            }
            let mut k = 0;
            let deadline = p.time + 2_000_000_000;
            while p.time < deadline {
                if !p.step() {
                    break;
                }
                let kind = kinds[k % kinds.len()];
                k += 1;
                let (cc, sc) = (p.client.conn(c), p.server.conn(s));
                // Forged as if from the client to the server, and back.
                let (to_server, src, dst, snd_nxt, rcv_nxt) = if k % 2 == 0 {
                    (true, cc.local_id(), cc.remote_id(), cc.next_psn(), sc.expected_psn())
                } else {
                    (false, sc.local_id(), sc.remote_id(), sc.next_psn(), cc.expected_psn())
                };
                let far = rcv_nxt.wrapping_add(1 << 30);
                let (psn, body, payload): (u32, Body, &[u8]) = match kind {
                    0 => (snd_nxt.wrapping_add(1000), Body::Ack(AckRepr { feedback: fb(1), sack_base: snd_nxt, sack: SackBitmap::from_psns(snd_nxt, [snd_nxt + 3]) }), &[]),
                    1 => (rcv_nxt, Body::Nack(NackRepr { feedback: fb(far), code: NackCode::from(kind.wrapping_mul(37)), rnr_timer: 255, nack_psn: far }), &[]),
                    2 => (far, Body::Data(DataRepr { op: Op::Write { remote_va: 0x1000, rkey }, payload_len: 4, msg_id: 0, msg_offset: 0, msg_len: 4 }), &[9, 9, 9, 9]),
                    3 => (rcv_nxt.wrapping_add(2000), Body::Data(DataRepr { op: Op::Send, payload_len: 4, msg_id: 77, msg_offset: 0, msg_len: 4 }), &[1, 2, 3, 4]),
                    4 => (far, Body::Data(DataRepr { op: Op::ReadResp, payload_len: 4, msg_id: 12345, msg_offset: 0, msg_len: 4 }), &[5, 5, 5, 5]),
                    5 => (0, Body::Ctrl(CtrlRepr { op: CtrlOp::from(200), cc_algo: CcAlgo::Hybrid, mtu: 1, init_psn: 0, features: Features::all(), ts_unit_ps: 0 }), &[]),
                    6 => (snd_nxt, Body::ProbeReply(fb(0xDEAD)), &[]),
                    _ => (snd_nxt.wrapping_sub(1 << 31), Body::Ack(AckRepr { feedback: fb(0), sack_base: 0, sack: SackBitmap::with_words(4) }), &[]),
                };
                let repr = Repr {
                    flags: Flags::AR,
                    tx_attempt: 3,
                    ev: 1,
                    path_seq: 5,
                    dst_conn: dst,
                    src_conn: src,
                    psn,
                    tx_ts: 1,
                    body,
                    tlvs: Vec::new(),
                    payload,
                    crc: true,
                };
                let bytes = repr.to_vec();
                let t = p.time;
                if to_server {
                    let from = p.client_addr;
                    p.server.handle_datagram(t, from, RxMeta { ce: true }, &bytes);
                } else {
                    let from = p.server_addr;
                    p.client.handle_datagram(t, from, RxMeta { ce: true }, &bytes);
                }
                let done = p.client_events.iter().filter(|(_, e)| matches!(e, Event::Completion(x) if x.kind == CompletionKind::Write)).count();
                if done == 4 {
                    break;
                }
            }
            let done: Vec<_> = p.client_events.iter().filter_map(|(_, e)| match e { Event::Completion(x) => Some(x.clone()), _ => None }).collect();
            prop_assert_eq!(done.len(), 4, "{:?} {:?}", done, p.client.conn(c).stats());
            prop_assert!(done.iter().all(|x| x.ok));
            let region = p.server.memory.region(rkey).unwrap();
            for i in 0..4 {
                prop_assert!(region.data[i * 100_000..(i + 1) * 100_000] == pattern(i, 100_000)[..]);
            }
            prop_assert!(!p.client.conn(c).is_closed() && !p.server.conn(s).is_closed());
        }
    }
}

/// A flood of forged CONNECTs cannot open more than `MAX_CONNS`
/// connections.
#[test]
fn connect_flood_is_bounded() {
    use proto_parse::metaroce::{Body, CcAlgo, CtrlOp, CtrlRepr, Features, Flags, Repr};
    use reference_stack::{Endpoint, MAX_CONNS};
    let mut ep = Endpoint::new(Config::default(), 1, true);
    let from = "10.9.9.9:4794".parse().unwrap();
    for i in 0..(MAX_CONNS as u32 + 100) {
        let repr = Repr {
            flags: Flags::empty(),
            tx_attempt: 0,
            ev: 1,
            path_seq: 0,
            dst_conn: 0,
            src_conn: i + 1,
            psn: 0,
            tx_ts: 0,
            body: Body::Ctrl(CtrlRepr {
                op: CtrlOp::Connect,
                cc_algo: CcAlgo::DelayBased,
                mtu: 4096,
                init_psn: i,
                features: Features::CRC,
                ts_unit_ps: 1000,
            }),
            tlvs: Vec::new(),
            payload: &[],
            crc: true,
        };
        ep.handle_datagram(0, from, RxMeta::default(), &repr.to_vec());
    }
    assert_eq!(ep.live_conns(), MAX_CONNS);
    assert_eq!(ep.stats().refused_connects, 100);
}
