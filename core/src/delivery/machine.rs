//! [`transition`](super::transition) as a machine without I/O: it names one ledger operation
//! at a time and is fed that operation's answer. The async `transition` drives it with a
//! [`Ledger`](crate::ports::Ledger); the model check (`tests/model`) drives the same machine a
//! step at a time, interleaved with other writers, crashes and lost responses — so what is
//! checked is this code, not a copy of it.
//!
//! The rules it carries: a `None` view is an assumption, verified by one read before a refusal
//! is believed; a conflict re-applies an intent to the item the write returned, but never an
//! outcome decided on an older view; a write that failed may have landed, so the item is read
//! once, and the write was ours if the item is what we wrote (or carries our fresh lease).

use super::Written;
use crate::ledger::{apply, Change, Ctx, DeliveryRecord, Refused, Status, Why};
use crate::ports::{Cas, Expected, PortError};

/// Conflicts tolerated before a write gives up (each one means another writer made progress).
/// The read that verifies an assumed absence is not one (before the machine, it took one of the
/// eight rounds).
pub const MAX_CAS_ROUNDS: usize = 8;

/// The ledger operation a [`Transition`] waits on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op<'a> {
    /// A strongly consistent read of `ctx.key` (`Ledger::get`).
    Get,
    /// Store `next` if the item is still `expected` (`Ledger::put_if`).
    PutIf {
        next: &'a DeliveryRecord,
        expected: Expected,
    },
}

/// What the machine does after an answer: wait on another operation, or answer the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
// Both variants carry records; a `Progress` lives only until its caller matches on it.
#[allow(clippy::large_enum_variant)]
pub enum Progress {
    Next(Transition),
    Done(Result<Written, PortError>),
}

/// A transition in progress, waiting on the answer to [`Transition::op`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transition {
    change: Change,
    ctx: Ctx,
    /// The last view of the item (`None`: no item, perhaps only assumed).
    seen: Option<DeliveryRecord>,
    /// `seen` was observed, not assumed.
    verified: bool,
    rounds: usize,
    waiting: Waiting,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Waiting {
    /// A read to verify the assumption that there is no item.
    Verify,
    /// A conditional write of `next`, expecting `seen`.
    Write { next: DeliveryRecord },
    /// A read back after the write of `next` failed with `err`.
    ReadBack {
        next: DeliveryRecord,
        err: PortError,
    },
}

impl Transition {
    /// Apply `change` starting from `seen` (the caller's last view; `None` when it has none,
    /// which is right for a first claim).
    pub fn start(seen: Option<DeliveryRecord>, change: Change, ctx: Ctx) -> Progress {
        let verified = seen.is_some();
        Self {
            change,
            ctx,
            seen,
            verified,
            rounds: 0,
            waiting: Waiting::Verify,
        }
        .plan()
    }

    /// The operation this transition waits on.
    pub fn op(&self) -> Op<'_> {
        match &self.waiting {
            Waiting::Verify | Waiting::ReadBack { .. } => Op::Get,
            Waiting::Write { next } => Op::PutIf {
                next,
                expected: Expected::of(self.seen.as_ref()),
            },
        }
    }

    /// The answer to a [`Op::Get`].
    pub fn got(mut self, item: Result<Option<DeliveryRecord>, PortError>) -> Progress {
        match std::mem::replace(&mut self.waiting, Waiting::Verify) {
            Waiting::Verify => match item {
                Ok(item) => {
                    self.verified = true;
                    self.seen = item;
                    self.plan()
                }
                Err(e) => Progress::Done(Err(e)),
            },
            Waiting::ReadBack { next, err } => Progress::Done(match item {
                Ok(Some(cur)) if is_ours(&cur, &next, &self.change) => Ok(Written::Applied(cur)),
                _ => Err(err),
            }),
            Waiting::Write { .. } => Progress::Done(Err(misfed("a read's answer to a write"))),
        }
    }

    /// The answer to a [`Op::PutIf`].
    pub fn put(mut self, cas: Result<Cas, PortError>) -> Progress {
        let Waiting::Write { next } = std::mem::replace(&mut self.waiting, Waiting::Verify) else {
            return Progress::Done(Err(misfed("a write's answer to a read")));
        };
        match cas {
            Ok(Cas::Applied) => Progress::Done(Ok(Written::Applied(next))),
            Ok(Cas::Conflict(current)) => {
                self.verified = true;
                let current = current.map(|boxed| *boxed);
                if let Some(done) = on_conflict(&current, self.seen.as_ref(), &next, &self.change) {
                    return Progress::Done(Ok(done));
                }
                self.seen = current;
                self.rounds += 1;
                if self.rounds >= MAX_CAS_ROUNDS {
                    return Progress::Done(Err(PortError::Unavailable {
                        op: "ledger.transition",
                        message: "too many concurrent writers on one delivery".into(),
                    }));
                }
                self.plan()
            }
            Err(err) if err.is_retryable() => {
                self.waiting = Waiting::ReadBack { next, err };
                Progress::Next(self)
            }
            Err(err) => Progress::Done(Err(err)),
        }
    }

    pub fn change(&self) -> &Change {
        &self.change
    }

    pub fn ctx(&self) -> &Ctx {
        &self.ctx
    }

    /// The item as last seen (`None`: none, perhaps only assumed: see [`Self::verified`]).
    pub fn seen(&self) -> Option<&DeliveryRecord> {
        self.seen.as_ref()
    }

    pub fn verified(&self) -> bool {
        self.verified
    }

    /// Conflicts met so far.
    pub fn rounds(&self) -> usize {
        self.rounds
    }

    /// What a write in flight would store (also while reading it back).
    pub fn attempted(&self) -> Option<&DeliveryRecord> {
        match &self.waiting {
            Waiting::Write { next } | Waiting::ReadBack { next, .. } => Some(next),
            Waiting::Verify => None,
        }
    }

    /// Waiting on the read that follows a failed write.
    pub fn reading_back(&self) -> bool {
        matches!(self.waiting, Waiting::ReadBack { .. })
    }

    /// Compute the next record from `seen`: write it, verify the view first, or answer.
    fn plan(mut self) -> Progress {
        match apply(self.seen.as_ref(), self.change.clone(), &self.ctx) {
            Ok(next) => {
                self.waiting = Waiting::Write { next };
                Progress::Next(self)
            }
            // `None` was an assumption, not an observation: read the item once before
            // answering a refusal from `scheduled`.
            Err(_) if !self.verified => {
                self.waiting = Waiting::Verify;
                Progress::Next(self)
            }
            Err(refused) => Progress::Done(Ok(Written::Refused {
                refused,
                current: self.seen,
            })),
        }
    }
}

fn misfed(what: &str) -> PortError {
    PortError::Invariant {
        op: "ledger.transition",
        message: format!("{what}: the driver answered the wrong operation"),
    }
}

/// What a conflict means for `change`, or `None` to re-apply it to the current item.
fn on_conflict(
    current: &Option<DeliveryRecord>,
    seen: Option<&DeliveryRecord>,
    next: &DeliveryRecord,
    change: &Change,
) -> Option<Written> {
    // The SDK retried a write whose first response was lost: the item already is what we
    // wrote, or carries our own fresh lease. That write was ours. (An identical write
    // repeated at the same instant is indistinguishable from it, and equally done.)
    if let Some(cur) = current.as_ref().filter(|cur| is_ours(cur, next, change)) {
        return Some(Written::Applied(cur.clone()));
    }
    // A fenced write that meets the item still `sending` under its own lease: nothing but an
    // unfenced horizon move (an edit's `Extend`) can have changed it, so the outcome decided
    // on what was seen still holds. Re-applied.
    if let (Some(token), Some(cur)) = (fence(change), current.as_ref()) {
        if cur.status() == Status::Sending && cur.lease_token() == Some(token) {
            return None;
        }
    }
    // The DLQ copy of one death holds whatever was written since while the item is still that
    // death (the same move into `dead`): an edit's horizon move, or a newer version's write,
    // landing between the death and its copy's claim must not leave the death without a copy.
    // The claim is made again (the change refuses a death already copied, or whose copy another
    // worker holds); the record of the copy only under the claim this worker made.
    if let (Some(cur), Some(seen)) = (current.as_ref(), seen) {
        let same_death = cur.death_number().is_some() && cur.death_number() == seen.death_number();
        let again = match change {
            Change::ClaimDlqCopy { .. } => same_death,
            // The claim the record was made under (the item as this worker read it) still holds.
            Change::CopiedToDlq => {
                same_death
                    && seen.dlq_copy_claim().is_some()
                    && cur.dlq_copy_claim() == seen.dlq_copy_claim()
            }
            _ => false,
        };
        if again {
            return None;
        }
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
            | Change::HandOn { .. }
            | Change::Die { token: None, .. }
            // Fenced by the lease the delivery died under, whatever was written since (its
            // DLQ copy, say).
            | Change::Reconcile { .. }
    );
    (!intent).then(|| Written::Refused {
        refused: Refused {
            change: change.name(),
            from: current.as_ref().map_or(Status::Scheduled, |c| c.status()),
            why: Why::Stale,
        },
        current: current.clone(),
    })
}

/// The lease a fenced outcome write is made under.
fn fence(change: &Change) -> Option<&crate::ledger::LeaseToken> {
    match change {
        Change::Deliver { token, .. }
        | Change::Defer { token, .. }
        | Change::Hold { token, .. }
        | Change::Release { token, .. }
        | Change::ExpireHeld { token }
        | Change::Die {
            token: Some(token), ..
        } => Some(token),
        _ => None,
    }
}

/// The item shows that our write landed: it is what we wrote, or carries our fresh lease.
pub fn is_ours(current: &DeliveryRecord, attempted: &DeliveryRecord, change: &Change) -> bool {
    if current == attempted {
        return true;
    }
    match change {
        Change::Claim { token, .. } | Change::Takeover { token, .. } => {
            current.status() == Status::Sending && current.lease_token() == Some(token)
        }
        // A copy claim sent again after its answer was lost, with another write landed since:
        // the claim the item holds is this worker's own.
        Change::ClaimDlqCopy { token } => {
            current.status() == Status::Dead
                && current.dlq_copied_at().is_none()
                && current.dlq_copy_claim() == Some(token)
        }
        _ => false,
    }
}
