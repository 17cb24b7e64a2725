//! The registry: every family's rules, in one order that gives each rule
//! its [`RuleId`], and the count of them.

use super::rule::{Rule, RuleId};
use super::{connection, network, packet, receiver, rocev2, sender};

/// Every family's rules, in registry order (a [`RuleId`] is its family's
/// place here and the rule's place in the family).
pub(crate) const FAMILIES: &[&[Rule]] = &[
    packet::RULES,
    connection::RULES,
    sender::RULES,
    receiver::RULES,
    network::RULES,
    rocev2::RULES,
];

/// Every rule of the registry, with its id.
pub fn rules() -> impl Iterator<Item = (RuleId, &'static Rule)> {
    FAMILIES.iter().enumerate().flat_map(|(f, rules)| {
        rules
            .iter()
            .enumerate()
            .map(move |(i, rule)| (RuleId::new(f, i), rule))
    })
}

/// Rules in the registry.
pub fn rule_count() -> usize {
    RULE_COUNT
}

pub(crate) const RULE_COUNT: usize = {
    let mut n = 0;
    let mut f = 0;
    while f < FAMILIES.len() {
        n += FAMILIES[f].len();
        f += 1;
    }
    n
};

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn rule_ids_are_unique_and_well_formed() {
        let mut seen = std::collections::HashSet::new();
        for (id, rule) in rules() {
            assert!(seen.insert(rule.id), "{} twice in the registry", rule.id);
            assert_eq!(RuleId::find(rule.id), Some(id));
            assert_eq!(id.rule(), rule);
            let parts: Vec<&str> = rule.id.split('-').collect();
            assert_eq!(parts.len(), 3, "{}", rule.id);
            assert!(matches!(parts[0], "MR" | "RC"), "{}", rule.id);
            assert!(
                parts[2].len() == 3 && parts[2].bytes().all(|b| b.is_ascii_digit()),
                "{}",
                rule.id
            );
            assert!(rule.statement.ends_with('.'), "{}", rule.id);
            assert!(!rule.evidence.is_empty() && !rule.spec_section.is_empty());
            assert!(!rule.vantage_why.is_empty(), "{}: why its vantage", rule.id);
        }
        assert_eq!(seen.len(), rule_count());
        let indices: Vec<usize> = rules().map(|(id, _)| id.index()).collect();
        assert_eq!(indices, (0..rule_count()).collect::<Vec<_>>());
    }
}
