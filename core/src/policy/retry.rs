//! The versioned retry policy ([`RetryPolicy`]): the attempt and throttle budgets, how
//! retries are spaced ([`Backoff`]), and what an ambiguous attempt does ([`AmbiguousRule`]),
//! as a deployment configures them and as each ledger item records them.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How retries after transient failures are spaced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Backoff {
    /// Full jitter: uniform in `[1 s, min(cap, base × 2^(n−1))]` after the n-th failure.
    Exponential { base_secs: u64, cap_secs: u64 },
    /// `schedule_secs[k]` is the wait before attempt k+1 (the first entry, usually 0, is the
    /// first attempt's); past its end the last entry repeats.
    Schedule { schedule_secs: Vec<u64> },
    /// Fitted to the freshness left (docs/design.md, "Retry policy"): the attempts left are spaced
    /// geometrically, each wait `factor` times the one before, so that together they fill nine
    /// tenths of the time until `fresh_until`; full jitter over the upper half of each wait. A
    /// reminder good for an hour, with five attempts and factor 4, tries at about 0, 30 s, 2.5 min,
    /// 12 min and 50 min; one good for a day at 0, 12 min, 1 h, 4 h and 19 h.
    Fitted { factor: u32 },
    /// A backoff a newer version snapshotted: kept as it was stored (written back as it is),
    /// and spaced here as [`DEFAULT_BACKOFF`] is.
    #[serde(untagged)]
    Unknown(serde_json::Value),
}

/// [`Backoff`] as this version knows it, for reading.
#[derive(Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum KnownBackoff {
    Exponential { base_secs: u64, cap_secs: u64 },
    Schedule { schedule_secs: Vec<u64> },
    Fitted { factor: u32 },
}

impl<'de> Deserialize<'de> for Backoff {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = serde_json::Value::deserialize(d)?;
        Ok(match KnownBackoff::deserialize(&raw) {
            Ok(KnownBackoff::Exponential {
                base_secs,
                cap_secs,
            }) => Backoff::Exponential {
                base_secs,
                cap_secs,
            },
            Ok(KnownBackoff::Schedule { schedule_secs }) => Backoff::Schedule { schedule_secs },
            Ok(KnownBackoff::Fitted { factor }) => Backoff::Fitted { factor },
            Err(e) => {
                tracing::warn!(backoff = %raw, error = %e, "backoff unknown to this version: carried on, spaced as the default");
                Backoff::Unknown(raw)
            }
        })
    }
}

/// What to do when a send may have happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AmbiguousRule {
    /// Retry with the same key when the provider honours idempotency keys, else dead.
    RetryIfIdempotent,
    /// Always dead as `ambiguous`, for reconciliation by hand.
    Dead,
    /// A rule a newer version snapshotted: carried on as it is, and read as `Dead` (never a
    /// second send this version cannot judge).
    Unknown(&'static str),
}

impl AmbiguousRule {
    pub const fn as_str(self) -> &'static str {
        match self {
            AmbiguousRule::RetryIfIdempotent => "retry_if_idempotent",
            AmbiguousRule::Dead => "dead",
            AmbiguousRule::Unknown(s) => s,
        }
    }
}

impl Serialize for AmbiguousRule {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for AmbiguousRule {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = std::borrow::Cow::<'de, str>::deserialize(d)?;
        Ok(match &*s {
            "retry_if_idempotent" => AmbiguousRule::RetryIfIdempotent,
            "dead" => AmbiguousRule::Dead,
            other => {
                tracing::warn!(
                    rule = other,
                    "ambiguous rule unknown to this version: carried on, read as dead"
                );
                AmbiguousRule::Unknown(crate::domain::wire::intern(other))
            }
        })
    }
}

/// The retry policy: configuration with a version label, snapshotted on the ledger item at
/// first claim so an in-flight delivery keeps the policy it started with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetryPolicy {
    pub version: String,
    /// Provider attempts that count against the budget, the first included.
    pub max_attempts: u32,
    pub backoff: Backoff,
    /// `fresh_until` = `due_at` + this, when a reminder does not say.
    pub freshness_default_secs: u64,
    pub max_throttle_deferrals: u32,
    /// Backoff after a throttle without Retry-After (full jitter, same shape as above).
    pub throttle_base_secs: u64,
    pub throttle_cap_secs: u64,
    pub ambiguous: AmbiguousRule,
}

/// The deployed policy's label and backoff (`template.yaml`'s `PolicyVersion` and `Backoff`
/// defaults; a template test holds them equal).
pub const DEFAULT_POLICY_VERSION: &str = "v2-fitted";
pub const DEFAULT_BACKOFF: Backoff = Backoff::Fitted { factor: 4 };

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            version: DEFAULT_POLICY_VERSION.into(),
            max_attempts: 5,
            backoff: DEFAULT_BACKOFF,
            freshness_default_secs: 3600,
            max_throttle_deferrals: 50,
            throttle_base_secs: 5,
            throttle_cap_secs: 300,
            ambiguous: AmbiguousRule::RetryIfIdempotent,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    #[error("policy: version label is empty")]
    NoVersion,
    #[error("policy: max_attempts must be at least 1")]
    NoAttempts,
    #[error("policy: backoff base must be ≥ 1 s and ≤ cap")]
    BadBackoff,
    #[error("policy: schedule is empty")]
    EmptySchedule,
    #[error("policy: freshness_default_secs must be positive")]
    NoFreshness,
    #[error("policy: a fitted backoff's factor must be 1 to 16")]
    BadFactor,
}

impl RetryPolicy {
    /// The ambiguous rule (docs/design.md, "The ambiguous rule"), its one home: a send that may
    /// have happened is made again, with the same key, only when the provider deduplicates on that
    /// key and the policy allows it; otherwise the delivery dies as `ambiguous`.
    pub fn may_resend_ambiguous(&self, provider_idempotent: bool) -> bool {
        provider_idempotent && self.ambiguous == AmbiguousRule::RetryIfIdempotent
    }

    pub fn validate(&self) -> Result<(), PolicyError> {
        if self.version.trim().is_empty() {
            return Err(PolicyError::NoVersion);
        }
        if self.max_attempts == 0 {
            return Err(PolicyError::NoAttempts);
        }
        match &self.backoff {
            Backoff::Exponential {
                base_secs,
                cap_secs,
            } if *base_secs == 0 || base_secs > cap_secs => return Err(PolicyError::BadBackoff),
            Backoff::Schedule { schedule_secs } if schedule_secs.is_empty() => {
                return Err(PolicyError::EmptySchedule)
            }
            Backoff::Fitted { factor } if !(1..=16).contains(factor) => {
                return Err(PolicyError::BadFactor)
            }
            _ => {}
        }
        if self.throttle_base_secs == 0 || self.throttle_base_secs > self.throttle_cap_secs {
            return Err(PolicyError::BadBackoff);
        }
        if self.freshness_default_secs == 0 {
            return Err(PolicyError::NoFreshness);
        }
        Ok(())
    }

    pub fn freshness_default(&self) -> Duration {
        Duration::from_secs(self.freshness_default_secs)
    }
}
