//! The budgets (docs/design.md, "Ledger" and "Failures and retries"): `attempt_count` never exceeds
//! the snapshotted policy's `max_attempts` between redrives, nor `throttle_count` its
//! `max_throttle_deferrals`.
//!
//! `apply` keeps it by itself (a claim or takeover with no attempt left is refused, and only
//! a send spends one), so arbitrary sequences of changes cannot overspend; and so does the
//! caller writing what [`decide`] answers. The driven property plays a worker that does so,
//! the way the consumer's claim and settle steps do, against random provider outcomes, lapsed
//! leases, cancels, expiries and redrives.

use std::time::Duration;

use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::SeedableRng;
use reminders::clock::Timestamp;
use reminders::domain::DeadReason;
use reminders::ledger::{apply, Change, Ctx, DeliveryRecord, Status};
use reminders::policy::{
    decide, decide_abandoned, Next, Outcome, OutcomeClass, RetryPolicy, Spent, ABANDONED,
};

use crate::strategies::{key, policy, redrive_all, token_n, T0, TOKENS};
use crate::walk::{claimed_steps, walk};

/// What happens next to the delivery, as the worker sees it.
#[derive(Debug, Clone)]
enum Op {
    /// Claim (waiting for eligibility first) with this lease length and configured policy.
    Claim(u64, u64, RetryPolicy),
    /// The lease holder's provider answers; `decide` says what to write.
    Answer(Outcome, bool, u64),
    /// The lease runs out with no outcome; another worker applies the ambiguous rule.
    Lapse(u64, bool, u64),
    Cancel,
    Expire,
    Redrive,
    Wait(u64),
}

fn answer() -> impl Strategy<Value = Outcome> {
    let e = || "[a-z_]{1,6}";
    prop_oneof![
        1 => Just(Outcome::Delivered { receipt: None }),
        2 => prop::option::of(0i64..600_000).prop_map(|ms| Outcome::Throttled {
            retry_after: ms.map(|ms| T0.plus(Duration::from_millis(ms as u64))),
        }),
        3 => e().prop_map(|error| Outcome::Transient { error }),
        1 => e().prop_map(|error| Outcome::Permanent { error }),
        2 => e().prop_map(|error| Outcome::Ambiguous { error }),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..TOKENS, 1u64..=120, policy()).prop_map(|(t, l, p)| Op::Claim(t, l, p)),
        6 => (answer(), any::<bool>(), any::<u64>()).prop_map(|(o, i, s)| Op::Answer(o, i, s)),
        2 => (0..TOKENS, any::<bool>(), any::<u64>()).prop_map(|(t, i, s)| Op::Lapse(t, i, s)),
        1 => Just(Op::Cancel),
        1 => Just(Op::Expire),
        2 => Just(Op::Redrive),
        2 => (0u64..=3_600_000).prop_map(Op::Wait),
    ]
}

/// The worker's world: the record, the clock and the reminder's freshness.
struct World {
    record: Option<DeliveryRecord>,
    now: Timestamp,
    fresh_until: Timestamp,
}

impl World {
    /// Apply `change`; true if it was applied.
    fn write(&mut self, change: Change) -> bool {
        let ctx = Ctx {
            key: key(),
            now: self.now,
            expires_at: 1_800_000_000,
            origin: None,
        };
        match apply(self.record.as_ref(), change, &ctx) {
            Ok(next) => {
                self.record = Some(next);
                true
            }
            Err(_) => false,
        }
    }

    /// The record while `sending`, with its snapshotted policy and counts.
    fn sending(&self) -> Option<(DeliveryRecord, RetryPolicy, Spent)> {
        let r = self
            .record
            .clone()
            .filter(|r| r.status() == Status::Sending)?;
        let policy = r
            .policy()
            .cloned()
            .expect("a claimed record holds its policy");
        let spent = Spent {
            attempts: r.attempt_count(),
            throttles: r.throttle_count(),
        };
        Some((r, policy, spent))
    }

    fn claim(&mut self, token: u64, lease_secs: u64, policy: RetryPolicy) {
        if let Some(at) = self
            .record
            .as_ref()
            .and_then(DeliveryRecord::next_eligible_at)
        {
            self.now = self.now.max(at);
        }
        let lease_expires_at = self.now.plus(Duration::from_secs(lease_secs));
        let (token, payload_version) = (token_n(token), 1);
        self.write(Change::Claim {
            token,
            lease_expires_at,
            payload_version,
            policy,
        });
    }

    /// What the consumer's settle step writes for `outcome`.
    fn settle(&mut self, outcome: Outcome, idempotent: bool, seed: u64) {
        let Some((r, policy, spent)) = self.sending() else {
            return;
        };
        let token = r.lease_token().cloned().expect("sending holds a lease");
        let rng = &mut StdRng::seed_from_u64(seed);
        let next = decide(
            &policy,
            spent,
            &outcome,
            idempotent,
            self.fresh_until,
            self.now,
            rng,
        );
        let error = Some("e".to_owned());
        let (class, throttled) = (outcome.class(), outcome.class() == OutcomeClass::Throttled);
        let change = match next {
            Next::Delivered => Change::Deliver {
                token,
                receipt: None,
            },
            Next::Retry { at, class, .. } => Change::Defer {
                token,
                next_eligible_at: at,
                class,
                error,
            },
            Next::Dead(reason) => Change::Die {
                token: Some(token),
                reason,
                spends_attempt: !throttled,
                error,
                fallback_to: None,
                maybe_sent: false,
            },
            Next::Expire => {
                let at = self.fresh_until;
                let deferred = self.write(Change::Defer {
                    token,
                    next_eligible_at: at,
                    class,
                    error,
                });
                if deferred {
                    self.write(Change::Expire);
                }
                return;
            }
        };
        self.write(change);
    }

    /// What the consumer's claim step writes for a send whose lease lapsed.
    fn lapse(&mut self, token: u64, idempotent: bool, seed: u64) {
        let Some((r, policy, spent)) = self.sending() else {
            return;
        };
        self.now = self
            .now
            .max(r.lease_expires_at().expect("sending has a lease expiry"));
        let stale_token = r.lease_token().cloned().expect("sending holds a lease");
        let rng = &mut StdRng::seed_from_u64(seed);
        let (fresh, now) = (self.fresh_until, self.now);
        let next = decide_abandoned(&policy, spent, idempotent, true, fresh, now, rng);
        let error = Some(ABANDONED.to_owned());
        let dies = |reason| Change::Die {
            token: Some(stale_token.clone()),
            reason,
            spends_attempt: true,
            error: error.clone(),
            fallback_to: None,
            maybe_sent: false,
        };
        let change = match next {
            Next::Dead(reason) => dies(reason),
            Next::Expire => dies(DeadReason::Ambiguous),
            Next::Retry { at, .. } if at > now => Change::Defer {
                token: stale_token.clone(),
                next_eligible_at: at,
                class: OutcomeClass::Ambiguous,
                error: error.clone(),
            },
            Next::Retry { .. } | Next::Delivered => Change::Takeover {
                stale_token: stale_token.clone(),
                token: token_n(token),
                lease_expires_at: now.plus(Duration::from_secs(60)),
            },
        };
        self.write(change);
    }

    fn run(&mut self, op: Op) {
        self.now = self.now.plus(Duration::from_millis(250));
        match op {
            Op::Claim(token, lease_secs, policy) => self.claim(token, lease_secs, policy),
            Op::Answer(outcome, idempotent, seed) => self.settle(outcome, idempotent, seed),
            Op::Lapse(token, idempotent, seed) => self.lapse(token, idempotent, seed),
            Op::Cancel => {
                self.write(Change::Cancel);
            }
            Op::Expire => {
                self.write(Change::Expire);
            }
            Op::Redrive => {
                self.write(redrive_all());
            }
            Op::Wait(ms) => self.now = self.now.plus(Duration::from_millis(ms)),
        }
    }
}

/// `attempt_count` within the snapshotted budget, a claim (the next attempt) only below it;
/// `throttle_count` within the throttle budget.
fn within_budget(r: &DeliveryRecord) -> Result<(), TestCaseError> {
    let Some(p) = r.policy() else {
        prop_assert_eq!((r.attempt_count(), r.throttle_count()), (0, 0));
        return Ok(());
    };
    let (attempts, max) = (r.attempt_count(), p.max_attempts);
    prop_assert!(attempts <= max, "{} attempts of {}", attempts, max);
    if r.status() == Status::Sending {
        prop_assert!(
            attempts < max,
            "sending attempt {} of {}",
            attempts + 1,
            max
        );
    }
    let (throttles, most) = (r.throttle_count(), p.max_throttle_deferrals);
    prop_assert!(
        throttles <= most,
        "{} throttle deferrals of {}",
        throttles,
        most
    );
    Ok(())
}

proptest! {
    #![proptest_config(crate::config())]

    /// A worker that writes what `decide` answers never spends more attempts than the
    /// policy the delivery started with allows (a redrive gives a fresh budget).
    #[test]
    fn decide_driven_attempts_stay_within_budget(
        ops in prop::collection::vec(op(), 1..=60),
        fresh_secs in 60u64..=2 * 86_400,
    ) {
        let fresh_until = T0.plus(Duration::from_secs(fresh_secs));
        let mut world = World { record: None, now: T0, fresh_until };
        for op in ops {
            world.run(op);
            if let Some(r) = &world.record {
                within_budget(r)?;
            }
        }
    }

    /// The property as the state machine's own: arbitrary changes never overspend. (It
    /// failed before `apply` held the budget: see [`overspent_by_a_takeover`].)
    #[test]
    fn arbitrary_changes_stay_within_the_attempt_budget(steps in claimed_steps()) {
        walk(&steps, |s| {
            let Ok(next) = s.result else { return Ok(false) };
            // No policy yet (never claimed): no budget to hold it to.
            let Some(max) = next.policy().map(|p| p.max_attempts) else { return Ok(false) };
            prop_assert!(next.attempt_count() <= max, "{} attempts of {}", next.attempt_count(), max);
            Ok(true)
        })?;
    }
}

/// The minimal case, found by the property above: with `max_attempts` 1, a claim and then a
/// takeover of its lapsed lease (the lost attempt is 1 of 1) must not leave room for a
/// resend. Before, the takeover and the new holder's delivery were applied (2 of 1).
#[test]
fn overspent_by_a_takeover() {
    let policy = RetryPolicy {
        max_attempts: 1,
        ..RetryPolicy::default()
    };
    let ctx = Ctx {
        key: key(),
        now: T0,
        expires_at: 1_800_000_000,
        origin: None,
    };
    let (first, second) = (token_n(0), token_n(1));
    let claim = Change::Claim {
        token: first.clone(),
        lease_expires_at: T0,
        payload_version: 1,
        policy,
    };
    let claimed = apply(None, claim, &ctx).expect("claimed");
    let takeover = Change::Takeover {
        stale_token: first,
        token: second,
        lease_expires_at: T0.plus(Duration::from_secs(60)),
    };
    let refused = apply(Some(&claimed), takeover, &ctx).expect_err("no attempt left");
    assert_eq!(
        refused.why,
        reminders::ledger::Why::BudgetSpent {
            attempts: 1,
            max: 1
        }
    );
}
