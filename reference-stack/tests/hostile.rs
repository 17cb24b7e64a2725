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
