//! Provider health: the gate, the throttle (429) and the breaker (outage), as a delivery
//! meets them (docs/design.md, "Outages: the breaker" and "Provider gate"). One gate item per
//! provider partition holds both: how long the provider asked everyone to wait, and the breaker's
//! state.
//!
//! **What happens on a 429**, start to end:
//! 1. The provider adapter classifies the answer as `Throttled`, with the `Retry-After` it
//!    gave if any (the `reminders` crate's providers).
//! 2. The policy decides without spending the attempt budget: a delay at least until
//!    `Retry-After`, jittered, against the throttle budget
//!    ([`crate::policy::throttle`]: `ThrottleExhausted` once that runs out, `Expire` when the
//!    wait outlives freshness).
//! 3. The record writes the deferral (fenced, `throttle_count` + 1) and closes the gate for
//!    every worker until the provider's `Retry-After` ([`InFlight::close_gate`], here): this
//!    container's copy at once ([`GateCache`]), the gate item by one write. The breaker does
//!    not count a 429 (the provider is up; [`breaker`]), and a breaker probe answered 429
//!    ends with no reopening counted: its cool-down does not double.
//! 4. This batch's concurrency halves ([`next_limit`]), and grows back by one per delivery.
//! 5. Every later delivery of the partition, in any container, is held by visibility before
//!    its claim (no claim, no call, nothing spent), spread wider on each receive so that a
//!    backlog does not come back at once ([`admission`]); the first after the gate reopens
//!    sends.
//!
//! **An outage** (5xx, timeouts): each transient failure counts toward opening the breaker;
//! once open, deliveries are held as at a closed gate; after the cool-down one worker wins
//! the probe by a conditional write and sends ([`admission`]); a success closes the breaker, a
//! failure reopens it with the cool-down of the stored count of failed probes (the probe write
//! is won only at that count), and a failure that opened the partition or met it open spends
//! nothing ([`breaker`]; thresholds in [`crate::policy::BreakerPolicy`]).

mod admission;
mod breaker;
mod cache;

pub(in crate::consumer::steps) use admission::Admit;
pub(crate) use cache::GateCache;

use super::InFlight;
use crate::clock::Timestamp;
use crate::consumer::Metrics;
use crate::ports::{Gate, GatePartition, Ports};

/// The batch's concurrency after one record: halved by a 429, one more after a delivery, up
/// to `max`.
pub(in crate::consumer) fn next_limit(limit: usize, m: &Metrics, max: usize) -> usize {
    if m.deferred_provider > 0 {
        (limit / 2).max(1)
    } else if m.delivered > 0 {
        (limit + 1).min(max)
    } else {
        limit
    }
}

impl<P: Ports> InFlight<'_, P> {
    /// Close the provider partition; a failure here only costs other workers a 429 each.
    pub(in crate::consumer::steps) async fn close_gate(
        &self,
        partition: &GatePartition,
        until: Timestamp,
    ) {
        let c = self.consumer;
        let now = self.now();
        c.gates.learned(partition, now, until).await;
        if let Err(e) = c.ports.gate().throttle(partition, until).await {
            tracing::warn!(error = %e, partition = %partition.item_key(), "could not close the provider gate");
        }
    }
}
