//! A newer version writing the ledger beside this one (a deploy in progress), as seen from the
//! writers of this version: in a third of the worlds, after a quarter of the writes of this
//! version, the newer version writes the item next, adding attributes of its own, one at the
//! top and one inside the origin (as the contract tests' newer writer does on DynamoDB). Every later writer of this
//! version (claims, outcomes, give-backs, cancels, edits' horizon moves, redrives, expiries)
//! reads the item and writes its next state whole: it must keep what it does not know
//! (`newer_attribute_dropped`, judged at the world's end on every item still there).
//! [`Plant::DropUnknown`] is a writer that drops it.

use std::collections::BTreeSet;
use std::sync::Mutex;

use rand::rngs::StdRng;
use rand::RngExt;
use reminders_core::domain::DeliveryKey;
use reminders_core::ledger::DeliveryRecord;
use reminders_core::ports::{Cas, Expected, Ledger, MemoryLedger};
use reminders_core::sync::lock;

use super::Plant;

/// The attribute the newer writer adds at the item's top, and the one inside its origin.
const TOP: &str = "newer_mark";
const NESTED: &str = "newer_nested";
/// The share of this version's writes the newer version follows with one of its own.
const SHARE: f64 = 0.25;

/// The newer writer of one world, and the items it marked.
pub struct Newer {
    rng: Mutex<StdRng>,
    marked: Mutex<BTreeSet<DeliveryKey>>,
}

impl Newer {
    /// A newer writer in a third of the worlds (the ones whose stream images carry a newer
    /// writer's values too), with dice of its own.
    pub(super) fn in_world(seed: super::seed::Seed) -> Option<Self> {
        seed.with_a_newer_writer().then(|| Self {
            rng: Mutex::new(seed.rng(super::seed::Stream::Newer)),
            marked: Mutex::default(),
        })
    }

    /// An item gone (deleted, or past its TTL and written anew): what the newer writer added
    /// went with it.
    pub fn gone(&self, key: &DeliveryKey) {
        lock(&self.marked).remove(key);
    }

    /// After this version's write `landed`: sometimes the newer version writes the item next,
    /// adding its attributes. A write of its own (the next transition number, the status and
    /// lease as they are), as this version's freshness extensions and horizon moves are: a writer
    /// of this version holding the item as it was finds its condition failed, reads it again and
    /// writes its change on what it reads.
    pub async fn after(&self, ledger: &MemoryLedger, landed: &DeliveryRecord) {
        if !lock(&self.rng).random_bool(SHARE) {
            return;
        }
        let Ok(mut v) = serde_json::to_value(landed) else {
            return;
        };
        v["seq"] = serde_json::json!(landed.seq() + 1);
        v[TOP] = serde_json::json!(true);
        if let Some(origin) = v["origin"].as_object_mut() {
            origin.insert(NESTED.into(), serde_json::json!([1, "x"]));
        }
        let Ok(marked) = serde_json::from_value::<DeliveryRecord>(v) else {
            return;
        };
        if let Ok(Cas::Applied) = ledger.put_if(&marked, Expected::of(Some(landed))).await {
            lock(&self.marked).insert(landed.key().clone());
        }
    }

    /// The items it marked that are still on the ledger and lost an attribute it added.
    pub async fn dropped(&self, ledger: &MemoryLedger) -> (u64, Vec<String>) {
        let marked: Vec<DeliveryKey> = lock(&self.marked).iter().cloned().collect();
        let mut lost = Vec::new();
        for key in &marked {
            let Ok(Some(rec)) = ledger.get(key).await else {
                continue;
            };
            let top = rec.unknown().get(TOP).is_some();
            let nested = rec.origin().is_none_or(|o| o.unknown.get(NESTED).is_some());
            if !(top && nested) {
                let which = match (top, nested) {
                    (false, false) => format!("`{TOP}` and `origin.{NESTED}`"),
                    (false, true) => format!("`{TOP}`"),
                    _ => format!("`origin.{NESTED}`"),
                };
                lost.push(format!(
                    "{key}: a writer of this version dropped {which}, which a newer version had added (now {}, transition {})",
                    rec.status().as_str(),
                    rec.seq()
                ));
            }
        }
        (marked.len() as u64, lost)
    }
}

/// [`Plant::DropUnknown`]: the record as a writer that drops what it does not know writes it.
pub fn as_written(plant: Option<Plant>, record: &DeliveryRecord) -> Option<DeliveryRecord> {
    if plant != Some(Plant::DropUnknown) || record.unknown().is_empty() {
        return None;
    }
    let mut v = serde_json::to_value(record).ok()?;
    v.as_object_mut()?.remove(TOP);
    if let Some(origin) = v["origin"].as_object_mut() {
        origin.remove(NESTED);
    }
    serde_json::from_value(v).ok()
}
