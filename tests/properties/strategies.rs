//! Generators shared by the suites: valid retry policies, lease tokens from a small pool (so
//! fenced changes often name the current lease, and often do not), times in one window, and
//! arbitrary [`Change`] values.

use std::collections::BTreeSet;
use std::time::Duration;

use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::SeedableRng;
use reminders::clock::Timestamp;
use reminders::domain::{Channel, DeadReason, DeliveryKey, ReminderId, SubscriberId};
use reminders::ledger::{Change, LeaseToken, RedriveAudit};
use reminders::policy::{AmbiguousRule, Backoff, OutcomeClass, RetryPolicy};

/// Where every state machine walk starts.
pub const T0: Timestamp = Timestamp::from_millis(1_700_000_000_000);
/// Times named by changes fall in `[T0, T0 + WINDOW)`, the span a walk's clock covers.
pub const WINDOW_MS: i64 = 3_600_000;
/// Lease tokens in the pool.
pub const TOKENS: u64 = 3;

/// Token number `n` of the pool: the same `n` is the same token.
pub fn token_n(n: u64) -> LeaseToken {
    LeaseToken::generate(&mut StdRng::seed_from_u64(n))
}

pub fn token() -> impl Strategy<Value = LeaseToken> {
    (0..TOKENS).prop_map(token_n)
}

pub fn key() -> DeliveryKey {
    DeliveryKey::derive(
        &ReminderId::parse("r-prop").expect("valid id"),
        &SubscriberId::parse("s-prop").expect("valid id"),
        Channel::Sms,
    )
}

/// A time in the walk's window.
pub fn at() -> impl Strategy<Value = Timestamp> {
    (0..WINDOW_MS).prop_map(|ms| T0.plus(Duration::from_millis(ms as u64)))
}

fn backoff() -> impl Strategy<Value = Backoff> {
    prop_oneof![
        (1u64..=600, 0u64..=100_000).prop_map(|(base, extra)| Backoff::Exponential {
            base_secs: base,
            cap_secs: base + extra,
        }),
        prop::collection::vec(0u64..=86_400, 1..6)
            .prop_map(|schedule_secs| Backoff::Schedule { schedule_secs }),
        (1u32..=16).prop_map(|factor| Backoff::Fitted { factor }),
    ]
}

/// A version label (regex strategies are slow in the walks' inner loop).
fn version() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["v1", "v2-beta", "2025.1", "x"]).prop_map(String::from)
}

/// Any policy [`RetryPolicy::validate`] accepts (the suites check that it does).
pub fn policy() -> impl Strategy<Value = RetryPolicy> {
    let ambiguous = prop_oneof![
        Just(AmbiguousRule::RetryIfIdempotent),
        Just(AmbiguousRule::Dead)
    ];
    (
        (version(), 1u32..=8, backoff(), 1u64..=7 * 86_400),
        (0u32..=8, 1u64..=120, 0u64..=3_600, ambiguous),
    )
        .prop_map(
            |((version, max_attempts, backoff, fresh), (throttles, tbase, textra, ambiguous))| {
                RetryPolicy {
                    version,
                    max_attempts,
                    backoff,
                    freshness_default_secs: fresh,
                    max_throttle_deferrals: throttles,
                    throttle_base_secs: tbase,
                    throttle_cap_secs: tbase + textra,
                    ambiguous,
                }
            },
        )
}

pub fn reason() -> impl Strategy<Value = DeadReason> {
    prop::sample::select(DeadReason::ALL.to_vec())
}

/// Every class this version knows, including those a deferral must refuse.
pub fn class() -> impl Strategy<Value = OutcomeClass> {
    prop::sample::select(OutcomeClass::KNOWN.to_vec())
}

/// An error text, sometimes longer than the ledger keeps and with multi-byte characters.
pub fn error() -> impl Strategy<Value = Option<String>> {
    let long = prop::collection::vec(any::<char>(), 150..=260).prop_map(String::from_iter);
    let short = any::<u16>().prop_map(|n| format!("http_{n}"));
    prop::option::of(prop_oneof![short.boxed(), long.boxed()])
}

fn receipt() -> impl Strategy<Value = Option<String>> {
    prop::option::of(any::<u32>().prop_map(|n| format!("msg-{n:x}")))
}

fn redrive() -> impl Strategy<Value = Change> {
    let operator = prop::sample::select(vec!["op", "ops-2"]);
    let audit = (0u32..100, operator, any::<char>()).prop_map(|(b, o, n)| RedriveAudit {
        batch_id: format!("b{b}"),
        operator: o.into(),
        note: n.to_string(),
    });
    let reasons = prop::collection::btree_set(reason(), 0..=DeadReason::ALL.len());
    (audit, reasons)
        .prop_map(|(audit, reasons): (_, BTreeSet<_>)| Change::Redrive { audit, reasons })
}

/// A redrive selecting every dead reason.
pub fn redrive_all() -> Change {
    Change::Redrive {
        audit: RedriveAudit {
            batch_id: "b".into(),
            operator: "op".into(),
            note: String::new(),
        },
        reasons: DeadReason::ALL.into_iter().collect(),
    }
}

/// Any change, its fields drawn so that every transition is sometimes allowed.
pub fn change() -> impl Strategy<Value = Change> {
    prop_oneof![
        4 => (token(), at(), 0u64..4, policy()).prop_map(|(token, l, v, policy)| Change::Claim {
            token,
            lease_expires_at: l,
            payload_version: v,
            policy,
        }),
        1 => (token(), token(), at()).prop_map(|(stale_token, token, l)| Change::Takeover {
            stale_token,
            token,
            lease_expires_at: l,
        }),
        2 => (token(), receipt()).prop_map(|(token, receipt)| Change::Deliver { token, receipt }),
        4 => (token(), at(), class(), error()).prop_map(|(token, n, class, error)| {
            Change::Defer {
                token,
                next_eligible_at: n,
                class,
                error,
            }
        }),
        3 => (
            prop::option::of(token()),
            // Every reason, with `ambiguous` drawn more often: its deaths under a lease are
            // the only way to `reconcile`, and walks must reach it however many reasons exist.
            prop_oneof![1 => Just(DeadReason::Ambiguous), 2 => reason()],
            any::<bool>(),
            error(),
            // Rare: a death that fell back is never redriven, and walks need redrives.
            prop::option::weighted(0.15, prop::sample::select(Channel::ALL.to_vec())),
            prop::bool::weighted(0.2),
        )
            .prop_map(
                |(token, reason, spends_attempt, error, fallback_to, maybe_sent)| Change::Die {
                    token,
                    reason,
                    spends_attempt,
                    error,
                    fallback_to,
                    maybe_sent,
                }
            ),
        1 => Just(Change::Expire),
        1 => Just(Change::Cancel),
        2 => redrive(),
        1 => token().prop_map(|token| Change::ClaimDlqCopy { token }),
        1 => Just(Change::CopiedToDlq),
        1 => token().prop_map(|token| Change::ExpireHeld { token }),
        1 => token().prop_map(|token| Change::Release { token, why: "lease too short" }),
        1 => (token(), receipt()).prop_map(|(token, receipt)| Change::Reconcile { token, receipt }),
    ]
}
