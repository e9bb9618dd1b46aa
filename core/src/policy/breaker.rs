//! The breaker's rule (docs/design.md, "Outages: the breaker": an outage is not N failures of N
//! deliveries), pure.
//!
//! **Consecutive failures, across deliveries.** The partition opens after `failures`
//! transient failures or timeouts in a row from any workers, over at least `min_run`, with
//! no success between them. Each failing worker resets the run on its next success; the span
//! keeps concurrent random failures (dozens a second at a high rate), each reset a moment
//! later, from adding up to a spurious opening. A
//! rate over a window would need every success counted on the shared item — a write per
//! delivery, against the budget (docs/design.md, "Budgets") — while a run of failures needs a write
//! only on a failure, and one more on the first success after it. A provider that fails 2% of
//! calls at random opens a five-failure breaker about once in 3·10⁸ calls; one that is down
//! opens it after five calls, however many workers there are.
//!
//! The cool-down before a probe starts at `cooldown` and doubles with each failed probe, to
//! `cooldown_cap`, with jitter over its upper half: the probes find a recovery within one
//! cap of it, and workers of many containers do not probe in step.

use std::time::Duration;

use rand::{Rng, RngExt};

/// The error a delivery records when the breaker holds it after a failed send (a failed probe,
/// or a failure that met an open partition): the outage's failure, nothing spent.
pub const HELD_BY_BREAKER: &str = "held_by_breaker";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerPolicy {
    /// Transient failures in a row that open the partition...
    pub failures: u32,
    /// ... over at least this long with no success between (so that random failures of
    /// many workers at once, each reset a moment later by its next success, never add up).
    pub min_run: Duration,
    /// The first cool-down.
    pub cooldown: Duration,
    /// The longest cool-down.
    pub cooldown_cap: Duration,
}

impl Default for BreakerPolicy {
    fn default() -> Self {
        Self {
            failures: 5,
            min_run: Duration::from_secs(1),
            cooldown: Duration::from_secs(5),
            cooldown_cap: Duration::from_secs(30),
        }
    }
}

impl BreakerPolicy {
    /// Whether a run of `failures` over `run` opens the partition.
    pub fn trips(&self, failures: u32, run: Duration) -> bool {
        failures >= self.failures && run >= self.min_run
    }

    /// The cool-down after `reopens` failed probes: `cooldown × 2^reopens`, capped, jittered
    /// uniformly over its upper half (whole milliseconds, never under half the first).
    pub fn cooldown(&self, reopens: u32, rng: &mut impl Rng) -> Duration {
        let base = self.cooldown.as_millis() as u64;
        let cap = (self.cooldown_cap.as_millis() as u64).max(base);
        let ceiling = base.saturating_mul(1u64 << reopens.min(20)).min(cap).max(1);
        Duration::from_millis(rng.random_range(ceiling / 2..=ceiling))
    }
}

#[cfg(test)]
mod tests {
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    use super::*;

    #[test]
    fn the_cool_down_doubles_to_its_cap_with_jitter() {
        let p = BreakerPolicy::default();
        let mut rng = StdRng::seed_from_u64(1);
        for (reopens, ceiling) in [
            (0, 5_000),
            (1, 10_000),
            (2, 20_000),
            (3, 30_000),
            (9, 30_000),
        ] {
            let seen: Vec<u64> = (0..200)
                .map(|_| p.cooldown(reopens, &mut rng).as_millis() as u64)
                .collect();
            assert!(seen.iter().all(|ms| (ceiling / 2..=ceiling).contains(ms)));
            assert!(seen.iter().any(|ms| *ms != seen[0]), "jittered");
        }
        let second = Duration::from_secs(1);
        assert!(!p.trips(4, second));
        assert!(p.trips(5, second));
        assert!(
            !p.trips(50, second / 2),
            "a burst of failures inside a second is no outage"
        );
    }
}
