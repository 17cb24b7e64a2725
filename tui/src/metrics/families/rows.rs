//! Folding: label sets in first-seen order up to `--metrics-max-series`,
//! the rest in one `src="other",dst="other"` row.

use std::collections::HashMap;
use std::net::IpAddr;

use crate::metrics::exposition::labels;
use crate::metrics::latency::SeriesKey;

/// Rows of one table: label sets in first-seen order, each with its
/// aggregate; keys past the limit go to one `other` row.
pub(super) struct Rows<K, A> {
    index: HashMap<K, usize>,
    rows: Vec<(String, A)>,
    other: Option<A>,
    pub(super) folded: u64,
    max: usize,
}

impl<K: std::hash::Hash + Eq, A: Default> Rows<K, A> {
    pub(super) fn new(max: usize) -> Self {
        Rows {
            index: HashMap::new(),
            rows: Vec::new(),
            other: None,
            folded: 0,
            max: max.max(1),
        }
    }

    /// The aggregate of `key` (labels made by `labels` when it is new).
    pub(super) fn get(&mut self, key: K, labels: impl FnOnce() -> String) -> &mut A {
        if let Some(&i) = self.index.get(&key) {
            return &mut self.rows[i].1;
        }
        if self.rows.len() < self.max {
            self.index.insert(key, self.rows.len());
            self.rows.push((labels(), A::default()));
            let last = self.rows.len() - 1;
            return &mut self.rows[last].1;
        }
        self.folded += 1;
        self.other.get_or_insert_with(A::default)
    }

    /// Every row, `other` last.
    pub(super) fn all<'a>(&'a self, other_labels: &'a str) -> Vec<(&'a str, &'a A)> {
        let mut all: Vec<(&'a str, &'a A)> =
            self.rows.iter().map(|(l, a)| (l.as_str(), a)).collect();
        if let Some(o) = &self.other {
            all.push((other_labels, o));
        }
        all
    }
}

pub(super) const OTHER: &str = "src=\"other\",dst=\"other\"";

pub(super) fn flow_labels(
    src: IpAddr,
    dst: IpAddr,
    conns: Option<(&str, u32, &str, u32)>,
) -> String {
    let (s, d) = (src.to_string(), dst.to_string());
    match conns {
        None => labels(&[("src", &s), ("dst", &d)]),
        Some((a, x, b, y)) => labels(&[
            ("src", &s),
            ("dst", &d),
            (a, &x.to_string()),
            (b, &y.to_string()),
        ]),
    }
}

pub(super) fn series_labels(key: &SeriesKey) -> String {
    match *key {
        SeriesKey::Flow { src, dst, conns } => {
            flow_labels(src, dst, conns.map(|(a, b)| ("src_conn", a, "dst_conn", b)))
        }
        SeriesKey::Other => OTHER.to_string(),
    }
}
