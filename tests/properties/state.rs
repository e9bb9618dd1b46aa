//! `ledger::apply` (docs/design.md, "States and transitions") under arbitrary sequences of changes,
//! from no record: what every write must keep, whatever the caller asks.

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use reminders::clock::Timestamp;
use reminders::domain::DeadReason;
use reminders::ledger::{
    apply, Change, DeliveryRecord, LeaseToken, Status, Why, HISTORY_BOUND, MAX_ERROR_LEN,
};
use reminders::policy::OutcomeClass;

use crate::strategies::{redrive_all, token_n, TOKENS};
use crate::walk::{ending_steps, long_steps, steps, walk};

/// The token a fenced change must hold the current lease with, if it is fenced.
fn fence(change: &Change) -> Option<&LeaseToken> {
    match change {
        Change::Deliver { token, .. }
        | Change::Defer { token, .. }
        | Change::Die {
            token: Some(token), ..
        }
        | Change::ExpireHeld { token }
        | Change::Release { token, .. } => Some(token),
        Change::Takeover { stale_token, .. } => Some(stale_token),
        _ => None,
    }
}

/// Whether `sending` allows the change with the right lease (a death from `sending` must be
/// for a provider or budget reason, or a recipient's choice that spends no attempt).
fn allowed_when_sending(change: &Change) -> bool {
    match change {
        Change::Die {
            reason,
            spends_attempt,
            ..
        } => {
            matches!(
                reason,
                DeadReason::Rejected
                    | DeadReason::AttemptsExhausted
                    | DeadReason::ThrottleExhausted
                    | DeadReason::Ambiguous
            ) || (reason.is_recipients_choice() && !spends_attempt)
        }
        _ => true,
    }
}

/// What a change adds to `attempt_count` when applied (a redrive resets it instead).
fn attempts_spent(change: &Change) -> u32 {
    let spends = match change {
        Change::Deliver { .. } | Change::Takeover { .. } => true,
        Change::Defer { class, .. } => {
            matches!(class, OutcomeClass::Transient | OutcomeClass::Ambiguous)
        }
        Change::Die { spends_attempt, .. } => *spends_attempt,
        _ => false,
    };
    u32::from(spends)
}

/// One of each kind of change, with every pool token and every dead reason.
fn every_change(now: Timestamp) -> Vec<Change> {
    let mut all = vec![
        Change::Expire,
        Change::Cancel,
        Change::CopiedToDlq,
        redrive_all(),
    ];
    for n in 0..TOKENS {
        all.extend(with_token(token_n(n), token_n((n + 1) % TOKENS), now));
    }
    all
}

/// Every change that names a lease token, with `token` (and `other` as a takeover's stale
/// token).
fn with_token(token: LeaseToken, other: LeaseToken, now: Timestamp) -> Vec<Change> {
    let t = || token.clone();
    let mut all = vec![
        Change::Claim {
            token: t(),
            lease_expires_at: now,
            payload_version: 1,
            policy: reminders::policy::RetryPolicy::default(),
        },
        Change::Takeover {
            stale_token: other,
            token: t(),
            lease_expires_at: now,
        },
        Change::Deliver {
            token: t(),
            receipt: None,
        },
        Change::ClaimDlqCopy { token: t() },
        Change::ExpireHeld { token: t() },
        Change::Release {
            token: t(),
            why: "lease too short",
        },
        Change::Reconcile {
            token: t(),
            receipt: None,
        },
    ];
    for class in [OutcomeClass::Throttled, OutcomeClass::Transient] {
        let (next_eligible_at, error) = (now, None);
        all.push(Change::Defer {
            token: t(),
            next_eligible_at,
            class,
            error,
        });
    }
    for reason in DeadReason::ALL {
        for token in [None, Some(t())] {
            let (spends_attempt, error) = (true, None);
            all.push(Change::Die {
                token,
                reason,
                spends_attempt,
                error,
                fallback_to: None,
                maybe_sent: false,
            });
        }
    }
    all
}

proptest! {
    #![proptest_config(crate::config())]

    /// Every applied change is the next transition number, and its history entry says so.
    #[test]
    fn every_applied_change_is_the_next_seq(steps in steps()) {
        walk(&steps, |s| {
            let Ok(next) = s.result else { return Ok(false) };
            let previous = s.before.map_or(0, DeliveryRecord::seq);
            prop_assert_eq!(next.seq(), previous + 1);
            let (n, last) = *next.history().last().expect("a history entry");
            prop_assert_eq!(n, next.seq());
            let from = s.before.map_or(Status::Scheduled, DeliveryRecord::status);
            prop_assert_eq!((last.at, last.from, last.to), (s.ctx.now, from, next.status()));
            Ok(true)
        })?;
    }

    /// `delivered`, `expired` and `cancelled` refuse every change: the one drawn, and one of
    /// each kind with every token.
    #[test]
    fn terminal_statuses_refuse_every_change(steps in ending_steps()) {
        walk(&steps, |s| {
            let Some(before) = s.before.filter(|r| r.status().is_terminal()) else {
                return Ok(false);
            };
            prop_assert!(s.result.is_err(), "{} applied to {:?}", s.change.name(), before.status());
            for change in every_change(s.ctx.now) {
                let name = change.name();
                let refused = apply(Some(before), change, s.ctx);
                prop_assert!(refused.is_err(), "{} applied to {:?}", name, before.status());
            }
            Ok(true)
        })?;
    }

    /// `attempt_count` moves by what the change spends (one for a send that may have reached
    /// the provider, none for a throttle or a refusal), and only a redrive resets it.
    #[test]
    fn attempts_count_what_each_change_spends(steps in steps()) {
        walk(&steps, |s| {
            let Ok(next) = s.result else { return Ok(false) };
            let before = s.before.map_or(0, DeliveryRecord::attempt_count);
            let expected = match s.change {
                Change::Redrive { .. } => 0,
                c => before + attempts_spent(c),
            };
            prop_assert_eq!(next.attempt_count(), expected, "after {}", s.change.name());
            Ok(true)
        })?;
    }
}

proptest! {
    #![proptest_config(crate::config())]

    /// A fenced change whose token is not the current lease is refused (as `WrongLease` while
    /// the delivery is `sending`); the lease holder's `deliver` is always accepted; only the
    /// lease a delivery died under can reconcile it.
    #[test]
    fn fenced_changes_need_the_current_lease(steps in steps()) {
        let mut died_under: Option<LeaseToken> = None;
        walk(&steps, |s| {
            let lease = s.before.and_then(DeliveryRecord::lease_token);
            let from = s.before.map_or(Status::Scheduled, DeliveryRecord::status);
            let mut checked = false;
            if let Some(token) = fence(s.change).filter(|t| Some(*t) != lease) {
                checked = true;
                let Err(refused) = s.result else {
                    let name = s.change.name();
                    return Err(TestCaseError::fail(format!("{name} applied under {token:?}")));
                };
                let why = if from == Status::Sending && allowed_when_sending(s.change) {
                    Why::WrongLease
                } else {
                    Why::NotAllowed
                };
                prop_assert_eq!(&refused.why, &why);
            }
            if let (Status::Sending, Change::Deliver { token, .. }) = (from, s.change) {
                checked = true;
                prop_assert_eq!(s.result.is_ok(), Some(token) == lease);
            }
            if let (Ok(_), Change::Reconcile { token, .. }) = (s.result, s.change) {
                checked = true;
                prop_assert_eq!(Some(token), died_under.as_ref());
            }
            if let Ok(next) = s.result {
                died_under = match (from, next.status()) {
                    (Status::Sending, Status::Dead) => lease.cloned(),
                    (Status::Dead, Status::Dead) => died_under.take(),
                    _ => None,
                };
            }
            Ok(checked)
        })?;
    }

    /// The history keeps the newest `HISTORY_BOUND` transitions, numbered without gaps.
    #[test]
    fn history_is_bounded(steps in long_steps()) {
        walk(&steps, |s| {
            let Ok(next) = s.result else { return Ok(false) };
            let numbers: Vec<u64> = next.history().into_iter().map(|(n, _)| n).collect();
            let kept = next.seq().min(HISTORY_BOUND);
            let expected: Vec<u64> = (next.seq() - kept + 1..=next.seq()).collect();
            prop_assert_eq!(numbers, expected);
            Ok(true)
        })?;
    }

    /// Every record round-trips through JSON unchanged (the ledger stores it that way).
    #[test]
    fn records_round_trip_through_json(steps in steps()) {
        walk(&steps, |s| {
            let Ok(next) = s.result else { return Ok(false) };
            let text = serde_json::to_string(next).expect("serializes");
            let back: DeliveryRecord = serde_json::from_str(&text).expect("deserializes");
            prop_assert_eq!(&back, next);
            let value = serde_json::to_value(next).expect("serializes");
            let back: DeliveryRecord = serde_json::from_value(value).expect("deserializes");
            prop_assert_eq!(&back, next);
            Ok(true)
        })?;
    }

    /// A lease exists exactly while `sending`, a dead reason exactly while `dead`; errors are
    /// bounded; the write is stamped with its time and never shortens the TTL.
    #[test]
    fn fields_follow_the_status(steps in steps()) {
        walk(&steps, |s| {
            let Ok(next) = s.result else { return Ok(false) };
            let sending = next.status() == Status::Sending;
            prop_assert_eq!(next.lease_token().is_some(), sending);
            prop_assert_eq!(next.lease_expires_at().is_some(), sending);
            prop_assert_eq!(next.dead_reason().is_some(), next.status() == Status::Dead);
            prop_assert!(next.last_error().is_none_or(|e| e.len() <= MAX_ERROR_LEN));
            prop_assert_eq!(next.updated_at(), s.ctx.now);
            let ttl = s.before.map_or(s.ctx.expires_at, |b| b.expires_at().max(s.ctx.expires_at));
            prop_assert_eq!(next.expires_at(), ttl);
            let first_seen = s.before.map_or(s.ctx.now, DeliveryRecord::first_seen_at);
            prop_assert_eq!(next.first_seen_at(), first_seen);
            Ok(true)
        })?;
    }
}
