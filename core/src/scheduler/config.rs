//! The scheduler's configuration, read once at cold start and checked: the look-ahead must
//! exceed the schedule period and fit SQS's DelaySeconds.

use std::time::Duration;

use crate::config::{ConfigError, Vars};
use crate::policy::MAX_DELAY_SECS;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchedulerConfig {
    /// Reminders due up to now + this are enqueued, with DelaySeconds for their due time.
    pub look_ahead: Duration,
    /// How often the schedule invokes the scheduler.
    pub schedule_period: Duration,
    pub per_subscriber_cap: u32,
    /// Reminders taken per run; a larger backlog drains over later runs, oldest first.
    pub max_per_run: u32,
    /// Index items read per run at most (skipped ones included).
    pub max_scan: u32,
    pub page_size: u32,
    /// Stop this long before the invocation deadline.
    pub deadline_margin: Duration,
    /// Retries of a batch's failed entries.
    pub send_retries: u32,
    /// Groups of reminders (at most one batch of ten per channel each) in flight at once.
    pub send_concurrency: usize,
    /// How often the first share sweeps the whole due index for items no query reaches (a
    /// `due_shard` outside the shards) or that can never become due, and quarantines them.
    pub sweep_every: Duration,
    /// How long a settled delivery's proof outlives `fresh_until`: the TTL of the ledger
    /// items the scheduler writes for reminders it expires unsent.
    pub retention: crate::domain::Retention,
}

/// The deployed scheduler: one schedule per share (`template.yaml`'s `SchedulerParallelism`
/// default), each run bounded by its deadline rather than a small cap. One: what
/// `remindctl plan --target-p99` recommends for the stated load (docs/performance.md, "How the
/// defaults were chosen"; `tests/sim/stated_load.rs` holds it). A stack deployed with the old
/// default of 4 keeps it on `sam deploy`, which reuses a parameter's previous value.
pub const DEFAULT_PARALLELISM: u32 = 1;
/// The most schedules a stack deploys.
pub const MAX_PARALLELISM: u32 = 16;
/// The scheduler's timeout in the template (seconds): a run stops taking work before it.
pub const FUNCTION_TIMEOUT_SECS: u64 = 50;
/// The scheduler's memory in the template: 1,769 MB is one full vCPU, and a run's CPU (about
/// 0.4 ms per reminder) is what bounds it, with DynamoDB and SQS latency.
pub const FUNCTION_MEMORY_MB: u32 = 1769;

impl Default for SchedulerConfig {
    fn default() -> Self {
        Self {
            look_ahead: Duration::from_secs(120),
            schedule_period: Duration::from_secs(60),
            per_subscriber_cap: 100,
            // A backstop the deadline binds first: the planner's arithmetic for one 50 s run on
            // one vCPU (CPU and marks: about 111,000) rounded up to ten thousand; a simulated
            // run, with SQS's latency too, enqueues about 70,000 (tests/sim/stated_load.rs
            // holds it to the planner's answer).
            max_per_run: 120_000,
            max_scan: 200_000,
            page_size: 250,
            deadline_margin: Duration::from_secs(5),
            send_retries: 3,
            send_concurrency: 8,
            sweep_every: Duration::from_secs(900),
            retention: crate::domain::Retention::default(),
        }
    }
}

/// Every variable [`SchedulerConfig`] reads.
pub const VARS: [&str; 8] = [
    "LOOK_AHEAD_SECS",
    "SCHEDULE_PERIOD_SECS",
    "PER_SUBSCRIBER_CAP",
    "MAX_PER_RUN",
    "MAX_SCAN",
    "PAGE_SIZE",
    "SWEEP_SECS",
    crate::domain::retention::RETENTION_VAR,
];

fn invalid(var: &'static str, problem: &str) -> ConfigError {
    ConfigError::invalid(var, problem)
}

impl SchedulerConfig {
    /// The cold-start checks: the look-ahead must exceed the schedule period (or reminders
    /// fall between runs) and stay within SQS's 900 s DelaySeconds.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.look_ahead <= self.schedule_period {
            return Err(invalid(
                "LOOK_AHEAD_SECS",
                "must be longer than SCHEDULE_PERIOD_SECS",
            ));
        }
        if self.look_ahead > Duration::from_secs(MAX_DELAY_SECS) {
            return Err(invalid(
                "LOOK_AHEAD_SECS",
                "must be at most 900 (SQS DelaySeconds)",
            ));
        }
        if self.per_subscriber_cap == 0 || self.max_per_run == 0 || self.max_scan == 0 {
            return Err(invalid("PER_SUBSCRIBER_CAP", "caps must be at least 1"));
        }
        if self.sweep_every < self.schedule_period {
            return Err(invalid(
                "SWEEP_SECS",
                "must be at least SCHEDULE_PERIOD_SECS",
            ));
        }
        if !(1..=1_000).contains(&self.page_size) {
            return Err(invalid("PAGE_SIZE", "must be 1 to 1000"));
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
            look_ahead: vars.secs_or("LOOK_AHEAD_SECS", d.look_ahead)?,
            schedule_period: vars.secs_or("SCHEDULE_PERIOD_SECS", d.schedule_period)?,
            per_subscriber_cap: vars.u32_or("PER_SUBSCRIBER_CAP", d.per_subscriber_cap)?,
            max_per_run: vars.u32_or("MAX_PER_RUN", d.max_per_run)?,
            max_scan: vars.u32_or("MAX_SCAN", d.max_scan)?,
            page_size: vars.u32_or("PAGE_SIZE", d.page_size)?,
            sweep_every: vars.secs_or("SWEEP_SECS", d.sweep_every)?,
            retention: crate::domain::Retention::from_vars(&vars)?,
            ..d
        };
        cfg.validate()?;
        Ok(cfg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_only_the_variables_it_declares() {
        let asked = std::cell::RefCell::new(Vec::new());
        let _ = SchedulerConfig::from_lookup(|k| {
            asked.borrow_mut().push(k.to_owned());
            None
        });
        let asked = asked.into_inner();
        assert_eq!(asked.len(), VARS.len());
        for k in &asked {
            assert!(VARS.contains(&k.as_str()), "{k} is read but not declared");
        }
    }

    #[test]
    fn cold_start_checks_the_look_ahead() {
        let get = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert!(SchedulerConfig::from_lookup(get(&[])).is_ok());
        let short = SchedulerConfig::from_lookup(get(&[("LOOK_AHEAD_SECS", "60")])).unwrap_err();
        assert!(short.to_string().contains("LOOK_AHEAD_SECS"), "{short}");
        let long = SchedulerConfig::from_lookup(get(&[("LOOK_AHEAD_SECS", "901")])).unwrap_err();
        assert!(long.to_string().contains("900"), "{long}");
    }
}
