//! Wire strings a newer version may write (docs/design.md, "Rolling deploys": a deploy rolls
//! readers and writers out at different moments). A persisted or published enum reads a value it
//! does not know into its `Unknown` case, which keeps the string: carried on when the item is
//! written back, logged where it is read, published as it is, never a reason to skip the item.

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
///
/// What it can hold is what JSON can: strings, numbers, booleans, null, lists and maps. A value
/// of another kind (DynamoDB's binary, say) is left out as every unknown attribute was before,
/// never a reason to refuse the item; sets come back as lists. Newer versions write only the
/// kinds it holds.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[serde(transparent)]
pub struct Unknown(std::collections::BTreeMap<String, serde_json::Value>);

impl<'de> serde::Deserialize<'de> for Unknown {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let all: std::collections::BTreeMap<String, Lenient> = serde::Deserialize::deserialize(d)?;
        Ok(Self(
            all.into_iter()
                .filter_map(|(k, v)| v.0.map(|v| (k, v)))
                .collect(),
        ))
    }
}

/// A value as JSON, or `None` for one JSON cannot hold (bytes, or a list or map holding any).
struct Lenient(Option<serde_json::Value>);

impl<'de> serde::Deserialize<'de> for Lenient {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(LenientVisitor)
    }
}

struct LenientVisitor;

impl<'de> serde::de::Visitor<'de> for LenientVisitor {
    type Value = Lenient;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Lenient, E> {
        Ok(Lenient(Some(v.into())))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Lenient, E> {
        Ok(Lenient(Some(v.into())))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Lenient, E> {
        Ok(Lenient(Some(v.into())))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Lenient, E> {
        Ok(Lenient(serde_json::Number::from_f64(v).map(Into::into)))
    }
    fn visit_str<E>(self, v: &str) -> Result<Lenient, E> {
        Ok(Lenient(Some(v.into())))
    }
    fn visit_bytes<E>(self, _: &[u8]) -> Result<Lenient, E> {
        Ok(Lenient(None))
    }
    fn visit_none<E>(self) -> Result<Lenient, E> {
        Ok(Lenient(Some(serde_json::Value::Null)))
    }
    fn visit_unit<E>(self) -> Result<Lenient, E> {
        Ok(Lenient(Some(serde_json::Value::Null)))
    }
    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Lenient, D::Error> {
        d.deserialize_any(self)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Lenient, A::Error> {
        let mut all = Vec::new();
        let mut whole = true;
        while let Some(Lenient(v)) = seq.next_element()? {
            match v {
                Some(v) => all.push(v),
                None => whole = false,
            }
        }
        Ok(Lenient(whole.then_some(serde_json::Value::Array(all))))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Lenient, A::Error> {
        let mut all = serde_json::Map::new();
        let mut whole = true;
        while let Some((k, Lenient(v))) = map.next_entry::<String, Lenient>()? {
            match v {
                Some(v) => {
                    all.insert(k, v);
                }
                None => whole = false,
            }
        }
        Ok(Lenient(whole.then_some(serde_json::Value::Object(all))))
    }
}

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
        serde_json::from_str(text).ok()
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
