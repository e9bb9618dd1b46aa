//! What tells two states apart. The checker keeps one state per hash, so the hash decides
//! which states count as the same. Four liberties, each exact for this model:
//!
//! - A record's `history`, `first_seen_at` and `expires_at` are left out. No decision reads
//!   them; only `is_ours` compares whole records, and always two records at the same `seq`
//!   (a read-back: the item against our write; a conflict: the item against what we would
//!   have written). The ledger's writes form one chain (each is conditional on the `seq` it
//!   was computed from), so two records at one `seq` come from the same record, and then
//!   those three fields agree whenever the hashed ones do (the history entry a write adds is
//!   its time, its from and to statuses and a detail named by its reason or class). (A
//!   planted `UnfencedOutcome` breaks the chain; a counterexample is a real path all the
//!   same, replayed from the start.)
//! - `seq` counts relative to the ledger's: it is only ever compared for equality.
//! - Lease tokens are numbered by first mention: a token's name means nothing but which
//!   other mentions are the same token.
//! - Workers are interchangeable (their tokens are renamed, as above): they are hashed in an
//!   order of their own, not by their numbers. A tie leaves two copies of a state, never one
//!   too few.
//!
//! (`dlq_copy_claim` has no getter and is left out: the model makes no DLQ copies.)

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use reminders::delivery::Transition;
use reminders::ledger::{Change, DeliveryRecord, LeaseToken};

use crate::operator::{Canceller, Redriver};
use crate::protocol::State;
use crate::worker::{Lease, Phase, Then};

impl Hash for State {
    fn hash<H: Hasher>(&self, h: &mut H) {
        let base = self.ledger.as_ref().map_or(0, |r| r.seq());
        let mut names = Names::default();
        (
            self.now,
            self.queue,
            self.reminder_cancelled,
            self.acceptances,
        )
            .hash(h);
        (&self.used, &self.ghost).hash(h);
        record(self.ledger.as_deref(), base, &mut names, h);
        operators(self, base, &mut names, h);
        // Workers are interchangeable: hash them in an order that does not depend on their
        // numbers (by what each looks like next to the ledger).
        let mut order: Vec<(u64, usize)> = (0..self.workers.len())
            .map(|w| {
                let mut own = Names(names.0.clone(), true);
                let mut key = DefaultHasher::new();
                worker(&self.workers[w], base, &mut own, &mut key);
                (key.finish(), w)
            })
            .collect();
        order.sort_unstable();
        for (_, w) in order {
            worker(&self.workers[w], base, &mut names, h);
        }
    }
}

/// Every lease token the state mentions.
pub fn mentioned(s: &State) -> Vec<LeaseToken> {
    let base = s.ledger.as_ref().map_or(0, |r| r.seq());
    let (mut names, mut sink) = (Names::default(), DefaultHasher::new());
    record(s.ledger.as_deref(), base, &mut names, &mut sink);
    operators(s, base, &mut names, &mut sink);
    for phase in &s.workers {
        worker(phase, base, &mut names, &mut sink);
    }
    names.0
}

/// Lease tokens by order of first mention: a token's name means nothing but which other
/// mentions are the same token, so states that differ only by the names count as one.
/// (Frozen: a token not yet numbered counts as "another token".)
#[derive(Default)]
struct Names(Vec<LeaseToken>, bool);

impl Names {
    fn hash<H: Hasher>(&mut self, token: Option<&LeaseToken>, h: &mut H) {
        let Some(token) = token else {
            return usize::MAX.hash(h);
        };
        match self.0.iter().position(|t| t == token) {
            Some(i) => i.hash(h),
            None if self.1 => (usize::MAX - 1).hash(h),
            None => {
                self.0.push(token.clone());
                (self.0.len() - 1).hash(h);
            }
        }
    }
}

fn worker<H: Hasher>(phase: &Phase, base: u64, names: &mut Names, h: &mut H) {
    std::mem::discriminant(phase).hash(h);
    match phase {
        Phase::Idle => {}
        Phase::Write(t, then) => {
            transition(t, base, names, h);
            std::mem::discriminant(then).hash(h);
            match then {
                Then::Claim(t) | Then::TakeOver(t) | Then::Deliver(t) => names.hash(Some(t), h),
                _ => {}
            }
        }
        Phase::Send(Lease { record: r, token }) => {
            record(Some(r), base, names, h);
            names.hash(Some(token), h);
        }
    }
}

fn operators<H: Hasher>(s: &State, base: u64, names: &mut Names, h: &mut H) {
    std::mem::discriminant(&s.canceller).hash(h);
    match &s.canceller {
        Canceller::Idle => {}
        Canceller::Ledger(t) => transition(t, base, names, h),
        Canceller::Mark(answer) => format!("{answer:?}").hash(h),
    }
    std::mem::discriminant(&s.redriver).hash(h);
    if let Redriver::Ledger(t) = &s.redriver {
        transition(t, base, names, h);
    }
}

/// Every field of a transition in progress that decides its next operation or answer.
fn transition<H: Hasher>(t: &Transition, base: u64, names: &mut Names, h: &mut H) {
    record(t.seen(), base, names, h);
    (t.verified(), t.rounds(), t.ctx().now, t.reading_back()).hash(h);
    change(t.change(), names, h);
    record(t.attempted(), base, names, h);
}

fn change<H: Hasher>(c: &Change, names: &mut Names, h: &mut H) {
    std::mem::discriminant(c).hash(h);
    match c {
        Change::Claim {
            token,
            lease_expires_at,
            payload_version,
            policy,
        } => {
            names.hash(Some(token), h);
            (lease_expires_at, payload_version).hash(h);
            (&policy.version, policy.max_attempts).hash(h);
        }
        Change::Takeover {
            stale_token,
            token,
            lease_expires_at,
        } => {
            names.hash(Some(stale_token), h);
            names.hash(Some(token), h);
            lease_expires_at.hash(h);
        }
        Change::Deliver { token, receipt } | Change::Reconcile { token, receipt } => {
            names.hash(Some(token), h);
            receipt.hash(h);
        }
        Change::Defer {
            token,
            next_eligible_at,
            class,
            error,
        } => {
            names.hash(Some(token), h);
            (next_eligible_at, class, error).hash(h);
        }
        Change::Die {
            token,
            reason,
            spends_attempt,
            error,
            fallback_to,
            maybe_sent,
        } => {
            names.hash(token.as_ref(), h);
            (reason, spends_attempt, error, fallback_to, maybe_sent).hash(h);
        }
        Change::Hold {
            token,
            next_eligible_at,
            error,
            quiet_hours,
            maybe_sent,
        } => {
            names.hash(Some(token), h);
            next_eligible_at.hash(h);
            error.hash(h);
            quiet_hours.hash(h);
            maybe_sent.hash(h);
        }
        Change::Release { token, .. }
        | Change::ExpireHeld { token }
        | Change::ClaimDlqCopy { token } => names.hash(Some(token), h),
        Change::Redrive { reasons, .. } => reasons.hash(h),
        Change::HandOn { to } => to.hash(h),
        Change::Expire | Change::Cancel | Change::Extend | Change::CopiedToDlq => {}
    }
}

/// Every field a decision reads; `seq` relative to the ledger's.
fn record<H: Hasher>(r: Option<&DeliveryRecord>, base: u64, names: &mut Names, h: &mut H) {
    let Some(r) = r else {
        0u8.hash(h);
        return;
    };
    1u8.hash(h);
    (r.status(), base.wrapping_sub(r.seq())).hash(h);
    (r.attempt_count(), r.throttle_count(), r.payload_version()).hash(h);
    names.hash(r.lease_token(), h);
    (r.lease_expires_at(), r.next_eligible_at(), r.updated_at()).hash(h);
    (r.last_outcome_class(), r.last_error(), r.dead_reason()).hash(h);
    (
        r.dlq_copied_at(),
        r.dlq_copy_claimed_at(),
        r.provider_receipt(),
    )
        .hash(h);
    r.policy().map(|p| (&p.version, p.max_attempts)).hash(h);
    names.hash(r.died_under_lease(), h);
}
