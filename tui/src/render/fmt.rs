//! Number formatting shared by the panes, on the report's number
//! formatting (`analyzer::fmt`: the same scaling as the CLI's text report;
//! the panes keep fixed decimals so that columns do not jitter).

use analyzer::fmt;

/// Bits per second: "0 b/s", "812 kb/s", "1.23 Gb/s".
pub fn bps(v: f64) -> String {
    si(v, "b/s")
}

/// Bytes per second: "4.10 MB/s".
pub fn bytes_per_s(v: f64) -> String {
    si(v, "B/s")
}

/// A rate of things per second without unit: "950", "123k", "1.20M".
pub fn per_s(v: f64) -> String {
    si(v, "").replace(' ', "")
}

fn si(v: f64, unit: &str) -> String {
    fmt::si(v, " ", unit)
}

/// A count: "999", "12.3k", "4.56M".
pub fn count(v: u64) -> String {
    if v < 10_000 {
        return v.to_string();
    }
    match fmt::scale(v as f64) {
        (x, 1) => format!("{x:.1}k"),
        (x, n) => format!("{x:.2}{}", ["", "k", "M", "G"][n]),
    }
}

/// A duration: "-", "850ns", "24.0µs", "5.03ms", "1.20s".
pub fn ns(v: u64) -> String {
    if v == 0 {
        return "-".into();
    }
    match fmt::scale(v as f64) {
        (_, 0) => format!("{v}ns"),
        (x, 1) => format!("{x:.1}µs"),
        (x, n) => format!("{x:.2}{}", ["ms", "s"][n - 2]),
    }
}

/// Path evs as a list for people: "1, 2, 3", "none" when empty.
pub fn evs(evs: &[u16]) -> String {
    if evs.is_empty() {
        return "none".into();
    }
    evs.iter()
        .map(u16::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// A percentage of `part` in `whole`: "0.0%".
pub fn pct(part: u64, whole: u64) -> String {
    if whole == 0 {
        "-".into()
    } else {
        format!("{:.1}%", part as f64 * 100.0 / whole as f64)
    }
}

/// A horizontal bar of `width` cells for `frac` in 0..=1 (eighths).
pub fn bar(frac: f64, width: usize) -> String {
    const PARTS: [char; 8] = [' ', '▏', '▎', '▍', '▌', '▋', '▊', '▉'];
    let eighths = (frac.clamp(0.0, 1.0) * (width * 8) as f64).round() as usize;
    let mut s: String = "█".repeat(eighths / 8);
    if !eighths.is_multiple_of(8) {
        s.push(PARTS[eighths % 8]);
    }
    let len = s.chars().count();
    s.extend(std::iter::repeat_n(' ', width.saturating_sub(len)));
    s
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(bps(1.234e9), "1.23 Gb/s");
        assert_eq!(bps(0.0), "0 b/s");
        assert_eq!(count(12_345), "12.3k");
        assert_eq!(ns(24_000), "24.0µs");
        assert_eq!(ns(5_026_000), "5.03ms");
        assert_eq!(pct(1, 4), "25.0%");
        assert_eq!(per_s(11_800.0), "11.8k");
        assert_eq!(per_s(950.0), "950");
        assert_eq!(bar(0.5, 4), "██  ");
        assert_eq!(bar(1.0, 2), "██");
    }
}
