//! What a write asks of the ledger item ([`Change`], in its [`Ctx`]), and why the state
//! machine may refuse it ([`Refused`], [`Why`]).

use std::collections::BTreeSet;

use super::{LeaseToken, Origin, RedriveAudit, Status};
use crate::clock::Timestamp;
use crate::domain::{Channel, DeadReason, DeliveryKey};
use crate::policy::{OutcomeClass, RetryPolicy};

/// What a write wants to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// scheduled, ready, deferred (eligible) → sending.
    Claim {
        token: LeaseToken,
        lease_expires_at: Timestamp,
        payload_version: u64,
        policy: RetryPolicy,
    },
    /// sending (lease expired, named token) → sending: only on the ambiguous rule. The lost
    /// attempt counts against the budget.
    Takeover {
        stale_token: LeaseToken,
        token: LeaseToken,
        lease_expires_at: Timestamp,
    },
    /// sending → delivered (fenced). Counts the attempt.
    Deliver {
        token: LeaseToken,
        receipt: Option<String>,
    },
    /// sending → deferred (fenced), after a throttle (no attempt spent) or a transient or
    /// ambiguous failure (one attempt spent).
    Defer {
        token: LeaseToken,
        next_eligible_at: Timestamp,
        class: OutcomeClass,
        error: Option<String>,
    },
    /// sending (fenced) → deferred, nothing spent: a breaker probe failed, which is the
    /// outage's failure, not this delivery's (docs/design.md, "States and transitions": held by the
    /// breaker). Also the recipient's quiet hours (`quiet_hours`): no provider was asked at all.
    /// `maybe_sent` when the failed send timed out after its request was written.
    Hold {
        token: LeaseToken,
        next_eligible_at: Timestamp,
        error: Option<String>,
        quiet_hours: bool,
        maybe_sent: bool,
    },
    /// sending (fenced) or deferred → dead for a provider or budget reason; scheduled → dead
    /// for an unknown reminder only.
    Die {
        token: Option<LeaseToken>,
        reason: DeadReason,
        spends_attempt: bool,
        error: Option<String>,
        /// The channel a fallback delivery was started on, recorded with the death.
        fallback_to: Option<Channel>,
        /// The answer that ended it may have been acted on (a lost answer on the last
        /// attempt, a send nobody recorded): a fallback never takes over from it.
        maybe_sent: bool,
    },
    /// scheduled, ready, deferred → expired.
    Expire,
    /// scheduled, ready, deferred or dead → cancelled (a dead one so that no redrive can
    /// move it back to ready).
    Cancel,
    /// any stored state → the same, its TTL moved out to `Ctx::expires_at`: an edit moved the
    /// reminder's `fresh_until`, and the proof of a delivery, settled or not, must outlive the
    /// edited reminder. Unfenced: a lease holder's fenced write that meets it is re-applied
    /// (its lease is still its own).
    Extend,
    /// dead → ready, fresh budgets, audit entry — only when the ledger's `dead_reason` is one
    /// the operator selected (a stale or crash-looped DLQ copy cannot redrive a delivery the
    /// ledger holds dead for another reason).
    Redrive {
        audit: RedriveAudit,
        reasons: BTreeSet<DeadReason>,
    },
    /// dead → dead: this worker (its own token) makes the DLQ copy, before the copy; one
    /// worker at a time.
    ClaimDlqCopy { token: LeaseToken },
    /// dead → dead: its DLQ copy exists (written once, after the copy).
    CopiedToDlq,
    /// dead → dead, naming the channel a standby's walk handed the reminder on to, when the
    /// death named none (or one the reminder no longer lists): written before that channel
    /// sends, so a redrive of this death is refused as it is for any death that fell back.
    HandOn { to: Channel },
    /// sending (fenced) → expired: the lease holder found it stale right before sending.
    ExpireHeld { token: LeaseToken },
    /// dead → delivered: the worker whose lease the delivery died under (while its send was in
    /// flight) learned the send succeeded (fenced by that lease's token).
    Reconcile {
        token: LeaseToken,
        receipt: Option<String>,
    },
    /// sending (fenced) → ready, nothing spent, nothing sent: the claim is given back, and
    /// `why` says why in the item's history (the lease left could not cover a provider call,
    /// a storage call before the send failed, the reminder too close to `fresh_until` to call).
    Release {
        token: LeaseToken,
        why: &'static str,
    },
}

impl Change {
    pub fn name(&self) -> &'static str {
        match self {
            Change::Claim { .. } => "claim",
            Change::Takeover { .. } => "takeover",
            Change::Deliver { .. } => "deliver",
            Change::Defer { .. } => "defer",
            Change::Hold { .. } => "hold",
            Change::Die { .. } => "die",
            Change::Expire => "expire",
            Change::Cancel => "cancel",
            Change::Extend => "extend",
            Change::Redrive { .. } => "redrive",
            Change::ClaimDlqCopy { .. } => "claim_dlq_copy",
            Change::CopiedToDlq => "copied_to_dlq",
            Change::HandOn { .. } => "hand_on",
            Change::ExpireHeld { .. } => "expire_held",
            Change::Release { .. } => "release",
            Change::Reconcile { .. } => "reconcile",
        }
    }
}

/// When and for how long the write happens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ctx {
    pub key: DeliveryKey,
    pub now: Timestamp,
    /// TTL (epoch seconds) written with this transition.
    pub expires_at: i64,
    /// Whose delivery it is, when the writer knows: kept from the first write that names it.
    pub origin: Option<Origin>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Why {
    /// The design lists no such transition from this state.
    NotAllowed,
    /// A redrive of a death that handed the reminder on to this channel (docs/design.md, "Fallback
    /// chain"): sending it again would reach the person twice.
    FellBack(Channel),
    /// The write is fenced and the lease is someone else's.
    WrongLease,
    /// A deferred delivery is not eligible before this time.
    NotYetEligible(Timestamp),
    /// A takeover needs the lease to have run out.
    LeaseLive(Timestamp),
    /// The item changed since the decision was made; decide again from the current item.
    Stale,
    /// A redrive whose reason set does not hold the ledger's dead reason.
    ReasonNotSelected(DeadReason),
    /// The policy's attempt budget leaves no attempt for this send (a redrive grants a new
    /// one): the state machine holds the budget itself, whatever the caller decided.
    BudgetSpent { attempts: u32, max: u32 },
    /// The item is in a status this version does not know ([`Status::Unknown`]): a newer
    /// writer owns it, and no change of this version may overwrite what it wrote.
    NewerStatus,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{change} refused from {from:?}: {why:?}")]
pub struct Refused {
    pub change: &'static str,
    pub from: Status,
    pub why: Why,
}
