//! `policy::decide` (docs/design.md, "Failures and retries"): for any valid policy, ledger counts,
//! outcome, freshness and time, the decision keeps the budgets, the Retry-After, the ambiguous
//! rule, the backoff caps and `fresh_until`.

use std::time::Duration;

use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::SeedableRng;
use reminders::clock::Timestamp;
use reminders::domain::reminder::{last_sendable, CLOCK_MARGIN};
use reminders::domain::DeadReason;
use reminders::policy::{
    decide, decide_abandoned, AmbiguousRule, Backoff, Next, Outcome, RetryPolicy, Spent, Wait,
    LAST_CHANCE_MARGIN, MAX_DELAY_SECS, MAX_VISIBILITY_SECS,
};

use crate::strategies::policy;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Delivered,
    /// Throttled with a Retry-After.
    Throttled,
    /// Throttled without one.
    ThrottledBare,
    Blocked,
    Transient,
    Permanent,
    Ambiguous,
}

const RETRYABLE: &[Kind] = &[
    Kind::Throttled,
    Kind::ThrottledBare,
    Kind::Blocked,
    Kind::Transient,
    Kind::Ambiguous,
];

/// One call of `decide`, with the seed of its random source.
#[derive(Debug, Clone)]
struct Case {
    policy: RetryPolicy,
    spent: Spent,
    outcome: Outcome,
    idempotent: bool,
    now: Timestamp,
    fresh_until: Timestamp,
    seed: u64,
}

impl Case {
    fn decide(&self) -> Next {
        self.decide_until(self.fresh_until)
    }

    fn decide_until(&self, fresh_until: Timestamp) -> Next {
        let mut rng = StdRng::seed_from_u64(self.seed);
        let (p, s, o) = (&self.policy, self.spent, &self.outcome);
        decide(p, s, o, self.idempotent, fresh_until, self.now, &mut rng)
    }

    /// The Retry-After the outcome carries, if any.
    fn retry_after(&self) -> Option<Timestamp> {
        match &self.outcome {
            Outcome::Throttled { retry_after } => *retry_after,
            Outcome::Blocked { retry_after, .. } => Some(*retry_after),
            _ => None,
        }
    }
}

fn offset(base: Timestamp, ms: i64) -> Timestamp {
    Timestamp::from_millis(base.as_millis().saturating_add(ms))
}

fn outcome(kind: Kind, now: Timestamp, after_ms: i64, error: String) -> Outcome {
    let retry_after = offset(now, after_ms);
    match kind {
        Kind::Delivered => Outcome::Delivered {
            receipt: Some(error),
        },
        Kind::Throttled => Outcome::Throttled {
            retry_after: Some(retry_after),
        },
        Kind::ThrottledBare => Outcome::Throttled { retry_after: None },
        Kind::Blocked => Outcome::Blocked { error, retry_after },
        Kind::Transient => Outcome::Transient { error },
        Kind::Permanent => Outcome::Permanent { error },
        Kind::Ambiguous => Outcome::Ambiguous { error },
    }
}

/// Cases whose outcome is one of `kinds`; counts from zero to a little past each budget;
/// Retry-After from an hour ago to two days ahead; `fresh_until` from an hour ago to a month
/// ahead, or never.
fn case(kinds: &'static [Kind]) -> impl Strategy<Value = Case> {
    case_with(kinds, false)
}

/// A case with both budgets left: the decision is about the next chance, not the end.
fn live_case(kinds: &'static [Kind]) -> impl Strategy<Value = Case> {
    case_with(kinds, true)
}

fn case_with(kinds: &'static [Kind], headroom: bool) -> impl Strategy<Value = Case> {
    let fresh = prop_oneof![
        4 => (-3_600_000i64..=30 * 86_400_000).prop_map(Some),
        1 => Just(None),
    ];
    let when = (
        0i64..=4_102_444_800_000,
        -3_600_000i64..=2 * 86_400_000,
        fresh,
    );
    (
        policy(),
        prop::sample::select(kinds),
        when,
        "[a-z_0-9]{0,8}",
    )
        .prop_flat_map(move |(policy, kind, (now, after, fresh), error)| {
            let now = Timestamp::from_millis(now);
            let fresh_until = fresh.map_or(Timestamp::from_millis(i64::MAX), |f| offset(now, f));
            let spent = match headroom {
                true => (
                    0..=policy.max_attempts.saturating_sub(2),
                    0..=policy.max_throttle_deferrals.saturating_sub(2),
                ),
                false => (
                    0..=policy.max_attempts + 2,
                    0..=policy.max_throttle_deferrals + 2,
                ),
            };
            let outcome = outcome(kind, now, after, error);
            (
                Just(policy),
                spent,
                Just(outcome),
                // With budgets left, an ambiguous send is resent only by an idempotent
                // provider: a live case is one.
                if headroom {
                    Just(true).boxed()
                } else {
                    any::<bool>().boxed()
                },
                any::<u64>(),
            )
                .prop_map(
                    move |(policy, (attempts, throttles), outcome, idempotent, seed)| Case {
                        policy,
                        spent: Spent {
                            attempts,
                            throttles,
                        },
                        outcome,
                        idempotent,
                        now,
                        fresh_until,
                        seed,
                    },
                )
        })
}

/// Whether the outcome costs an attempt when retried (throttles and blocks never do).
fn spends(outcome: &Outcome) -> bool {
    matches!(
        outcome,
        Outcome::Transient { .. } | Outcome::Ambiguous { .. }
    )
}

/// `base × 2^n`, capped, in milliseconds: the ceiling of full jitter after n+1 failures.
fn jitter_ceiling_ms(base: u64, cap: u64, n: u32) -> i64 {
    let ceiling = base.saturating_mul(1u64 << n.min(32)).min(cap).max(1);
    i64::try_from(ceiling.saturating_mul(1000)).unwrap_or(i64::MAX)
}

proptest! {
    #![proptest_config(crate::config())]

    #[test]
    fn generated_policies_are_valid(p in policy()) {
        prop_assert_eq!(p.validate(), Ok(()));
    }

    /// A throttle (or a blocked partition) never spends an attempt and never dies of the
    /// attempt budget; a transient or ambiguous retry always spends one.
    #[test]
    fn a_throttle_never_spends_an_attempt(c in case(RETRYABLE)) {
        match c.decide() {
            Next::Retry { spends_attempt, class, .. } => {
                prop_assert_eq!(spends_attempt, spends(&c.outcome));
                prop_assert_eq!(class, c.outcome.class());
            }
            Next::Dead(DeadReason::AttemptsExhausted) => prop_assert!(spends(&c.outcome)),
            Next::Dead(DeadReason::ThrottleExhausted) => prop_assert!(!spends(&c.outcome)),
            Next::Dead(DeadReason::Ambiguous) => {
                prop_assert!(matches!(c.outcome, Outcome::Ambiguous { .. }), "{:?}", c.outcome)
            }
            Next::Expire => {}
            other => prop_assert!(false, "{:?} for {:?}", other, c.outcome),
        }
    }

    /// After this failure `attempts + 1` attempts are spent; a retry is one more, which must
    /// stay within `max_attempts`.
    #[test]
    fn never_retries_past_max_attempts(c in case(&[Kind::Transient, Kind::Ambiguous])) {
        let spent_after = u64::from(c.spent.attempts) + 1;
        let next = c.decide();
        if let Next::Retry { .. } = next {
            prop_assert!(spent_after < u64::from(c.policy.max_attempts), "{:?}", next);
        }
        let resendable = c.idempotent && c.policy.ambiguous == AmbiguousRule::RetryIfIdempotent;
        let allowed = matches!(c.outcome, Outcome::Transient { .. }) || resendable;
        if allowed && spent_after >= u64::from(c.policy.max_attempts) {
            prop_assert_eq!(next, Next::Dead(DeadReason::AttemptsExhausted));
        }
    }

    /// Throttle deferrals stop at `max_throttle_deferrals`.
    #[test]
    fn throttles_stop_at_max_throttle_deferrals(
        c in case(&[Kind::Throttled, Kind::ThrottledBare, Kind::Blocked]),
    ) {
        let deferrals = u64::from(c.spent.throttles) + 1;
        let over = deferrals > u64::from(c.policy.max_throttle_deferrals);
        let next = c.decide();
        prop_assert_eq!(over, next == Next::Dead(DeadReason::ThrottleExhausted), "{:?}", next);
    }

    /// The next chance is never before the provider's Retry-After (nor before now), on the
    /// ledger and on the queue (whole seconds rounded up), and only a little after it.
    #[test]
    fn a_delay_is_never_before_retry_after(c in live_case(&[Kind::Throttled, Kind::Blocked])) {
        let ra = c.retry_after().expect("these kinds carry a Retry-After");
        let next = c.decide();
        prop_assume!(matches!(next, Next::Retry { .. }), "{:?}", next);
        let Next::Retry { at, wait, .. } = next else { unreachable!() };
        prop_assert!(at >= ra && at >= c.now, "at {} ra {} now {}", at, ra, c.now);
        let earliest = ra.max(c.now);
        prop_assert!(at <= earliest.plus(Duration::from_secs(5)), "jitter: {} vs {}", at, earliest);
        match wait {
            Wait::Visibility { secs } => {
                let visible = c.now.plus(Duration::from_secs(u64::from(secs)));
                prop_assert!(visible >= ra, "visible again at {} before {}", visible, ra);
            }
            Wait::Reenqueue { not_before, .. } => prop_assert!(not_before >= ra),
        }
    }

    /// Permanent is dead as `rejected`, delivered is delivered: whatever the budgets and time.
    #[test]
    fn a_permanent_outcome_is_never_retried(c in case(&[Kind::Permanent, Kind::Delivered])) {
        let expected = match c.outcome {
            Outcome::Permanent { .. } => Next::Dead(DeadReason::Rejected),
            _ => Next::Delivered,
        };
        prop_assert_eq!(c.decide(), expected);
    }
}

proptest! {
    #![proptest_config(crate::config())]

    /// A send that may have happened is resent only to a provider that deduplicates, and only
    /// when the policy allows it; otherwise it is dead as `ambiguous`.
    #[test]
    fn the_ambiguous_rule_is_honoured(c in case(&[Kind::Ambiguous])) {
        let resend = c.idempotent && c.policy.ambiguous == AmbiguousRule::RetryIfIdempotent;
        let next = c.decide();
        if resend {
            prop_assert_ne!(&next, &Next::Dead(DeadReason::Ambiguous));
        } else {
            prop_assert_eq!(&next, &Next::Dead(DeadReason::Ambiguous));
        }
        // A lapsed lease is the same rule; with no resend wanted it is always ambiguous.
        let abandoned = |may_resend| {
            let mut rng = StdRng::seed_from_u64(c.seed);
            let (p, s) = (&c.policy, c.spent);
            decide_abandoned(p, s, c.idempotent, may_resend, c.fresh_until, c.now, &mut rng)
        };
        prop_assert_eq!(abandoned(true), next);
        prop_assert_eq!(abandoned(false), Next::Dead(DeadReason::Ambiguous));
    }

    /// Transient and ambiguous retries wait what the backoff says: full jitter within
    /// `[1 s, min(cap, base × 2^attempts)]`, the schedule's entry for the next attempt, or
    /// for a fitted backoff at most nine tenths of the freshness left — unless that lands
    /// past the last sendable instant (`fresh_until` less the clock margin), when the last
    /// attempt goes in `LAST_CHANCE_MARGIN` before it;
    /// a throttle without Retry-After within `[1 s, min(throttle cap, base × 2^throttles)]`.
    #[test]
    fn delays_are_within_the_backoff_cap(
        c in live_case(&[Kind::Transient, Kind::Ambiguous, Kind::ThrottledBare]),
    ) {
        let next = c.decide();
        prop_assume!(matches!(next, Next::Retry { .. }), "{:?}", next);
        let Next::Retry { at, .. } = next else { unreachable!() };
        let delay = at.as_millis() - c.now.as_millis();
        let p = &c.policy;
        // The time left to send in: up to the clock margin before fresh_until.
        let left = last_sendable(c.fresh_until).as_millis().saturating_sub(c.now.as_millis());
        let last_chance = left - LAST_CHANCE_MARGIN.as_millis() as i64;
        let failed = !matches!(c.outcome, Outcome::Throttled { .. });
        // A failure's retry moved to the last chance is outside the backoff's range by design
        // (checked below against the last chance itself).
        let moved_to_last_chance = failed && delay == last_chance;
        let (low, high) = match (&c.outcome, &p.backoff) {
            (Outcome::Throttled { .. }, _) => {
                let ceiling = jitter_ceiling_ms(p.throttle_base_secs, p.throttle_cap_secs, c.spent.throttles);
                (1000, ceiling)
            }
            (_, Backoff::Exponential { base_secs, cap_secs }) => {
                (1000, jitter_ceiling_ms(*base_secs, *cap_secs, c.spent.attempts))
            }
            (_, Backoff::Schedule { schedule_secs }) => {
                let next_attempt = (c.spent.attempts as usize + 1).min(schedule_secs.len() - 1);
                let ms = schedule_secs[next_attempt] as i64 * 1000;
                (ms, ms)
            }
            // An unknown backoff (never generated here) is spaced as the default, fitted.
            (_, Backoff::Fitted { .. } | Backoff::Unknown(_)) => {
                (1000, (left / 10 * 9).clamp(1000, 86_400_000))
            }
        };
        prop_assert!(
            moved_to_last_chance || (low <= delay && delay <= high),
            "delay {} ms not in [{}, {}]", delay, low, high
        );
        if failed {
            prop_assert!(delay <= last_chance.max(1000), "delay {} past the last chance {}", delay, last_chance);
        }
    }

    /// How a wait is held fits SQS: visibility in whole seconds, rounded up, at least one and
    /// at most the visibility limit; a longer wait is a delayed copy with `not_before`.
    #[test]
    fn waits_fit_what_sqs_can_hold(c in live_case(RETRYABLE)) {
        let next = c.decide();
        prop_assume!(matches!(next, Next::Retry { .. }), "{:?}", next);
        let Next::Retry { at, wait, .. } = next else { unreachable!() };
        let delay = at.as_millis() - c.now.as_millis();
        prop_assert!(delay >= 0);
        let whole = ((delay + 999) / 1000).max(1);
        match wait {
            Wait::Visibility { secs } => {
                prop_assert_eq!(i64::from(secs), whole);
                prop_assert!(u64::from(secs) <= MAX_VISIBILITY_SECS);
            }
            Wait::Reenqueue { delay_secs, not_before } => {
                prop_assert!(whole > MAX_VISIBILITY_SECS as i64, "{} s fits visibility", whole);
                prop_assert!(u64::from(delay_secs) <= MAX_DELAY_SECS);
                prop_assert_eq!(not_before, at);
            }
        }
    }

    /// Nothing is retried at a time past `fresh_until`. A throttle whose chosen time passes
    /// it expires, exactly then (same random draw); a failed attempt whose backoff passes it
    /// gets its last attempt `LAST_CHANCE_MARGIN` before it, while there is room for one.
    #[test]
    fn nothing_past_fresh_until_is_retried(c in case(RETRYABLE)) {
        let next = c.decide();
        prop_assert_eq!(&c.decide(), &next, "decide is pure");
        if let Next::Retry { at, .. } = next {
            // Not even inside the clock margin before it (docs/design.md, "Clock margin").
            let last = last_sendable(c.fresh_until);
            prop_assert!(at <= last, "retry at {} past {}", at, last);
        }
        if c.fresh_until < c.now {
            prop_assert!(!matches!(next, Next::Retry { .. }), "{:?} while stale", next);
        }
        let never = Timestamp::from_millis(i64::MAX);
        let fitted = matches!(c.policy.backoff, Backoff::Fitted { .. });
        let failed = matches!(c.outcome, Outcome::Transient { .. } | Outcome::Ambiguous { .. });
        if let (Next::Retry { at, .. }, false) = (c.decide_until(never), fitted) {
            // Sendable until exactly then (fresh until the clock margin after it): a throttle
            // keeps its time; a failure whose retry would land inside the last margin goes
            // in the margin earlier, room permitting.
            let again = c.decide_until(at.plus(CLOCK_MARGIN));
            let margin_room = at.since(c.now).saturating_sub(LAST_CHANCE_MARGIN);
            let expected = if failed && margin_room >= Duration::from_secs(1) {
                c.now.plus(margin_room)
            } else {
                at
            };
            prop_assert!(matches!(again, Next::Retry { at: a, .. } if a == expected), "{:?}", again);
            let just_before = Timestamp::from_millis(at.as_millis() - 1);
            let room = just_before.since(c.now).saturating_sub(LAST_CHANCE_MARGIN);
            match c.decide_until(just_before.plus(CLOCK_MARGIN)) {
                Next::Retry { at: last, .. } if failed => {
                    prop_assert_eq!(last, c.now.plus(room), "the last chance");
                    prop_assert!(room >= Duration::from_secs(1));
                }
                Next::Expire => prop_assert!(!failed || room < Duration::from_secs(1)),
                other => prop_assert!(false, "{:?}", other),
            }
        }
    }
}
