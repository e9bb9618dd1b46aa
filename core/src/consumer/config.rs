//! The consumer's configuration: the retry policy and the timing rules around it, read once at
//! cold start and checked (docs/design.md, "Cold-start checks"): a configuration that breaks
//! them is refused.

use std::time::Duration;

use crate::config::{ConfigError, Vars};
use crate::domain::retention::{Retention, RETENTION_VAR};
use crate::policy::{AmbiguousRule, Backoff, BreakerPolicy, RetryPolicy};
use crate::ports::STORAGE_OPERATION_TIMEOUT;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerConfig {
    pub policy: RetryPolicy,
    /// When a provider partition's breaker opens, and how long it stays open.
    pub breaker: BreakerPolicy,
    /// How long a claim owns a delivery; must outlast the provider call.
    pub lease: Duration,
    /// The providers' own request timeout.
    pub provider_timeout: Duration,
    /// The queue's maxReceiveCount (its redrive policy), the crash-loop safety net.
    pub max_receive_count: u32,
    /// Re-enqueue a fresh copy once a message has this few receives left.
    pub reenqueue_margin: u32,
    /// No record starts this close to the invocation deadline.
    pub deadline_margin: Duration,
    pub initial_concurrency: usize,
    pub max_concurrency: usize,
    /// How long a warm container trusts its copy of a provider gate.
    pub gate_cache: Duration,
    /// Ledger items live this long past `fresh_until`.
    pub retention: Retention,
    /// Print EMF metric lines (off in tests and the simulation).
    pub emit_metrics: bool,
    /// The calling codes SMS may go to; a number elsewhere dies `country_not_allowed`.
    pub sms_countries: crate::domain::SmsCountries,
}

impl Default for ConsumerConfig {
    fn default() -> Self {
        Self {
            policy: RetryPolicy::default(),
            breaker: BreakerPolicy::default(),
            lease: Duration::from_secs(60),
            provider_timeout: Duration::from_secs(10),
            max_receive_count: 100,
            reenqueue_margin: 5,
            deadline_margin: Duration::from_secs(12),
            initial_concurrency: 4,
            max_concurrency: 10,
            gate_cache: Duration::from_secs(1),
            retention: Retention::default(),
            emit_metrics: true,
            sms_countries: crate::domain::SmsCountries::default(),
        }
    }
}

/// The event source mappings' defaults (template.yaml's `ConsumerMaxConcurrency` and
/// `ConsumerBatchSize`; a template test holds them equal): batches each channel's mapping runs
/// at once, and records a batch. The simulation and the planner run these. Four batches: what
/// `remindctl plan --target-p99` recommends for the stated load (docs/performance.md, "How the
/// defaults were chosen"; `tests/sim/stated_load.rs` holds it), enough to carry a provider's 100
/// sends a second at 300 ms a send with a fifth spare.
pub const MAPPING_MAX_CONCURRENCY: u32 = 4;
pub const MAPPING_BATCH_SIZE: u32 = 10;
/// The mappings' provisioned mode (template.yaml's `ConsumerMinPollers` and
/// `ConsumerMaxPollers`, held equal by the same test): 0 minimum pollers is standard mode (the
/// mapping scales itself, `ConsumerMaxConcurrency` bounds it); 2 or more keeps that many event
/// pollers ready (ten concurrent invocations each) and lets the mapping scale to the maximum.
pub const MAPPING_MIN_POLLERS: u32 = 0;
pub const MAPPING_MAX_POLLERS: u32 = 200;

/// Every variable [`ConsumerConfig`] reads.
pub const VARS: [&str; 18] = [
    "POLICY_VERSION",
    "BREAKER_FAILURES",
    "BREAKER_COOLDOWN_SECS",
    "BREAKER_COOLDOWN_CAP_SECS",
    "MAX_ATTEMPTS",
    "BACKOFF",
    "MAX_THROTTLE_DEFERRALS",
    "THROTTLE_BASE_SECS",
    "THROTTLE_CAP_SECS",
    "AMBIGUOUS",
    "LEASE_SECS",
    "PROVIDER_TIMEOUT_SECS",
    "MAX_RECEIVE_COUNT",
    "REENQUEUE_MARGIN",
    "DEADLINE_MARGIN_SECS",
    "MAX_CONCURRENCY",
    RETENTION_VAR,
    crate::domain::sms_countries::SMS_COUNTRIES_VAR,
];

/// The variable a policy error is about.
fn policy_variable(e: &crate::policy::PolicyError) -> &'static str {
    use crate::policy::PolicyError as E;
    match e {
        E::NoVersion => "POLICY_VERSION",
        E::NoAttempts => "MAX_ATTEMPTS",
        E::BadBackoff | E::EmptySchedule | E::BadFactor => "BACKOFF",
        E::NoFreshness => "freshness_default_secs",
    }
}

fn invalid(var: &'static str, problem: impl Into<String>) -> ConfigError {
    ConfigError::invalid(var, problem)
}

impl ConsumerConfig {
    /// Whether a lease with `left` to run covers a provider call and the outcome's write
    /// after it: the one rule, checked at cold start against the whole lease and before each
    /// send against what is left of it.
    pub fn lease_covers_send(&self, left: Duration) -> bool {
        left > self.provider_timeout + STORAGE_OPERATION_TIMEOUT
    }

    /// The cold-start checks (docs/design.md, "Cold-start checks").
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.policy
            .validate()
            .map_err(|e| invalid(policy_variable(&e), e.to_string()))?;
        if !self.lease_covers_send(self.lease) {
            return Err(invalid(
                "LEASE_SECS",
                "the lease must be longer than PROVIDER_TIMEOUT_SECS plus a storage call (5 s)",
            ));
        }
        if self.max_receive_count <= self.reenqueue_margin + 1 {
            return Err(invalid(
                "MAX_RECEIVE_COUNT",
                "leaves no room for the re-enqueue rule (must exceed REENQUEUE_MARGIN + 1)",
            ));
        }
        if self.deadline_margin <= self.provider_timeout {
            return Err(invalid(
                "DEADLINE_MARGIN_SECS",
                "must exceed PROVIDER_TIMEOUT_SECS, or a started record can outlive the invocation",
            ));
        }
        let b = &self.breaker;
        if b.failures == 0 {
            return Err(invalid("BREAKER_FAILURES", "must be at least 1"));
        }
        if b.cooldown.is_zero() || b.cooldown_cap < b.cooldown {
            return Err(invalid(
                "BREAKER_COOLDOWN_CAP_SECS",
                "BREAKER_COOLDOWN_SECS must be ≥ 1 and ≤ BREAKER_COOLDOWN_CAP_SECS",
            ));
        }
        if self.initial_concurrency == 0 || self.max_concurrency < self.initial_concurrency {
            return Err(invalid(
                "MAX_CONCURRENCY",
                "must be ≥ 1 and ≥ the initial value",
            ));
        }
        Ok(())
    }

    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(crate::config::env)
    }

    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let vars = Vars::new(get);
        let d = Self::default();
        let cfg = Self {
            policy: policy_from(&vars, &d.policy)?,
            breaker: BreakerPolicy {
                failures: vars.u32_or("BREAKER_FAILURES", d.breaker.failures)?,
                cooldown: vars.secs_or("BREAKER_COOLDOWN_SECS", d.breaker.cooldown)?,
                cooldown_cap: vars.secs_or("BREAKER_COOLDOWN_CAP_SECS", d.breaker.cooldown_cap)?,
                ..d.breaker
            },
            lease: vars.secs_or("LEASE_SECS", d.lease)?,
            provider_timeout: vars.secs_or("PROVIDER_TIMEOUT_SECS", d.provider_timeout)?,
            max_receive_count: vars.u32_or("MAX_RECEIVE_COUNT", d.max_receive_count)?,
            reenqueue_margin: vars.u32_or("REENQUEUE_MARGIN", d.reenqueue_margin)?,
            deadline_margin: vars.secs_or("DEADLINE_MARGIN_SECS", d.deadline_margin)?,
            initial_concurrency: d.initial_concurrency,
            max_concurrency: vars.usize_or("MAX_CONCURRENCY", d.max_concurrency)?,
            gate_cache: d.gate_cache,
            retention: Retention::from_vars(&vars)?,
            emit_metrics: true,
            sms_countries: crate::domain::SmsCountries::from_vars(&vars)?,
        };
        let cfg = Self {
            initial_concurrency: cfg.initial_concurrency.min(cfg.max_concurrency).max(1),
            ..cfg
        };
        cfg.validate()?;
        Ok(cfg)
    }
}

fn policy_from<F: Fn(&str) -> Option<String>>(
    vars: &Vars<F>,
    d: &RetryPolicy,
) -> Result<RetryPolicy, ConfigError> {
    Ok(RetryPolicy {
        version: vars.get("POLICY_VERSION").unwrap_or(d.version.clone()),
        max_attempts: vars.u32_or("MAX_ATTEMPTS", d.max_attempts)?,
        backoff: match vars.get("BACKOFF") {
            None => d.backoff.clone(),
            Some(v) => parse_backoff(&v)?,
        },
        // Reminders carry their own fresh_until; the default window is the writer's
        // (`remindctl remind create` reads FRESHNESS_SECS), not the consumer's.
        freshness_default_secs: d.freshness_default_secs,
        max_throttle_deferrals: vars.u32_or("MAX_THROTTLE_DEFERRALS", d.max_throttle_deferrals)?,
        throttle_base_secs: vars.u64_or("THROTTLE_BASE_SECS", d.throttle_base_secs)?,
        throttle_cap_secs: vars.u64_or("THROTTLE_CAP_SECS", d.throttle_cap_secs)?,
        ambiguous: match vars.get("AMBIGUOUS").as_deref() {
            None | Some("retry") => AmbiguousRule::RetryIfIdempotent,
            Some("dead") => AmbiguousRule::Dead,
            Some(other) => {
                return Err(invalid(
                    "AMBIGUOUS",
                    format!("{other:?}: use retry or dead"),
                ))
            }
        },
    })
}

/// `fitted:<factor>`, `exponential:<base>:<cap>` or `schedule:<s0>,<s1>,…` (seconds).
pub fn parse_backoff(v: &str) -> Result<Backoff, ConfigError> {
    let bad = || {
        invalid(
            "BACKOFF",
            format!("{v:?}: use fitted:<factor>, exponential:<base>:<cap> or schedule:<s>,<s>,…"),
        )
    };
    let nums = |s: &str, sep: char| -> Result<Vec<u64>, ConfigError> {
        s.split(sep)
            .map(|n| crate::config::parse_u64("BACKOFF", n).map_err(|_| bad()))
            .collect()
    };
    match v.split_once(':') {
        Some(("exponential", rest)) => match nums(rest, ':')?.as_slice() {
            [base, cap] => Ok(Backoff::Exponential {
                base_secs: *base,
                cap_secs: *cap,
            }),
            _ => Err(bad()),
        },
        Some(("fitted", rest)) => match nums(rest, ':')?.as_slice() {
            [factor] => Ok(Backoff::Fitted {
                factor: u32::try_from(*factor).map_err(|_| bad())?,
            }),
            _ => Err(bad()),
        },
        Some(("schedule", rest)) => Ok(Backoff::Schedule {
            schedule_secs: nums(rest, ',')?,
        }),
        _ => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn load(pairs: &[(&str, &str)]) -> Result<ConsumerConfig, ConfigError> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        ConsumerConfig::from_lookup(|k| m.get(k).cloned())
    }

    #[test]
    fn reads_only_the_variables_it_declares() {
        let asked = std::cell::RefCell::new(Vec::new());
        let _ = ConsumerConfig::from_lookup(|k| {
            asked.borrow_mut().push(k.to_owned());
            None
        });
        let asked = asked.into_inner();
        assert!(!asked.is_empty());
        for k in &asked {
            assert!(VARS.contains(&k.as_str()), "{k} is read but not declared");
        }
    }

    #[test]
    fn a_bad_policy_names_its_variable() {
        let err = load(&[("MAX_ATTEMPTS", "0")]).unwrap_err().to_string();
        assert!(err.contains("MAX_ATTEMPTS"), "{err}");
        assert!(!err.contains("POLICY_*"), "{err}");
    }

    #[test]
    fn defaults_are_valid() {
        assert_eq!(load(&[]), Ok(ConsumerConfig::default()));
    }

    #[test]
    fn parses_the_policy() {
        let c = load(&[
            ("BACKOFF", "schedule:0,900,3600"),
            ("MAX_ATTEMPTS", "4"),
            ("AMBIGUOUS", "dead"),
        ])
        .unwrap();
        assert_eq!(
            c.policy.backoff,
            Backoff::Schedule {
                schedule_secs: vec![0, 900, 3600]
            }
        );
        assert_eq!(c.policy.max_attempts, 4);
        assert_eq!(c.policy.ambiguous, AmbiguousRule::Dead);
        let e = load(&[("BACKOFF", "exponential:30")]).unwrap_err();
        assert!(e.to_string().contains("BACKOFF"), "{e}");
    }

    #[test]
    fn refuses_configurations_that_break_the_rules() {
        let lease = load(&[("LEASE_SECS", "14"), ("PROVIDER_TIMEOUT_SECS", "10")]).unwrap_err();
        assert!(lease.to_string().contains("LEASE_SECS"), "{lease}");
        let receives = load(&[("MAX_RECEIVE_COUNT", "6")]).unwrap_err();
        assert!(
            receives.to_string().contains("MAX_RECEIVE_COUNT"),
            "{receives}"
        );
        let attempts = load(&[("MAX_ATTEMPTS", "0")]).unwrap_err();
        assert!(attempts.to_string().contains("MAX_ATTEMPTS"), "{attempts}");
        let nan = load(&[("LEASE_SECS", "soon")]).unwrap_err();
        assert!(nan.to_string().contains("LEASE_SECS"), "{nan}");
    }
}
