//! The profiler traces of `--merge` (Kineto, NCCL profiler: Chrome trace
//! JSON): held as text, each event copied to the output byte for byte.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::de::{MapAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

/// The profiler traces given to `--merge`, as read.
pub(super) struct Profiler {
    /// The first trace's top-level keys but `traceEvents` (and `otherData`),
    /// then keys only later traces have.
    pub(super) head: Vec<(String, Box<RawValue>)>,
    pub(super) other_data: Option<serde_json::Map<String, Value>>,
    /// Every event of every trace, as written.
    pub(super) events: Vec<Box<RawValue>>,
    pub(super) base_ns: Option<u64>,
    /// The largest numeric pid of the profiler's events (0 if none).
    pub(super) max_pid: u64,
}

impl Profiler {
    pub(super) fn read(paths: &[PathBuf]) -> Result<Profiler, String> {
        let mut p = Profiler {
            head: Vec::new(),
            other_data: None,
            events: Vec::new(),
            base_ns: None,
            max_pid: 0,
        };
        let mut base_from: Option<(&Path, Option<u64>)> = None;
        for path in paths {
            let name = path.display();
            let text = std::fs::read_to_string(path).map_err(|e| format!("{name}: {e}"))?;
            let parsed = parse_trace(&text).map_err(|e| format!("{name}: {e}"))?;
            let base = parsed.base_ns;
            match base_from {
                None => {
                    base_from = Some((path, base));
                    p.base_ns = base;
                }
                Some((other, b)) if b != base => {
                    let show = |b: Option<u64>| b.map_or("none".to_string(), |b| b.to_string());
                    return Err(format!(
                        "{name}: baseTimeNanoseconds {} differs from {}'s ({}): the merged traces \
                         keep their events unchanged, so they must share one time base",
                        show(base),
                        other.display(),
                        show(b)
                    ));
                }
                Some(_) => {}
            }
            for (i, event) in parsed.events.iter().enumerate() {
                let value: Value = serde_json::from_str(event.get())
                    .map_err(|e| format!("{name}: traceEvents[{i}]: {e}"))?;
                let Value::Object(obj) = value else {
                    return Err(format!("{name}: traceEvents[{i}] is not an object"));
                };
                if let Some(pid) = obj.get("pid").and_then(Value::as_u64) {
                    p.max_pid = p.max_pid.max(pid);
                }
            }
            p.events.extend(parsed.events);
            for (key, value) in parsed.rest {
                if key == "otherData" {
                    if p.other_data.is_none() {
                        match serde_json::from_str::<Value>(value.get()) {
                            Ok(Value::Object(m)) => p.other_data = Some(m),
                            _ => return Err(format!("{name}: otherData is not an object")),
                        }
                    }
                } else if !p.head.iter().any(|(k, _)| k == &key) {
                    p.head.push((key, value));
                }
            }
        }
        Ok(p)
    }

    pub(super) fn events(&self) -> impl Iterator<Item = &str> {
        self.events.iter().map(|e| e.get())
    }

    /// The top-level keys before `traceEvents`, `otherData` with the
    /// network's metadata under `metaroce`, and the opening of
    /// `traceEvents`.
    pub(super) fn write_head(&self, out: &mut dyn Write, metadata: Value) -> io::Result<()> {
        for (key, value) in &self.head {
            serde_json::to_writer(&mut *out, key)?;
            out.write_all(b":")?;
            out.write_all(value.get().as_bytes())?;
            out.write_all(b",")?;
        }
        let mut other = self.other_data.clone().unwrap_or_default();
        other.insert("metaroce".to_string(), metadata);
        out.write_all(b"\"otherData\":")?;
        serde_json::to_writer(&mut *out, &other)?;
        out.write_all(b",\"traceEvents\":[")
    }
}

/// A profiler trace: its events and its other top-level keys, as written.
struct ParsedTrace {
    events: Vec<Box<RawValue>>,
    rest: Vec<(String, Box<RawValue>)>,
    base_ns: Option<u64>,
}

/// Reads a Chrome trace: an object with `traceEvents`, or a bare array of
/// events (the format's other form). Errors name the line and column.
fn parse_trace(text: &str) -> Result<ParsedTrace, String> {
    if text.trim_start().starts_with('[') {
        let events: Vec<Box<RawValue>> = serde_json::from_str(text).map_err(|e| e.to_string())?;
        return Ok(ParsedTrace {
            events,
            rest: Vec::new(),
            base_ns: None,
        });
    }
    let entries: Entries = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let mut events = None;
    let mut rest = Vec::new();
    let mut base_ns = None;
    for (key, value) in entries.0 {
        match key.as_str() {
            "traceEvents" => {
                let list: Vec<Box<RawValue>> = serde_json::from_str(value.get())
                    .map_err(|_| "traceEvents is not an array".to_string())?;
                events = Some(list);
            }
            "baseTimeNanoseconds" => {
                let v: Value = serde_json::from_str(value.get()).map_err(|e| e.to_string())?;
                // Kineto writes a number; a string of digits is taken too.
                let ns = v
                    .as_u64()
                    .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
                    .ok_or_else(|| {
                        format!("baseTimeNanoseconds: expected an integer (ns since the epoch), found {v}")
                    })?;
                base_ns = Some(ns);
                rest.push((key, value));
            }
            _ => rest.push((key, value)),
        }
    }
    let events = events.ok_or_else(|| "no traceEvents array".to_string())?;
    Ok(ParsedTrace {
        events,
        rest,
        base_ns,
    })
}

/// A JSON object's entries in the order written, values unparsed.
struct Entries(Vec<(String, Box<RawValue>)>);

impl<'de> serde::Deserialize<'de> for Entries {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Entries, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Entries;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a trace object (with traceEvents) or an array of events")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entries, A::Error> {
                let mut entries = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, Box<RawValue>>()? {
                    entries.push((k, v));
                }
                Ok(Entries(entries))
            }
        }
        d.deserialize_map(V)
    }
}
