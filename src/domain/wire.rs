//! Wire strings a newer version may write (DESIGN §11: a deploy rolls readers and writers
//! out at different moments). A persisted or published enum reads a value it does not know
//! into its `Unknown` case, which keeps the string: carried on when the item is written
//! back, logged where it is read, published as it is, never a reason to skip the item.

use std::collections::BTreeSet;
use std::sync::{Mutex, PoisonError};

/// Distinct unknown wire strings kept (each leaked once); past this many, one more reads as
/// `"unknown"`. A newer version adds a handful: the bound only guards a corrupt writer.
const MAX_UNKNOWN: usize = 64;

/// `s` as a `'static` string, the same one for every read of it.
pub fn intern(s: &str) -> &'static str {
    static SEEN: Mutex<BTreeSet<&'static str>> = Mutex::new(BTreeSet::new());
    let mut seen = SEEN.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(known) = seen.get(s) {
        return known;
    }
    if seen.len() >= MAX_UNKNOWN {
        return "unknown";
    }
    let leaked: &'static str = Box::leak(s.to_owned().into_boxed_str());
    seen.insert(leaked);
    leaked
}

/// The attributes of an item (a ledger record, its origin, a series) that this version does
/// not know, a newer version's: kept as read and written back with every change, so that a
/// writer of this version, running while a newer one is deployed, drops none of them (a
/// newer mark like `maybe_sent`, lost, would let a fallback take over after an attempt that
/// may have reached the person).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct Unknown(std::collections::BTreeMap<String, serde_json::Value>);

impl Unknown {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The attribute `name`, as a newer writer left it.
    pub fn get(&self, name: &str) -> Option<&serde_json::Value> {
        self.0.get(name)
    }

    /// In the in-memory ledger's byte form: JSON text, `None` when there is nothing.
    pub fn to_text(&self) -> Option<String> {
        (!self.is_empty()).then(|| serde_json::to_string(&self.0).unwrap_or_default())
    }

    pub fn from_text(text: &str) -> Option<Self> {
        serde_json::from_str(text).ok().map(Self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_string_per_value() {
        let a = intern("from_a_newer_version");
        let b = intern(&String::from("from_a_newer_version"));
        assert!(std::ptr::eq(a, b));
    }
}
