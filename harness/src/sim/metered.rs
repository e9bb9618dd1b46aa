//! The consumer's DynamoDB calls, timed and admitted: each call of a batch costs its modelled
//! latency ([`LatencyModel`]) and passes through the throughput model ([`Dynamo`]), its SDK
//! retries' waits included; the batch's duration (its calls' time spread over the records it
//! runs at once) is what the event source mapping's concurrency pays for in [`super`]. The
//! counts come from the consumer's real path, not from a table of costs: whatever it calls,
//! the wrapper counts.

use std::sync::{Arc, Mutex};

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use reminders_core::clock::{Clock, ManualClock, Timestamp};
use reminders_core::domain::{
    AddressHash, DeliveryKey, Preferences, Reminder, ReminderId, ReminderStatus, SubscriberId,
    Suppression,
};
use reminders_core::ledger::DeliveryRecord;
use reminders_core::ports::{
    Cas, DuePage, DueQuery, Expected, Inserted, Ledger, Marked, PortError, ReminderStore,
};

use super::capacity::{Dynamo, Table};
use super::latency::LatencyModel;

/// The time the current batch's calls have taken, in milliseconds, and their count.
pub struct BatchMeter {
    model: LatencyModel,
    clock: ManualClock,
    dynamo: Arc<Dynamo>,
    state: Mutex<(f64, u64, StdRng)>,
}

impl BatchMeter {
    pub fn new(model: LatencyModel, clock: ManualClock, dynamo: Arc<Dynamo>, seed: u64) -> Self {
        Self {
            model,
            clock,
            dynamo,
            state: Mutex::new((0.0, 0, StdRng::seed_from_u64(seed ^ 0xba7c))),
        }
    }

    /// A new batch starts: its calls' time so far is zero.
    pub fn start(&self) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        s.0 = 0.0;
        s.1 = 0;
    }

    /// The batch's calls: total milliseconds and how many DynamoDB requests.
    pub fn spent(&self) -> (f64, u64) {
        let s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        (s.0, s.1)
    }

    /// Charge `ms` (another stage's latency, the provider's) to the batch.
    pub fn charge(&self, p50_ms: f64, p99_ms: f64) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let ms = sample(&mut s.2, p50_ms, p99_ms);
        s.0 += ms;
    }

    fn call(
        &self,
        table: Table,
        reads: f64,
        writes: f64,
        op: &'static str,
    ) -> Result<(), PortError> {
        let at = self.clock.now().as_millis();
        let admitted = self.dynamo.call(table, None, reads, writes, at);
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let latency = sample(&mut s.2, self.model.dynamo_p50_ms, self.model.dynamo_p99_ms);
        s.1 += 1;
        match admitted {
            Ok(waited) => {
                s.0 += latency + waited;
                Ok(())
            }
            Err(waited) => {
                s.0 += latency + waited;
                Err(PortError::Throttled {
                    op,
                    message: "modelled: throughput exceeded after the SDK's retries".into(),
                })
            }
        }
    }
}

/// p50 (±50%) most of the time, p99 one call in fifty (the scheduler's model, latency.rs).
fn sample(rng: &mut StdRng, p50: f64, p99: f64) -> f64 {
    if rng.random_bool(0.02) {
        p99
    } else {
        p50 * rng.random_range(0.5..1.5)
    }
}

/// A port of the consumer, metered by its batch's [`BatchMeter`].
pub struct Metered<T> {
    pub inner: T,
    pub meter: Arc<BatchMeter>,
}

impl<T: Ledger> Ledger for Metered<T> {
    async fn get(&self, key: &DeliveryKey) -> Result<Option<DeliveryRecord>, PortError> {
        self.meter.call(Table::Ledger, 1.0, 0.0, "ledger get")?;
        self.inner.get(key).await
    }
    async fn put_if(&self, record: &DeliveryRecord, expected: Expected) -> Result<Cas, PortError> {
        // A refused condition consumes its write unit too.
        self.meter.call(Table::Ledger, 0.0, 1.0, "ledger put")?;
        self.inner.put_if(record, expected).await
    }
    async fn delete_if(&self, key: &DeliveryKey, expected: Expected) -> Result<Cas, PortError> {
        self.meter.call(Table::Ledger, 0.0, 1.0, "ledger delete")?;
        self.inner.delete_if(key, expected).await
    }
}

impl<T: ReminderStore> Metered<T> {
    fn read(&self, op: &'static str) -> Result<(), PortError> {
        self.meter.call(Table::Reminders, 1.0, 0.0, op)
    }
    fn write(&self, op: &'static str) -> Result<(), PortError> {
        self.meter.call(Table::Reminders, 0.0, 1.0, op)
    }
}

impl<T: ReminderStore> ReminderStore for Metered<T> {
    fn shards(&self) -> u32 {
        self.inner.shards()
    }
    async fn insert(&self, r: &Reminder) -> Result<Inserted, PortError> {
        self.write("insert")?;
        self.inner.insert(r).await
    }
    async fn replace(&self, r: &Reminder, v: u64, st: ReminderStatus) -> Result<Marked, PortError> {
        self.write("replace")?;
        self.inner.replace(r, v, st).await
    }
    async fn get(&self, id: &ReminderId) -> Result<Option<Reminder>, PortError> {
        self.read("get")?;
        self.inner.get(id).await
    }
    async fn query_due(&self, q: &DueQuery<'_>) -> Result<DuePage, PortError> {
        self.inner.query_due(q).await
    }
    async fn extend_freshness(
        &self,
        id: &ReminderId,
        v: u64,
        fresh_until: Timestamp,
        expires_at: i64,
    ) -> Result<Marked, PortError> {
        self.write("extend_freshness")?;
        self.inner
            .extend_freshness(id, v, fresh_until, expires_at)
            .await
    }
    async fn sweep_index(
        &self,
        after: Option<&reminders_core::ports::SweepCursor>,
        limit: u32,
    ) -> Result<reminders_core::ports::SweepPage, PortError> {
        self.inner.sweep_index(after, limit).await
    }
    async fn quarantine(&self, key: &str, reason: &str) -> Result<Marked, PortError> {
        self.write("quarantine")?;
        self.inner.quarantine(key, reason).await
    }
    async fn mark(&self, id: &ReminderId, v: u64, to: ReminderStatus) -> Result<Marked, PortError> {
        self.write("mark")?;
        self.inner.mark(id, v, to).await
    }
    async fn preferences(
        &self,
        subscriber: &SubscriberId,
    ) -> Result<Option<Preferences>, PortError> {
        self.read("preferences")?;
        self.inner.preferences(subscriber).await
    }
    async fn put_preferences(
        &self,
        subscriber: &SubscriberId,
        prefs: &Preferences,
    ) -> Result<(), PortError> {
        self.write("put_preferences")?;
        self.inner.put_preferences(subscriber, prefs).await
    }
    async fn suppression(&self, address: &AddressHash) -> Result<Option<Suppression>, PortError> {
        self.read("suppression")?;
        self.inner.suppression(address).await
    }
    async fn put_suppression(&self, s: &Suppression) -> Result<(), PortError> {
        self.write("put_suppression")?;
        self.inner.put_suppression(s).await
    }
}
