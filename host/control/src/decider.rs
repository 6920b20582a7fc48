//! Which component a policy's name meant when it decided: its version, the SHA-256 of
//! its bytes and, for a policy pulled from a registry, the reference pinned to that
//! digest ([`DecidingPolicy`]). Decision records name the deciding policy by name only;
//! a listing of rounds names each component once, from the round it began deciding
//! ([`PolicyFromRound`], kept in a [`DeciderLog`]), rather than repeating a 71-character
//! digest in every round. A name can mean other bytes later (an upload replaces a
//! policy of the same name), which is why each entry says from which round it holds.
//!
//! It only notes and selects identities; it runs no policy and keeps no records.

use std::collections::{BTreeSet, VecDeque};

use serde::{Deserialize, Serialize};

use crate::decision_record::DecisionRecord;
use switchyard_runtime::PolicyModule;

/// A component as it decided: what a policy's name in a decision record stands for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DecidingPolicy {
    /// The name it gives itself (the one the records use).
    pub name: String,
    /// The version it reports.
    pub version: String,
    /// The SHA-256 of its bytes, `sha256:` and 64 hex digits.
    pub digest: String,
    /// For a policy pulled from a registry: its reference pinned to the artifact's
    /// digest (`oci://REGISTRY/REPOSITORY:TAG@sha256:...`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
}

impl DecidingPolicy {
    /// The identity of `module`, pulled from `reference` when it came from a registry.
    pub fn of(module: &PolicyModule, reference: Option<String>) -> Self {
        Self {
            name: module.name().to_string(),
            version: module.description().version.clone(),
            digest: module.digest().to_hex(),
            reference,
        }
    }
}

/// A component that decides under its name from round `from_round` on (until an entry
/// of the same name with a later round).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyFromRound {
    /// The first round it decided under its name.
    pub from_round: u64,
    /// The component.
    #[serde(flatten)]
    pub policy: DecidingPolicy,
}

/// The components that decided a run's rounds, each noted once, when its name first
/// decided with its bytes: a few entries for any number of rounds.
#[derive(Clone, Debug, Default)]
pub struct DeciderLog {
    entries: VecDeque<PolicyFromRound>,
}

impl DeciderLog {
    /// Notes that `module` decided round `round`; a new entry only when its name last
    /// meant other bytes, or nothing. `reference` is asked for the registry reference
    /// only then.
    pub fn note(
        &mut self,
        round: u64,
        module: &PolicyModule,
        reference: impl FnOnce() -> Option<String>,
    ) -> bool {
        let digest = module.digest().to_hex();
        let same = self
            .entries
            .iter()
            .rev()
            .find(|e| e.policy.name == module.name())
            .is_some_and(|e| e.policy.digest == digest);
        if !same {
            self.entries.push_back(PolicyFromRound {
                from_round: round,
                policy: DecidingPolicy::of(module, reference()),
            });
        }
        !same
    }

    /// Forgets what no round from `oldest` on needs: an entry whose name a later entry
    /// took over at or before `oldest`.
    pub fn forget_before(&mut self, oldest: u64) {
        let mut taken_over = BTreeSet::new();
        let mut keep = vec![true; self.entries.len()];
        for (i, entry) in self.entries.iter().enumerate().rev() {
            if taken_over.contains(entry.policy.name.as_str()) {
                keep[i] = false;
            } else if entry.from_round <= oldest {
                taken_over.insert(entry.policy.name.as_str());
            }
        }
        let mut keep = keep.into_iter();
        self.entries.retain(|_| keep.next().unwrap_or(true));
    }

    /// The entries that say what the policy names of `records` (rounds in order) meant:
    /// for each name they use, the entry in effect at their first round and those begun
    /// within them.
    pub fn naming(&self, records: &[DecisionRecord]) -> Vec<PolicyFromRound> {
        let (Some(first), Some(last)) = (records.first(), records.last()) else {
            return Vec::new();
        };
        let mut used = BTreeSet::new();
        for record in records {
            used.insert(record.arm_a.policy.as_str());
            used.extend(record.arm_b.iter().map(|b| b.policy.as_str()));
            used.extend(record.shadow.iter().map(|s| s.policy.as_str()));
        }
        self.for_rounds(first.round, last.round, &used)
    }

    /// The entries of the names in `used` in effect at some round from `first` to `last`.
    fn for_rounds(&self, first: u64, last: u64, used: &BTreeSet<&str>) -> Vec<PolicyFromRound> {
        let mut taken_over = BTreeSet::new();
        let mut out: Vec<PolicyFromRound> = self
            .entries
            .iter()
            .rev()
            .filter(|e| e.from_round <= last && used.contains(e.policy.name.as_str()))
            .filter(|e| {
                if taken_over.contains(e.policy.name.as_str()) {
                    return false;
                }
                if e.from_round <= first {
                    taken_over.insert(e.policy.name.as_str());
                }
                true
            })
            .cloned()
            .collect();
        out.reverse();
        out
    }

    /// Every entry, oldest first.
    pub fn entries(&self) -> impl Iterator<Item = &PolicyFromRound> {
        self.entries.iter()
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing has been noted.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, digest: &str, from_round: u64) -> PolicyFromRound {
        PolicyFromRound {
            from_round,
            policy: DecidingPolicy {
                name: name.into(),
                version: "1".into(),
                digest: digest.into(),
                reference: None,
            },
        }
    }

    fn log(entries: &[PolicyFromRound]) -> DeciderLog {
        DeciderLog {
            entries: entries.iter().cloned().collect(),
        }
    }

    fn digests(entries: &[PolicyFromRound]) -> Vec<&str> {
        entries.iter().map(|e| e.policy.digest.as_str()).collect()
    }

    /// Rounds `rounds` decided by `policy` (arm A).
    fn decided(rounds: std::ops::RangeInclusive<u64>, policy: &str) -> Vec<DecisionRecord> {
        rounds
            .map(|round| {
                let arm = crate::ArmRecord::new(policy.into(), None, Default::default());
                DecisionRecord::new(round, &switchyard_core::Snapshot::default(), arm, None)
            })
            .collect()
    }

    #[test]
    fn rounds_are_told_what_their_names_meant_then_and_nothing_else() {
        // `fair` is uploaded again at round 10; `default` decides rounds 4 and 5.
        let log = log(&[
            entry("fair", "a", 0),
            entry("default", "d", 4),
            entry("fair", "b", 10),
        ]);
        assert_eq!(digests(&log.naming(&decided(0..=3, "fair"))), ["a"]);
        let mut rounds = decided(3..=3, "fair");
        rounds.extend(decided(4..=5, "default"));
        rounds.extend(decided(6..=9, "fair"));
        assert_eq!(digests(&log.naming(&rounds)), ["a", "d"]);
        assert_eq!(digests(&log.naming(&decided(8..=12, "fair"))), ["a", "b"]);
        assert_eq!(digests(&log.naming(&decided(10..=12, "fair"))), ["b"]);
        assert!(log.naming(&[]).is_empty());
    }

    #[test]
    fn forgetting_keeps_the_entry_in_effect_at_the_oldest_round_kept() {
        let mut log = log(&[
            entry("fair", "a", 0),
            entry("default", "d", 4),
            entry("fair", "b", 10),
            entry("fair", "c", 20),
        ]);
        log.forget_before(9);
        assert_eq!(
            digests(&log.entries().cloned().collect::<Vec<_>>()),
            ["a", "d", "b", "c"]
        );
        log.forget_before(15);
        assert_eq!(
            digests(&log.entries().cloned().collect::<Vec<_>>()),
            ["d", "b", "c"]
        );
        log.forget_before(20);
        assert_eq!(
            digests(&log.entries().cloned().collect::<Vec<_>>()),
            ["d", "c"]
        );
    }
}
