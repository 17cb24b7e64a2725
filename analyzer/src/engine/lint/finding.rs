//! A finding: one packet that broke one rule, with the few numbers that
//! prove it. Recording one copies a small `Copy` struct (no `String`);
//! [`Finding::evidence`] formats the rule's sentence when it is printed.

use std::fmt::{self, Write as _};
use std::net::IpAddr;

use super::rule::{Rule, RuleId, Vantage};
use super::vantage::Side;

/// The flow a finding is about: the packet's own connection direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Conn {
    /// A MetaRoCE direction `(src, dst, src_conn, dst_conn)` (spec 2).
    MetaRoce {
        src: IpAddr,
        dst: IpAddr,
        src_conn: u32,
        dst_conn: u32,
    },
    /// A RoCEv2 packet's addresses and destination QP.
    RoceV2 {
        src: IpAddr,
        dst: IpAddr,
        dest_qp: u32,
    },
}

impl Conn {
    pub fn src(&self) -> IpAddr {
        match *self {
            Conn::MetaRoce { src, .. } | Conn::RoceV2 { src, .. } => src,
        }
    }

    pub fn dst(&self) -> IpAddr {
        match *self {
            Conn::MetaRoce { dst, .. } | Conn::RoceV2 { dst, .. } => dst,
        }
    }
}

/// `10.0.0.1:256 -> 10.0.0.2:512` (connection ids in decimal, as the
/// report names them; spec-decisions 20), `10.0.0.1 -> 10.0.0.2 qp 17`.
impl fmt::Display for Conn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Conn::MetaRoce {
                src,
                dst,
                src_conn,
                dst_conn,
            } => write!(f, "{src}:{src_conn} -> {dst}:{dst_conn}"),
            Conn::RoceV2 { src, dst, dest_qp } => write!(f, "{src} -> {dst} qp {dest_qp}"),
        }
    }
}

/// One rule broken by one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Finding {
    pub rule: RuleId,
    /// The packet that broke the rule (1-based frame number).
    pub frame: u64,
    pub ts_ns: u64,
    /// Another packet the evidence names (the CONNECT answered, the
    /// original transmission, ...).
    pub related_frame: Option<u64>,
    pub conn: Conn,
    /// The packet's path, when it has one.
    pub ev: Option<u16>,
    /// What was seen and what the rule wanted, as the rule's evidence
    /// sentence reads them.
    pub observed: u64,
    pub expected: u64,
    /// Where this finding holds: its rule's vantage, or a narrower one
    /// when the finding rests on what only that capture point shows
    /// (MR-SND-003's gap in a path's path_seq: `Sender`).
    pub vantage: Vantage,
}

impl Finding {
    pub fn rule(&self) -> &'static Rule {
        self.rule.rule()
    }

    /// Whether this finding holds at a capture taken on `host` (`None`:
    /// unknown or in the middle), as the report counts it.
    pub fn judged_from(&self, host: Option<IpAddr>) -> bool {
        Side::of(self.conn.src(), self.conn.dst(), host).judges(self.vantage)
    }

    /// The rule's evidence sentence with this finding's numbers.
    pub fn evidence(&self) -> String {
        let mut out = String::new();
        let mut rest = self.rule().evidence;
        while let Some(open) = rest.find('{') {
            out.push_str(&rest[..open]);
            let Some(close) = rest[open..].find('}') else {
                break;
            };
            let name = &rest[open + 1..open + close];
            rest = &rest[open + close + 1..];
            let _ = match name {
                "observed" => write!(out, "{}", self.observed),
                "expected" => write!(out, "{}", self.expected),
                "observed:x" => write!(out, "{:#x}", self.observed),
                "expected:x" => write!(out, "{:#x}", self.expected),
                "ev" => match self.ev {
                    Some(ev) => write!(out, "{ev}"),
                    None => write!(out, "-"),
                },
                "related" => match self.related_frame {
                    Some(frame) => write!(out, "{frame}"),
                    None => write!(out, "(not captured)"),
                },
                other => write!(out, "{{{other}}}"),
            };
        }
        out.push_str(rest);
        out
    }
}
