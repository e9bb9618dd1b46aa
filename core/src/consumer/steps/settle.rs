//! Step 5: record the provider's answer, fenced by our lease, and act on the policy's
//! decision — ack a delivery, hold a retry, dead-letter a dead one, expire a stale one.

use std::time::Duration;

use super::dead::Facts;
use super::{class_name, log_transition, Action, Delivery, InFlight, Lease};
use crate::clock::Timestamp;
use crate::delivery::{settled, transition, Written};
use crate::domain::DeadReason;
use crate::ledger::{Change, Ctx};
use crate::policy::{decide, Next, Outcome, OutcomeClass, Spent};
use crate::ports::{PortError, Ports};

impl<P: Ports> InFlight<'_, P> {
    pub(super) async fn settle(
        &mut self,
        d: &Delivery,
        lease: Lease,
        outcome: Outcome,
    ) -> Result<Action, PortError> {
        if let Some(held) = self.breaker_learns(d, &lease, &outcome).await? {
            return Ok(held);
        }
        let now = self.now();
        let ctx = self.ctx(&d.msg, d.reminder.fresh_until, now);
        let policy = lease
            .record
            .policy()
            .cloned()
            .unwrap_or_else(|| self.consumer.cfg.policy.clone());
        let spent = Spent {
            attempts: lease.record.attempt_count(),
            throttles: lease.record.throttle_count(),
        };
        let idempotent = self.idempotent();
        let fresh_until = d.reminder.fresh_until;
        let next = decide(
            &policy,
            spent,
            &outcome,
            idempotent,
            fresh_until,
            now,
            self.rng,
        );
        let change = settled(&next, &outcome, lease.token.clone(), fresh_until);
        match next {
            Next::Delivered => self.delivered(d, lease, change, &ctx).await,
            Next::Retry { at, .. } => self.retry(d, lease, &outcome, change, at, &ctx).await,
            Next::Dead(reason) => self.died(d, lease, &outcome, change, reason, &ctx).await,
            Next::Expire => self.expired(d, lease, change, &ctx).await,
        }
    }

    async fn delivered(
        &mut self,
        d: &Delivery,
        lease: Lease,
        change: Change,
        ctx: &Ctx,
    ) -> Result<Action, PortError> {
        let receipt_kept = match &change {
            Change::Deliver { receipt, .. } => receipt.clone(),
            _ => None,
        };
        let lease_token = lease.token.clone();
        let ledger = self.consumer.ports.ledger();
        match transition(ledger, Some(lease.record), change, ctx).await? {
            Written::Applied(done) => {
                self.m.delivered += 1;
                // Late against the reminder as it is now (an edit that moved it keeps the old
                // message), and not for a redrive: an operator's replay is not lateness, and it
                // would page the lateness alarm for days-old deaths.
                if d.msg.redrive.is_none() {
                    let lateness = ctx.now.as_millis() - d.reminder.due_at.as_millis();
                    self.m.lateness_ms.push(lateness);
                }
                self.m.attempts.push(done.attempt_count());
                let attempt = done.attempt_count();
                log_transition(&d.msg, attempt, "delivered", "ack", Duration::ZERO);
            }
            Written::Refused {
                current: Some(dead),
                ..
            } if dead.status() == crate::ledger::Status::Dead => {
                // The send outlived the lease and the delivery died meanwhile: it was
                // delivered after all. Reconcile, fenced by the lease it died under.
                self.m.delivered_after_takeover += 1;
                let change = Change::Reconcile {
                    token: lease_token,
                    receipt: receipt_kept,
                };
                let ledger = self.consumer.ports.ledger();
                match transition(ledger, Some(dead), change, ctx).await? {
                    Written::Applied(done) => {
                        self.m.delivered += 1;
                        let attempt = done.attempt_count();
                        log_transition(&d.msg, attempt, "delivered", "reconciled", Duration::ZERO);
                    }
                    Written::Refused { refused, .. } => {
                        tracing::error!(
                            delivery_key = %d.msg.delivery_key,
                            %refused,
                            "delivered, but the ledger could not be reconciled: it still says dead"
                        );
                        return Ok(Action::Leave);
                    }
                }
            }
            Written::Refused { refused, current } => {
                // The send outlived the lease and another worker took over. With an
                // idempotent provider its resend is deduplicated; otherwise the ledger may
                // now say dead/ambiguous for a delivered message: say so loudly, with the
                // receipt, for reconciliation.
                self.m.delivered_after_takeover += 1;
                tracing::error!(
                    delivery_key = %d.msg.delivery_key,
                    %refused,
                    ledger_status = ?current.as_ref().map(|c| c.status()),
                    "delivered after the lease was taken over"
                );
                return Ok(Action::Leave);
            }
        }
        Ok(Action::Ack)
    }

    async fn retry(
        &mut self,
        d: &Delivery,
        lease: Lease,
        outcome: &Outcome,
        change: Change,
        at: Timestamp,
        ctx: &Ctx,
    ) -> Result<Action, PortError> {
        let class = outcome.class();
        if class == OutcomeClass::Throttled {
            self.m.deferred_provider += 1;
            // The gate closes until the provider said (its Retry-After), not until this
            // delivery's jittered retry: deferred workers add their own jitter.
            let until = outcome.retry_after().unwrap_or(at);
            self.close_gate(&d.partition, until).await;
        } else {
            self.m.retried += 1;
        }
        let ledger = self.consumer.ports.ledger();
        match transition(ledger, Some(lease.record), change, ctx).await? {
            Written::Applied(deferred) => {
                let attempt = deferred.attempt_count();
                log_transition(
                    &d.msg,
                    attempt,
                    class_name(class),
                    "retry",
                    at.since(ctx.now),
                );
                self.hold(&d.msg, at, ctx.now).await
            }
            // Our lease was taken over: the new holder's handle decides.
            Written::Refused { .. } => Ok(Action::Leave),
        }
    }

    async fn died(
        &mut self,
        d: &Delivery,
        lease: Lease,
        outcome: &Outcome,
        change: Change,
        reason: DeadReason,
        ctx: &Ctx,
    ) -> Result<Action, PortError> {
        let class = outcome.class();
        // The death names the channel it hands the reminder on to (docs/design.md, "Fallback
        // chain"), by the preferences read after the claim: no storage call between the send and
        // this write. This answer too: a last attempt whose answer was lost may have reached the
        // person.
        let reached = class == OutcomeClass::Ambiguous;
        let next = self.fallback_for(d, &lease.record, reason, reached, lease.prefs.as_ref());
        let mut change = change;
        if let Change::Die { fallback_to, .. } = &mut change {
            *fallback_to = next;
        }
        let ledger = self.consumer.ports.ledger();
        let Written::Applied(dead) = transition(ledger, Some(lease.record), change, ctx).await?
        else {
            // Our lease was taken over: the new holder's handle decides.
            return Ok(Action::Leave);
        };
        // After the outcome is written: the dead address, then the fallback's message.
        if let Some(source) = outcome.gone() {
            self.suppress(d, source).await;
        }
        if let Some(next) = next {
            self.m.fallbacks += 1;
            self.enqueue_fallback(&d.msg, next).await?;
        }
        self.m.dead(reason);
        let attempt = dead.attempt_count();
        log_transition(&d.msg, attempt, class_name(class), "dead", Duration::ZERO);
        let facts = Facts::of(&dead);
        self.copy_once(reason, dead, facts).await?;
        Ok(Action::Ack)
    }

    /// The next chance lands after `fresh_until`: deferred (fenced) until then, and the message
    /// held until just past it, when its intake finds it stale and expires it. A delivery is
    /// never called expired while it is still fresh.
    async fn expired(
        &mut self,
        d: &Delivery,
        lease: Lease,
        change: Change,
        ctx: &Ctx,
    ) -> Result<Action, PortError> {
        // Not eligible before the provider allows (an edit could extend the freshness).
        let eligible = match &change {
            Change::Defer {
                next_eligible_at, ..
            } => *next_eligible_at,
            _ => d.reminder.fresh_until,
        };
        let ledger = self.consumer.ports.ledger();
        let Written::Applied(deferred) =
            transition(ledger, Some(lease.record), change, ctx).await?
        else {
            return Ok(Action::Leave);
        };
        let past = eligible.max(crate::domain::reminder::surely_stale_at(
            d.reminder.fresh_until,
        ));
        let wait = past.since(ctx.now);
        log_transition(
            &d.msg,
            deferred.attempt_count(),
            "no_chance_left",
            "expire",
            wait,
        );
        self.hold(&d.msg, past, ctx.now).await
    }

    /// A fenced change to the delivery we hold, written now.
    pub(super) async fn under_lease(
        &self,
        d: &Delivery,
        held: crate::ledger::DeliveryRecord,
        change: Change,
    ) -> Result<Written, PortError> {
        let ctx = self.ctx(&d.msg, d.reminder.fresh_until, self.now());
        transition(self.consumer.ports.ledger(), Some(held), change, &ctx).await
    }

    /// Stale under our lease, before any send: expired (fenced), never sent.
    pub(super) async fn expire_held(
        &mut self,
        d: &Delivery,
        lease: Lease,
    ) -> Result<Action, PortError> {
        if !self.mark_expired(&d.reminder).await? {
            // Edited since it was read: the lease is given back, and the next look reads
            // the edited version.
            return self.release_unsent(d, lease).await;
        }
        let change = Change::ExpireHeld { token: lease.token };
        if let Written::Refused { .. } = self.under_lease(d, lease.record, change).await? {
            return Ok(Action::Leave);
        }
        self.m.expired += 1;
        log_transition(&d.msg, 0, "stale", "ack", Duration::ZERO);
        Ok(Action::Ack)
    }

    /// Give back a lease too short to send under: ready again at once, nothing spent.
    pub(super) async fn release_unsent(
        &mut self,
        d: &Delivery,
        lease: Lease,
    ) -> Result<Action, PortError> {
        let at = self.now().plus(Duration::from_secs(1));
        let why = ("lease_too_short", "lease too short");
        self.release_until(d, lease, at, why).await
    }

    /// Give the lease back, nothing spent, and hold the message until `at`; `why` is the
    /// log's tag and the words the item's history keeps.
    pub(super) async fn release_until(
        &mut self,
        d: &Delivery,
        lease: Lease,
        at: crate::clock::Timestamp,
        (tag, words): (&'static str, &'static str),
    ) -> Result<Action, PortError> {
        let now = self.now();
        let change = Change::Release {
            token: lease.token,
            why: words,
        };
        if let Written::Refused { refused, .. } = self.under_lease(d, lease.record, change).await? {
            // Another worker took the lapsed lease over; nothing was sent here, and the
            // holder's handle decides.
            tracing::warn!(delivery_key = %d.msg.delivery_key, %refused, "lease given back too late");
            return Ok(Action::Leave);
        }
        log_transition(&d.msg, 0, tag, "retry", at.since(now));
        self.hold(&d.msg, at, now).await
    }
}
