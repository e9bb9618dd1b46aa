//! The consumer's DynamoDB calls, timed and admitted: each call of a batch costs its modelled
//! latency ([`LatencyModel`]) and passes through the throughput model ([`Dynamo`]), its SDK
//! retries' waits included; the batch's duration (its calls' time spread over the records it
//! runs at once) is what the event source mapping's concurrency pays for in [`super`]. The
//! counts come from the consumer's real path, not from a table of costs: whatever it calls,
//! the wrapper counts.

use std::sync::{Arc, Mutex};

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use crate::ManualClock;
use reminders_core::clock::Clock;
use reminders_core::ports::PortError;

use crate::around::{Around, Call, Hook};

use super::capacity::{Dynamo, Table};
use super::latency::LatencyModel;
use super::seed::Stream;

/// The time the current batch's calls have taken, in milliseconds, and their count.
pub struct BatchMeter {
    model: LatencyModel,
    clock: ManualClock,
    dynamo: Arc<Dynamo>,
    state: Mutex<(f64, u64, StdRng)>,
}

impl BatchMeter {
    /// Latencies drawn from the simulation seeded with `seed` (its stream
    /// [`Stream::ConsumerCalls`]).
    pub fn new(model: LatencyModel, clock: ManualClock, dynamo: Arc<Dynamo>, seed: u64) -> Self {
        Self {
            model,
            clock,
            dynamo,
            state: Mutex::new((
                0.0,
                0,
                StdRng::seed_from_u64(Stream::ConsumerCalls.of(seed)),
            )),
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

/// The consumer's ports, each call metered by its batch's [`BatchMeter`] before it is made.
/// The compound reads are the trait's single reads, each metered: the model's cost per read.
impl Hook for BatchMeter {
    async fn before(&self, call: &Call<'_>) -> Result<(), PortError> {
        use Call::*;
        let (table, write) = match call {
            LedgerGet { .. } => (Table::Ledger, false),
            // A refused condition consumes its write unit too.
            PutIf { .. } | DeleteIf { .. } => (Table::Ledger, true),
            Get { .. } | Preferences { .. } | Suppression { .. } => (Table::Reminders, false),
            Insert { .. }
            | Replace { .. }
            | ExtendFreshness { .. }
            | Quarantine { .. }
            | Mark { .. } => (Table::Reminders, true),
            PutPreferences { .. } | PutSuppression { .. } => (Table::Reminders, true),
            _ => return Ok(()),
        };
        let (reads, writes) = if write { (0.0, 1.0) } else { (1.0, 0.0) };
        self.call(table, reads, writes, call.name())
    }

    fn splits_compound_reads(&self) -> bool {
        true
    }
}

/// A port of the consumer, metered by its batch's [`BatchMeter`].
pub type Metered<T> = Around<T, Arc<BatchMeter>>;
