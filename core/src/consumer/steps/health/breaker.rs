//! The breaker's bookkeeping after a send (docs/design.md, "Outages: the breaker" and "Provider
//! gate"): a transient failure or timeout counts toward opening; a delivery or a rejection shows
//! the provider up, and closes what was open (a 429 does neither). A probe that fails reopens the
//! partition, with the cool-down of the failed-probe count its write was won at; a probe answered
//! 429 ends with no reopening counted, and the 429 gate holds the partition. A failure that opened
//! the partition or met it open is held with nothing spent: the failure was the outage's.

use std::time::Duration;

use super::super::{log_transition, Action, Delivery, InFlight, Lease};
use crate::clock::Timestamp;
use crate::delivery::{transition, Written};
use crate::ledger::{Change, Ctx};
use crate::policy::Outcome;
use crate::ports::gate::{BreakerChange, GateState, OpenBreaker};
use crate::ports::{Gate, GatePartition, PortError, Ports};

impl<P: Ports> InFlight<'_, P> {
    /// The breaker's bookkeeping for the provider's answer; `Some` when a failed probe holds
    /// the delivery (the caller writes nothing more).
    pub(in crate::consumer::steps) async fn breaker_learns(
        &mut self,
        d: &Delivery,
        lease: &Lease,
        outcome: &Outcome,
    ) -> Result<Option<Action>, PortError> {
        let now = self.now();
        let down = matches!(
            outcome,
            Outcome::Transient { .. } | Outcome::Ambiguous { .. }
        );
        // A 429 shows a provider shedding load, not one that recovered: it neither counts
        // nor closes (the 429 gate handles it). Nor is it a failed probe: the provider
        // answered, so the probe ends with no reopening, the next one after its Retry-After.
        if matches!(outcome, Outcome::Throttled { .. } | Outcome::Blocked { .. }) {
            if let Some(probe_until) = lease.probe {
                self.release_probe(&d.partition, probe_until, outcome.retry_after(), now)
                    .await;
            }
            return Ok(None);
        }
        if !down {
            self.provider_up(&d.partition, lease.probe, now).await;
            return Ok(None);
        }
        if let Some(probe_until) = lease.probe {
            self.reopen(&d.partition, probe_until, now).await;
            // The outage's failure: held, nothing spent (unless the ambiguous rule must decide).
            let until = self.reopened_until(d, now).await;
            if let (true, Some(until)) = (self.holdable(lease, outcome), until) {
                return self
                    .probe_failed(d, lease, outcome, until, now)
                    .await
                    .map(Some);
            }
            return Ok(None);
        }
        let open_until = self.count_failure(&d.partition, now).await;
        // A failure that opened the partition, or met it open, is the outage's: held with
        // nothing spent, like a failed probe.
        if let (true, Some(until)) = (self.holdable(lease, outcome), open_until) {
            return self
                .probe_failed(d, lease, outcome, until, now)
                .await
                .map(Some);
        }
        Ok(None)
    }

    /// Whether the outage may hold this failed send with nothing spent: a failure before the
    /// request was written, or a timeout that the ambiguous rule would resend with the same
    /// key anyway (the provider deduplicates). Otherwise the ambiguous rule decides.
    fn holdable(&self, lease: &Lease, outcome: &Outcome) -> bool {
        match outcome {
            Outcome::Transient { .. } => true,
            Outcome::Ambiguous { .. } => {
                let policy = lease.record.policy().unwrap_or(&self.consumer.cfg.policy);
                policy.may_resend_ambiguous(self.idempotent())
            }
            _ => false,
        }
    }

    /// The provider answered: close what was open, reset a run of failures.
    async fn provider_up(
        &mut self,
        partition: &GatePartition,
        probe: Option<Timestamp>,
        now: Timestamp,
    ) {
        let c = self.consumer;
        if let Some(token) = probe {
            c.gates.probed(partition, token);
        }
        let probed = probe.is_some();
        let known = c.gates.state(c.ports.gate(), partition, now).await;
        let dirty = known.is_ok_and(|s| s.failures > 0 || s.breaker.is_some());
        if !(probed || dirty) {
            return;
        }
        match c
            .ports
            .gate()
            .breaker(partition, BreakerChange::Close)
            .await
        {
            Ok(closed) => {
                if closed && probed {
                    tracing::info!(partition = %partition.item_key(), "breaker closed: the probe succeeded");
                }
                self.learn(partition, now, BreakerChange::Close).await;
            }
            Err(e) => {
                tracing::warn!(error = %e, partition = %partition.item_key(), "could not close the breaker")
            }
        }
    }

    /// One more failure in a row; at the threshold the partition opens for every worker.
    /// Answers until when the partition is open, if this failure opened it or found it open.
    async fn count_failure(
        &mut self,
        partition: &GatePartition,
        now: Timestamp,
    ) -> Option<Timestamp> {
        let c = self.consumer;
        let gate = c.ports.gate();
        let state = match gate.failed(partition, now).await {
            Ok(state) => state,
            Err(e) => {
                tracing::warn!(error = %e, partition = %partition.item_key(), "could not count a provider failure");
                c.gates.forget(partition).await;
                return self.known_open_until(partition, now).await;
            }
        };
        // The item as our write left it: strongly consistent, and the copy takes it whole.
        c.gates.set(partition, now, state).await;
        let soonest = now.plus(c.cfg.breaker.cooldown);
        if let Some(open) = state.breaker {
            return Some(open.until.max(soonest));
        }
        let (failures, run) = (
            state.failures,
            state.run_since.map_or(Duration::ZERO, |s| now.since(s)),
        );
        if !c.cfg.breaker.trips(failures, run) {
            return None;
        }
        let until = now.plus(c.cfg.breaker.cooldown(0, self.rng));
        let change = BreakerChange::Open { now, until };
        match gate.breaker(partition, change).await {
            Ok(true) => {
                self.m.breaker_opened += 1;
                self.learn(partition, now, change).await;
                tracing::warn!(partition = %partition.item_key(), failures, "breaker opened: the provider looks down");
                Some(until)
            }
            // Opened by another worker between our count and this write.
            Ok(false) => {
                c.gates.forget(partition).await;
                Some(
                    self.known_open_until(partition, now)
                        .await
                        .unwrap_or(soonest),
                )
            }
            Err(e) => {
                tracing::warn!(error = %e, partition = %partition.item_key(), "could not open the breaker");
                c.gates.forget(partition).await;
                self.known_open_until(partition, now).await
            }
        }
    }

    /// Until when this worker's copy of the gate says the partition is open, if it does. A
    /// gate it cannot read is no evidence of an outage: the failure is charged as usual (a
    /// hold would be a provider call outside the attempt budget).
    async fn known_open_until(
        &self,
        partition: &GatePartition,
        now: Timestamp,
    ) -> Option<Timestamp> {
        let c = self.consumer;
        let soonest = now.plus(c.cfg.breaker.cooldown);
        let state = c.gates.state(c.ports.gate(), partition, now).await.ok()?;
        state.breaker.map(|b| b.until.max(soonest))
    }

    /// Our probe failed: open again (fenced by our probe), a longer cool-down than before:
    /// the one after the count our probe was won at, which is the stored count (no other
    /// write changes it while our probe holds).
    async fn reopen(&mut self, partition: &GatePartition, probe_until: Timestamp, now: Timestamp) {
        let c = self.consumer;
        let reopens = match c.gates.probed(partition, probe_until) {
            Some(won_at) => won_at + 1,
            // Not won by this container (cannot happen: the lease's probe was won here).
            None => {
                let known = c.gates.state(c.ports.gate(), partition, now).await;
                known
                    .ok()
                    .and_then(|s| s.breaker)
                    .map_or(0, |b| b.reopens + 1)
            }
        };
        let until = now.plus(c.cfg.breaker.cooldown(reopens, self.rng));
        let change = BreakerChange::Reopen { probe_until, until };
        match c.ports.gate().breaker(partition, change).await {
            Ok(true) => {
                self.m.breaker_opened += 1;
                self.learn(partition, now, change).await;
            }
            Ok(false) => c.gates.forget(partition).await,
            Err(e) => {
                tracing::warn!(error = %e, partition = %partition.item_key(), "could not reopen the breaker")
            }
        }
    }

    /// Our probe was answered 429 (or the partition refused): the provider is up but sheds
    /// load. The probe ends, fenced by its token, with no reopening counted; the next probe
    /// waits for the provider's `Retry-After` (which the 429 gate holds every worker to), or
    /// one first cool-down when it gave none.
    async fn release_probe(
        &mut self,
        partition: &GatePartition,
        probe_until: Timestamp,
        retry_after: Option<Timestamp>,
        now: Timestamp,
    ) {
        let c = self.consumer;
        c.gates.probed(partition, probe_until);
        // Without a Retry-After (or when the delivery is not retried, so no 429 gate closes),
        // the next probe waits one first cool-down, never doubled: not at once against a
        // provider shedding load.
        let until = retry_after.map_or(now.plus(c.cfg.breaker.cooldown), |at| at.max(now));
        let change = BreakerChange::Release { probe_until, until };
        match c.ports.gate().breaker(partition, change).await {
            Ok(true) => self.learn(partition, now, change).await,
            Ok(false) => c.gates.forget(partition).await,
            Err(e) => {
                // Its claim on the probe lapses by itself; the next probe after that.
                tracing::warn!(error = %e, partition = %partition.item_key(), "could not release the breaker probe")
            }
        }
    }

    /// When the breaker reopened for lets the next probe in, as this worker's copy knows it.
    async fn reopened_until(&self, d: &Delivery, now: Timestamp) -> Option<Timestamp> {
        let c = self.consumer;
        let soonest = now.plus(c.cfg.breaker.cooldown);
        let known = c.gates.state(c.ports.gate(), &d.partition, now).await;
        // Unreadable: the probe failed all the same; the next look after a cool-down decides.
        let at = known
            .ok()
            .and_then(|s| s.breaker)
            .map_or(soonest, |b| b.until.max(soonest));
        Some(at)
    }

    /// Hold the delivery whose send the outage failed until `until`, nothing spent (fenced by
    /// our lease).
    async fn probe_failed(
        &mut self,
        d: &Delivery,
        lease: &Lease,
        outcome: &Outcome,
        until: Timestamp,
        now: Timestamp,
    ) -> Result<Action, PortError> {
        // Back when the gate reopens while it may still be sent; otherwise once it is surely
        // stale, when its intake expires it (no attempt promised that cannot happen).
        let fresh_until = d.reminder.fresh_until;
        let last = crate::domain::reminder::last_sendable(fresh_until);
        let (at, eligible) = if until <= last {
            (until, until)
        } else {
            (
                crate::domain::reminder::surely_stale_at(fresh_until),
                fresh_until,
            )
        };
        let change = Change::Hold {
            token: lease.token.clone(),
            next_eligible_at: eligible,
            error: Some(crate::policy::breaker::HELD_BY_BREAKER.into()),
            quiet_hours: false,
            // A timeout after the request was written may have reached the person.
            maybe_sent: matches!(outcome, Outcome::Ambiguous { .. }),
        };
        let ctx: Ctx = self.ctx(&d.msg, d.reminder.fresh_until, now);
        let ledger = self.consumer.ports.ledger();
        match transition(ledger, Some(lease.record.clone()), change, &ctx).await? {
            Written::Applied(held) => {
                self.m.held_breaker += 1;
                log_transition(
                    &d.msg,
                    held.attempt_count(),
                    "probe_failed",
                    "hold",
                    at.since(now),
                );
                self.hold(&d.msg, at, now).await
            }
            // Our lease was taken over: the new holder's handle decides.
            Written::Refused { .. } => Ok(Action::Leave),
        }
    }

    /// Apply a breaker write this worker made to its own copy of the gate.
    pub(super) async fn learn(
        &self,
        partition: &GatePartition,
        now: Timestamp,
        change: BreakerChange,
    ) {
        let c = self.consumer;
        c.gates
            .update(partition, now, |s: &GateState| match change {
                // The copy may not have seen the item's state; open from what we wrote.
                BreakerChange::Open { now, until } => Some(GateState {
                    breaker: Some(OpenBreaker {
                        opened_at: now,
                        until,
                        reopens: 0,
                        probe_until: None,
                    }),
                    ..*s
                }),
                // A close leaves the item closed at zero, applied or refused (refused: it
                // already was).
                BreakerChange::Close => Some(BreakerChange::Close.apply(s).unwrap_or(*s)),
                // Applied to the item but refused by the copy: the copy is behind the item.
                other => other.apply(s),
            })
            .await;
    }
}
