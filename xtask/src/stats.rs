//! The benchmarks' statistics, in one place: medians, per-round ratios and
//! their spread, and the figures read from the measuring tools' output
//! (valgrind's cachegrind, perf stat, GNU time).
//!
//! Why per-round ratios: this machine's speed moves between rounds far
//! more than within one, so two programs compared are run back to back in
//! each round and the ratio is taken inside the round, then its median over
//! the rounds.

/// The median (the mean of the two middle values for an even count); 0 for
/// no values.
pub fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// The median of integer samples, rounded to an integer.
pub fn median_u64(values: &[u64]) -> u64 {
    let v: Vec<f64> = values.iter().map(|&x| x as f64).collect();
    median(&v).round() as u64
}

/// `a / b`, or 0 where `b` is not positive (a run that measured nothing
/// gives no ratio rather than an infinite one).
pub fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 { a / b } else { 0.0 }
}

/// `a[i] / b[i]` for each round (0 where `b[i]` is not positive).
pub fn ratios(a: &[f64], b: &[f64]) -> Vec<f64> {
    a.iter().zip(b).map(|(&a, &b)| ratio(a, b)).collect()
}

/// The median of the per-round ratios `a[i] / b[i]`.
pub fn median_ratio(a: &[f64], b: &[f64]) -> f64 {
    median(&ratios(a, b))
}

/// The smallest and largest of some values.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    pub min: f64,
    pub max: f64,
}

impl std::fmt::Display for Spread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:.3}-{:.3}", self.min, self.max)
    }
}

/// The range of the values (`None` for none).
pub fn spread(values: &[f64]) -> Option<Spread> {
    let min = values.iter().copied().min_by(f64::total_cmp)?;
    let max = values.iter().copied().max_by(f64::total_cmp)?;
    Some(Spread { min, max })
}

/// The ratio of the best of each side's rounds, the best being the
/// lowest (times); 0 when either side has no rounds. Best, not median:
/// load from other processes only ever slows a round, so the best is the
/// closest to what the program itself can do.
pub fn ratio_of_lowest(a: &[f64], b: &[f64]) -> f64 {
    match (spread(a), spread(b)) {
        (Some(a), Some(b)) => ratio(a.min, b.min),
        _ => 0.0,
    }
}

/// [`ratio_of_lowest`] for rates: the best is the highest.
pub fn ratio_of_highest(a: &[f64], b: &[f64]) -> f64 {
    match (spread(a), spread(b)) {
        (Some(a), Some(b)) => ratio(a.max, b.max),
        _ => 0.0,
    }
}

/// The count per unit between two cumulative counts: `(hi - lo) / units`
/// (instructions per packet from runs over two packet counts, so the
/// fixed start-up cost cancels out); 0 if `hi < lo` or no units.
pub fn per_unit_between(lo: u64, hi: u64, units: u64) -> u64 {
    hi.saturating_sub(lo).checked_div(units).unwrap_or(0)
}

/// A rate: `count / seconds`, or infinity for no time.
pub fn rate(count: f64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        count / seconds
    } else {
        f64::INFINITY
    }
}

/// Instructions executed, from cachegrind's summary on standard error
/// (`==123== I   refs:      1,234,567`; older valgrinds write `I refs:`).
pub fn cachegrind_instructions(stderr: &str) -> Option<u64> {
    stderr.lines().find_map(|line| {
        let words: Vec<&str> = line.split_whitespace().collect();
        let at = words.windows(2).position(|w| w == ["I", "refs:"])?;
        words.get(at + 2)?.replace(',', "").parse().ok()
    })
}

/// Instructions executed, from a cachegrind output file's `summary:` line
/// (the form the plugin's bench reads, from a run inside a chroot).
pub fn cachegrind_file_summary(text: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        line.strip_prefix("summary:")?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    })
}

/// Milliseconds of CPU time, every thread, from `perf stat -x, -e
/// task-clock` (`1234.56,msec,task-clock,...`).
pub fn perf_task_clock_ms(stderr: &str) -> Option<f64> {
    stderr.lines().find_map(|line| {
        let mut fields = line.split(',');
        let value = fields.next()?;
        let _unit = fields.next()?;
        (fields.next()? == "task-clock").then(|| value.parse().ok())?
    })
}

/// What GNU time's `-v` report says of a process.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimeReport {
    /// User plus system CPU seconds.
    pub cpu_s: f64,
    pub max_rss_kib: u64,
}

/// Reads GNU time's `-v` report (`User time (seconds): 0.52`, `System time
/// (seconds): 0.08`, `Maximum resident set size (kbytes): 10240`).
pub fn time_verbose(stderr: &str) -> Option<TimeReport> {
    let field = |name: &str| {
        stderr.lines().find_map(|line| {
            let (key, value) = line.trim().split_once(": ")?;
            (key == name).then(|| value.trim().to_string())
        })
    };
    let user: f64 = field("User time (seconds)")?.parse().ok()?;
    let system: f64 = field("System time (seconds)")?.parse().ok()?;
    let max_rss_kib = field("Maximum resident set size (kbytes)")?.parse().ok()?;
    Some(TimeReport {
        cpu_s: user + system,
        max_rss_kib,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        assert_eq!(median(&[]), 0.0);
        assert_eq!(median(&[3.0]), 3.0);
        assert_eq!(median(&[5.0, 1.0, 3.0]), 3.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median_u64(&[1, 2]), 2);
        assert_eq!(median_u64(&[7, 1, 9]), 7);
    }

    #[test]
    fn ratios_are_taken_within_each_round() {
        // A slow second round slows both programs: the ratio stays 2.
        let a = [2.0, 20.0, 4.0];
        let b = [1.0, 10.0, 2.0];
        assert_eq!(ratios(&a, &b), vec![2.0, 2.0, 2.0]);
        assert_eq!(median_ratio(&a, &b), 2.0);
        // The ratio of the medians would say otherwise: 4 / 2.
        assert_eq!(median(&a) / median(&b), 2.0);
        assert_eq!(median_ratio(&[1.0, 3.0], &[0.0, 1.0]), 1.5);
    }

    #[test]
    fn plain_ratios_give_zero_for_nothing_measured() {
        assert_eq!(ratio(3.0, 2.0), 1.5);
        assert_eq!(ratio(3.0, 0.0), 0.0);
        assert_eq!(ratio(3.0, -1.0), 0.0);
    }

    #[test]
    fn ratios_of_the_lowest_compare_each_side_at_its_fastest() {
        // Times of 3 rounds, the second slowed by the host for both.
        let with = [0.42, 0.90, 0.44];
        let without = [0.40, 0.85, 0.39];
        assert!((ratio_of_lowest(&with, &without) - 0.42 / 0.39).abs() < 1e-12);
        assert_eq!(ratio_of_lowest(&[], &[1.0]), 0.0);
        assert_eq!(ratio_of_lowest(&[1.0], &[0.0]), 0.0);
    }

    #[test]
    fn ratios_of_the_highest_compare_each_side_at_its_best() {
        // With an option: 1195 at best; without: 976 at best (a slow
        // round on either side does not move it).
        let with = [1100.0, 1195.0, 700.0];
        let without = [976.0, 500.0, 950.0];
        assert!((ratio_of_highest(&with, &without) - 1195.0 / 976.0).abs() < 1e-12);
        assert_eq!(ratio_of_highest(&[2.0], &[4.0]), 0.5);
        assert_eq!(ratio_of_highest(&[], &[1.0]), 0.0);
        assert_eq!(ratio_of_highest(&[1.0], &[]), 0.0);
        assert_eq!(ratio_of_highest(&[1.0], &[0.0]), 0.0);
    }

    #[test]
    fn counts_per_unit_cancel_the_fixed_cost() {
        // 30 M instructions of start-up, 80,000 per packet.
        let run = |packets: u64| 30_000_000 + 80_000 * packets;
        assert_eq!(per_unit_between(run(2000), run(12000), 10_000), 80_000);
        assert_eq!(per_unit_between(5, 3, 10), 0);
        assert_eq!(per_unit_between(3, 5, 0), 0);
    }

    #[test]
    fn spreads() {
        assert_eq!(spread(&[]), None);
        let s = spread(&[1.2, 0.9, 1.05]).unwrap();
        assert_eq!((s.min, s.max), (0.9, 1.2));
        assert_eq!(s.to_string(), "0.900-1.200");
    }

    #[test]
    fn rates() {
        assert_eq!(rate(1000.0, 0.5), 2000.0);
        assert!(rate(1.0, 0.0).is_infinite());
    }

    #[test]
    fn cachegrind_summaries_are_read() {
        let stderr = "==4242== Cachegrind, a high-precision tracing profiler\n\
                      ==4242== \n\
                      ==4242== I   refs:      1,064,123,456\n";
        assert_eq!(cachegrind_instructions(stderr), Some(1_064_123_456));
        assert_eq!(
            cachegrind_instructions("==1== I refs: 12,345\n"),
            Some(12_345)
        );
        assert_eq!(cachegrind_instructions("==1== I1  misses: 3\n"), None);
        assert_eq!(cachegrind_instructions("no summary"), None);
        let file = "desc: --cache-sim=no\ncmd: tshark\nevents: Ir\nfl=x\n1 2\nsummary: 987654\n";
        assert_eq!(cachegrind_file_summary(file), Some(987_654));
        assert_eq!(cachegrind_file_summary("events: Ir\n"), None);
    }

    #[test]
    fn perf_task_clock_is_read() {
        let stderr = "1234.56,msec,task-clock,1234560000,100.00,1.998,CPUs utilized\n";
        assert_eq!(perf_task_clock_ms(stderr), Some(1234.56));
        assert_eq!(perf_task_clock_ms("5,,cycles,0,0\n"), None);
        assert_eq!(
            perf_task_clock_ms("<not counted>,msec,task-clock,0,0\n"),
            None
        );
    }

    #[test]
    fn gnu_time_reports_are_read() {
        let stderr = "\tCommand being timed: \"metaroce-analyze report\"\n\
                      \tUser time (seconds): 0.52\n\
                      \tSystem time (seconds): 0.08\n\
                      \tPercent of CPU this job got: 180%\n\
                      \tMaximum resident set size (kbytes): 10240\n";
        let t = time_verbose(stderr).unwrap();
        assert!((t.cpu_s - 0.60).abs() < 1e-9);
        assert_eq!(t.max_rss_kib, 10240);
        assert_eq!(time_verbose("\tUser time (seconds): 0.52\n"), None);
    }
}
