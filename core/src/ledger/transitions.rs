//! [`apply`]: the one way to change a delivery's state, one function per kind of change.
//! Each checks the state it starts from (and the lease, when the change is fenced), edits the
//! next record, and names the state it lands in; [`apply`] stamps what every write carries.

use super::{
    Change, Ctx, DeliveryRecord, HistoryEntry, LeaseToken, RedriveAudit, Refused, Status, Why,
};
use crate::clock::Timestamp;
use crate::domain::DeadReason;
use crate::policy::{OutcomeClass, RetryPolicy};
use from_dead::{claim_copy, copied, hand_on, reconcile};
use outcomes::{defer, deliver, die, hold};

mod from_dead;
mod outcomes;

pub use outcomes::HELD_FOR_QUIET_HOURS;

/// Where a change lands, and what its history entry says.
struct Landed {
    to: Status,
    detail: Option<String>,
    redrive: Option<RedriveAudit>,
}

impl Landed {
    fn at(to: Status) -> Self {
        Self {
            to,
            detail: None,
            redrive: None,
        }
    }

    fn saying(to: Status, detail: String) -> Self {
        Self {
            detail: Some(detail),
            ..Self::at(to)
        }
    }
}

/// The current record, as the change sees it.
struct From<'a> {
    current: Option<&'a DeliveryRecord>,
    status: Status,
    change: &'static str,
}

impl From<'_> {
    fn refuse(&self, why: Why) -> Refused {
        Refused {
            change: self.change,
            from: self.status,
            why,
        }
    }

    /// A fenced change needs the delivery `sending` under `token`.
    fn fenced(&self, token: &LeaseToken) -> Result<(), Refused> {
        match self.current {
            Some(r) if r.status == Status::Sending && r.lease_token.as_ref() == Some(token) => {
                Ok(())
            }
            Some(r) if r.status == Status::Sending => Err(self.refuse(Why::WrongLease)),
            _ => Err(self.refuse(Why::NotAllowed)),
        }
    }
}

/// The one way to change a delivery's state.
pub fn apply(
    current: Option<&DeliveryRecord>,
    change: Change,
    ctx: &Ctx,
) -> Result<DeliveryRecord, Refused> {
    let from = From {
        current,
        status: current.map_or(Status::Scheduled, |r| r.status),
        change: change.name(),
    };
    // A newer writer's state (logged when read): no change names it, an `extend` neither.
    if !from.status.is_known() {
        return Err(from.refuse(Why::NewerStatus));
    }
    let mut next = current
        .cloned()
        .unwrap_or_else(|| DeliveryRecord::fresh(ctx));
    let landed = land(&from, &mut next, &change, ctx)?;
    next.status = landed.to;
    next.seq += 1;
    next.updated_at = ctx.now;
    next.expires_at = next.expires_at.max(ctx.expires_at);
    // The first writer that knows it names the origin (an item from before origins were
    // kept gets one on its next such write); nothing replaces it.
    if next.origin.is_none() {
        next.origin = ctx.origin.clone();
    }
    // A fallback's message names the channel it falls back from, whoever wrote first.
    let from_channel = ctx.origin.as_ref().and_then(|o| o.fallback_from);
    if let (Some(o), Some(c)) = (next.origin.as_mut(), from_channel) {
        o.fallback_from.get_or_insert(c);
    }
    next.push_history(HistoryEntry {
        at: ctx.now,
        from: from.status,
        to: landed.to,
        detail: landed.detail,
        redrive: landed.redrive,
    });
    Ok(next)
}

/// The change's own edits to `next`, and where it lands.
fn land(
    from: &From,
    next: &mut DeliveryRecord,
    change: &Change,
    ctx: &Ctx,
) -> Result<Landed, Refused> {
    Ok(match change {
        Change::Claim {
            token,
            lease_expires_at,
            payload_version,
            policy,
        } => {
            let lease = (token, *lease_expires_at);
            claim(from, next, lease, *payload_version, policy, ctx)?
        }
        Change::Takeover {
            stale_token,
            token,
            lease_expires_at,
        } => takeover(from, next, stale_token, (token, *lease_expires_at), ctx)?,
        Change::Deliver { token, receipt } => deliver(from, next, token, receipt)?,
        Change::Defer {
            token,
            next_eligible_at,
            class,
            error,
        } => defer(from, next, token, *next_eligible_at, *class, error)?,
        Change::Hold {
            token,
            next_eligible_at,
            error,
            quiet_hours,
            maybe_sent,
        } => {
            next.maybe_sent |= *maybe_sent;
            hold(from, next, token, *next_eligible_at, error, *quiet_hours)?
        }
        Change::Die {
            token,
            reason,
            spends_attempt,
            error,
            fallback_to,
            maybe_sent,
        } => {
            let landed = die(from, next, token.as_ref(), *reason, *spends_attempt, error)?;
            next.maybe_sent |= *maybe_sent;
            // Only a death known to have sent nothing hands on (docs/design.md, "Fallback chain"),
            // whoever asks.
            next.fallback_to = fallback_to.filter(|_| !next.may_have_reached());
            // The last answer was lost (a GET says so, not the transient before it).
            if *maybe_sent {
                next.last_outcome_class = Some(OutcomeClass::Ambiguous);
            }
            landed
        }
        Change::Expire => finish(from, next, OutcomeClass::Stale, Status::Expired)?,
        Change::Cancel => cancel(from, next)?,
        Change::Extend => extend(from)?,
        Change::Redrive { audit, reasons } => redrive(from, next, audit, reasons)?,
        Change::ExpireHeld { token } => released(from, next, token, Status::Expired, "")?,
        Change::Release { token, why } => released(from, next, token, Status::Ready, why)?,
        Change::Reconcile { token, receipt } => reconcile(from, next, token, receipt)?,
        Change::ClaimDlqCopy { token } => claim_copy(from, next, token, ctx)?,
        Change::CopiedToDlq => copied(from, next, ctx)?,
        Change::HandOn { to } => hand_on(from, next, *to)?,
    })
}

/// scheduled, ready, deferred (eligible) → sending.
fn claim(
    from: &From,
    next: &mut DeliveryRecord,
    (token, lease_expires_at): (&LeaseToken, Timestamp),
    payload_version: u64,
    policy: &RetryPolicy,
    ctx: &Ctx,
) -> Result<Landed, Refused> {
    match from.status {
        Status::Scheduled | Status::Ready => {}
        Status::Deferred => {
            if let Some(at) = next.next_eligible_at.filter(|at| *at > ctx.now) {
                return Err(from.refuse(Why::NotYetEligible(at)));
            }
        }
        _ => return Err(from.refuse(Why::NotAllowed)),
    }
    // The policy is snapshotted at the first claim and kept thereafter.
    let max = next.policy.as_ref().unwrap_or(policy).max_attempts;
    if next.attempt_count >= max {
        let attempts = next.attempt_count;
        return Err(from.refuse(Why::BudgetSpent { attempts, max }));
    }
    next.lease_token = Some(token.clone());
    next.lease_expires_at = Some(lease_expires_at);
    next.next_eligible_at = None;
    next.payload_version = payload_version;
    next.policy.get_or_insert_with(|| policy.clone());
    Ok(Landed::at(Status::Sending))
}

/// sending (lease expired, named token) → sending under a new lease; the lost attempt counts.
fn takeover(
    from: &From,
    next: &mut DeliveryRecord,
    stale_token: &LeaseToken,
    (token, lease_expires_at): (&LeaseToken, Timestamp),
    ctx: &Ctx,
) -> Result<Landed, Refused> {
    from.fenced(stale_token)?;
    if let Some(until) = next.lease_expires_at.filter(|until| *until > ctx.now) {
        return Err(from.refuse(Why::LeaseLive(until)));
    }
    // The lost attempt counts; the resend needs one more.
    let max = next.policy.as_ref().map_or(u32::MAX, |p| p.max_attempts);
    if next.attempt_count + 1 >= max {
        let attempts = next.attempt_count + 1;
        return Err(from.refuse(Why::BudgetSpent { attempts, max }));
    }
    next.lease_token = Some(token.clone());
    next.lease_expires_at = Some(lease_expires_at);
    next.attempt_count += 1;
    // The lapsed send may have gone out.
    next.maybe_sent = true;
    let detail = "lease expired: ambiguous takeover".to_owned();
    Ok(Landed::saying(Status::Sending, detail))
}

/// scheduled, ready, deferred → expired or cancelled.
fn finish(
    from: &From,
    next: &mut DeliveryRecord,
    class: OutcomeClass,
    to: Status,
) -> Result<Landed, Refused> {
    if !matches!(
        from.status,
        Status::Scheduled | Status::Ready | Status::Deferred
    ) {
        return Err(from.refuse(Why::NotAllowed));
    }
    next.next_eligible_at = None;
    next.last_outcome_class = Some(class);
    Ok(Landed::at(to))
}

/// scheduled, ready, deferred or dead → cancelled. A dead delivery is cancelled too, so that
/// the ledger orders a cancel against a redrive (docs/design.md, "Cancelling"): once cancelled, no
/// redrive can move it back to ready. Its dead reason stays in the history.
fn cancel(from: &From, next: &mut DeliveryRecord) -> Result<Landed, Refused> {
    if from.status != Status::Dead {
        return finish(from, next, OutcomeClass::Cancelled, Status::Cancelled);
    }
    let was = next.dead_reason.take().map_or("dead", |r| r.as_str());
    let detail = format!("cancelled while dead ({was})");
    // `died_under_lease` stays as evidence: a send in flight when the delivery died may still
    // come back accepted. Cancelled is final, so its worker only logs it (sent before the
    // cancel, never after); the history keeps the ambiguous death.
    next.dlq_copy_claimed_at = None;
    next.dlq_copy_claim = None;
    next.last_outcome_class = Some(OutcomeClass::Cancelled);
    Ok(Landed::saying(Status::Cancelled, detail))
}

/// Any stored state → the same; [`apply`] moves the TTL out. An unsettled delivery too: its
/// proof must outlive every message an edit left carrying its key (a `sending` item deleted
/// by TTL before the ambiguous rule runs would be claimed afresh and sent again).
fn extend(from: &From) -> Result<Landed, Refused> {
    if from.current.is_none() {
        return Err(from.refuse(Why::NotAllowed));
    }
    Ok(Landed::saying(from.status, super::HORIZON_MOVED.into()))
}

/// dead → ready: fresh budgets, an audit entry.
fn redrive(
    from: &From,
    next: &mut DeliveryRecord,
    audit: &RedriveAudit,
    reasons: &std::collections::BTreeSet<DeadReason>,
) -> Result<Landed, Refused> {
    if from.status != Status::Dead {
        return Err(from.refuse(Why::NotAllowed));
    }
    if let Some(reason) = next.dead_reason.filter(|r| !reasons.contains(r)) {
        return Err(from.refuse(Why::ReasonNotSelected(reason)));
    }
    if let Some(to) = next.fallback_to {
        return Err(from.refuse(Why::FellBack(to)));
    }
    next.attempt_count = 0;
    next.throttle_count = 0;
    next.dead_reason = None;
    // A later death gets its own copy.
    next.dlq_copied_at = None;
    next.dlq_copy_claimed_at = None;
    next.dlq_copy_claim = None;
    next.died_under_lease = None;
    next.next_eligible_at = None;
    Ok(Landed {
        redrive: Some(audit.clone()),
        ..Landed::at(Status::Ready)
    })
}

/// sending (fenced) → expired (stale right before the send) or ready (the lease left could
/// not cover a provider call): never sent, nothing spent.
fn released(
    from: &From,
    next: &mut DeliveryRecord,
    token: &LeaseToken,
    to: Status,
    why: &str,
) -> Result<Landed, Refused> {
    from.fenced(token)?;
    next.clear_lease();
    if to == Status::Expired {
        next.last_outcome_class = Some(OutcomeClass::Stale);
        return Ok(Landed::saying(to, "stale before send".to_owned()));
    }
    Ok(Landed::saying(to, format!("released unsent: {why}")))
}
