//! DRAGON's idle clock: when each node's usable idle resources were first seen idle.
//!
//! In the state blob it is a map from node name to time (a JSON object). In memory it
//! is a list in the order of the snapshot's nodes, because a round
//! visits the nodes in that order and the nodes rarely change between rounds: the round
//! finds each node's entry by walking the list beside the nodes ([`Reader`]), one name
//! comparison per idle node, instead of searching and rebuilding an ordered map keyed by
//! name (a dozen byte-by-byte comparisons per lookup and a copied name per insert, most
//! of a round on a thousand idle nodes). A round that leaves the clock as it was hands
//! the same list back ([`IdleClock::after_round`]), so nothing is copied.

use std::collections::HashMap;

use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use switchyard_policy_sdk::Node;

/// When each node listed first had usable idle resources, in the order of the nodes of
/// the round that wrote it. A node appears at most once.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct IdleClock {
    entries: Vec<(String, f64)>,
}

/// One node's clock as a round leaves it: the node's position in the snapshot, the time
/// its idle resources were first seen, and where the entry came from in the clock the
/// round read (none for a node newly idle).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tick {
    /// Position of the node in the snapshot.
    pub node: usize,
    /// When its idle resources were first seen idle.
    pub since: f64,
    /// The entry of the clock read this round that gave `since`.
    pub from: Option<usize>,
}

impl IdleClock {
    /// The clock of `(node name, since)` pairs, a name's last pair winning (as in a
    /// map).
    pub fn from_pairs(pairs: impl IntoIterator<Item = (String, f64)>) -> Self {
        let mut entries: Vec<(String, f64)> = Vec::new();
        let mut at: HashMap<String, usize> = HashMap::new();
        for (name, since) in pairs {
            match at.get(&name) {
                Some(&i) => entries[i].1 = since,
                None => {
                    at.insert(name.clone(), entries.len());
                    entries.push((name, since));
                }
            }
        }
        Self { entries }
    }

    /// When `node` was first seen idle, if it is on the clock.
    pub fn get(&self, node: &str) -> Option<f64> {
        self.entries
            .iter()
            .find(|(name, _)| name == node)
            .map(|&(_, since)| since)
    }

    /// True when no node is on the clock.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Reads the clock in the order of the snapshot's nodes.
    pub fn reader(&self) -> Reader<'_> {
        Reader {
            entries: &self.entries,
            cursor: 0,
            by_name: None,
        }
    }

    /// True when a round that left `ticks` carried every entry of `self` over, in
    /// order, and added none: the clock it leaves is `self`.
    pub fn carried_over(&self, ticks: &[Tick]) -> bool {
        ticks.len() == self.entries.len()
            && ticks.iter().enumerate().all(|(k, t)| t.from == Some(k))
    }

    /// The clock a round leaves: `ticks` in node order, taken from `self` (the clock
    /// the round read) or new; `self` as it is when [`IdleClock::carried_over`].
    pub fn after_round(self, ticks: &[Tick], nodes: &[Node]) -> Self {
        if self.carried_over(ticks) {
            return self;
        }
        Self {
            entries: ticks
                .iter()
                .map(|t| (nodes[t.node].name.clone(), t.since))
                .collect(),
        }
    }
}

/// Looks nodes up on a clock, visited in the snapshot's order: each lookup first tries
/// the entry after the last one found, and only a node not there is looked up by name
/// (an index built on the first such miss).
pub struct Reader<'a> {
    entries: &'a [(String, f64)],
    cursor: usize,
    by_name: Option<HashMap<&'a str, usize>>,
}

impl Reader<'_> {
    /// `node`'s entry: its position on the clock and when it was first seen idle.
    pub fn find(&mut self, node: &str) -> Option<(usize, f64)> {
        if let Some((name, since)) = self.entries.get(self.cursor)
            && name == node
        {
            self.cursor += 1;
            return Some((self.cursor - 1, *since));
        }
        let entries = self.entries;
        let by_name = self.by_name.get_or_insert_with(|| {
            entries
                .iter()
                .enumerate()
                .map(|(i, (name, _))| (name.as_str(), i))
                .collect()
        });
        let &at = by_name.get(node)?;
        self.cursor = at + 1;
        Some((at, entries[at].1))
    }
}

impl Serialize for IdleClock {
    fn serialize<S: Serializer>(&self, out: S) -> Result<S::Ok, S::Error> {
        let mut map = out.serialize_map(Some(self.entries.len()))?;
        for (name, since) in &self.entries {
            map.serialize_entry(name, since)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for IdleClock {
    fn deserialize<D: Deserializer<'de>>(input: D) -> Result<Self, D::Error> {
        input.deserialize_map(Pairs)
    }
}

struct Pairs;

impl<'de> Visitor<'de> for Pairs {
    type Value = IdleClock;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a map from node name to the time it was first seen idle")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<IdleClock, A::Error> {
        let mut pairs = Vec::new();
        while let Some(pair) = map.next_entry::<String, f64>()? {
            pairs.push(pair);
        }
        Ok(IdleClock::from_pairs(pairs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use switchyard_policy_sdk::testing::node;

    fn clock(pairs: &[(&str, f64)]) -> IdleClock {
        IdleClock::from_pairs(pairs.iter().map(|&(n, t)| (n.to_string(), t)))
    }

    #[test]
    fn the_blob_is_the_map_it_always_was_and_an_old_blob_reads() {
        let old: BTreeMap<String, f64> =
            BTreeMap::from([("a".into(), 1.5), ("b".into(), 0.1 + 0.2)]);
        let text = serde_json::to_string(&old).unwrap();
        let read: IdleClock = serde_json::from_str(&text).unwrap();
        assert_eq!(read.get("b"), Some(0.1 + 0.2));
        assert_eq!(serde_json::to_string(&read).unwrap(), text);
        // A name given twice keeps its last time, as a map would.
        let twice: IdleClock = serde_json::from_str(r#"{"a": 1, "b": 2, "a": 3}"#).unwrap();
        assert_eq!(twice, clock(&[("a", 3.0), ("b", 2.0)]));
    }

    #[test]
    fn a_reader_finds_nodes_in_order_out_of_order_and_not_at_all() {
        let c = clock(&[("n1", 1.0), ("n3", 3.0), ("n4", 4.0)]);
        let mut r = c.reader();
        assert_eq!(r.find("n1"), Some((0, 1.0)));
        assert_eq!(r.find("n2"), None);
        assert_eq!(r.find("n3"), Some((1, 3.0)));
        assert_eq!(r.find("n4"), Some((2, 4.0)));
        let mut r = c.reader();
        assert_eq!(r.find("n4"), Some((2, 4.0)));
        assert_eq!(r.find("n1"), Some((0, 1.0)));
        assert_eq!(r.find("n5"), None);
    }

    #[test]
    fn a_round_that_carries_every_entry_over_in_order_keeps_the_clock() {
        let nodes = vec![node("n1", 1000), node("n2", 1000), node("n3", 1000)];
        let c = clock(&[("n1", 1.0), ("n3", 3.0)]);
        let same = [
            Tick {
                node: 0,
                since: 1.0,
                from: Some(0),
            },
            Tick {
                node: 2,
                since: 3.0,
                from: Some(1),
            },
        ];
        assert_eq!(c.clone().after_round(&same, &nodes), c);
        let grown = [
            Tick {
                node: 0,
                since: 1.0,
                from: Some(0),
            },
            Tick {
                node: 1,
                since: 9.0,
                from: None,
            },
            Tick {
                node: 2,
                since: 3.0,
                from: Some(1),
            },
        ];
        assert_eq!(
            c.clone().after_round(&grown, &nodes),
            clock(&[("n1", 1.0), ("n2", 9.0), ("n3", 3.0)])
        );
        let dropped = [Tick {
            node: 2,
            since: 3.0,
            from: Some(1),
        }];
        assert_eq!(c.after_round(&dropped, &nodes), clock(&[("n3", 3.0)]));
    }
}
