//! The provider gate before a claim (docs/design.md, "Outages: the breaker" and "Provider gate"): a
//! throttled partition, or an open breaker, holds the delivery by visibility with no claim, no
//! provider call and no attempt spent; once the cool-down is over, one worker wins the probe by a
//! conditional write right before it sends. What the breaker learns from the answer is in
//! [`super::breaker`].

use std::time::Duration;

use rand::RngExt;

use super::super::{log_transition, Delivery, InFlight, Lease, Step};
use crate::clock::Timestamp;
use crate::domain::reminder::last_sendable;
use crate::ports::gate::BreakerChange;
use crate::ports::{Gate, PortError, Ports};

/// What the gate lets this delivery do now.
pub(in crate::consumer::steps) enum Admit {
    /// Send; `half_open` when the breaker lets one probe through (won right before the send).
    Send {
        half_open: bool,
    },
    Hold {
        until: Timestamp,
        why: &'static str,
    },
}

impl<P: Ports> InFlight<'_, P> {
    /// The gate's answer for `d` at intake's moment.
    pub(in crate::consumer::steps) async fn admit(
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
    pub(in crate::consumer::steps) async fn win_probe(
        &mut self,
        d: &Delivery,
    ) -> Option<Timestamp> {
        let now = self.now();
        let c = self.consumer;
        let storage = crate::ports::STORAGE_OPERATION_TIMEOUT;
        let probe_until = now.plus(c.cfg.provider_timeout + storage + storage);
        // Won only at the count of failed probes our copy holds: a stale copy loses this
        // probe (released, nothing spent) instead of timing the next cool-down wrong. The
        // copy as admission read it: no read here, between the last checks and the send.
        let known = c.gates.peek(&d.partition).await;
        let reopens = known.and_then(|s| s.breaker).map_or(0, |b| b.reopens);
        let change = BreakerChange::Probe {
            now,
            probe_until,
            reopens,
        };
        match c.ports.gate().breaker(&d.partition, change).await {
            Ok(true) => {
                self.m.breaker_probes += 1;
                c.gates.probing(&d.partition, probe_until, reopens);
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
    /// receive, never past the last instant it may be sent: a held delivery still expires on
    /// time, never sent.
    pub(in crate::consumer::steps) async fn hold_at_gate(
        &mut self,
        d: &Delivery,
        until: Timestamp,
        why: &'static str,
    ) -> Step<Lease> {
        let now = d.seen.now;
        let fresh_until = d.reminder.fresh_until;
        // Never spread past the last instant it may still be sent (fresh by every clock
        // within the margin): the hold ends while it can still go. A gate that reopens too
        // late holds it until it is surely stale, when its intake expires it.
        let last = last_sendable(fresh_until);
        let at = if until <= last {
            let room = last.since(until).as_millis() / 2;
            let spread = gate_hold_spread(self.inc.receive_count).min(room as u64);
            let jitter = Duration::from_millis(self.rng.random_range(0..=spread));
            until.plus(jitter).min(last)
        } else {
            crate::domain::reminder::surely_stale_at(fresh_until)
        };
        log_transition(&d.msg, 0, why, "hold", at.since(now));
        self.hold(&d.msg, at, now)
            .await
            .map(std::ops::ControlFlow::Break)
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
