//! What happens after a provider answers (docs/design.md, "Failures and retries"): the outcome
//! classes, the versioned retry policy, and the pure decision [`decide`] — policy, ledger counts,
//! outcome, now and a random source in; the next action and its delay out, clamped to what SQS can
//! hold.

pub mod breaker;
mod retry;
pub mod throttle;

use std::time::Duration;

use rand::{Rng, RngExt};
use serde::{Deserialize, Serialize};

use crate::clock::{ceil_secs, Timestamp};
use crate::domain::reminder::last_sendable;
use crate::domain::suppression::SuppressionSource;
use crate::domain::DeadReason;

pub use breaker::BreakerPolicy;
pub use retry::{
    AmbiguousRule, Backoff, PolicyError, RetryPolicy, DEFAULT_BACKOFF, DEFAULT_POLICY_VERSION,
};
pub use throttle::parse_retry_after;

/// SQS caps a message's visibility at 12 h from its receive; keep a margin for the
/// processing time already spent (a Lambda runs at most 15 minutes).
pub const MAX_VISIBILITY_SECS: u64 = 12 * 3600 - 15 * 60;
/// SQS caps DelaySeconds at 15 minutes.
pub const MAX_DELAY_SECS: u64 = 15 * 60;

/// A provider's answer, already classified by the provider adapter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Delivered {
        receipt: Option<String>,
    },
    /// 429 and friends: never spends an attempt. `retry_after` is absolute.
    Throttled {
        retry_after: Option<Timestamp>,
    },
    /// Failed before the request was written (or 408/5xx): safe to retry.
    Transient {
        error: String,
    },
    /// The provider will never accept this delivery.
    Permanent {
        error: String,
    },
    /// Permanent, and the provider declared the address itself dead (a hard bounce, an
    /// invalid address or number, a disabled endpoint, `410 Gone`): the address is suppressed
    /// (docs/design.md, "Suppressions"), so later deliveries to it end `suppressed` without a call.
    Gone {
        error: String,
        source: SuppressionSource,
    },
    /// The request may have been acted on (timeout or reset after writing it).
    Ambiguous {
        error: String,
    },
    /// The provider refuses the whole partition for now (account suspended, sending paused,
    /// authorization revoked): no attempt spent, the gate closes until `retry_after`, and the
    /// delivery waits like a throttled one — bounded by the throttle budget and freshness.
    Blocked {
        error: String,
        retry_after: Timestamp,
    },
}

impl Outcome {
    pub fn class(&self) -> OutcomeClass {
        match self {
            Outcome::Delivered { .. } => OutcomeClass::Delivered,
            Outcome::Throttled { .. } | Outcome::Blocked { .. } => OutcomeClass::Throttled,
            Outcome::Transient { .. } => OutcomeClass::Transient,
            Outcome::Permanent { .. } | Outcome::Gone { .. } => OutcomeClass::Permanent,
            Outcome::Ambiguous { .. } => OutcomeClass::Ambiguous,
        }
    }

    /// The classified error the ledger keeps for this answer (none for a delivery).
    pub fn error(&self) -> Option<String> {
        match self {
            Outcome::Transient { error }
            | Outcome::Permanent { error }
            | Outcome::Gone { error, .. }
            | Outcome::Ambiguous { error }
            | Outcome::Blocked { error, .. } => Some(error.clone()),
            Outcome::Throttled { .. } => Some("throttled".into()),
            Outcome::Delivered { .. } => None,
        }
    }

    /// Who declared the address dead, when the provider did.
    pub fn gone(&self) -> Option<SuppressionSource> {
        match self {
            Outcome::Gone { source, .. } => Some(*source),
            _ => None,
        }
    }

    /// When the provider said it would take requests again, if it said.
    pub fn retry_after(&self) -> Option<Timestamp> {
        match self {
            Outcome::Throttled { retry_after } => *retry_after,
            Outcome::Blocked { retry_after, .. } => Some(*retry_after),
            _ => None,
        }
    }
}

/// The design's outcome classes, as recorded on the ledger and in logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OutcomeClass {
    Delivered,
    Throttled,
    Transient,
    Permanent,
    Ambiguous,
    Stale,
    Cancelled,
    /// A class a newer version recorded: carried on as it is ([`crate::domain::wire`]).
    Unknown(&'static str),
}

impl OutcomeClass {
    pub const KNOWN: [OutcomeClass; 7] = [
        OutcomeClass::Delivered,
        OutcomeClass::Throttled,
        OutcomeClass::Transient,
        OutcomeClass::Permanent,
        OutcomeClass::Ambiguous,
        OutcomeClass::Stale,
        OutcomeClass::Cancelled,
    ];

    /// The wire string.
    pub const fn as_str(self) -> &'static str {
        match self {
            OutcomeClass::Delivered => "delivered",
            OutcomeClass::Throttled => "throttled",
            OutcomeClass::Transient => "transient",
            OutcomeClass::Permanent => "permanent",
            OutcomeClass::Ambiguous => "ambiguous",
            OutcomeClass::Stale => "stale",
            OutcomeClass::Cancelled => "cancelled",
            OutcomeClass::Unknown(s) => s,
        }
    }

    /// A stored wire string: a known class, or [`OutcomeClass::Unknown`] (logged).
    pub fn read(s: &str) -> OutcomeClass {
        OutcomeClass::KNOWN
            .into_iter()
            .find(|c| c.as_str() == s)
            .unwrap_or_else(|| {
                tracing::warn!(
                    class = s,
                    "outcome class unknown to this version: carried on as it is"
                );
                OutcomeClass::Unknown(crate::domain::wire::intern(s))
            })
    }
}

impl Serialize for OutcomeClass {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for OutcomeClass {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = std::borrow::Cow::<'de, str>::deserialize(d)?;
        Ok(OutcomeClass::read(&s))
    }
}

/// The ledger's counts before this outcome.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Spent {
    pub attempts: u32,
    pub throttles: u32,
}

/// How a wait is held: on the message's visibility, or by a delayed fresh copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    Visibility {
        secs: u32,
    },
    /// Longer than visibility allows: send a copy with DelaySeconds and `not_before`, ack this.
    Reenqueue {
        delay_secs: u32,
        not_before: Timestamp,
    },
}

/// What the consumer does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    Delivered,
    Retry {
        at: Timestamp,
        wait: Wait,
        spends_attempt: bool,
        class: OutcomeClass,
    },
    Dead(DeadReason),
    /// The next chance would land after `fresh_until`: give up as stale.
    Expire,
}

/// The decision. Pure: same inputs and rng state, same answer.
pub fn decide(
    policy: &RetryPolicy,
    spent: Spent,
    outcome: &Outcome,
    provider_idempotent: bool,
    fresh_until: Timestamp,
    now: Timestamp,
    rng: &mut impl Rng,
) -> Next {
    let (delay, spends_attempt) = match outcome {
        Outcome::Delivered { .. } => return Next::Delivered,
        Outcome::Permanent { .. } | Outcome::Gone { .. } => {
            return Next::Dead(DeadReason::Rejected)
        }
        Outcome::Ambiguous { .. } if !policy.may_resend_ambiguous(provider_idempotent) => {
            return Next::Dead(DeadReason::Ambiguous)
        }
        Outcome::Transient { .. } | Outcome::Ambiguous { .. } => {
            let attempts = spent.attempts.saturating_add(1);
            if attempts >= policy.max_attempts {
                return Next::Dead(DeadReason::AttemptsExhausted);
            }
            // The time left to send in: fresh by every clock within the margin.
            let left = last_sendable(fresh_until).since(now);
            let delay = retry_delay(policy, attempts, left, rng);
            // No retry is scheduled past fresh_until: the last one goes in before it, while
            // there is room for it.
            let last_chance = left.saturating_sub(LAST_CHANCE_MARGIN);
            if delay > last_chance && last_chance >= Duration::from_secs(1) {
                let at = now.plus(last_chance);
                return Next::Retry {
                    at,
                    wait: wait_until(now, at),
                    spends_attempt: true,
                    class: outcome.class(),
                };
            }
            (delay, true)
        }
        Outcome::Throttled { .. } | Outcome::Blocked { .. } => {
            match throttle::delay(policy, spent, outcome, now, rng) {
                Ok(delay) => (delay, false),
                Err(dead) => return dead,
            }
        }
    };
    let at = now.plus(delay);
    if at > last_sendable(fresh_until) {
        return Next::Expire;
    }
    Next::Retry {
        at,
        wait: wait_until(now, at),
        spends_attempt,
        class: outcome.class(),
    }
}

/// A retry that would land past `fresh_until` goes in this long before it instead: room for
/// the receive, the claim and the send.
pub const LAST_CHANCE_MARGIN: Duration = Duration::from_secs(30);

/// The error recorded for a send whose lease ran out with no outcome recorded.
pub const ABANDONED: &str = "lease_expired_without_outcome";

/// A send whose worker vanished (its lease ran out with no outcome): the ambiguous rule, as
/// for a provider timeout. `may_resend` is false when a resend is no longer wanted (the
/// delivery is now cancelled or stale): the send may have happened, so it dies as
/// `ambiguous` for reconciliation.
pub fn decide_abandoned(
    policy: &RetryPolicy,
    spent: Spent,
    provider_idempotent: bool,
    may_resend: bool,
    fresh_until: Timestamp,
    now: Timestamp,
    rng: &mut impl Rng,
) -> Next {
    if !may_resend {
        return Next::Dead(DeadReason::Ambiguous);
    }
    let outcome = Outcome::Ambiguous {
        error: ABANDONED.into(),
    };
    decide(
        policy,
        spent,
        &outcome,
        provider_idempotent,
        fresh_until,
        now,
        rng,
    )
}

/// Hold a message until `at` (rounded up to whole seconds, at least one).
pub fn wait_until(now: Timestamp, at: Timestamp) -> Wait {
    let secs = ceil_secs(at.since(now)).max(1);
    if secs <= MAX_VISIBILITY_SECS {
        Wait::Visibility { secs: secs as u32 }
    } else {
        Wait::Reenqueue {
            delay_secs: MAX_DELAY_SECS as u32,
            not_before: at,
        }
    }
}

/// Wait before the next attempt after `failures` failed attempts, `left` before `fresh_until`.
fn retry_delay(
    policy: &RetryPolicy,
    failures: u32,
    left: Duration,
    rng: &mut impl Rng,
) -> Duration {
    match &policy.backoff {
        Backoff::Fitted { factor } => {
            let remaining = policy.max_attempts.saturating_sub(failures).max(1);
            fitted_delay(*factor, remaining, left, rng)
        }
        Backoff::Exponential {
            base_secs,
            cap_secs,
        } => full_jitter(*base_secs, *cap_secs, failures, rng),
        Backoff::Schedule { schedule_secs } => {
            let i = (failures as usize).min(schedule_secs.len().saturating_sub(1));
            Duration::from_secs(schedule_secs.get(i).copied().unwrap_or(0))
        }
        Backoff::Unknown(_) => {
            let default = RetryPolicy {
                backoff: DEFAULT_BACKOFF,
                ..policy.clone()
            };
            retry_delay(&default, failures, left, rng)
        }
    }
}

/// The first of `remaining` waits, each `factor` times the one before, that together fill
/// nine tenths of `left`; jittered uniformly over its upper half, from a second to a day.
fn fitted_delay(factor: u32, remaining: u32, left: Duration, rng: &mut impl Rng) -> Duration {
    let f = f64::from(factor.max(1));
    let r = remaining.min(32) as i32;
    // Sum of f^0 .. f^(r-1).
    let parts = if factor <= 1 {
        f64::from(remaining)
    } else {
        (f.powi(r) - 1.0) / (f - 1.0)
    };
    let budget_ms = left.as_millis() as f64 * 0.9;
    // A day at most: a reminder good for a month is not tried once a week.
    let ceiling = ((budget_ms / parts) as u64).clamp(1_000, 86_400_000);
    Duration::from_millis(rng.random_range(ceiling / 2..=ceiling).max(1_000))
}

/// Uniform in `[1 s, min(cap, base × 2^(n−1))]`, in whole seconds.
pub(super) fn full_jitter(base: u64, cap: u64, n: u32, rng: &mut impl Rng) -> Duration {
    let exp = n.saturating_sub(1).min(32);
    let ceiling = base.saturating_mul(1u64 << exp).min(cap).max(1);
    Duration::from_secs(rng.random_range(1..=ceiling))
}

#[cfg(test)]
mod tests;
