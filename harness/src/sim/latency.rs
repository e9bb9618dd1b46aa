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
use super::seed::Stream;

use std::borrow::Cow;

use crate::ManualClock;
use reminders_core::clock::{Clock, Timestamp};
use reminders_core::domain::due_shard;
use reminders_core::ports::{DuePage, OutgoingMessage, PortError};

use crate::around::{Answer, Around, Call, Hook};

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
    /// On `base`, latencies drawn from the simulation seeded with `seed` (its stream
    /// [`Stream::SchedulerCalls`]).
    pub fn new(base: ManualClock, model: LatencyModel, seed: u64) -> Self {
        Self {
            base,
            spent_us: Arc::default(),
            model,
            rng: Arc::new(Mutex::new(StdRng::seed_from_u64(
                Stream::SchedulerCalls.of(seed),
            ))),
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

/// The scheduler run's calls, timed by its [`RunClock`]: each costs its modelled latency
/// before it is made, and the due index's and the table's throughput admit it.
pub struct RunTimer {
    pub clock: RunClock,
    /// Groups the scheduler keeps in flight.
    pub groups: f64,
    /// DynamoDB's throughput: the due index's partitions and the reminders table.
    pub dynamo: Arc<Dynamo>,
    /// The due index's shards (a mark's entry leaves its shard's partition).
    pub shards: u32,
}

/// A port of the scheduler's run, timed by its [`RunTimer`].
pub type Timed<T> = Around<T, RunTimer>;

impl RunTimer {
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

impl Hook for RunTimer {
    async fn before(&self, call: &Call<'_>) -> Result<(), PortError> {
        match call {
            Call::SweepIndex { .. }
            | Call::Preferences { .. }
            | Call::Suppression { .. }
            | Call::PutSuppression { .. } => self.clock.dynamo(1.0),
            Call::QueryDue { .. } | Call::Quarantine { .. } => self.clock.dynamo(QUERIES_IN_FLIGHT),
            Call::Mark { id, .. } => {
                // Ten marks of a group at once, `groups` groups at once.
                let in_flight = self.groups * 10.0;
                self.clock.dynamo(in_flight);
                self.clock.cpu(1, 2.0 / 3.0);
                // One conditional write, which also takes the entry out of its due-index
                // partition (one write there too; an index that throttles fails the write).
                let shard = u64::from(due_shard(id, self.shards));
                self.admit(Table::DueIndex, Some(shard), (0.0, 1.0), in_flight, "mark")?;
                self.admit(Table::Reminders, None, (0.0, 1.0), in_flight, "mark")?;
            }
            Call::SendBatch { .. } => self.clock.sqs(self.groups),
            _ => {}
        }
        Ok(())
    }

    /// A due page read is admitted by its partition's throughput once its size is known.
    fn after(&self, call: &Call<'_>, answer: Answer<'_>) -> Result<(), PortError> {
        let (Call::QueryDue { query }, Ok(page)) = (call, answer) else {
            return Ok(());
        };
        let Some(page) = page.downcast_ref::<DuePage>() else {
            return Ok(());
        };
        // An eventually consistent query: half a unit per 4 KB of entries read.
        let bytes = page.items.len().max(1) as f64 * ddb::DUE_INDEX_ENTRY_BYTES;
        let units = (bytes / ddb::READ_UNIT_BYTES).ceil() * 0.5;
        let shard = Some(u64::from(query.shard));
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
        Ok(())
    }

    fn splits_compound_reads(&self) -> bool {
        true
    }

    /// The scheduler computed DelaySeconds on its own clock; the queue counts from the
    /// simulation's, so the time the run spent is added: a message is visible when a real
    /// run would have sent it, plus its delay.
    fn batch<'m>(&self, messages: &'m [OutgoingMessage]) -> Cow<'m, [OutgoingMessage]> {
        let spent = reminders_core::clock::ceil_secs(self.clock.spent());
        Cow::Owned(
            messages
                .iter()
                .map(|m| OutgoingMessage {
                    delay_secs: (u64::from(m.delay_secs) + spent)
                        .min(reminders_core::policy::MAX_DELAY_SECS)
                        as u32,
                    ..m.clone()
                })
                .collect(),
        )
    }
}
