//! The table of current figures in `docs/performance.md`, written by the
//! benchmarks themselves: each bench replaces its own rows (those whose
//! first column names it) between the table's markers and leaves the
//! others, so the doc holds one figure per claim, each with the command that
//! measured it, and cannot disagree with itself.

use std::path::Path;

use anyhow::{Context, bail};

pub const BEGIN: &str =
    "<!-- figures:begin (written by `cargo xtask bench`; edits here are overwritten) -->";
pub const END: &str = "<!-- figures:end -->";
const HEADER: &str = "| bench | figure | value | command |\n|---|---|---|---|";

/// The benches in the order their rows appear.
pub const ORDER: [&str; 7] = [
    "analyzer",
    "lint",
    "connections",
    "plugin",
    "tui",
    "html",
    "stack",
];

/// One row of the table.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
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

/// `doc` with the rows of `bench` replaced by `figures` (in their order),
/// the other benches' rows kept, all in the order of [`ORDER`].
pub fn replace_rows(doc: &str, bench: &str, figures: &[Figure]) -> anyhow::Result<String> {
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
        if name == bench || name == "bench" || name.starts_with("---") || line.starts_with("|---") {
            continue;
        }
        let rank = ORDER.iter().position(|b| *b == name).unwrap_or(ORDER.len());
        kept.push((rank, line.to_string()));
    }
    let rank = ORDER
        .iter()
        .position(|b| *b == bench)
        .unwrap_or(ORDER.len());
    kept.extend(figures.iter().map(|f| (rank, row(f))));
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

/// Writes `figures` as `bench`'s rows of the table in the doc at `path`.
pub fn write(path: &Path, bench: &str, figures: &[Figure]) -> anyhow::Result<()> {
    let doc =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let updated = replace_rows(&doc, bench, figures).with_context(|| path.display().to_string())?;
    std::fs::write(path, updated).with_context(|| format!("writing {}", path.display()))?;
    eprintln!(
        "xtask: {} rows of `{bench}` written to {}",
        figures.len(),
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
            "analyzer",
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
            "analyzer",
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
            "lint",
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
    fn cells_keep_the_table_whole() {
        let out = replace_rows(&doc_with(""), "html", &[fig("html", "a|b", "1")]).unwrap();
        assert!(out.contains("| html | a\\|b | 1 |"));
    }

    #[test]
    fn missing_markers_are_an_error() {
        assert!(replace_rows("# no table\n", "lint", &[]).is_err());
        let reversed = format!("{END}\n{BEGIN}\n");
        assert!(replace_rows(&reversed, "lint", &[]).is_err());
    }
}
