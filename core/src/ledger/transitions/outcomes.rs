//! What a lease holder's send comes to: delivered, deferred (a throttle or a failure), held
//! with nothing spent (the breaker, quiet hours), or dead; and the deaths of a delivery that is
//! gone or cannot be sent, before any claim.

use super::{From, Landed};
use crate::clock::Timestamp;
use crate::domain::DeadReason;
use crate::ledger::{DeliveryRecord, LeaseToken, Refused, Status, Why};
use crate::policy::OutcomeClass;

/// sending (fenced) → delivered; counts the attempt.
pub(super) fn deliver(
    from: &From,
    next: &mut DeliveryRecord,
    token: &LeaseToken,
    receipt: &Option<String>,
) -> Result<Landed, Refused> {
    from.fenced(token)?;
    next.attempt_count += 1;
    next.maybe_sent = true;
    next.provider_receipt = receipt.clone();
    next.last_outcome_class = Some(OutcomeClass::Delivered);
    next.clear_lease();
    Ok(Landed::at(Status::Delivered))
}

/// sending (fenced) → deferred: a throttle spends no attempt, a transient or ambiguous
/// failure one.
pub(super) fn defer(
    from: &From,
    next: &mut DeliveryRecord,
    token: &LeaseToken,
    next_eligible_at: Timestamp,
    class: OutcomeClass,
    error: &Option<String>,
) -> Result<Landed, Refused> {
    from.fenced(token)?;
    match class {
        OutcomeClass::Throttled => next.throttle_count += 1,
        OutcomeClass::Transient => next.attempt_count += 1,
        OutcomeClass::Ambiguous => {
            next.attempt_count += 1;
            next.maybe_sent = true;
        }
        _ => return Err(from.refuse(Why::NotAllowed)),
    }
    next.next_eligible_at = Some(next_eligible_at);
    next.last_outcome_class = Some(class);
    next.set_error(error.as_deref());
    next.clear_lease();
    let detail = format!("{class:?}").to_lowercase();
    Ok(Landed::saying(Status::Deferred, detail))
}

/// sending (fenced) → deferred with nothing spent: held by the breaker, or for the
/// recipient's quiet hours (no provider was asked: the last outcome stays what it was).
pub(super) fn hold(
    from: &From,
    next: &mut DeliveryRecord,
    token: &LeaseToken,
    next_eligible_at: Timestamp,
    error: &Option<String>,
    quiet_hours: bool,
) -> Result<Landed, Refused> {
    from.fenced(token)?;
    next.next_eligible_at = Some(next_eligible_at);
    if !quiet_hours {
        next.last_outcome_class = Some(OutcomeClass::Transient);
    }
    next.set_error(error.as_deref());
    next.clear_lease();
    let detail = if quiet_hours {
        HELD_FOR_QUIET_HOURS
    } else {
        crate::policy::breaker::HELD_BY_BREAKER
    };
    Ok(Landed::saying(Status::Deferred, detail.into()))
}

/// The history detail of a hold for the recipient's quiet hours.
pub const HELD_FOR_QUIET_HOURS: &str = crate::ledger::Detail::HeldForQuietHours.as_str();

/// sending (fenced) or deferred → dead for a provider or budget reason; scheduled, ready or
/// deferred → dead for a reminder that is gone or cannot be read or sent (never from
/// `sending`: a lease holder finishes its own send).
pub(super) fn die(
    from: &From,
    next: &mut DeliveryRecord,
    token: Option<&LeaseToken>,
    reason: DeadReason,
    spends_attempt: bool,
    error: &Option<String>,
) -> Result<Landed, Refused> {
    let budget_or_provider = matches!(
        reason,
        DeadReason::Rejected
            | DeadReason::AttemptsExhausted
            | DeadReason::ThrottleExhausted
            | DeadReason::Ambiguous
    );
    // The recipient's rules end a claimed delivery before any send (docs/design.md, "Recipient
    // rules").
    let recipients_choice = reason.is_recipients_choice() && !spends_attempt;
    match (from.status, token) {
        (Status::Sending, Some(t)) if budget_or_provider || recipients_choice => from.fenced(t)?,
        (Status::Deferred, None) if budget_or_provider => {}
        (Status::Scheduled | Status::Ready | Status::Deferred, None) if reason.dies_unclaimed() => {
        }
        _ => return Err(from.refuse(Why::NotAllowed)),
    }
    // Only a send spends an attempt, and only a lease holder sends.
    if spends_attempt && from.status != Status::Sending {
        return Err(from.refuse(Why::NotAllowed));
    }
    next.attempt_count += u32::from(spends_attempt);
    next.maybe_sent |= reason == DeadReason::Ambiguous;
    next.dead_reason = Some(reason);
    // Only a send that may have happened can be reconciled; a recipient's choice sent nothing.
    next.died_under_lease = match from.status {
        Status::Sending if !recipients_choice => next.lease_token.clone(),
        _ => None,
    };
    next.set_error(error.as_deref());
    next.clear_lease();
    next.next_eligible_at = None;
    Ok(Landed::saying(Status::Dead, reason.as_str().to_owned()))
}
