use std::time::Duration;

use rand::rngs::StdRng;
use rand::SeedableRng;

use super::*;
use crate::domain::{Channel, ReminderId, SubscriberId};

const T0: Timestamp = Timestamp::from_millis(1_000_000);
/// After every lease of these tests ran out.
const LATER: Timestamp = Timestamp::from_millis(1_000_000 + 120_000);

fn ctx_at(now: Timestamp) -> Ctx {
    Ctx {
        key: DeliveryKey::derive(
            &ReminderId::parse("r").unwrap(),
            &SubscriberId::parse("s").unwrap(),
            Channel::Sms,
        ),
        now,
        expires_at: 5_000,
        origin: None,
    }
}

fn tok(n: u64) -> LeaseToken {
    LeaseToken::generate(&mut StdRng::seed_from_u64(n))
}

fn claim(token: LeaseToken) -> Change {
    Change::Claim {
        token,
        lease_expires_at: T0.plus(Duration::from_secs(60)),
        payload_version: 1,
        policy: RetryPolicy::default(),
    }
}

fn step(r: Option<&DeliveryRecord>, c: Change) -> DeliveryRecord {
    step_at(r, c, T0)
}

fn step_at(r: Option<&DeliveryRecord>, c: Change, now: Timestamp) -> DeliveryRecord {
    apply(r, c, &ctx_at(now)).expect("transition allowed")
}

/// A record in each stored state, with lease token `tok(1)` where it has one.
fn in_state(s: Status) -> Option<DeliveryRecord> {
    let sending = step(None, claim(tok(1)));
    let r = match s {
        Status::Scheduled => return None,
        Status::Sending => sending,
        Status::Deferred => step(
            Some(&sending),
            Change::Defer {
                token: tok(1),
                next_eligible_at: T0,
                class: OutcomeClass::Transient,
                error: Some("http_503".into()),
            },
        ),
        Status::Delivered => step(
            Some(&sending),
            Change::Deliver {
                token: tok(1),
                receipt: Some("m-1".into()),
            },
        ),
        Status::Expired => step(None, Change::Expire),
        Status::Cancelled => step(None, Change::Cancel),
        Status::Dead => step(
            Some(&sending),
            Change::Die {
                token: Some(tok(1)),
                reason: DeadReason::Rejected,
                spends_attempt: true,
                error: None,
                fallback_to: None,
                maybe_sent: false,
            },
        ),
        Status::Ready => step(
            in_state(Status::Dead).as_ref(),
            Change::Redrive {
                audit: RedriveAudit {
                    batch_id: "b".into(),
                    operator: "op".into(),
                    note: "n".into(),
                },
                reasons: DeadReason::ALL.into_iter().collect(),
            },
        ),
        Status::Unknown(s) => unreachable!("no change of this version lands in {s}"),
    };
    assert_eq!(r.status(), s);
    Some(r)
}

const ALL: [Status; 8] = [
    Status::Scheduled,
    Status::Ready,
    Status::Sending,
    Status::Deferred,
    Status::Delivered,
    Status::Expired,
    Status::Cancelled,
    Status::Dead,
];

/// Each kind of change with the arguments a legitimate caller would pass (the lease holder's
/// token where one is needed), and the states the design allows it from.
fn table() -> Vec<(Change, Vec<Status>, Status)> {
    let mut t = fenced_table();
    t.extend(unfenced_table());
    t
}

/// Changes that need the lease holder's token.
fn fenced_table() -> Vec<(Change, Vec<Status>, Status)> {
    use Status::*;
    vec![
        (Change::ExpireHeld { token: tok(1) }, vec![Sending], Expired),
        (
            Change::Release {
                token: tok(1),
                why: "lease too short",
            },
            vec![Sending],
            Ready,
        ),
        (
            Change::Takeover {
                stale_token: tok(1),
                token: tok(5),
                lease_expires_at: LATER,
            },
            vec![Sending],
            Sending,
        ),
        (
            Change::Deliver {
                token: tok(1),
                receipt: None,
            },
            vec![Sending],
            Delivered,
        ),
        (
            Change::Defer {
                token: tok(1),
                next_eligible_at: T0,
                class: OutcomeClass::Throttled,
                error: None,
            },
            vec![Sending],
            Deferred,
        ),
        (
            Change::Die {
                token: Some(tok(1)),
                reason: DeadReason::Rejected,
                spends_attempt: true,
                error: None,
                fallback_to: None,
                maybe_sent: false,
            },
            vec![Sending],
            Dead,
        ),
    ]
}

/// Changes without a lease: claims, and what the budget, the reminder or an operator decide.
fn unfenced_table() -> Vec<(Change, Vec<Status>, Status)> {
    use Status::*;
    vec![
        (claim(tok(2)), vec![Scheduled, Ready, Deferred], Sending),
        (
            Change::Die {
                token: None,
                reason: DeadReason::ThrottleExhausted,
                spends_attempt: false,
                error: None,
                fallback_to: None,
                maybe_sent: false,
            },
            vec![Deferred],
            Dead,
        ),
        (
            Change::Die {
                token: None,
                reason: DeadReason::UnknownReminder,
                spends_attempt: false,
                error: None,
                fallback_to: None,
                maybe_sent: false,
            },
            vec![Scheduled, Ready, Deferred],
            Dead,
        ),
        (
            Change::Die {
                token: None,
                reason: DeadReason::InvalidReminder,
                spends_attempt: false,
                error: Some("recipients.sms: missing for a listed channel".into()),
                fallback_to: None,
                maybe_sent: false,
            },
            vec![Scheduled, Ready, Deferred],
            Dead,
        ),
        (Change::Expire, vec![Scheduled, Ready, Deferred], Expired),
        (Change::ClaimDlqCopy { token: tok(3) }, vec![Dead], Dead),
        (Change::CopiedToDlq, vec![Dead], Dead),
        (
            Change::Cancel,
            vec![Scheduled, Ready, Deferred, Dead],
            Cancelled,
        ),
        (
            Change::Redrive {
                audit: RedriveAudit {
                    batch_id: "b2".into(),
                    operator: "op".into(),
                    note: "".into(),
                },
                reasons: DeadReason::ALL.into_iter().collect(),
            },
            vec![Dead],
            Ready,
        ),
    ]
}

#[test]
fn every_listed_transition_is_allowed_and_every_other_refused() {
    for (change, allowed_from, to) in table() {
        for from in ALL {
            let current = in_state(from);
            let result = apply(current.as_ref(), change.clone(), &ctx_at(LATER));
            if allowed_from.contains(&from) {
                let next =
                    result.unwrap_or_else(|e| panic!("{} from {from:?}: {e}", change.name()));
                assert_eq!(next.status(), to, "{} from {from:?}", change.name());
                assert_eq!(next.seq(), current.as_ref().map_or(0, |r| r.seq()) + 1);
                let (_, last) = *next.history().last().unwrap();
                assert_eq!((last.from, last.to), (from, to));
            } else {
                let refused = result.expect_err(&format!("{} from {from:?}", change.name()));
                assert_eq!(refused.from, from);
                assert_eq!(
                    refused.why,
                    Why::NotAllowed,
                    "{} from {from:?}",
                    change.name()
                );
            }
        }
    }
}

/// An edit moves the TTL of every stored delivery's proof, settled or not, and nothing else: a
/// `sending` item kept the old horizon before, so a TTL could delete it before the ambiguous rule
/// ran and the next claim sent again. With no item there is nothing to move.
#[test]
fn extend_moves_every_stored_deliverys_ttl() {
    let far = ctx_at(LATER);
    let far = Ctx {
        expires_at: far.expires_at + 86_400 * 30,
        ..far
    };
    for s in ALL {
        let current = in_state(s);
        let result = apply(current.as_ref(), Change::Extend, &far);
        match current {
            Some(cur) => {
                let next = result.unwrap();
                assert_eq!(next.status(), s);
                assert_eq!(next.expires_at(), far.expires_at);
                assert_eq!(next.attempt_count(), cur.attempt_count());
                assert_eq!(next.lease_token(), cur.lease_token(), "{s:?}");
                assert_eq!(next.seq(), cur.seq() + 1);
            }
            None => assert_eq!(result.unwrap_err().why, Why::NotAllowed, "{s:?}"),
        }
    }
}

#[test]
fn terminal_states_never_change() {
    for s in [Status::Delivered, Status::Expired, Status::Cancelled] {
        assert!(s.is_terminal());
        let r = in_state(s);
        for (change, _, _) in table() {
            assert!(apply(r.as_ref(), change, &ctx_at(LATER)).is_err(), "{s:?}");
        }
    }
}

#[test]
fn counters_policy_snapshot_and_redrive_budget() {
    let sending = in_state(Status::Sending).unwrap();
    let throttled = step(
        Some(&sending),
        Change::Defer {
            token: tok(1),
            next_eligible_at: T0,
            class: OutcomeClass::Throttled,
            error: None,
        },
    );
    assert_eq!(
        (throttled.attempt_count(), throttled.throttle_count()),
        (0, 1)
    );
    let other_policy = RetryPolicy {
        version: "v2".into(),
        ..RetryPolicy::default()
    };
    let reclaimed = step(
        Some(&throttled),
        Change::Claim {
            token: tok(2),
            lease_expires_at: T0,
            payload_version: 2,
            policy: other_policy,
        },
    );
    assert_eq!(
        reclaimed.policy().unwrap().version,
        RetryPolicy::default().version
    );
    assert_eq!(reclaimed.payload_version(), 2);
    let dead = in_state(Status::Dead).unwrap();
    assert_eq!(dead.attempt_count(), 1);
    assert_eq!(dead.dead_reason(), Some(DeadReason::Rejected));
    let ready = in_state(Status::Ready).unwrap();
    assert_eq!((ready.attempt_count(), ready.dead_reason()), (0, None));
    let audit = ready.history().last().unwrap().1.redrive.clone().unwrap();
    assert_eq!(audit.batch_id, "b");
}

#[test]
fn history_is_bounded_and_keeps_the_newest() {
    let mut r = in_state(Status::Sending).unwrap();
    for i in 0..40 {
        let deferred = step(
            Some(&r),
            Change::Defer {
                token: tok(i + 1),
                next_eligible_at: T0,
                class: OutcomeClass::Throttled,
                error: None,
            },
        );
        r = step(Some(&deferred), claim(tok(i + 2)));
    }
    let h = r.history();
    assert_eq!(h.len() as u64, HISTORY_BOUND);
    assert_eq!(h.last().unwrap().0, r.seq());
    assert_eq!(h.first().unwrap().0, r.seq() - HISTORY_BOUND + 1);
}

#[test]
fn dead_reasons_and_defer_classes_are_the_listed_ones() {
    let sending = in_state(Status::Sending).unwrap();
    let die = |reason| Change::Die {
        token: Some(tok(1)),
        reason,
        spends_attempt: false,
        error: None,
        fallback_to: None,
        maybe_sent: false,
    };
    for reason in [
        DeadReason::Schema,
        DeadReason::UnknownReminder,
        DeadReason::ReceiveCountExceeded,
        DeadReason::InvalidReminder,
        DeadReason::CountryNotAllowed,
    ] {
        let refused = apply(Some(&sending), die(reason), &ctx_at(T0)).unwrap_err();
        assert_eq!(refused.why, Why::NotAllowed, "{reason}");
    }
    for class in [
        OutcomeClass::Delivered,
        OutcomeClass::Permanent,
        OutcomeClass::Stale,
    ] {
        let defer = Change::Defer {
            token: tok(1),
            next_eligible_at: T0,
            class,
            error: None,
        };
        assert!(
            apply(Some(&sending), defer, &ctx_at(T0)).is_err(),
            "{class:?}"
        );
    }
}

#[test]
fn a_takeover_spends_the_lost_attempt() {
    let sending = in_state(Status::Sending).unwrap();
    let taken = step_at(
        Some(&sending),
        Change::Takeover {
            stale_token: tok(1),
            token: tok(2),
            lease_expires_at: LATER,
        },
        LATER,
    );
    assert_eq!(taken.attempt_count(), sending.attempt_count() + 1);
}

#[test]
fn errors_are_truncated_on_a_char_boundary() {
    let sending = in_state(Status::Sending).unwrap();
    let dead = step(
        Some(&sending),
        Change::Die {
            token: Some(tok(1)),
            reason: DeadReason::Rejected,
            spends_attempt: true,
            error: Some("é".repeat(300)),
            fallback_to: None,
            maybe_sent: false,
        },
    );
    assert!(dead.last_error().unwrap().len() <= MAX_ERROR_LEN);
}

mod fallback;
mod leases;
mod newer;
mod origin;
