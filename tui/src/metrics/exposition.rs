//! The text formats a scrape asks for: Prometheus 0.0.4 (the default) and
//! OpenMetrics 1.0.0 (when the `Accept` header names it). They differ in
//! three places only: a counter's `# TYPE` line names the family without
//! `_total` in OpenMetrics, OpenMetrics has `# UNIT` lines, and it ends
//! with `# EOF`.

use std::fmt::Write;

use super::latency::{BOUNDS_NS, Hist};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Prometheus,
    OpenMetrics,
}

impl Format {
    /// From a request's `Accept` header (Prometheus sends
    /// `application/openmetrics-text;version=1.0.0,...;q=0.5,text/plain...`
    /// when it prefers OpenMetrics).
    pub fn negotiate(accept: Option<&str>) -> Format {
        match accept {
            Some(a) if a.contains("application/openmetrics-text") => Format::OpenMetrics,
            _ => Format::Prometheus,
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Format::Prometheus => "text/plain; version=0.0.4; charset=utf-8",
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
    /// A constant 1 whose labels say something (`_info`).
    Info,
}

/// Writes families, one at a time: [`Writer::family`], then its samples.
pub struct Writer {
    pub out: String,
    format: Format,
    /// The family being written (for `_total`).
    kind: Kind,
}

impl Writer {
    pub fn new(format: Format, capacity: usize) -> Writer {
        Writer {
            out: String::with_capacity(capacity),
            format,
            kind: Kind::Gauge,
        }
    }

    /// Starts family `name` (a counter's without `_total`). Names ending
    /// in `_seconds` or `_bytes` get OpenMetrics' `# UNIT`.
    pub fn family(&mut self, name: &str, kind: Kind, help: &str) {
        self.kind = kind;
        let (om_type, prom_suffix) = match kind {
            Kind::Counter => ("counter", "_total"),
            Kind::Gauge => ("gauge", ""),
            Kind::Histogram => ("histogram", ""),
            Kind::Info => ("info", "_info"),
        };
        match self.format {
            // Prometheus 0.0.4 names the samples' metric (an info is a
            // gauge there).
            Format::Prometheus => {
                let t = if kind == Kind::Info { "gauge" } else { om_type };
                let _ = writeln!(self.out, "# HELP {name}{prom_suffix} {help}");
                let _ = writeln!(self.out, "# TYPE {name}{prom_suffix} {t}");
            }
            Format::OpenMetrics => {
                let _ = writeln!(self.out, "# TYPE {name} {om_type}");
                self.unit(name);
                let _ = writeln!(self.out, "# HELP {name} {help}");
            }
        }
    }

    fn unit(&mut self, name: &str) {
        if self.format != Format::OpenMetrics {
            return;
        }
        // A counter's unit comes before its `_total`.
        for unit in ["seconds", "bytes"] {
            if name.ends_with(&format!("_{unit}")) {
                let _ = writeln!(self.out, "# UNIT {name} {unit}");
            }
        }
    }

    /// One sample of the current family: `labels` is the label list
    /// without braces (already escaped), `extra` one more label.
    pub fn sample(&mut self, name: &str, labels: &str, extra: Option<(&str, &str)>, value: u64) {
        self.name_and_labels(name, labels, extra);
        self.value(value);
    }

    /// ` VALUE\n` (itoa: a scrape writes hundreds of thousands).
    fn value(&mut self, value: u64) {
        self.out.push(' ');
        self.out.push_str(itoa::Buffer::new().format(value));
        self.out.push('\n');
    }

    /// A sample with a fractional value.
    pub fn sample_f64(&mut self, name: &str, labels: &str, value: f64) {
        self.name_and_labels(name, labels, None);
        let _ = writeln!(self.out, " {}", F64(value));
    }

    fn name_and_labels(&mut self, name: &str, labels: &str, extra: Option<(&str, &str)>) {
        self.out.push_str(name);
        match self.kind {
            Kind::Counter => self.out.push_str("_total"),
            Kind::Info => self.out.push_str("_info"),
            Kind::Gauge | Kind::Histogram => {}
        }
        if labels.is_empty() && extra.is_none() {
            return;
        }
        self.out.push('{');
        self.out.push_str(labels);
        if let Some((k, v)) = extra {
            if !labels.is_empty() {
                self.out.push(',');
            }
            let _ = write!(self.out, "{k}=\"");
            escape_into(&mut self.out, v);
            self.out.push('"');
        }
        self.out.push('}');
    }

    /// The samples of histogram `name` (`_bucket` cumulative over
    /// [`BOUNDS_NS`] in seconds, `+Inf`, `_sum` in seconds, `_count`).
    pub fn histogram(&mut self, name: &str, labels: &str, h: &Hist) {
        let mut cumulative = 0;
        for (i, n) in h.buckets.iter().enumerate() {
            cumulative += n;
            self.out.push_str(name);
            self.out.push_str("_bucket{");
            self.out.push_str(labels);
            if !labels.is_empty() {
                self.out.push(',');
            }
            self.out.push_str("le=\"");
            self.out
                .push_str(LE_SECONDS.get(i).copied().unwrap_or("+Inf"));
            self.out.push_str("\"}");
            self.value(cumulative);
        }
        for (suffix, value) in [("_sum", None), ("_count", Some(h.count))] {
            self.out.push_str(name);
            self.out.push_str(suffix);
            if !labels.is_empty() {
                self.out.push('{');
                self.out.push_str(labels);
                self.out.push('}');
            }
            match value {
                Some(v) => self.value(v),
                None => {
                    let _ = writeln!(self.out, " {}", F64(h.sum_ns as f64 / 1e9));
                }
            }
        }
    }

    pub fn finish(mut self) -> String {
        if self.format == Format::OpenMetrics {
            self.out.push_str("# EOF\n");
        }
        self.out
    }
}

/// The `le` of each bound of [`BOUNDS_NS`], in seconds (a test checks
/// they agree).
const LE_SECONDS: [&str; BOUNDS_NS.len()] = [
    "1e-06", "2e-06", "5e-06", "1e-05", "2e-05", "5e-05", "0.0001", "0.0002", "0.0005", "0.001",
    "0.002", "0.005", "0.01", "0.02", "0.05", "0.1", "0.2", "0.5", "1.0",
];

/// A float as both formats read it (`+Inf`, `-Inf`, `NaN`; integers with
/// `.0` are fine either way).
struct F64(f64);

impl std::fmt::Display for F64 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let v = self.0;
        if v.is_nan() {
            f.write_str("NaN")
        } else if v.is_infinite() {
            f.write_str(if v > 0.0 { "+Inf" } else { "-Inf" })
        } else {
            write!(f, "{v:?}")
        }
    }
}

/// A label value escaped as both formats want (`\\`, `\"`, `\n`).
pub fn escape_into(out: &mut String, value: &str) {
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// `k1="v1",k2="v2"`, values escaped.
pub fn labels(pairs: &[(&str, &str)]) -> String {
    let mut out = String::new();
    for (i, (k, v)) in pairs.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(k);
        out.push_str("=\"");
        escape_into(&mut out, v);
        out.push('"');
    }
    out
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn le_strings_are_the_bounds() {
        for (b, le) in BOUNDS_NS.iter().zip(LE_SECONDS) {
            let le: f64 = le.parse().unwrap();
            assert_eq!(le, *b as f64 / 1e9);
        }
    }

    #[test]
    fn counters_histograms_and_escapes_in_both_formats() {
        let mut h = Hist::default();
        h.record(1_500);
        h.record(3_000_000_000);
        for format in [Format::Prometheus, Format::OpenMetrics] {
            let mut w = Writer::new(format, 0);
            w.family("m_packets", Kind::Counter, "Packets.");
            w.sample(
                "m_packets",
                &labels(&[("src", "a\"b\\c\n")]),
                Some(("code", "GAP")),
                7,
            );
            w.family("m_rtt_seconds", Kind::Histogram, "RTT.");
            w.histogram("m_rtt_seconds", "", &h);
            let text = w.finish();
            assert!(
                text.contains("m_packets_total{src=\"a\\\"b\\\\c\\n\",code=\"GAP\"} 7\n"),
                "{text}"
            );
            assert!(
                text.contains("m_rtt_seconds_bucket{le=\"1e-06\"} 0\n"),
                "{text}"
            );
            assert!(
                text.contains("m_rtt_seconds_bucket{le=\"2e-06\"} 1\n"),
                "{text}"
            );
            assert!(
                text.contains("m_rtt_seconds_bucket{le=\"1.0\"} 1\n"),
                "{text}"
            );
            assert!(
                text.contains("m_rtt_seconds_bucket{le=\"+Inf\"} 2\n"),
                "{text}"
            );
            assert!(text.contains("m_rtt_seconds_sum 3.0000015\n"), "{text}");
            assert!(text.contains("m_rtt_seconds_count 2\n"), "{text}");
            match format {
                Format::Prometheus => {
                    assert!(text.contains("# TYPE m_packets_total counter\n"));
                    assert!(!text.contains("# EOF"));
                }
                Format::OpenMetrics => {
                    assert!(text.contains("# TYPE m_packets counter\n"));
                    assert!(text.contains("# UNIT m_rtt_seconds seconds\n"));
                    assert!(text.ends_with("# EOF\n"));
                }
            }
        }
    }
}
