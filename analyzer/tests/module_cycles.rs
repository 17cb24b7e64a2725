//! No two sibling modules of `analyzer/src` import each other, directly
//! or around a loop: a module reads its children and its ancestors
//! freely, and its siblings in one direction only, so that each can be
//! read (and moved) with what it uses and not with what uses it.
//!
//! The check reads the sources: every `crate::` and `super::` path of a
//! file outside its comments and its `#[cfg(test)]` module is resolved to
//! the module it names; a path from module A into module B is an edge
//! between the two children of their closest common ancestor that hold
//! them (none when one holds the other). A cycle among those edges fails
//! the test and is named.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

type ModPath = Vec<String>;

/// The module of `file` under `src` (`lib.rs` is the crate root).
fn module_of(src: &Path, file: &Path) -> ModPath {
    let rel = file.strip_prefix(src).unwrap();
    let mut parts: ModPath = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap();
    match last.as_str() {
        "lib.rs" | "mod.rs" => {}
        name => parts.push(name.trim_end_matches(".rs").to_owned()),
    }
    parts
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The code of a file: without comments and without its test module.
fn code(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod ") {
        Some(at) => &text[..at],
        None => text,
    };
    let mut out = String::new();
    let mut in_block = false;
    for line in text.lines() {
        let mut line = line;
        if in_block {
            match line.find("*/") {
                Some(at) => {
                    line = &line[at + 2..];
                    in_block = false;
                }
                None => continue,
            }
        }
        if let Some(at) = line.find("/*") {
            in_block = !line[at..].contains("*/");
            line = &line[..at];
        }
        // A `//` outside a string literal starts a comment.
        let mut quotes = 0;
        let mut end = line.len();
        let bytes = line.as_bytes();
        for i in 0..bytes.len() {
            if bytes[i] == b'"' && (i == 0 || bytes[i - 1] != b'\\') {
                quotes += 1;
            }
            if quotes % 2 == 0 && bytes[i..].starts_with(b"//") {
                end = i;
                break;
            }
        }
        out.push_str(&line[..end]);
        out.push('\n');
    }
    out
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Every path that starts with `crate::` or `super::` in `code`, as its
/// segments (a `{a, b::c}` group gives one path per member, first
/// segment only).
fn paths(code: &str) -> Vec<Vec<String>> {
    let bytes = code.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let starts = (bytes[i..].starts_with(b"crate::") || bytes[i..].starts_with(b"super::"))
            && (i == 0 || !is_ident(bytes[i - 1]) && bytes[i - 1] != b':');
        if !starts {
            i += 1;
            continue;
        }
        let mut segments = Vec::new();
        let mut j = i;
        loop {
            let start = j;
            while j < bytes.len() && is_ident(bytes[j]) {
                j += 1;
            }
            if j > start {
                segments.push(code[start..j].to_owned());
            }
            if bytes[j..].starts_with(b"::{") {
                let close = code[j..].find('}').map_or(bytes.len(), |c| j + c);
                for member in code[j + 3..close].split(',') {
                    let first: String = member
                        .trim()
                        .bytes()
                        .take_while(|&b| is_ident(b))
                        .map(char::from)
                        .collect();
                    if !first.is_empty() {
                        let mut p = segments.clone();
                        p.push(first);
                        out.push(p);
                    }
                }
                j = close;
                segments.clear();
                break;
            }
            if bytes[j..].starts_with(b"::") {
                j += 2;
            } else {
                break;
            }
        }
        if !segments.is_empty() {
            out.push(segments);
        }
        i = j.max(i + 1);
    }
    out
}

/// The module `path`, written in module `from`, names: the longest
/// module prefix of it (what follows is an item).
fn resolve(from: &ModPath, path: &[String], modules: &BTreeSet<ModPath>) -> ModPath {
    let mut at: ModPath = from.clone();
    let mut rest = path;
    while let Some((first, tail)) = rest.split_first() {
        match first.as_str() {
            "crate" => at.clear(),
            "super" => {
                at.pop();
            }
            _ => break,
        }
        rest = tail;
    }
    for segment in rest {
        let mut next = at.clone();
        next.push(segment.clone());
        if !modules.contains(&next) {
            break;
        }
        at = next;
    }
    at
}

/// Edges between sibling modules: for each parent, from child to child.
fn sibling_edges(src: &Path) -> BTreeMap<ModPath, BTreeSet<(String, String)>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let modules: BTreeSet<ModPath> = files.iter().map(|f| module_of(src, f)).collect();
    let mut edges: BTreeMap<ModPath, BTreeSet<(String, String)>> = BTreeMap::new();
    for file in &files {
        let from = module_of(src, file);
        for path in paths(&code(&fs::read_to_string(file).unwrap())) {
            let to = resolve(&from, &path, &modules);
            let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
            if common == from.len() || common == to.len() {
                continue; // an ancestor or a descendant
            }
            edges
                .entry(from[..common].to_vec())
                .or_default()
                .insert((from[common].clone(), to[common].clone()));
        }
    }
    edges
}

/// A cycle in `edges`, if any, as the modules around it.
fn find_cycle(edges: &BTreeSet<(String, String)>) -> Option<Vec<String>> {
    fn visit<'a>(
        node: &'a str,
        edges: &'a BTreeSet<(String, String)>,
        stack: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
    ) -> Option<Vec<String>> {
        if let Some(at) = stack.iter().position(|&n| n == node) {
            let mut cycle: Vec<String> = stack[at..].iter().map(|s| s.to_string()).collect();
            cycle.push(node.to_owned());
            return Some(cycle);
        }
        if !done.insert(node) {
            return None;
        }
        stack.push(node);
        for (_, to) in edges.iter().filter(|(from, _)| from == node) {
            if let Some(cycle) = visit(to, edges, stack, done) {
                return Some(cycle);
            }
        }
        stack.pop();
        None
    }
    let mut done = BTreeSet::new();
    for (from, _) in edges {
        if let Some(cycle) = visit(from, edges, &mut Vec::new(), &mut done) {
            return Some(cycle);
        }
    }
    None
}

#[test]
fn no_two_sibling_modules_import_each_other() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let edges = sibling_edges(&src);
    let engine = edges.get(&vec!["engine".to_owned()]);
    assert!(
        engine.is_some_and(|e| e.iter().any(|(a, b)| a == "lint" && b == "verdict")),
        "the check sees the engine's modules (the lint reads the verdict)"
    );
    let cycles: Vec<String> = edges
        .iter()
        .filter_map(|(parent, e)| {
            find_cycle(e).map(|c| format!("in crate::{}: {}", parent.join("::"), c.join(" -> ")))
        })
        .collect();
    assert!(cycles.is_empty(), "import cycles: {cycles:#?}");
}

#[test]
fn a_cycle_is_found() {
    let edges: BTreeSet<(String, String)> = [("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")]
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    assert_eq!(
        find_cycle(&edges),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
    let acyclic: BTreeSet<(String, String)> = edges.into_iter().filter(|(a, _)| a != "c").collect();
    assert_eq!(find_cycle(&acyclic), None);
}

#[test]
fn paths_resolve_to_the_module_they_name() {
    let modules: BTreeSet<ModPath> = [
        vec![],
        vec!["engine"],
        vec!["engine", "lint"],
        vec!["engine", "verdict"],
    ]
    .into_iter()
    .map(|m| m.into_iter().map(String::from).collect())
    .collect();
    let lint: ModPath = vec!["engine".into(), "lint".into()];
    let found =
        paths("use super::verdict::{RetxKind, Verdict};\nlet x = crate::engine::Engine::new;");
    assert_eq!(found[0], ["super", "verdict", "RetxKind"]);
    assert_eq!(resolve(&lint, &found[0], &modules), ["engine", "verdict"]);
    assert_eq!(resolve(&lint, &found[2], &modules), ["engine"]);
    assert!(
        code("let a = 1; // crate::x\n/* super::y */")
            .find("::")
            .is_none()
    );
}
