//! The report's numbers as people read them, shared by its two readers for
//! people, the CLI's text report and the TUI: a value is scaled by powers
//! of 1,000 to the largest step it reaches and shown with three significant
//! digits. Each tool chooses its units' spelling and spacing.

/// Steps of 1,000: `(v / 1000^n, n)` for the largest `n` (at most 3) with
/// `v >= 1000^n`; `n` indexes a tool's unit names (`["", "k", "M", "G"]`,
/// or `["ns", "us", "ms", "s"]` for nanoseconds).
pub fn scale(v: f64) -> (f64, usize) {
    if v >= 1e9 {
        (v / 1e9, 3)
    } else if v >= 1e6 {
        (v / 1e6, 2)
    } else if v >= 1e3 {
        (v / 1e3, 1)
    } else {
        (v, 0)
    }
}

/// Three significant digits of a value from 1 to 999.9...: `123`, `12.3`,
/// `1.23`.
pub fn sig3(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else if x >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

/// `v` with an SI prefix and three significant digits, `sep` between the
/// number and the unit: `si(1.234e9, " ", "b/s")` is `1.23 Gb/s`; below
/// 1,000 the value rounded to a whole number (`950 b/s`).
pub fn si(v: f64, sep: &str, unit: &str) -> String {
    const PREFIX: [&str; 4] = ["", "k", "M", "G"];
    match scale(v) {
        (x, 0) => format!("{x:.0}{sep}{unit}"),
        (x, n) => format!("{}{sep}{}{unit}", sig3(x), PREFIX[n]),
    }
}

/// Nanoseconds as a short duration, three significant digits, `micro` the
/// spelling of the microsecond (`us` or `µs`): `850ns`, `24.0us`, `5.03ms`,
/// `1.20s`.
pub fn duration_ns(ns: u64, micro: &str) -> String {
    match scale(ns as f64) {
        (_, 0) => format!("{ns}ns"),
        (x, n) => format!("{}{}", sig3(x), ["", micro, "ms", "s"][n]),
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn scales_and_digits() {
        assert_eq!(scale(999.0), (999.0, 0));
        assert_eq!(scale(1_000.0), (1.0, 1));
        assert_eq!(scale(2.5e9), (2.5, 3));
        assert_eq!(sig3(123.4), "123");
        assert_eq!(sig3(12.34), "12.3");
        assert_eq!(sig3(1.234), "1.23");
        assert_eq!(si(1.234e9, " ", "b/s"), "1.23 Gb/s");
        assert_eq!(si(0.0, " ", "b/s"), "0 b/s");
        assert_eq!(si(950.0, "", "b/s"), "950b/s");
        assert_eq!(si(11_800.0, "", ""), "11.8k");
        assert_eq!(duration_ns(850, "us"), "850ns");
        assert_eq!(duration_ns(24_000, "µs"), "24.0µs");
        assert_eq!(duration_ns(5_026_000, "us"), "5.03ms");
        assert_eq!(duration_ns(1_200_000_000, "us"), "1.20s");
    }
}
