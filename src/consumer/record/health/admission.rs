//! The provider gate before a claim, and the breaker's bookkeeping after a send (DESIGN §5–6).
//!
//! Before: a throttled partition, or an open breaker, holds the delivery by visibility with no
//! claim, no provider call and no attempt spent; once the cool-down is over, one worker wins
//! the probe by a conditional write and sends. After: a transient failure or timeout counts
//! toward opening; a delivery or a rejection shows the provider up, and closes what was open
//! (a 429 does neither). A probe that fails reopens the partition, and a failure that opened
//! the partition or met it open is held with nothing spent: the failure was the outage's.

use std::time::Duration;

use rand::RngExt;

use super::super::{log_transition, Action, Delivery, Lease, Record, Step};
use crate::clock::Timestamp;
use crate::delivery::{transition, Written};
use crate::ledger::{Change, Ctx};
use crate::policy::Outcome;
use crate::ports::gate::{BreakerChange, GateState, OpenBreaker};
use crate::ports::{Gate, GatePartition, PortError, Ports};

/// What the gate lets this delivery do now.
pub(in crate::consumer::record) enum Admit {
    /// Send; `half_open` when the breaker lets one probe through (won right before the send).
    Send {
        half_open: bool,
    },
    Hold {
        until: Timestamp,
        why: &'static str,
    },
}

impl<P: Ports> Record<'_, P> {
    /// The gate's answer for `d` at intake's moment.
    pub(in crate::consumer::record) async fn admit(
        &mut self,
        d: &Delivery,
    ) -> Result<Admit, PortError> {
        let now = d.seen.now;
        let c = self.consumer;
        let state = c.gates.state(c.ports.gate(), &d.partition, now).await?;
        if let Some(until) = state.throttled_until.filter(|u| *u > now) {
            self.m.deferred_gate += 1;
            return Ok(Admit::Hold {
                until,
                why: "gate_closed",
            });
        }
        let Some(open) = state.breaker else {
            return Ok(Admit::Send { half_open: false });
        };
        self.m.breaker_open_secs = self
            .m
            .breaker_open_secs
            .max(now.since(open.opened_at).as_secs());
        if open.until > now {
            return Ok(self.held_open(open.until));
        }
        // Half-open. One probe at a time; the others look again a cool-down later. The probe
        // itself is won right before the send (`win_probe`), so a record that claims and then
        // does not send never strands it.
        let again = now.plus(c.cfg.breaker.cooldown);
        if open.probe_until.is_some_and(|p| p > now) {
            return Ok(self.held_open(again));
        }
        Ok(Admit::Send { half_open: true })
    }

    /// Win the half-open partition's single probe, right before sending under our lease:
    /// `Some(probe_until)` when this send is the probe. It lapses after a send and its
    /// outcome write could have ended, if the worker dies.
    pub(in crate::consumer::record) async fn win_probe(
        &mut self,
        d: &Delivery,
    ) -> Option<Timestamp> {
        let now = self.now();
        let c = self.consumer;
        let storage = crate::ports::STORAGE_OPERATION_TIMEOUT;
        let probe_until = now.plus(c.cfg.provider_timeout + storage + storage);
        let change = BreakerChange::Probe { now, probe_until };
        match c.ports.gate().breaker(&d.partition, change).await {
            Ok(true) => {
                self.m.breaker_probes += 1;
                self.learn(&d.partition, now, change).await;
                tracing::info!(partition = %d.partition.item_key(), "breaker half-open: probing");
                Some(probe_until)
            }
            // Another worker probes, or the breaker closed meanwhile: read it afresh next time.
            Ok(false) => {
                c.gates.forget(&d.partition).await;
                None
            }
            Err(e) => {
                tracing::warn!(error = %e, partition = %d.partition.item_key(), "could not take the breaker probe");
                c.gates.forget(&d.partition).await;
                None
            }
        }
    }

    fn held_open(&mut self, until: Timestamp) -> Admit {
        self.m.held_breaker += 1;
        Admit::Hold {
            until,
            why: "breaker_open",
        }
    }

    /// Hold `d` by visibility until the gate reopens, spread by a jitter that widens with each
    /// receive, never past `fresh_until`: a held delivery still expires on time, never sent.
    pub(in crate::consumer::record) async fn hold_at_gate(
        &mut self,
        d: &Delivery,
        until: Timestamp,
        why: &'static str,
    ) -> Step<Lease> {
        let now = d.seen.now;
        let fresh_until = d.reminder.fresh_until;
        // Never spread past the reminder's freshness: the hold ends while it can still go.
        let room = fresh_until.since(until).as_millis() / 2;
        let spread = gate_hold_spread(self.inc.receive_count).min(room as u64);
        let jitter = Duration::from_millis(self.rng.random_range(0..=spread));
        let at = until
            .plus(jitter)
            .min(fresh_until.plus(Duration::from_millis(1)));
        log_transition(&d.msg, 0, why, "hold", at.since(now));
        self.hold(&d.msg, at, now)
            .await
            .map(std::ops::ControlFlow::Break)
    }

    /// The breaker's bookkeeping for the provider's answer; `Some` when a failed probe holds
    /// the delivery (the caller writes nothing more).
    pub(in crate::consumer::record) async fn breaker_learns(
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
        // nor closes (the 429 gate handles it); a probe answered so tries again later.
        if matches!(outcome, Outcome::Throttled { .. } | Outcome::Blocked { .. }) {
            if let Some(probe_until) = lease.probe {
                self.reopen(&d.partition, probe_until, now).await;
            }
            return Ok(None);
        }
        if !down {
            self.provider_up(&d.partition, lease.probe.is_some(), now)
                .await;
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
    async fn provider_up(&mut self, partition: &GatePartition, probed: bool, now: Timestamp) {
        let c = self.consumer;
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

    /// Our probe failed: open again (fenced by our probe), a longer cool-down than before.
    async fn reopen(&mut self, partition: &GatePartition, probe_until: Timestamp, now: Timestamp) {
        let c = self.consumer;
        let known = c.gates.state(c.ports.gate(), partition, now).await;
        let reopens = known
            .ok()
            .and_then(|s| s.breaker)
            .map_or(0, |b| b.reopens + 1);
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
        let at = until.min(d.reminder.fresh_until);
        let change = Change::Hold {
            token: lease.token.clone(),
            next_eligible_at: at,
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
    async fn learn(&self, partition: &GatePartition, now: Timestamp, change: BreakerChange) {
        let c = self.consumer;
        c.gates
            .update(partition, now, |s: &mut GateState| {
                *s = match change {
                    // The copy may not have seen the item's state; open from what we wrote.
                    BreakerChange::Open { now, until } => GateState {
                        breaker: Some(OpenBreaker {
                            opened_at: now,
                            until,
                            reopens: 0,
                            probe_until: None,
                        }),
                        ..*s
                    },
                    other => other.apply(s).unwrap_or(*s),
                };
            })
            .await;
    }
}

/// How widely (ms) a gate hold spreads the message past the reopening: a second on the first
/// receive, doubling with each receive to a minute (exponential backoff with full jitter).
/// Every message held by one closing comes back at once otherwise; the provider takes a
/// second's worth, throttles the rest, and the gate closes again over a backlog that is
/// received once per closing — work that grows with the square of the backlog.
fn gate_hold_spread(receive_count: u32) -> u64 {
    let doublings = receive_count.saturating_sub(1).min(6);
    (1_000u64 << doublings).min(60_000)
}

#[cfg(test)]
mod tests {
    use super::gate_hold_spread;

    #[test]
    fn a_gate_hold_spreads_wider_with_each_receive_up_to_a_minute() {
        let spreads: Vec<u64> = (0..=9).map(gate_hold_spread).collect();
        assert_eq!(
            spreads,
            [1_000, 1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 60_000, 60_000, 60_000]
        );
        assert_eq!(gate_hold_spread(u32::MAX), 60_000);
    }
}
