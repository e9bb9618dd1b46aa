//! One delivery's life on the ledger: the state machine ([`state`]) and the operations that
//! persist its transitions through the [`Ledger`] port — claim, fenced outcome writes, cancel.
//!
//! Every operation is optimistic: compute the next record from what was last seen (nothing, for
//! a first claim: the happy path costs one write), write it conditionally, and on a conflict
//! recompute from the item DynamoDB returned (no extra read). The loop itself is
//! [`machine::Transition`], a machine without I/O, so the model check drives the same code.

pub mod abandoned;
pub mod machine;
pub mod outcome;
pub mod standby;

use crate::clock::Timestamp;
use crate::ledger::{Change, Ctx, DeliveryRecord, LeaseToken, Refused, Status};
use crate::policy::{Next, Outcome, OutcomeClass, RetryPolicy};
use crate::ports::{Ledger, PortError};
pub use machine::{is_ours, Op, Progress, Transition};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Written {
    Applied(DeliveryRecord),
    /// The state machine refused the change against the current item.
    Refused {
        refused: Refused,
        current: Option<DeliveryRecord>,
    },
}

/// Apply `change` on the ledger, starting from `seen` (the caller's last view; `None` when it
/// has none, which is right for a first claim): [`machine::Transition`] driven by `ledger`.
pub async fn transition<L: Ledger>(
    ledger: &L,
    seen: Option<DeliveryRecord>,
    change: Change,
    ctx: &Ctx,
) -> Result<Written, PortError> {
    let mut progress = Transition::start(seen, change, ctx.clone());
    loop {
        let t = match progress {
            Progress::Done(answer) => return answer,
            Progress::Next(t) => t,
        };
        progress = match t.op() {
            Op::Get => {
                let item = ledger.get(&ctx.key).await;
                t.got(item)
            }
            Op::PutIf { next, expected } => {
                let cas = ledger.put_if(next, expected).await;
                t.put(cas)
            }
        };
    }
}

/// The fenced write that records the provider's `outcome` under the lease `token`, as the
/// policy decided (`next`). A decision to expire is a deferral until `fresh_until` (and the
/// provider's Retry-After): a delivery is never called expired while it is still fresh; its
/// next intake finds it stale.
pub fn settled(
    next: &Next,
    outcome: &Outcome,
    token: LeaseToken,
    fresh_until: Timestamp,
) -> Change {
    let error = outcome.error();
    match next {
        Next::Delivered => Change::Deliver {
            token,
            receipt: match outcome {
                Outcome::Delivered { receipt } => receipt.clone(),
                _ => None,
            },
        },
        Next::Retry { at, class, .. } => Change::Defer {
            token,
            next_eligible_at: *at,
            class: *class,
            error,
        },
        Next::Dead(reason) => Change::Die {
            token: Some(token),
            reason: *reason,
            spends_attempt: outcome.class() != OutcomeClass::Throttled,
            error,
            fallback_to: None,
            maybe_sent: outcome.class() == OutcomeClass::Ambiguous,
        },
        Next::Expire => Change::Defer {
            token,
            next_eligible_at: outcome
                .retry_after()
                .map_or(fresh_until, |at| at.max(fresh_until)),
            class: outcome.class(),
            error,
        },
    }
}

/// The answer to a claim (docs/design.md, "States and transitions").
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// `sending` under our lease: go ahead and call the provider.
    Acquired(DeliveryRecord),
    /// Already delivered: a duplicate, suppressed.
    AlreadyDelivered(DeliveryRecord),
    /// Expired or cancelled: nothing to do.
    Finished(DeliveryRecord),
    /// Dead: waits for a redrive.
    Dead(DeliveryRecord),
    /// Another worker holds a live lease until then.
    HeldByOther { until: Timestamp },
    /// A worker's lease ran out mid-send: the send may have happened (the ambiguous rule).
    LeaseExpired(DeliveryRecord),
    /// Deferred, and not eligible before then.
    NotYetEligible { at: Timestamp },
    /// No attempt left in the budget (the state machine refuses the claim).
    BudgetSpent(DeliveryRecord),
    /// In a status this version does not know (a newer writer's): left alone, looked at
    /// again later by whichever version then reads it.
    NewerStatus(DeliveryRecord),
}

/// Parameters of a claim.
#[derive(Debug, Clone)]
pub struct ClaimRequest {
    pub token: LeaseToken,
    pub lease_expires_at: Timestamp,
    pub payload_version: u64,
    pub policy: RetryPolicy,
}

/// Claim a delivery in one conditional write (two when it already has an item).
pub async fn claim<L: Ledger>(
    ledger: &L,
    req: ClaimRequest,
    ctx: &Ctx,
) -> Result<Claim, PortError> {
    let change = Change::Claim {
        token: req.token,
        lease_expires_at: req.lease_expires_at,
        payload_version: req.payload_version,
        policy: req.policy,
    };
    let written = transition(ledger, None, change, ctx).await?;
    claim_answer(written, ctx.now)
}

/// What a claim's write means (the [`Claim`] answer), at `now`.
pub fn claim_answer(written: Written, now: Timestamp) -> Result<Claim, PortError> {
    let (refused, current) = match written {
        Written::Applied(record) => return Ok(Claim::Acquired(record)),
        Written::Refused { refused, current } => (refused, current),
    };
    if matches!(refused.why, crate::ledger::Why::BudgetSpent { .. }) {
        if let Some(cur) = current {
            return Ok(Claim::BudgetSpent(cur));
        }
    }
    let Some(cur) = current else {
        // Unreachable by construction: a claim from nothing is always allowed.
        return Err(PortError::Invariant {
            op: "ledger.claim",
            message: format!("claim refused without an item: {refused}"),
        });
    };
    Ok(match cur.status() {
        Status::Delivered => Claim::AlreadyDelivered(cur),
        Status::Expired | Status::Cancelled => Claim::Finished(cur),
        Status::Dead => Claim::Dead(cur),
        Status::Sending => match cur.lease_expires_at() {
            Some(until) if until > now => Claim::HeldByOther { until },
            _ => Claim::LeaseExpired(cur),
        },
        Status::Deferred => Claim::NotYetEligible {
            at: cur.next_eligible_at().unwrap_or(now),
        },
        Status::Unknown(_) => Claim::NewerStatus(cur),
        Status::Scheduled | Status::Ready => {
            return Err(PortError::Invariant {
                op: "ledger.claim",
                message: format!("claim refused from a claimable state: {refused}"),
            })
        }
    })
}

/// Move a delivery's TTL out to `ctx.expires_at` (an edit moved the reminder's freshness or
/// due time): its proof must outlive every message that carries its key, whether it settled
/// or not (a `sending` item a TTL deleted would be claimed and sent again). One kept that long
/// already is left alone.
pub async fn extend_horizon<L: Ledger>(ledger: &L, ctx: &Ctx) -> Result<(), PortError> {
    let Some(current) = ledger.get(&ctx.key).await? else {
        return Ok(());
    };
    if current.expires_at() >= ctx.expires_at {
        return Ok(());
    }
    transition(ledger, Some(current), Change::Extend, ctx).await?;
    Ok(())
}

/// The answer to cancelling one delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cancelled {
    Cancelled,
    /// A worker claimed it first: it may be sent.
    AlreadyInFlight,
    AlreadyDelivered,
    /// Expired, dead or cancelled before.
    AlreadyFinal(Status),
}

/// Cancel one delivery: ordered against claims by the ledger (docs/design.md, "Cancelling").
pub async fn cancel<L: Ledger>(ledger: &L, ctx: &Ctx) -> Result<Cancelled, PortError> {
    Ok(cancel_answer(
        transition(ledger, None, Change::Cancel, ctx).await?,
    ))
}

/// Expire one delivery that was never enqueued (its reminder went stale first), so the
/// ledger, `remind show` and the outcome events say so. A delivery already on its way or
/// settled is left as it is (`Refused`).
pub async fn expire_unsent<L: Ledger>(ledger: &L, ctx: &Ctx) -> Result<Written, PortError> {
    transition(ledger, None, Change::Expire, ctx).await
}

/// What a cancel's write means.
pub fn cancel_answer(written: Written) -> Cancelled {
    match written {
        Written::Applied(_) => Cancelled::Cancelled,
        Written::Refused { current, .. } => match current.map(|c| c.status()) {
            Some(Status::Sending) => Cancelled::AlreadyInFlight,
            Some(Status::Delivered) => Cancelled::AlreadyDelivered,
            // A newer writer's state: not cancelled here, and the answer names it as stored.
            Some(s) if !s.is_known() => {
                tracing::warn!(status = s.as_str(), "cancel met a ledger status unknown to this version: not cancelled, answered as stored");
                Cancelled::AlreadyFinal(s)
            }
            Some(s) => Cancelled::AlreadyFinal(s),
            None => Cancelled::AlreadyFinal(Status::Scheduled),
        },
    }
}

#[cfg(test)]
mod tests;
