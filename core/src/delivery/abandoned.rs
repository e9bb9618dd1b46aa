//! A send whose lease ran out with no outcome written (a crashed or stalled worker): the
//! provider may or may not have accepted it. The ambiguous rule
//! ([`crate::policy::decide_abandoned`]) decides what the ledger says next; these functions
//! turn its decision into the write, for the consumer and for the model check alike.

use std::time::Duration;

use rand::Rng;

use crate::clock::Timestamp;
use crate::domain::DeadReason;
use crate::ledger::{Change, DeliveryRecord, LeaseToken};
use crate::policy::{decide_abandoned, Next, OutcomeClass, RetryPolicy, Spent, ABANDONED};
use crate::ports::PortError;

/// What a worker that found the lapsed lease decides, and would claim under `token` for
/// `lease` if it resends.
pub struct Lapsed<'a> {
    /// The consumer's policy, for a record that carries no snapshot of its own.
    pub policy: &'a RetryPolicy,
    pub idempotent: bool,
    pub fresh_until: Timestamp,
    pub now: Timestamp,
    pub lease: Duration,
}

/// The write for a lapsed send found by a claim: a takeover that resends with the same key,
/// a wait for the policy's backoff (the attempt is spent, as for a timeout), or dead.
pub fn after_lapse(
    stale: &DeliveryRecord,
    token: &LeaseToken,
    l: &Lapsed<'_>,
    rng: &mut impl Rng,
) -> Result<Change, PortError> {
    let stale_token = stale.lease_token().cloned().ok_or_else(no_lease_token)?;
    let policy = stale.policy().unwrap_or(l.policy);
    let spent = Spent {
        attempts: stale.attempt_count(),
        throttles: stale.throttle_count(),
    };
    let next = decide_abandoned(policy, spent, l.idempotent, true, l.fresh_until, l.now, rng);
    Ok(match next {
        Next::Dead(reason) => dies(stale_token, reason),
        Next::Retry { at, .. } if at > l.now => Change::Defer {
            token: stale_token,
            next_eligible_at: at,
            class: OutcomeClass::Ambiguous,
            error: Some(ABANDONED.into()),
        },
        // The next chance lands after fresh_until, and the send may have happened: it is
        // not "expired" (never sent) but ambiguous, for reconciliation.
        Next::Expire => dies(stale_token, DeadReason::Ambiguous),
        Next::Retry { .. } | Next::Delivered => Change::Takeover {
            stale_token,
            token: token.clone(),
            lease_expires_at: l.now.plus(l.lease),
        },
    })
}

/// What to do with a delivery found `sending` when it should be cancelled or expired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolve {
    /// Its lease is live: look again once it has run out.
    Wait { until: Timestamp },
    /// Too late to resend: write this (dead, by the ambiguous rule with no resend).
    Write(Change),
}

/// A delivery found `sending` when it should be cancelled or expired: once its lease ran
/// out, it is too late to resend, and the send may have happened.
pub fn resolve(
    sending: &DeliveryRecord,
    policy: &RetryPolicy,
    idempotent: bool,
    now: Timestamp,
    rng: &mut impl Rng,
) -> Result<Resolve, PortError> {
    let (Some(until), Some(stale_token)) =
        (sending.lease_expires_at(), sending.lease_token().cloned())
    else {
        return Err(no_lease_token());
    };
    if until > now {
        return Ok(Resolve::Wait { until });
    }
    let next = decide_abandoned(policy, Spent::default(), idempotent, false, now, now, rng);
    let reason = match next {
        Next::Dead(reason) => reason,
        _ => DeadReason::Ambiguous,
    };
    Ok(Resolve::Write(dies(stale_token, reason)))
}

/// The dead write for a send whose outcome nobody recorded (fenced by the lapsed lease).
fn dies(stale_token: LeaseToken, reason: DeadReason) -> Change {
    Change::Die {
        token: Some(stale_token),
        reason,
        spends_attempt: true,
        error: Some(ABANDONED.into()),
        fallback_to: None,
        // Nobody heard what became of the send.
        maybe_sent: true,
    }
}

/// The state machine never writes `sending` without a lease.
fn no_lease_token() -> PortError {
    PortError::Invariant {
        op: "consumer.take_over",
        message: "a sending delivery has no lease".into(),
    }
}
