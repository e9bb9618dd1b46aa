//! Step 2: the provider gate, then the claim — one conditional write that takes the lease.
//! A lease that ran out mid-send (a crashed worker) is resolved by the ambiguous rule
//! ([`crate::delivery::abandoned`]): taken over to resend with the same key, or dead as
//! `ambiguous` for reconciliation.

use std::ops::ControlFlow::{Break, Continue};
use std::time::Duration;

use super::dead::Facts;
use super::health::Admit;
use super::{log_transition, Action, Delivery, InFlight, Lease, Step};
use crate::clock::Timestamp;
use crate::delivery::abandoned::{self, Lapsed, Resolve};
use crate::delivery::{claim, transition, Claim, ClaimRequest, Written};
use crate::domain::reminder::{freshness, Freshness};
use crate::domain::{DeadReason, DeliveryMessage};
use crate::ledger::{Change, Ctx, DeliveryRecord, LeaseToken};
use crate::ports::{PortError, Ports};

/// How long a message waits when its ledger item is in a status this version does not know:
/// long enough for a deploy to finish rolling out the version that does, short beside any
/// freshness window.
pub const NEWER_STATUS_WAIT: Duration = Duration::from_secs(5 * 60);

impl<P: Ports> InFlight<'_, P> {
    pub(super) async fn claim(&mut self, d: &Delivery) -> Step<Lease> {
        let half_open = match self.admit(d).await? {
            Admit::Send { half_open } => half_open,
            Admit::Hold { until, why } => return self.hold_at_gate(d, until, why).await,
        };
        // The lease counts from the claim, not from the start of the record; freshness is
        // checked again at that moment.
        let now = self.now();
        match freshness(d.reminder.fresh_until, now) {
            Freshness::Fresh => {}
            Freshness::Stale => {
                // Written at the moment it was found stale, not at intake's earlier reading.
                let ctx = self.ctx(&d.msg, d.reminder.fresh_until, now);
                return self
                    .expire_unclaimed(&d.msg, &d.reminder, &ctx)
                    .await
                    .map(Break);
            }
            Freshness::Unsure { until } => return self.hold(&d.msg, until, now).await.map(Break),
        }
        let mut ctx = self.ctx(&d.msg, d.reminder.fresh_until, now);
        if let Some(origin) = ctx.origin.as_mut() {
            origin.chain_head = d.chain_head;
            origin.chain.clone_from(&d.chain);
        }
        let token = LeaseToken::generate(self.rng);
        let req = ClaimRequest {
            token: token.clone(),
            lease_expires_at: now.plus(self.consumer.cfg.lease),
            payload_version: d.reminder.payload_version,
            policy: self.consumer.cfg.policy.clone(),
        };
        let record = match claim(self.consumer.ports.ledger(), req, &ctx).await? {
            Claim::Acquired(record) => record,
            Claim::LeaseExpired(stale) => match self.take_over(d, stale, &token, &ctx).await? {
                Continue(record) => record,
                Break(action) => return Ok(Break(action)),
            },
            other => {
                if let Claim::Dead(dead) = &other {
                    self.pass_on(d, dead).await?;
                }
                return self.not_ours(&d.msg, other, now).await.map(Break);
            }
        };
        Ok(Continue(Lease {
            record,
            token,
            half_open,
            probe: None,
            prefs: None,
        }))
    }

    /// A claim that did not give us the lease: a duplicate, a finished or dead delivery, or
    /// one to look at again later.
    async fn not_ours(
        &mut self,
        msg: &DeliveryMessage,
        claim: Claim,
        now: Timestamp,
    ) -> Result<Action, PortError> {
        match claim {
            Claim::AlreadyDelivered(_) => {
                self.m.duplicates_suppressed += 1;
                log_transition(msg, 0, "duplicate", "ack", Duration::ZERO);
                Ok(Action::Ack)
            }
            Claim::Dead(record) => {
                self.ensure_fallback(msg, &record).await?;
                self.ensure_copied(msg, record, now).await
            }
            Claim::HeldByOther { until } => {
                self.hold(msg, until.plus(Duration::from_secs(1)), now)
                    .await
            }
            Claim::NotYetEligible { at } => self.hold(msg, at, now).await,
            // The state machine holds the budget itself: a delivery with no attempt left dies
            // as `attempts_exhausted` (with its copy), never loops.
            Claim::BudgetSpent(record) => self.die_budget_spent(msg, record, now).await,
            Claim::Finished(_) => Ok(Action::Ack),
            Claim::NewerStatus(record) => self.newer_status(msg, &record, now).await,
            Claim::Acquired(_) | Claim::LeaseExpired(_) => Err(PortError::Invariant {
                op: "consumer.claim",
                message: "a claim that acquired the lease was handled as not ours".into(),
            }),
        }
    }

    /// The ledger item is in a status this version does not know: a newer writer owns it
    /// (a deploy rolling out). Nothing is written over it, and the message is neither acked
    /// nor dead-lettered: it waits ([`NEWER_STATUS_WAIT`]) for a reader that knows the
    /// status, counted (`newer_status`) and logged.
    pub(super) async fn newer_status(
        &mut self,
        msg: &DeliveryMessage,
        record: &DeliveryRecord,
        now: Timestamp,
    ) -> Result<Action, PortError> {
        self.m.newer_status += 1;
        tracing::warn!(delivery_key = %msg.delivery_key, status = record.status().as_str(), seq = record.seq(), "ledger status unknown to this version: left as it is, message looked at again later");
        self.hold(msg, now.plus(NEWER_STATUS_WAIT), now).await
    }

    async fn die_budget_spent(
        &mut self,
        msg: &DeliveryMessage,
        record: DeliveryRecord,
        now: Timestamp,
    ) -> Result<Action, PortError> {
        let ctx = Ctx {
            key: record.key().clone(),
            now,
            expires_at: record.expires_at(),
            origin: Some(crate::ledger::Origin::of(msg)),
        };
        let change = Change::Die {
            token: None,
            reason: DeadReason::AttemptsExhausted,
            spends_attempt: false,
            error: Some("no attempt left in the budget".into()),
            fallback_to: None,
            maybe_sent: false,
        };
        let ledger = self.consumer.ports.ledger();
        let dead = match transition(ledger, Some(record), change, &ctx).await? {
            Written::Applied(dead) => {
                self.m.dead(DeadReason::AttemptsExhausted);
                dead
            }
            // Changed meanwhile: the next look decides again.
            Written::Refused { .. } => {
                return self.hold(msg, now.plus(Duration::from_secs(1)), now).await
            }
        };
        log_transition(
            msg,
            dead.attempt_count(),
            "attempts_exhausted",
            "dead",
            Duration::ZERO,
        );
        self.ensure_copied(msg, dead, now).await
    }

    /// A lease ran out mid-send: the ambiguous rule decides between resending with the same
    /// key (a takeover under our lease) and dead as `ambiguous`.
    async fn take_over(
        &mut self,
        d: &Delivery,
        stale: DeliveryRecord,
        token: &LeaseToken,
        ctx: &Ctx,
    ) -> Step<DeliveryRecord> {
        let change = self.abandoned_change(d, &stale, token, ctx)?;
        let ledger = self.consumer.ports.ledger();
        let written = transition(ledger, Some(stale), change.clone(), ctx).await?;
        match (written, change) {
            (Written::Applied(record), Change::Takeover { .. }) => {
                let attempt = record.attempt_count();
                log_transition(
                    &d.msg,
                    attempt,
                    "ambiguous",
                    "resend_same_key",
                    Duration::ZERO,
                );
                Ok(Continue(record))
            }
            (Written::Applied(deferred), Change::Defer { .. }) => {
                self.abandoned_deferred(d, deferred, ctx).await.map(Break)
            }
            (Written::Applied(dead), _) => self.died_abandoned(&d.msg, dead).await.map(Break),
            // Another worker got there first: look again shortly.
            (Written::Refused { .. }, _) => {
                let again = ctx.now.plus(Duration::from_secs(1));
                self.hold(&d.msg, again, ctx.now).await.map(Break)
            }
        }
    }

    /// What the ambiguous rule decides for a send whose lease lapsed without an outcome.
    fn abandoned_change(
        &mut self,
        d: &Delivery,
        stale: &DeliveryRecord,
        token: &LeaseToken,
        ctx: &Ctx,
    ) -> Result<Change, PortError> {
        let lapsed = Lapsed {
            policy: &self.consumer.cfg.policy,
            idempotent: self.idempotent(),
            fresh_until: d.reminder.fresh_until,
            now: ctx.now,
            lease: self.consumer.cfg.lease,
        };
        abandoned::after_lapse(stale, token, &lapsed, self.rng)
    }

    /// An abandoned send now deferred: wait for its retry time.
    async fn abandoned_deferred(
        &mut self,
        d: &Delivery,
        deferred: DeliveryRecord,
        ctx: &Ctx,
    ) -> Result<Action, PortError> {
        let at = deferred.next_eligible_at().unwrap_or(ctx.now);
        let attempt = deferred.attempt_count();
        log_transition(&d.msg, attempt, "ambiguous", "retry", at.since(ctx.now));
        self.hold(&d.msg, at, ctx.now).await
    }

    /// A delivery found `sending` when it should be cancelled or expired: once its lease ran
    /// out, it is too late to resend, and the send may have happened — the ambiguous rule
    /// with no resend allowed.
    pub(super) async fn resolve_abandoned(
        &mut self,
        msg: &DeliveryMessage,
        sending: DeliveryRecord,
        ctx: &Ctx,
    ) -> Result<Action, PortError> {
        let idempotent = self.idempotent();
        let policy = &self.consumer.cfg.policy;
        let change = match abandoned::resolve(&sending, policy, idempotent, ctx.now, self.rng)? {
            Resolve::Wait { until } => {
                let again = until.plus(Duration::from_secs(1));
                return self.hold(msg, again, ctx.now).await;
            }
            Resolve::Write(change) => change,
        };
        match transition(self.consumer.ports.ledger(), Some(sending), change, ctx).await? {
            Written::Applied(dead) => self.died_abandoned(msg, dead).await,
            Written::Refused { .. } => {
                let again = ctx.now.plus(Duration::from_secs(1));
                self.hold(msg, again, ctx.now).await
            }
        }
    }

    async fn died_abandoned(
        &mut self,
        msg: &DeliveryMessage,
        dead: DeliveryRecord,
    ) -> Result<Action, PortError> {
        let reason = dead.dead_reason().unwrap_or(DeadReason::Ambiguous);
        self.m.dead(reason);
        log_transition(
            msg,
            dead.attempt_count(),
            "ambiguous",
            "dead",
            Duration::ZERO,
        );
        let facts = Facts::of(&dead);
        self.copy_once(reason, dead, facts).await?;
        Ok(Action::Ack)
    }
}
