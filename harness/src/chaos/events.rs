//! Outcome events in a world (docs/design.md, "Outcome events"): every ledger write that lands is
//! appended to the world's stream, as DynamoDB Streams would record it (old and new image, one
//! sequence number each), and an event source mapping hands the stream to the real
//! [`reminders_core::events::handle`] in batches, under crashes, with a bus whose calls fail as every
//! port's do. The checker keeps its own list of the settled transitions it saw land (a write
//! into `delivered`, `dead`, `expired` or `cancelled` from another status) and asks, at the
//! end, that each has its event on the bus ([`Tap::missing`]).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_lambda_events::event::dynamodb::EventRecord;

use super::adapter::{Adapter, Chaotic};
use super::dice::invoke;
use super::Plant;
use crate::around::{cast, Call, Hook, Next, Value};
use reminders_core::domain::DeliveryKey;
use reminders_core::events::Settled;
use reminders_core::ledger::{DeliveryRecord, Status};
use reminders_core::ports::{EventBus, MemoryBus, PortError};
use reminders_core::sync::lock;

/// Records per batch, as the events function's mapping reads them.
const BATCH: usize = 100;
const FUNCTION_TIMEOUT: Duration = Duration::from_secs(30);

/// The world's ledger stream, and what the checker expects of it.
#[derive(Default)]
pub struct Tap {
    records: Mutex<Vec<EventRecord>>,
    /// Settled transitions as they landed, by (key, transition number): the statuses it moved
    /// between, in words.
    settled: Mutex<std::collections::BTreeMap<(DeliveryKey, u64), String>>,
    /// A newer version writes the ledger (version skew, as in a deploy in progress): its images
    /// carry values this events function does not know ([`newer`]); each dead event must name the
    /// reason as that writer wrote it.
    newer_writer: bool,
    /// [`Plant::RefuseNewerValues`]: the newer value lands in `status` too.
    refuse: bool,
    /// The reason each settled death's image carries, by (key, transition number).
    reasons: Mutex<std::collections::BTreeMap<(DeliveryKey, u64), String>>,
    /// How many records the events function's mapping has handled (its checkpoint).
    handled: std::sync::atomic::AtomicUsize,
}

impl Tap {
    /// A stream whose writer is of this version, or (`newer_writer`) of a newer one.
    pub fn new(newer_writer: bool, plant: Option<Plant>) -> Self {
        Self {
            newer_writer,
            refuse: newer_writer && plant == Some(Plant::RefuseNewerValues),
            ..Self::default()
        }
    }

    /// A write landed on the ledger: its stream record, and the settled transition if it is
    /// one (judged here by the statuses alone, not by the events module's decision).
    pub fn landed(&self, before: Option<&DeliveryRecord>, after: &DeliveryRecord) {
        let from = before.map_or(Status::Scheduled, DeliveryRecord::status);
        let to = after.status();
        let settles = matches!(
            to,
            Status::Delivered | Status::Dead | Status::Expired | Status::Cancelled
        );
        let mut record = record(lock(&self.records).len(), before, after);
        if self.newer_writer {
            newer(&mut record.change.new_image, self.refuse);
            newer(&mut record.change.old_image, self.refuse);
        }
        if settles && from != to {
            let key = (after.key().clone(), after.seq());
            if let Some(serde_dynamo::AttributeValue::S(r)) =
                record.change.new_image.get("dead_reason")
            {
                lock(&self.reasons).insert(key.clone(), r.clone());
            }
            let moved = format!("{} → {}", from.as_str(), to.as_str());
            lock(&self.settled).insert(key, moved);
        }
        lock(&self.records).push(record);
    }

    /// Dead events whose reason is not the one their image carried (a newer writer's reason
    /// read as another, or dropped).
    pub fn misread(&self, bus: &MemoryBus) -> Vec<(DeliveryKey, u64, String)> {
        let reasons = lock(&self.reasons);
        bus.published()
            .into_iter()
            .filter_map(|e| {
                let want = reasons.get(&(e.delivery_key.clone(), e.transition))?;
                let got = e.reason.map(|r| r.as_str()).unwrap_or("none");
                (got != want).then(|| (e.delivery_key, e.transition, format!("{got}, not {want}")))
            })
            .collect()
    }

    /// Settled deaths whose image carried a value this version does not know.
    pub fn newer_values(&self) -> u64 {
        if self.newer_writer {
            lock(&self.reasons).len() as u64
        } else {
            0
        }
    }

    /// Whether the mapping has handled every record the stream holds: a write that lands
    /// while the world settles has its event before the world is judged.
    pub fn caught_up(&self) -> bool {
        self.handled.load(std::sync::atomic::Ordering::SeqCst) >= lock(&self.records).len()
    }

    fn batch(&self, from: usize) -> Vec<EventRecord> {
        let records = lock(&self.records);
        records.iter().skip(from).take(BATCH).cloned().collect()
    }

    /// Settled transitions with no event on `bus`: key, transition number, and the statuses it
    /// moved between.
    pub fn missing(&self, bus: &MemoryBus) -> Vec<(DeliveryKey, u64, String)> {
        let published: BTreeSet<(DeliveryKey, u64)> = bus
            .published()
            .into_iter()
            .map(|e| (e.delivery_key, e.transition))
            .collect();
        lock(&self.settled)
            .iter()
            .filter(|(t, _)| !published.contains(*t))
            .map(|((key, n), moved)| (key.clone(), *n, moved.clone()))
            .collect()
    }

    pub fn settled_transitions(&self) -> u64 {
        lock(&self.settled).len() as u64
    }
}

/// An image as a newer writer would make it: each enum it knows in a version this one does
/// not (a dead reason, an outcome class, the policy's backoff and ambiguous rule); with
/// `refuse`, the status too (a field this version still refuses).
fn newer(image: &mut serde_dynamo::Item, refuse: bool) {
    use serde_dynamo::AttributeValue as A;
    let renamed = |v: &mut A| {
        if let A::S(s) = v {
            s.push_str("_v9");
        }
    };
    let mut fields = vec!["dead_reason", "last_outcome_class"];
    if refuse {
        fields.push("status");
    }
    for f in fields {
        if let Some(v) = image.get_mut(f) {
            renamed(v);
        }
    }
    if let Some(A::M(policy)) = image.get_mut("policy") {
        if let Some(v) = policy.get_mut("ambiguous") {
            renamed(v);
        }
        if let Some(A::M(backoff)) = policy.get_mut("backoff") {
            if let Some(kind) = backoff.get_mut("kind") {
                renamed(kind);
            }
        }
    }
}

/// The stream record of one write, as DynamoDB Streams writes it (NEW_AND_OLD_IMAGES).
fn record(seq: usize, old: Option<&DeliveryRecord>, new: &DeliveryRecord) -> EventRecord {
    let image = |r: &DeliveryRecord| serde_dynamo::to_item(r).unwrap_or_default();
    let mut r = EventRecord::default();
    r.event_name = if old.is_some() { "MODIFY" } else { "INSERT" }.into();
    r.change.sequence_number = Some(format!("{seq:021}"));
    r.change.keys = [(
        "delivery_key".to_owned(),
        serde_dynamo::AttributeValue::S(new.key().as_str().to_owned()),
    )]
    .into_iter()
    .collect::<std::collections::HashMap<_, _>>()
    .into();
    r.change.new_image = image(new);
    r.change.old_image = old.map(image).unwrap_or_default();
    r
}

/// The events function's mapping: batches from the checkpoint, each handed to the real
/// handler; the checkpoint moves past what the handler did not fail. A crash repeats the
/// batch (at least once), and the mapping retries as long as the stream holds the record.
pub(super) async fn stream_to_bus(tap: Arc<Tap>, bus: Arc<Chaotic<Arc<MemoryBus>>>) {
    let mut done = 0;
    // Polls back off while the stream is quiet (a world's hours of settling cost few wakes).
    let mut idle = 1;
    loop {
        let batch = tap.batch(done);
        if batch.is_empty() {
            tokio::time::sleep(Duration::from_secs(idle)).await;
            idle = (idle * 2).min(120);
            continue;
        }
        idle = 1;
        let handled = invoke(
            reminders_core::events::handle(&*bus, &batch),
            FUNCTION_TIMEOUT,
        )
        .await;
        match handled {
            Some(h) => {
                done += h.failed_from.unwrap_or(batch.len());
                tap.handled.store(done, std::sync::atomic::Ordering::SeqCst);
                if h.failed_from.is_some() {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
            None => tokio::time::sleep(Duration::from_secs(1)).await,
        }
    }
}

/// The bus's model: the dice around each publish, and the plants of a bus adapter.
impl Hook for Adapter<Arc<MemoryBus>> {
    async fn around<R: Value>(&self, call: &Call<'_>, next: Next<'_, R>) -> Result<R, PortError> {
        match call {
            Call::Publish { events } => self.publish(events, next()).await,
            _ => self.dice.around(call.name(), next()).await,
        }
    }
}

impl Adapter<Arc<MemoryBus>> {
    /// A publish: the plants publish what is left on the bus itself.
    async fn publish<R: std::any::Any>(
        &self,
        events: &[Settled],
        next: impl std::future::Future<Output = Result<R, PortError>>,
    ) -> Result<R, PortError> {
        // [`Plant::DropEvent`]: the first event of the world is answered published and never
        // sent (a bus adapter that reports entries it dropped).
        let next = match self.plant {
            Some(Plant::DropEvent) if !self.dice.once() && !events.is_empty() => {
                let mut rest = events.to_vec();
                rest.remove(0);
                let mut refused = self.store.publish(&rest).await?;
                for r in &mut refused {
                    r.index += 1;
                }
                return Ok(cast(refused));
            }
            // [`Plant::RefuseNewerValues`]: an events function of the old kind, which skipped
            // an item whose status it did not know: those events are answered published and
            // never sent.
            Some(Plant::RefuseNewerValues) => {
                let (at, kept): (Vec<usize>, Vec<Settled>) = events
                    .iter()
                    .cloned()
                    .enumerate()
                    .filter(|(_, e)| {
                        !e.newer_values
                            .iter()
                            .any(|v| *v == "outcome" || *v == "from")
                    })
                    .unzip();
                let mut refused = self.store.publish(&kept).await?;
                for r in &mut refused {
                    r.index = at[r.index];
                }
                return Ok(cast(refused));
            }
            _ => next,
        };
        self.dice
            .around(reminders_core::ports::events::OP_PUBLISH, next)
            .await
    }
}
