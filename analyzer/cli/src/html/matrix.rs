//! With several captures: the host-pair matrix, upstream capture (row) to
//! downstream capture (column), of what `between_captures` reports per
//! path, summed per pair: transmissions matched and lost between the two
//! points (the cell's colour is the loss rate, lost / (matched + lost)),
//! and the range of the paths' one-way-delay p50 and their largest p99.
//! At most [`MAX_HOSTS`] captures (those that see most traffic).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::svg::{Svg, shade};
use super::{Page, esc, more_line};
use crate::text::{fmt_ns, fmt_rate};

/// Most captures per side of the matrix.
pub const MAX_HOSTS: usize = 24;

#[derive(Default)]
struct PairSum {
    paths: u64,
    matched: u64,
    lost: u64,
    unknown: u64,
    p50_lo: Option<u64>,
    p50_hi: u64,
    p99_hi: u64,
}

pub fn render(out: &mut String, page: &Page<'_>) {
    if page.results.len() < 2 || page.merged.between_captures.is_empty() {
        return;
    }
    let mut pairs: BTreeMap<(u64, u64), PairSum> = BTreeMap::new();
    for p in page
        .merged
        .between_captures
        .iter()
        .flat_map(|b| b.paths.iter())
    {
        let e = pairs.entry((p.upstream, p.downstream)).or_default();
        e.paths += 1;
        e.matched += p.matched;
        e.lost += p.lost_between;
        e.unknown += p.unknown;
        let s = &p.one_way_delay_ns;
        if s.count > 0 {
            e.p50_lo = Some(e.p50_lo.map_or(s.p50, |v| v.min(s.p50)));
            e.p50_hi = e.p50_hi.max(s.p50);
            e.p99_hi = e.p99_hi.max(s.p99);
        }
    }
    // The captures that see most matched traffic.
    let mut traffic: BTreeMap<u64, u64> = BTreeMap::new();
    for ((a, b), s) in &pairs {
        *traffic.entry(*a).or_default() += s.matched + s.lost;
        *traffic.entry(*b).or_default() += s.matched + s.lost;
    }
    let mut hosts: Vec<(u64, u64)> = traffic.into_iter().collect();
    let all_hosts = hosts.len();
    hosts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    hosts.truncate(MAX_HOSTS);
    hosts.sort_by_key(|h| h.0);
    let hosts: Vec<u64> = hosts.into_iter().map(|h| h.0).collect();

    out.push_str(r#"<h3 id="host-matrix">Between capture points: one-way delay and loss (row: upstream, column: downstream)</h3>"#);
    let names: Vec<String> = hosts.iter().map(|&h| page.capture_name(h)).collect();
    let label_w = 20.0 + 7.0 * names.iter().map(|n| n.chars().count()).max().unwrap_or(4) as f64;
    let cell_w = 150.0;
    let cell_h = 50.0;
    let top = 40.0;
    let max_rate = pairs
        .values()
        .map(|s| s.lost as f64 / (s.matched + s.lost).max(1) as f64)
        .fold(0.0, f64::max);
    let mut svg = Svg::new(
        label_w + cell_w * hosts.len() as f64 + 10.0,
        top + cell_h * hosts.len() as f64 + 10.0,
        "one-way delay and loss between capture points",
    );
    for (c, n) in names.iter().enumerate() {
        svg.text(
            label_w + cell_w * (c as f64 + 0.5),
            top - 8.0,
            "middle",
            "t",
            n,
        );
    }
    svg.text(label_w + 4.0, 14.0, "start", "s", "downstream →");
    for (r, &a) in hosts.iter().enumerate() {
        let y = top + cell_h * r as f64;
        svg.text(label_w - 8.0, y + cell_h / 2.0 + 4.0, "end", "t", &names[r]);
        for (c, &b) in hosts.iter().enumerate() {
            let x = label_w + cell_w * c as f64;
            let Some(s) = pairs.get(&(a, b)) else {
                svg.rect(
                    x + 1.0,
                    y + 1.0,
                    cell_w - 2.0,
                    cell_h - 2.0,
                    "#f7f8fa",
                    None,
                );
                continue;
            };
            let rate = s.lost as f64 / (s.matched + s.lost).max(1) as f64;
            let fill = if s.lost > 0 {
                shade(
                    (196, 30, 45),
                    0.15 + 0.6 * (rate / max_rate.max(1e-12)).sqrt(),
                )
            } else {
                "#e7f3ea".to_string()
            };
            let owd = match s.p50_lo {
                Some(lo) if lo == s.p50_hi => format!("owd p50 {}", fmt_ns(lo)),
                Some(lo) => format!("owd p50 {}-{}", fmt_ns(lo), fmt_ns(s.p50_hi)),
                None => "no delay samples".to_string(),
            };
            let loss = format!(
                "loss {} ({} of {})",
                fmt_rate(Some(rate)),
                s.lost,
                s.matched + s.lost
            );
            let tip = format!(
                "{} -> {}: {} paths, {} matched, {} lost, {} unknown; {owd}, largest p99 {}",
                names[r],
                names[c],
                s.paths,
                s.matched,
                s.lost,
                s.unknown,
                fmt_ns(s.p99_hi)
            );
            svg.rect(
                x + 1.0,
                y + 1.0,
                cell_w - 2.0,
                cell_h - 2.0,
                &fill,
                Some(&tip),
            );
            svg.text(x + cell_w / 2.0, y + 20.0, "middle", "c", &owd);
            svg.text(x + cell_w / 2.0, y + 36.0, "middle", "c", &loss);
        }
    }
    let _ = write!(out, r#"<div id="host-matrix-chart">{}</div>"#, svg.finish());
    let _ = write!(
        out,
        r#"<p class="note">{}</p>"#,
        esc(
            "per pair of capture points, summed over its paths: loss = lost / (matched + lost) between the two points; owd p50 = the range of the paths' one-way-delay medians (offset-corrected); transmissions whose fate the captures cannot tell are in the tooltip"
        )
    );
    if all_hosts > hosts.len() {
        more_line(
            out,
            &format!(
                "{} of {all_hosts} capture points shown (those that saw most traffic); every path is in the between-captures table",
                hosts.len()
            ),
        );
    }
}
