//! `metaroce-analyze`: offline analysis of MetaRoCE and RoCEv2 captures.
//! This library is the command line's machinery, shared by the binary
//! (`src/main.rs`) and the benchmark's examples: the per-frame decoder
//! ([`decode`]), the two-thread analysis pipeline ([`pipeline`]), the
//! terminal report ([`text`]), the self-contained HTML report ([`html`]),
//! both laying out the same report tables ([`columns`]),
//! Chrome/Perfetto traces ([`trace`]), the packets table's rows
//! ([`rows`]) and their Parquet/CSV export ([`export`],
//! feature `export`) and charts ([`plot`], feature `plot`); the charts of
//! `html` and `plot` draw the verdict stream's [`series`]. None of it
//! analyses anything itself: packets go through `proto_parse` and the flow
//! engine (the `analyzer` crate); this crate reads, schedules and presents.
#![forbid(unsafe_code)]

pub mod columns;
pub mod decode;
pub mod html;
pub mod pipeline;
pub mod points;
pub mod rows;
pub mod series;
pub mod text;
pub mod trace;

#[cfg(feature = "export")]
pub mod export;
#[cfg(feature = "plot")]
pub mod plot;

/// Parses a duration for `--stall-threshold`: a number with a unit `ns`,
/// `us` (or `µs`), `ms` or `s` (`1ms`, `500us`, `2.5ms`); a bare number
/// is nanoseconds.
pub fn parse_duration(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a duration (examples: 1ms, 500us, 2s)"))?;
    let scale = match unit.trim() {
        "" | "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        other => {
            return Err(format!(
                "unknown unit '{other}' in '{s}' (use ns, us, ms or s)"
            ));
        }
    };
    let ns = value * scale;
    if !ns.is_finite() || ns < 0.0 || ns > u64::MAX as f64 {
        return Err(format!("'{s}' is out of range"));
    }
    Ok(ns.round() as u64)
}

#[cfg(test)]
mod tests {
    use super::parse_duration;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("1ms"), Ok(1_000_000));
        assert_eq!(parse_duration("500us"), Ok(500_000));
        assert_eq!(parse_duration("2.5ms"), Ok(2_500_000));
        assert_eq!(parse_duration("7"), Ok(7));
        assert_eq!(parse_duration("1s"), Ok(1_000_000_000));
        assert!(parse_duration("ms").is_err());
        assert!(parse_duration("3 parsecs").is_err());
    }
}
