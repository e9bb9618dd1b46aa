//! The scheduler's run as the stack runs it, timed by a model (docs/design.md, "Scheduler shares":
//! the planner answers for the stack as deployed). The simulation's calls are instantaneous; here
//! each DynamoDB and SQS call of a scheduler run costs its modelled latency, divided by the calls
//! of its kind the scheduler keeps in flight (8 shard queries, 8 groups each with one batch per
//! channel, 10 marks per group), and each reminder costs the scheduler's CPU time, scaled to
//! the function's memory. The run sees that time on its own clock ([`RunClock`]), so its own
//! deadline logic stops it where a real run would, and the messages it sends become visible
//! when a real run would have sent them.
//!
//! Figures (defaults): DynamoDB p50 5 ms, p99 25 ms; SQS p50 10 ms, p99 30 ms (2% of calls
//! take the p99); 387 µs of CPU per reminder at one vCPU (2,585 reminders per CPU second,
//! BENCHMARKS.md, the slowest of three runs), on the scheduler's 1,769 MB (one vCPU).

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use super::capacity::{Dynamo, Table};
use super::limits::dynamo as ddb;

use reminders_core::clock::{Clock, ManualClock, Timestamp};
use reminders_core::domain::{due_shard, Channel, Reminder, ReminderId, ReminderStatus};
use reminders_core::ports::{
    DeliveryQueue, DuePage, DueQuery, Inserted, Marked, OutgoingMessage, PortError, QueueDepth,
    ReceivedMessage, ReminderStore, SendFailure,
};

/// Modelled AWS latency and scheduler CPU.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LatencyModel {
    pub dynamo_p50_ms: f64,
    pub dynamo_p99_ms: f64,
    pub sqs_p50_ms: f64,
    pub sqs_p99_ms: f64,
    /// Scheduler CPU per reminder taken, at one vCPU.
    pub cpu_us_per_reminder: f64,
    /// The scheduler's vCPU share (Lambda: memory / 1,769 MB).
    pub vcpu: f64,
}

impl Default for LatencyModel {
    fn default() -> Self {
        Self {
            dynamo_p50_ms: 5.0,
            dynamo_p99_ms: 25.0,
            sqs_p50_ms: 10.0,
            sqs_p99_ms: 30.0,
            cpu_us_per_reminder: 387.0,
            vcpu: f64::from(reminders_core::scheduler::config::FUNCTION_MEMORY_MB) / 1769.0,
        }
    }
}

impl LatencyModel {
    /// No latency and no CPU: the scheduler's ceiling removed (what the planner did before).
    pub fn none() -> Self {
        Self {
            dynamo_p50_ms: 0.0,
            dynamo_p99_ms: 0.0,
            sqs_p50_ms: 0.0,
            sqs_p99_ms: 0.0,
            cpu_us_per_reminder: 0.0,
            vcpu: 1.0,
        }
    }
}

/// A scheduler run's own clock: the simulation's time plus what the run has spent so far.
#[derive(Clone)]
pub struct RunClock {
    base: ManualClock,
    spent_us: Arc<AtomicI64>,
    model: LatencyModel,
    rng: Arc<Mutex<StdRng>>,
}

impl RunClock {
    pub fn new(base: ManualClock, model: LatencyModel, seed: u64) -> Self {
        Self {
            base,
            spent_us: Arc::default(),
            model,
            rng: Arc::new(Mutex::new(StdRng::seed_from_u64(seed))),
        }
    }

    /// A new run starts now.
    pub fn start_run(&self) {
        self.spent_us.store(0, Ordering::SeqCst);
    }

    /// What the run has spent so far.
    pub fn spent(&self) -> Duration {
        Duration::from_micros(self.spent_us.load(Ordering::SeqCst).max(0) as u64)
    }

    fn charge_us(&self, us: f64) {
        self.spent_us
            .fetch_add(us.max(0.0).round() as i64, Ordering::SeqCst);
    }

    /// One call: p50 (±50%) most of the time, p99 one time in fifty; `in_flight` such calls
    /// overlap.
    fn call(&self, p50_ms: f64, p99_ms: f64, in_flight: f64) {
        let ms = {
            let mut rng = self.rng.lock().unwrap_or_else(|e| e.into_inner());
            if rng.random_bool(0.02) {
                p99_ms
            } else {
                p50_ms * rng.random_range(0.5..1.5)
            }
        };
        self.charge_us(ms * 1_000.0 / in_flight.max(1.0));
    }

    fn dynamo(&self, in_flight: f64) {
        self.call(
            self.model.dynamo_p50_ms,
            self.model.dynamo_p99_ms,
            in_flight,
        );
    }

    fn sqs(&self, in_flight: f64) {
        self.call(self.model.sqs_p50_ms, self.model.sqs_p99_ms, in_flight);
    }

    /// A wait of `ms` (the SDK's backoff after a throttle) of one of `in_flight` calls.
    fn wait(&self, ms: f64, in_flight: f64) {
        self.charge_us(ms * 1_000.0 / in_flight.max(1.0));
    }

    /// `share` of the CPU of `reminders` reminders.
    fn cpu(&self, reminders: usize, share: f64) {
        let us = self.model.cpu_us_per_reminder / self.model.vcpu.max(0.01);
        self.charge_us(us * share * reminders as f64);
    }
}

impl Clock for RunClock {
    fn now(&self) -> Timestamp {
        self.base.now().plus(self.spent())
    }
    async fn sleep(&self, d: Duration) {
        self.charge_us(d.as_micros() as f64);
    }
}

/// Shard queries, groups and marks the scheduler keeps in flight (scheduler/scan.rs,
/// dispatch.rs: 8 queries; `send_concurrency` groups, each one batch per channel at once and
/// its marks at once).
const QUERIES_IN_FLIGHT: f64 = 8.0;

/// A port of the scheduler's run, timed by its [`RunClock`].
pub struct Timed<T> {
    pub inner: T,
    pub clock: RunClock,
    /// Groups the scheduler keeps in flight.
    pub groups: f64,
    /// DynamoDB's throughput: the due index's partitions and the reminders table.
    pub dynamo: Arc<Dynamo>,
}

impl<T> Timed<T> {
    /// Admit a call on `table` at the run's time, paying the SDK's waits: `Throttled` once
    /// its attempts are spent.
    fn admit(
        &self,
        table: Table,
        key: Option<u64>,
        units: (f64, f64),
        in_flight: f64,
        op: &'static str,
    ) -> Result<(), PortError> {
        let at = self.clock.now().as_millis();
        match self.dynamo.call(table, key, units.0, units.1, at) {
            Ok(waited) => {
                self.clock.wait(waited, in_flight);
                Ok(())
            }
            Err(waited) => {
                self.clock.wait(waited, in_flight);
                Err(PortError::Throttled {
                    op,
                    message: "modelled: throughput exceeded after the SDK's retries".into(),
                })
            }
        }
    }
}

impl<T: ReminderStore> ReminderStore for Timed<T> {
    fn shards(&self) -> u32 {
        self.inner.shards()
    }
    async fn sweep_index(
        &self,
        after: Option<&reminders_core::ports::SweepCursor>,
        limit: u32,
    ) -> Result<reminders_core::ports::SweepPage, PortError> {
        self.clock.dynamo(1.0);
        self.inner.sweep_index(after, limit).await
    }
    async fn insert(&self, r: &Reminder) -> Result<Inserted, PortError> {
        self.inner.insert(r).await
    }
    async fn replace(&self, r: &Reminder, v: u64, st: ReminderStatus) -> Result<Marked, PortError> {
        self.inner.replace(r, v, st).await
    }
    async fn get(&self, id: &ReminderId) -> Result<Option<Reminder>, PortError> {
        self.inner.get(id).await
    }
    async fn query_due(&self, q: &DueQuery<'_>) -> Result<DuePage, PortError> {
        self.clock.dynamo(QUERIES_IN_FLIGHT);
        let page = self.inner.query_due(q).await?;
        // An eventually consistent query: half a unit per 4 KB of entries read.
        let bytes = page.items.len().max(1) as f64 * ddb::DUE_INDEX_ENTRY_BYTES;
        let units = (bytes / ddb::READ_UNIT_BYTES).ceil() * 0.5;
        let shard = Some(u64::from(q.shard));
        self.admit(
            Table::DueIndex,
            shard,
            (units, 0.0),
            QUERIES_IN_FLIGHT,
            "query_due",
        )?;
        // A third of a reminder's CPU is decoding its index item; the rest is its message
        // and its mark (signing and serializing a request per reminder).
        self.clock.cpu(page.items.len(), 1.0 / 3.0);
        Ok(page)
    }
    async fn extend_freshness(
        &self,
        id: &ReminderId,
        v: u64,
        fresh_until: Timestamp,
        expires_at: i64,
    ) -> Result<Marked, PortError> {
        self.inner
            .extend_freshness(id, v, fresh_until, expires_at)
            .await
    }
    async fn quarantine(&self, key: &str, reason: &str) -> Result<Marked, PortError> {
        self.clock.dynamo(QUERIES_IN_FLIGHT);
        self.inner.quarantine(key, reason).await
    }
    async fn mark(&self, id: &ReminderId, v: u64, to: ReminderStatus) -> Result<Marked, PortError> {
        // Ten marks of a group at once, `groups` groups at once.
        let in_flight = self.groups * 10.0;
        self.clock.dynamo(in_flight);
        self.clock.cpu(1, 2.0 / 3.0);
        // One conditional write, which also takes the entry out of its due-index partition
        // (one write there too; an index that throttles fails the write).
        let shard = u64::from(due_shard(id, self.inner.shards()));
        self.admit(Table::DueIndex, Some(shard), (0.0, 1.0), in_flight, "mark")?;
        self.admit(Table::Reminders, None, (0.0, 1.0), in_flight, "mark")?;
        self.inner.mark(id, v, to).await
    }
    async fn preferences(
        &self,
        subscriber: &reminders_core::domain::SubscriberId,
    ) -> Result<Option<reminders_core::domain::Preferences>, PortError> {
        self.clock.dynamo(1.0);
        self.inner.preferences(subscriber).await
    }
    async fn put_preferences(
        &self,
        subscriber: &reminders_core::domain::SubscriberId,
        prefs: &reminders_core::domain::Preferences,
    ) -> Result<(), PortError> {
        self.inner.put_preferences(subscriber, prefs).await
    }
    async fn suppression(
        &self,
        address: &reminders_core::domain::AddressHash,
    ) -> Result<Option<reminders_core::domain::Suppression>, PortError> {
        self.clock.dynamo(1.0);
        self.inner.suppression(address).await
    }
    async fn put_suppression(
        &self,
        s: &reminders_core::domain::Suppression,
    ) -> Result<(), PortError> {
        self.clock.dynamo(1.0);
        self.inner.put_suppression(s).await
    }
}

impl<T: DeliveryQueue> DeliveryQueue for Timed<T> {
    async fn send_batch(
        &self,
        channel: Channel,
        messages: &[OutgoingMessage],
    ) -> Result<Vec<SendFailure>, PortError> {
        self.clock.sqs(self.groups);
        // The scheduler computed DelaySeconds on its own clock; the queue counts from the
        // simulation's, so the time the run spent is added: a message is visible when a real
        // run would have sent it, plus its delay.
        let spent = reminders_core::clock::ceil_secs(self.clock.spent());
        let shifted: Vec<OutgoingMessage> = messages
            .iter()
            .map(|m| OutgoingMessage {
                delay_secs: (u64::from(m.delay_secs) + spent)
                    .min(reminders_core::policy::MAX_DELAY_SECS) as u32,
                ..m.clone()
            })
            .collect();
        self.inner.send_batch(channel, &shifted).await
    }
    async fn change_visibility(&self, c: Channel, h: &str, secs: u32) -> Result<(), PortError> {
        self.inner.change_visibility(c, h, secs).await
    }
    async fn delete(&self, c: Channel, h: &str) -> Result<(), PortError> {
        self.inner.delete(c, h).await
    }
    async fn receive(
        &self,
        c: Channel,
        max: u32,
        visibility_secs: u32,
    ) -> Result<Vec<ReceivedMessage>, PortError> {
        self.inner.receive(c, max, visibility_secs).await
    }
    async fn depth(&self, c: Channel) -> Result<QueueDepth, PortError> {
        self.inner.depth(c).await
    }
}
