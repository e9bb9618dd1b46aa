//! One delivery's life on the ledger: the state machine ([`state`]) and the operations that
//! persist its transitions through the [`Ledger`] port — claim, fenced outcome writes, cancel.
//!
//! Every operation is optimistic: compute the next record from what was last seen (nothing, for
//! a first claim: the happy path costs one write), write it conditionally, and on a conflict
//! recompute from the item DynamoDB returned (no extra read).

pub mod state;

use crate::clock::Timestamp;
use crate::policy::RetryPolicy;
use crate::ports::{Cas, Expected, Ledger, PortError};
use state::{apply, Change, Ctx, DeliveryRecord, LeaseToken, Refused, Status};

/// Conflicts tolerated before a write gives up (each one means another writer made progress).
const MAX_CAS_ROUNDS: usize = 8;

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
/// has none, which is right for a first claim).
pub async fn transition<L: Ledger>(
    ledger: &L,
    seen: Option<DeliveryRecord>,
    change: Change,
    ctx: &Ctx,
) -> Result<Written, PortError> {
    // `None` from the caller is an assumption (no item yet), not an observation: if the change
    // is refused from `scheduled`, read the item once before answering.
    let mut verified = seen.is_some();
    let mut seen = seen;
    for _ in 0..MAX_CAS_ROUNDS {
        let next = match apply(seen.as_ref(), change.clone(), ctx) {
            Ok(next) => next,
            Err(_) if !verified => {
                verified = true;
                seen = ledger.get(&ctx.key).await?;
                continue;
            }
            Err(refused) => {
                return Ok(Written::Refused {
                    refused,
                    current: seen,
                })
            }
        };
        let cas = match ledger.put_if(&next, Expected::of(seen.as_ref())).await {
            Ok(cas) => cas,
            Err(e) => return read_back(ledger, &next, &change, ctx, e).await,
        };
        match cas {
            Cas::Applied => return Ok(Written::Applied(next)),
            Cas::Conflict(current) => {
                verified = true;
                let current = current.map(|boxed| *boxed);
                if let Some(done) = on_conflict(&current, &next, &change) {
                    return Ok(done);
                }
                seen = current;
            }
        }
    }
    Err(PortError::Unavailable {
        op: "ledger.transition",
        message: "too many concurrent writers on one delivery".into(),
    })
}

/// What a conflict means for `change`, or `None` to re-apply it to the current item.
fn on_conflict(
    current: &Option<DeliveryRecord>,
    next: &DeliveryRecord,
    change: &Change,
) -> Option<Written> {
    // The SDK retried a write whose first response was lost: the item already is what we
    // wrote, or carries our own fresh lease. That write was ours. (An identical write
    // repeated at the same instant is indistinguishable from it, and equally done.)
    if let Some(cur) = current.as_ref().filter(|cur| is_ours(cur, next, change)) {
        return Some(Written::Applied(cur.clone()));
    }
    // A claim, cancel, expiry, redrive or an unfenced death (the reminder is gone or
    // unreadable) states an intent that holds whatever the item now is; an outcome or a
    // takeover was decided on what was seen, so it is not re-applied to a newer item.
    let intent = matches!(
        change,
        Change::Claim { .. }
            | Change::Cancel
            | Change::Expire
            | Change::Redrive { .. }
            | Change::Extend
            | Change::Die { token: None, .. }
            // Fenced by the lease the delivery died under, whatever was written since (its
            // DLQ copy, say).
            | Change::Reconcile { .. }
    );
    (!intent).then(|| Written::Refused {
        refused: Refused {
            change: change.name(),
            from: current.as_ref().map_or(Status::Scheduled, |c| c.status()),
            why: state::Why::Stale,
        },
        current: current.clone(),
    })
}

/// A write that failed (a timeout, a lost response) may have been applied all the same: read
/// the item once; if it is what we wrote (or carries our own fresh lease), the write was ours
/// and the caller goes on. Otherwise the error stands.
async fn read_back<L: Ledger>(
    ledger: &L,
    next: &DeliveryRecord,
    change: &Change,
    ctx: &Ctx,
    err: PortError,
) -> Result<Written, PortError> {
    if !err.is_retryable() {
        return Err(err);
    }
    match ledger.get(&ctx.key).await {
        Ok(Some(cur)) if is_ours(&cur, next, change) => Ok(Written::Applied(cur)),
        _ => Err(err),
    }
}

fn is_ours(current: &DeliveryRecord, attempted: &DeliveryRecord, change: &Change) -> bool {
    if current == attempted {
        return true;
    }
    match change {
        Change::Claim { token, .. } | Change::Takeover { token, .. } => {
            current.status() == Status::Sending && current.lease_token() == Some(token)
        }
        _ => false,
    }
}

/// The answer to a claim (DESIGN §4).
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
    let (refused, current) = match transition(ledger, None, change, ctx).await? {
        Written::Applied(record) => return Ok(Claim::Acquired(record)),
        Written::Refused { refused, current } => (refused, current),
    };
    if matches!(refused.why, state::Why::BudgetSpent { .. }) {
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
            Some(until) if until > ctx.now => Claim::HeldByOther { until },
            _ => Claim::LeaseExpired(cur),
        },
        Status::Deferred => Claim::NotYetEligible {
            at: cur.next_eligible_at().unwrap_or(ctx.now),
        },
        Status::Scheduled | Status::Ready => {
            return Err(PortError::Invariant {
                op: "ledger.claim",
                message: format!("claim refused from a claimable state: {refused}"),
            })
        }
    })
}

/// Move a settled delivery's TTL out to `ctx.expires_at` (an edit moved the reminder's
/// freshness): its proof must outlive every message that carries its key. A delivery not
/// settled, or already kept that long, is left alone; it gets its horizon from its next write.
pub async fn extend_horizon<L: Ledger>(ledger: &L, ctx: &Ctx) -> Result<(), PortError> {
    let Some(current) = ledger.get(&ctx.key).await? else {
        return Ok(());
    };
    if !current.status().is_terminal() || current.expires_at() >= ctx.expires_at {
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

/// Cancel one delivery: ordered against claims by the ledger (DESIGN §4).
pub async fn cancel<L: Ledger>(ledger: &L, ctx: &Ctx) -> Result<Cancelled, PortError> {
    match transition(ledger, None, Change::Cancel, ctx).await? {
        Written::Applied(_) => Ok(Cancelled::Cancelled),
        Written::Refused { current, .. } => Ok(match current.map(|c| c.status()) {
            Some(Status::Sending) => Cancelled::AlreadyInFlight,
            Some(Status::Delivered) => Cancelled::AlreadyDelivered,
            Some(s) => Cancelled::AlreadyFinal(s),
            None => Cancelled::AlreadyFinal(Status::Scheduled),
        }),
    }
}

#[cfg(test)]
mod tests;
