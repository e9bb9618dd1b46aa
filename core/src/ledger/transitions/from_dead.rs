//! The transitions out of `dead` that are not a redrive: the late success of a send the item
//! died under (`dead → delivered`), and the bookkeeping a dead item carries (`dead → dead`):
//! the claim and the record of its one DLQ copy, and the hand-on to a fallback channel.

use super::{From, Landed};
use crate::ledger::{Ctx, Detail};
use crate::ledger::{DeliveryRecord, LeaseToken, Refused, Status, Why, COPY_CLAIM_TIMEOUT};
use crate::policy::OutcomeClass;

/// dead → delivered, by the worker whose lease it died under (its send succeeded after all).
pub(super) fn reconcile(
    from: &From,
    next: &mut DeliveryRecord,
    token: &LeaseToken,
    receipt: &Option<String>,
) -> Result<Landed, Refused> {
    if from.status != Status::Dead || next.died_under_lease.is_none() {
        return Err(from.refuse(Why::NotAllowed));
    }
    if next.died_under_lease.as_ref() != Some(token) {
        return Err(from.refuse(Why::WrongLease));
    }
    next.dead_reason = None;
    next.died_under_lease = None;
    next.maybe_sent = true;
    next.dlq_copy_claimed_at = None;
    next.dlq_copy_claim = None;
    next.provider_receipt = receipt.clone();
    next.last_outcome_class = Some(OutcomeClass::Delivered);
    let detail = "reconciled: delivered after takeover".to_owned();
    Ok(Landed::saying(Status::Delivered, detail))
}

/// dead → dead: one worker at a time makes the copy; a claim past its timeout was a
/// crashed worker's.
pub(super) fn claim_copy(
    from: &From,
    next: &mut DeliveryRecord,
    token: &LeaseToken,
    ctx: &Ctx,
) -> Result<Landed, Refused> {
    let held = next
        .dlq_copy_claimed_at
        .is_some_and(|at| ctx.now.since(at) < COPY_CLAIM_TIMEOUT);
    if from.status != Status::Dead || next.dlq_copied_at.is_some() || held {
        return Err(from.refuse(Why::NotAllowed));
    }
    next.dlq_copy_claimed_at = Some(ctx.now);
    next.dlq_copy_claim = Some(token.clone());
    Ok(Landed::saying(
        Status::Dead,
        Detail::DlqCopyClaimed.as_str().to_owned(),
    ))
}

/// dead → dead: its DLQ copy exists, once.
pub(super) fn copied(from: &From, next: &mut DeliveryRecord, ctx: &Ctx) -> Result<Landed, Refused> {
    if from.status != Status::Dead || next.dlq_copied_at.is_some() {
        return Err(from.refuse(Why::NotAllowed));
    }
    next.dlq_copied_at = Some(ctx.now);
    next.dlq_copy_claimed_at = None;
    next.dlq_copy_claim = None;
    Ok(Landed::saying(
        Status::Dead,
        Detail::DlqCopy.as_str().to_owned(),
    ))
}

/// dead → dead, handing the reminder on to `to` (a standby's walk, for a death that named no
/// listed channel, or one the reminder no longer lists: that name is replaced). Refused once
/// it names `to` already; and refused for a death that may have reached the person (a send
/// that may have happened ends the chain: the same rule as `Die`'s `fallback_to`, here in the
/// ledger as well as in every caller).
pub(super) fn hand_on(
    from: &From,
    next: &mut DeliveryRecord,
    to: crate::domain::Channel,
) -> Result<Landed, Refused> {
    if from.status != Status::Dead || next.fallback_to == Some(to) || next.may_have_reached() {
        return Err(from.refuse(Why::NotAllowed));
    }
    next.fallback_to = Some(to);
    Ok(Landed::saying(Status::Dead, format!("handed on to {to}")))
}
