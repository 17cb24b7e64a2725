//! A lint rule as data: what it says, where the spec says it, how bad a
//! breach is and where it can be judged. The registry is the concatenation
//! of every family's `RULES` (`FAMILIES`, in `registry.rs`); a [`RuleId`]
//! is a rule's place in it, checked at compile time by [`RuleId::of`].

use std::fmt;

use super::FAMILIES;

/// How bad a breach is: a MUST of the spec is an error, a SHOULD or a
/// heuristic a warning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum Severity {
    Warning,
    Error,
}

impl Severity {
    pub const fn as_str(self) -> &'static str {
        match self {
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a capture must be taken for the rule to be judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum Vantage {
    /// Any capture point: what the packet itself (and the packets before
    /// it) say.
    Either,
    /// A capture at the host that sends the direction's DATA: what was
    /// captured is what was sent (no loss or reordering in between).
    Sender,
    /// A capture at the host that receives the direction's DATA: what was
    /// captured is what arrived.
    Receiver,
    /// A capture at either end host, not in the middle: the sender's
    /// capture holds every transmission, the receiver's every arrival, so
    /// a PSN captured at neither was never sent, or never arrived (at a
    /// mirror, packets of paths it does not see are missing).
    Endpoint,
    /// Captures at both ends, merged (`MultiEngine`).
    TwoCapture,
}

impl Vantage {
    pub const fn as_str(self) -> &'static str {
        match self {
            Vantage::Either => "either",
            Vantage::Sender => "sender",
            Vantage::Receiver => "receiver",
            Vantage::Endpoint => "endpoint",
            Vantage::TwoCapture => "two-capture",
        }
    }
}

/// The protocol a rule is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
pub enum Protocol {
    MetaRoce,
    RoceV2,
}

impl Protocol {
    pub const fn as_str(self) -> &'static str {
        match self {
            Protocol::MetaRoce => "MetaRoCE",
            Protocol::RoceV2 => "RoCEv2",
        }
    }
}

/// One rule of the registry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    /// `MR-<FAMILY>-<NNN>` for MetaRoCE, `RC-<FAMILY>-<NNN>` for RoCEv2;
    /// never reused for another statement.
    pub id: &'static str,
    /// The rule in one sentence, as a requirement.
    pub statement: &'static str,
    /// Where it comes from: a section of `docs/metaroce-wire-v1.md`
    /// ("8", "11.3"), or the IBTA rule for RoCEv2 ("IBTA 9.7.5.1.2").
    pub spec_section: &'static str,
    pub severity: Severity,
    pub vantage: Vantage,
    /// Why the rule is judged from `vantage` (and not from the others),
    /// in a few words: what a capture there shows that one elsewhere
    /// does not.
    pub vantage_why: &'static str,
    pub protocol: Protocol,
    /// One sentence for a finding, with placeholders filled from the
    /// finding: `{observed}`, `{expected}` (decimal; `{observed:x}`,
    /// `{expected:x}` in hex), `{ev}`, `{related}` (the related frame).
    pub evidence: &'static str,
}

impl Rule {
    /// A rule of `protocol`: an error (a MUST) judged from any capture
    /// point, until [`Rule::with_severity`] or [`Rule::judged_from`] says
    /// otherwise. Each family's table builds its rules from it.
    pub(super) const fn new(
        protocol: Protocol,
        id: &'static str,
        spec_section: &'static str,
        statement: &'static str,
        evidence: &'static str,
    ) -> Rule {
        Rule {
            id,
            statement,
            spec_section,
            severity: Severity::Error,
            vantage: Vantage::Either,
            vantage_why: "",
            protocol,
            evidence,
        }
    }

    pub(super) const fn with_severity(self, severity: Severity) -> Rule {
        Rule { severity, ..self }
    }

    pub(super) const fn judged_from(self, vantage: Vantage) -> Rule {
        Rule { vantage, ..self }
    }

    /// Why the rule is judged from its vantage (`Rule::vantage_why`).
    pub(super) const fn because(self, vantage_why: &'static str) -> Rule {
        Rule {
            vantage_why,
            ..self
        }
    }
}

/// A rule's place in the registry: the family (index into
/// `super::FAMILIES`) in the high byte, the rule's index in its family's
/// `RULES` in the low byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct RuleId(u16);

impl RuleId {
    /// The rule whose `id` is `id`; a compile error (in a `const`) when
    /// there is none: `const MALFORMED: RuleId = RuleId::of("MR-PKT-001");`.
    pub const fn of(id: &str) -> RuleId {
        match RuleId::find(id) {
            Some(r) => r,
            None => panic!("no lint rule with this id"),
        }
    }

    /// The rule whose `id` is `id`, if any (`--allow`, `--deny`).
    pub const fn find(id: &str) -> Option<RuleId> {
        let mut f = 0;
        while f < FAMILIES.len() {
            let rules = FAMILIES[f];
            let mut i = 0;
            while i < rules.len() {
                if str_eq(rules[i].id, id) {
                    return Some(RuleId(((f as u16) << 8) | i as u16));
                }
                i += 1;
            }
            f += 1;
        }
        None
    }

    /// The rule.
    pub fn rule(self) -> &'static Rule {
        &FAMILIES[usize::from(self.0 >> 8)][usize::from(self.0 & 0xFF)]
    }

    /// Index of the rule in the flat registry (`super::rules()` order),
    /// for per-rule counters.
    pub fn index(self) -> usize {
        let family = usize::from(self.0 >> 8);
        FAMILIES[..family].iter().map(|f| f.len()).sum::<usize>() + usize::from(self.0 & 0xFF)
    }

    pub(super) const fn new(family: usize, index: usize) -> RuleId {
        RuleId(((family as u16) << 8) | index as u16)
    }
}

impl fmt::Display for RuleId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.rule().id)
    }
}

const fn str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

pub use crate::engine::verdict::RuleSet;

/// The registry fits a [`RuleSet`].
const _: () = assert!(super::RULE_COUNT <= RuleSet::CAPACITY);

/// A [`RuleSet`] holds rules by their flat index in the registry
/// ([`RuleId::index`]).
impl RuleSet {
    pub fn insert(&mut self, id: RuleId) {
        self.insert_index(id.index());
    }

    pub fn contains(&self, id: RuleId) -> bool {
        self.contains_index(id.index())
    }

    /// The rules, in registry order.
    pub fn iter(&self) -> impl Iterator<Item = RuleId> + '_ {
        super::rules()
            .map(|(id, _)| id)
            .filter(|&id| self.contains(id))
    }
}

#[cfg(feature = "serde")]
impl serde::Serialize for RuleSet {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter().map(|r| r.rule().id))
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::engine::lint::rules;

    #[test]
    fn a_rule_set_holds_each_rule_once() {
        let mut set = RuleSet::default();
        assert!(set.is_empty());
        let ids: Vec<RuleId> = rules().map(|(id, _)| id).collect();
        for &id in ids.iter().rev().step_by(2) {
            set.insert(id);
            set.insert(id);
        }
        let mut want: Vec<RuleId> = ids.iter().rev().step_by(2).copied().collect();
        want.reverse();
        assert_eq!(set.len(), want.len());
        assert_eq!(set.iter().collect::<Vec<_>>(), want);
        assert!(!set.contains(ids[ids.len() - 2]));
    }
}
