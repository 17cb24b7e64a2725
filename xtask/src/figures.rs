//! The table of current figures in `docs/performance.md`, written by the
//! benchmarks themselves: a bench run replaces the rows of the sections it
//! measured (those whose first column names them: a bench's name, or a
//! part of a bench that can run alone, like `tui --metrics`) between the
//! table's markers and leaves the others, so the doc holds one figure per
//! claim, each with the command that measured it, and cannot disagree with
//! itself.

use std::path::Path;

use anyhow::{Context, bail};

pub const BEGIN: &str =
    "<!-- figures:begin (written by `cargo xtask bench`; edits here are overwritten) -->";
pub const END: &str = "<!-- figures:end -->";
const HEADER: &str = "| bench | figure | value | command |\n|---|---|---|---|";

/// The sections in the order their rows appear.
pub const ORDER: [&str; 9] = [
    "analyzer",
    "lint",
    "mirror",
    "connections",
    "plugin",
    "tui",
    "tui --metrics",
    "html",
    "stack",
];

/// One row of the table.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    /// The section: the bench, or the part of it that measured the figure.
    pub bench: &'static str,
    pub what: String,
    pub value: String,
    pub command: String,
}

impl Figure {
    pub fn new(bench: &'static str, what: impl Into<String>, value: impl Into<String>) -> Figure {
        Figure {
            bench,
            what: what.into(),
            value: value.into(),
            command: String::new(),
        }
    }
}

/// Cells may not hold the table's separator.
fn cell(s: &str) -> String {
    s.replace('|', "\\|")
}

fn row(f: &Figure) -> String {
    format!(
        "| {} | {} | {} | `{}` |",
        f.bench,
        cell(&f.what),
        cell(&f.value),
        f.command
    )
}

/// The sections a run measured: those of its figures, else (no figures)
/// the bench's own.
pub fn sections<'a>(bench: &'a str, figures: &[Figure]) -> Vec<&'a str> {
    let mut s: Vec<&str> = Vec::new();
    for f in figures {
        if !s.contains(&f.bench) {
            s.push(f.bench);
        }
    }
    if s.is_empty() {
        s.push(bench);
    }
    s
}

/// `doc` with the rows of `sections` replaced by `figures` (in their
/// order), the other sections' rows kept, all in the order of [`ORDER`].
pub fn replace_rows(doc: &str, sections: &[&str], figures: &[Figure]) -> anyhow::Result<String> {
    let (Some(begin), Some(end)) = (doc.find(BEGIN), doc.find(END)) else {
        bail!("the figures table's markers are missing ({BEGIN} ... {END})");
    };
    if end < begin {
        bail!("the figures table's end marker comes before its begin marker");
    }
    let inside = &doc[begin + BEGIN.len()..end];
    let bench_of = |line: &str| {
        line.strip_prefix("| ")
            .and_then(|l| l.split(" | ").next())
            .map(str::to_string)
    };
    let mut kept: Vec<(usize, String)> = Vec::new();
    for line in inside.lines().map(str::trim).filter(|l| l.starts_with('|')) {
        let Some(name) = bench_of(line) else { continue };
        if sections.contains(&name.as_str())
            || name == "bench"
            || name.starts_with("---")
            || line.starts_with("|---")
        {
            continue;
        }
        kept.push((rank(&name), line.to_string()));
    }
    kept.extend(figures.iter().map(|f| (rank(f.bench), row(f))));
    // Stable: each bench's rows keep their order.
    kept.sort_by_key(|(rank, _)| *rank);
    let mut table = String::from(HEADER);
    for (_, line) in &kept {
        table.push('\n');
        table.push_str(line);
    }
    Ok(format!(
        "{}{BEGIN}\n{table}\n{}",
        &doc[..begin],
        &doc[end..]
    ))
}

fn rank(section: &str) -> usize {
    ORDER
        .iter()
        .position(|b| *b == section)
        .unwrap_or(ORDER.len())
}

/// Writes `figures` as the rows of `bench`'s sections (see [`sections`])
/// of the table in the doc at `path`.
pub fn write(path: &Path, bench: &str, figures: &[Figure]) -> anyhow::Result<()> {
    let doc =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let sections = sections(bench, figures);
    let updated =
        replace_rows(&doc, &sections, figures).with_context(|| path.display().to_string())?;
    std::fs::write(path, updated).with_context(|| format!("writing {}", path.display()))?;
    eprintln!(
        "xtask: {} rows of `{}` written to {}",
        figures.len(),
        sections.join("`, `"),
        path.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fig(bench: &'static str, what: &str, value: &str) -> Figure {
        Figure {
            command: format!("cargo xtask bench {bench}"),
            ..Figure::new(bench, what, value)
        }
    }

    fn doc_with(rows: &str) -> String {
        format!("# Perf\n\nintro\n\n{BEGIN}\n{HEADER}\n{rows}{END}\n\nafter\n")
    }

    #[test]
    fn a_bench_replaces_only_its_own_rows() {
        let doc = doc_with(
            "| analyzer | report, packets/s | 1 | `cargo xtask bench analyzer` |\n\
             | html | page bytes | 7 | `cargo xtask bench html` |\n",
        );
        let out = replace_rows(
            &doc,
            &["analyzer"],
            &[fig("analyzer", "report, packets/s", "2")],
        )
        .unwrap();
        assert!(out.contains("| analyzer | report, packets/s | 2 |"));
        assert!(!out.contains("| analyzer | report, packets/s | 1 |"));
        assert!(out.contains("| html | page bytes | 7 |"));
        assert!(out.starts_with("# Perf\n\nintro\n\n"));
        assert!(out.ends_with(&format!("{END}\n\nafter\n")));
        // Writing the same figures again changes nothing.
        let again = replace_rows(
            &out,
            &["analyzer"],
            &[fig("analyzer", "report, packets/s", "2")],
        )
        .unwrap();
        assert_eq!(again, out);
    }

    #[test]
    fn rows_follow_the_order_of_the_benches() {
        let doc = doc_with("| stack | goodput | 1 | `x` |\n");
        let out = replace_rows(
            &doc,
            &["lint"],
            &[fig("lint", "ratio", "1.1"), fig("lint", "b", "2")],
        )
        .unwrap();
        let lint = out.find("| lint | ratio").unwrap();
        let lint_b = out.find("| lint | b").unwrap();
        let stack = out.find("| stack |").unwrap();
        assert!(lint < lint_b && lint_b < stack);
        assert_eq!(out.matches("| bench | figure |").count(), 1);
    }

    #[test]
    fn a_part_run_alone_replaces_only_its_section() {
        let doc = doc_with(
            "| tui | live kpps | 50 | `cargo xtask bench tui` |\n\
             | tui --metrics | drain ratio | 1.22 | `cargo xtask bench tui` |\n\
             | html | page bytes | 7 | `x` |\n",
        );
        // `bench tui --only-metrics` measures the --metrics section alone.
        let only = [fig("tui --metrics", "drain ratio", "0.98")];
        assert_eq!(sections("tui", &only), vec!["tui --metrics"]);
        let out = replace_rows(&doc, &sections("tui", &only), &only).unwrap();
        assert!(out.contains("| tui | live kpps | 50 |"));
        assert!(out.contains("| tui --metrics | drain ratio | 0.98 |"));
        assert!(!out.contains("1.22"));
        // A whole run replaces both, in the order of the sections.
        let all = [
            fig("tui --metrics", "drain ratio", "1.01"),
            fig("tui", "live kpps", "60"),
        ];
        assert_eq!(sections("tui", &all), vec!["tui --metrics", "tui"]);
        let out = replace_rows(&out, &sections("tui", &all), &all).unwrap();
        let (live, metrics, html) = (
            out.find("| tui | live kpps | 60 |").unwrap(),
            out.find("| tui --metrics | drain ratio | 1.01 |").unwrap(),
            out.find("| html |").unwrap(),
        );
        assert!(live < metrics && metrics < html);
        assert!(!out.contains("| 50 |") && !out.contains("0.98"));
        // A bench without figures clears its own section.
        assert_eq!(sections("lint", &[]), vec!["lint"]);
    }

    #[test]
    fn cells_keep_the_table_whole() {
        let out = replace_rows(&doc_with(""), &["html"], &[fig("html", "a|b", "1")]).unwrap();
        assert!(out.contains("| html | a\\|b | 1 |"));
    }

    #[test]
    fn missing_markers_are_an_error() {
        assert!(replace_rows("# no table\n", &["lint"], &[]).is_err());
        let reversed = format!("{END}\n{BEGIN}\n");
        assert!(replace_rows(&reversed, &["lint"], &[]).is_err());
    }
}
