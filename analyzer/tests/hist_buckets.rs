//! A histogram rebuilt from its counts per bucket (`Hist::from_buckets`,
//! what the Spark reduce sums over partitions) has the summary of the
//! samples themselves.

use analyzer::engine::Hist;
use proptest::prelude::*;

proptest! {
    #[test]
    fn bucket_counts_give_the_samples_summary(
        samples in prop::collection::vec(prop_oneof![0u64..5_000, 0u64..50_000_000, any::<u32>().prop_map(u64::from)], 1..400),
        split in 0usize..400,
    ) {
        let mut direct = Hist::new();
        for &s in &samples {
            direct.record(s);
        }
        // Counted in two partitions, each bucket possibly twice.
        let split = split.min(samples.len());
        let mut counts: Vec<(u64, u64)> = Vec::new();
        for part in [&samples[..split], &samples[split..]] {
            let mut per: std::collections::BTreeMap<u64, u64> = Default::default();
            for &s in part {
                *per.entry(Hist::bucket_lowest(s)).or_default() += 1;
            }
            counts.extend(per);
        }
        let (min, max) = (*samples.iter().min().unwrap(), *samples.iter().max().unwrap());
        let rebuilt = Hist::from_buckets(min, max, &counts);
        prop_assert_eq!(rebuilt.summary(), direct.summary());
    }
}
