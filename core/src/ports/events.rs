//! The outcome-event ports: [`EventBus`] (EventBridge: publish settled events) and
//! [`LedgerStream`] (the ledger's DynamoDB stream, read shard by shard — what Lambda's event
//! source mapping does on AWS, and the local player does on an emulator), each with its
//! in-memory implementation.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::Mutex;

use aws_lambda_events::event::dynamodb::EventRecord;
use serde::Serialize;

use super::PortError;
use crate::clock::Timestamp;
use crate::domain::{DeadReason, DeliveryKey, ReminderId, SubscriberId};
use crate::ledger::Status;
use crate::sync::lock;

pub const OP_PUBLISH: &str = "events.publish";
pub const OP_READ: &str = "events.read_stream";

/// The detail of one event, field for field as published (docs/events.md, "The event"); decided by
/// [`crate::events::settled`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Settled {
    pub version: u32,
    /// From the ledger item's origin; `null` for items written before it was kept.
    pub reminder_id: Option<ReminderId>,
    pub subscriber_id: Option<SubscriberId>,
    /// A channel's wire name: one a newer version wrote is published as written.
    pub channel: Option<&'static str>,
    pub delivery_key: DeliveryKey,
    /// `delivered`, `dead`, `expired` or `cancelled`.
    pub outcome: Status,
    /// Why it died (`dead` only).
    pub reason: Option<DeadReason>,
    /// The ledger's transition number of the settling write: with the key, the dedup id.
    pub transition: u64,
    /// The status it left (`scheduled` when the settling write created the item).
    pub from: Status,
    /// When the transition happened (RFC 3339, UTC).
    #[serde(serialize_with = "rfc3339")]
    pub at: Timestamp,
    /// Provider attempts that counted against the budget.
    pub attempts: u32,
    /// The channel this delivery fell back from, when it is a fallback (docs/design.md, "Fallback
    /// chain").
    pub fallback_from: Option<&'static str>,
    /// The channel this (dead) delivery handed the reminder to, when it fell back.
    pub fallback_to: Option<&'static str>,
    /// The series the reminder is an occurrence of (docs/design.md, "Recurring series"), read from
    /// its id.
    pub series_id: Option<crate::domain::SeriesId>,
    /// The occurrence's instant in its series (RFC 3339, UTC).
    #[serde(serialize_with = "rfc3339_opt")]
    pub occurrence_at: Option<Timestamp>,
    /// The detail fields whose value the publishing version did not know (a newer writer's,
    /// during a deploy), published as written: `outcome`, `from`, `reason`, `channel`,
    /// `fallback_from`, `fallback_to`. Empty otherwise.
    pub newer_values: Vec<&'static str>,
}

impl Settled {
    /// The detail as EventBridge takes it (a JSON object, as text).
    pub fn detail_json(&self) -> String {
        // Plain strings, numbers and options: serialization cannot fail.
        serde_json::to_string(self).unwrap_or_else(|_| "{}".to_owned())
    }
}

fn rfc3339<S: serde::Serializer>(at: &Timestamp, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&at.to_rfc3339())
}

fn rfc3339_opt<S: serde::Serializer>(at: &Option<Timestamp>, s: S) -> Result<S::Ok, S::Error> {
    match at {
        Some(at) => s.serialize_str(&at.to_rfc3339()),
        None => s.serialize_none(),
    }
}

/// One event the bus would not take, by its index in the call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    pub index: usize,
    /// The bus's error code (`InternalFailure`, `ThrottlingException`, …).
    pub code: String,
}

pub trait EventBus: Send + Sync {
    /// Publish `events` in order. `Ok` lists the ones the bus refused (each may be retried);
    /// `Err` means none is known to be published (some may have been: at least once).
    fn publish(
        &self,
        events: &[Settled],
    ) -> impl Future<Output = Result<Vec<Rejected>, PortError>> + Send;
}

impl<T: EventBus> EventBus for std::sync::Arc<T> {
    fn publish(
        &self,
        events: &[Settled],
    ) -> impl Future<Output = Result<Vec<Rejected>, PortError>> + Send {
        (**self).publish(events)
    }
}

/// The bus in memory: what was published, in order, and the keys whose events it refuses (as
/// EventBridge answers one entry of a call failed).
#[derive(Debug, Default)]
pub struct MemoryBus {
    published: Mutex<Vec<Settled>>,
    refused: Mutex<BTreeSet<DeliveryKey>>,
}

impl MemoryBus {
    /// Refuse every event for `key` (as EventBridge refuses one entry of a call).
    pub fn refuse(&self, key: DeliveryKey) {
        lock(&self.refused).insert(key);
    }

    /// Take events for every key again.
    pub fn accept_all(&self) {
        lock(&self.refused).clear();
    }

    /// Everything published so far, in order.
    pub fn published(&self) -> Vec<Settled> {
        lock(&self.published).clone()
    }
}

impl EventBus for MemoryBus {
    async fn publish(&self, events: &[Settled]) -> Result<Vec<Rejected>, PortError> {
        let refused = lock(&self.refused).clone();
        let mut rejected = Vec::new();
        for (index, event) in events.iter().enumerate() {
            if refused.contains(&event.delivery_key) {
                let code = "InternalFailure".to_owned();
                rejected.push(Rejected { index, code });
            } else {
                lock(&self.published).push(event.clone());
            }
        }
        Ok(rejected)
    }
}

/// A bus that cannot be reached: every publish fails (the tests' failed call).
#[cfg(test)]
pub(crate) struct Unreachable;

#[cfg(test)]
impl EventBus for Unreachable {
    async fn publish(&self, _: &[Settled]) -> Result<Vec<Rejected>, PortError> {
        Err(PortError::Unavailable {
            op: OP_PUBLISH,
            message: "the bus cannot be reached".into(),
        })
    }
}

/// A DynamoDB stream, read the way an event source mapping reads it: every shard, in order,
/// from just after a sequence number.
pub trait LedgerStream: Send + Sync {
    /// What names the stream (its ARN): checkpoints are kept per stream.
    fn id(&self) -> &str;

    /// The stream's shards, parents before children.
    fn shards(&self) -> impl Future<Output = Result<Vec<String>, PortError>> + Send;

    /// Up to `limit` records of `shard` after sequence number `after` (from the oldest kept
    /// when `None`), in order; empty when none is there yet.
    fn read(
        &self,
        shard: &str,
        after: Option<&str>,
        limit: u32,
    ) -> impl Future<Output = Result<Vec<EventRecord>, PortError>> + Send;
}

/// A stream in memory: records appended by a test, one shard each name.
#[derive(Debug, Default)]
pub struct MemoryStream {
    shards: Mutex<BTreeMap<String, Vec<EventRecord>>>,
}

impl MemoryStream {
    /// Append `record` to `shard`; its sequence number must sort after the shard's last.
    pub fn push(&self, shard: &str, record: EventRecord) {
        lock(&self.shards)
            .entry(shard.to_owned())
            .or_default()
            .push(record);
    }
}

impl LedgerStream for MemoryStream {
    fn id(&self) -> &str {
        "memory-stream"
    }

    async fn shards(&self) -> Result<Vec<String>, PortError> {
        Ok(lock(&self.shards).keys().cloned().collect())
    }

    async fn read(
        &self,
        shard: &str,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<EventRecord>, PortError> {
        let shards = lock(&self.shards);
        let records = shards.get(shard).map(Vec::as_slice).unwrap_or_default();
        let start = match after {
            None => 0,
            Some(seq) => records
                .iter()
                .position(|r| r.change.sequence_number.as_deref() == Some(seq))
                .map_or(0, |i| i + 1),
        };
        let end = (start + limit as usize).min(records.len());
        Ok(records[start..end].to_vec())
    }
}
