use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::SeedableRng;

use super::*;

const NOW: Timestamp = Timestamp::from_millis(1_700_000_000_000);

fn far() -> Timestamp {
    NOW.plus(Duration::from_secs(30 * 24 * 3600))
}

fn policy() -> RetryPolicy {
    RetryPolicy {
        max_attempts: 3,
        backoff: Backoff::Exponential {
            base_secs: 10,
            cap_secs: 60,
        },
        ..RetryPolicy::default()
    }
}

fn transient() -> Outcome {
    Outcome::Transient {
        error: "http_503".into(),
    }
}

fn rng() -> StdRng {
    StdRng::seed_from_u64(7)
}

fn run(p: &RetryPolicy, spent: Spent, outcome: &Outcome) -> Next {
    decide(p, spent, outcome, true, far(), NOW, &mut rng())
}

#[test]
fn default_policy_is_valid() {
    assert_eq!(RetryPolicy::default().validate(), Ok(()));
    let mut p = policy();
    p.max_attempts = 0;
    assert_eq!(p.validate(), Err(PolicyError::NoAttempts));
    p = policy();
    p.backoff = Backoff::Schedule {
        schedule_secs: vec![],
    };
    assert_eq!(p.validate(), Err(PolicyError::EmptySchedule));
    p = policy();
    p.backoff = Backoff::Exponential {
        base_secs: 100,
        cap_secs: 10,
    };
    assert_eq!(p.validate(), Err(PolicyError::BadBackoff));
}

#[test]
fn delivered_and_permanent_are_final() {
    let p = policy();
    assert_eq!(
        run(&p, Spent::default(), &Outcome::Delivered { receipt: None }),
        Next::Delivered
    );
    let perm = Outcome::Permanent {
        error: "invalid_recipient".into(),
    };
    assert_eq!(
        run(&p, Spent::default(), &perm),
        Next::Dead(DeadReason::Rejected)
    );
}

#[test]
fn transient_spends_an_attempt_until_the_maximum() {
    let p = policy();
    // Attempt 2 of 3 failed: one attempt left, so retry.
    let spent = Spent {
        attempts: 1,
        throttles: 0,
    };
    match run(&p, spent, &transient()) {
        Next::Retry {
            spends_attempt,
            class,
            ..
        } => {
            assert!(spends_attempt);
            assert_eq!(class, OutcomeClass::Transient);
        }
        other => panic!("expected retry, got {other:?}"),
    }
    // Attempt 3 of 3 failed: the attempt equal to the maximum is the last.
    let spent = Spent {
        attempts: 2,
        throttles: 0,
    };
    assert_eq!(
        run(&p, spent, &transient()),
        Next::Dead(DeadReason::AttemptsExhausted)
    );
}

#[test]
fn exponential_delay_respects_the_cap() {
    let p = policy();
    for seed in 0..200 {
        let mut r = StdRng::seed_from_u64(seed);
        let next = decide(
            &p,
            Spent {
                attempts: 1,
                throttles: 0,
            },
            &transient(),
            true,
            far(),
            NOW,
            &mut r,
        );
        let Next::Retry { at, wait, .. } = next else {
            panic!("{next:?}")
        };
        let secs = at.since(NOW).as_secs();
        assert!(
            (1..=20).contains(&secs),
            "after 2 failures: ≤ base×2, got {secs}"
        );
        assert!(matches!(wait, Wait::Visibility { secs } if secs <= 20));
    }
    let mut seen_max = 0;
    for seed in 0..200 {
        let mut r = StdRng::seed_from_u64(seed);
        let spent = Spent {
            attempts: 1,
            throttles: 0,
        };
        let mut p = p.clone();
        p.max_attempts = 100;
        let spent = Spent {
            attempts: 40,
            ..spent
        };
        if let Next::Retry { at, .. } = decide(&p, spent, &transient(), true, far(), NOW, &mut r) {
            seen_max = seen_max.max(at.since(NOW).as_secs());
        }
    }
    assert!(seen_max <= 60, "cap is 60 s, saw {seen_max}");
    assert!(
        seen_max > 20,
        "jitter reaches towards the cap, saw {seen_max}"
    );
}

#[test]
fn schedule_gives_exact_delays_and_repeats_its_last() {
    let mut p = policy();
    p.max_attempts = 10;
    p.backoff = Backoff::Schedule {
        schedule_secs: vec![0, 900, 3600, 14_400],
    };
    let delay = |attempts| match run(
        &p,
        Spent {
            attempts,
            throttles: 0,
        },
        &transient(),
    ) {
        Next::Retry { at, .. } => at.since(NOW).as_secs(),
        other => panic!("{other:?}"),
    };
    assert_eq!(delay(0), 900, "after the first attempt, wait 15 m");
    assert_eq!(delay(1), 3600);
    assert_eq!(delay(2), 14_400);
    assert_eq!(delay(5), 14_400);
}

#[test]
fn long_waits_become_a_reenqueue_past_the_12h_clamp() {
    let mut p = policy();
    p.backoff = Backoff::Schedule {
        schedule_secs: vec![0, 13 * 3600],
    };
    let Next::Retry { at, wait, .. } = run(&p, Spent::default(), &transient()) else {
        panic!()
    };
    assert_eq!(at, NOW.plus(Duration::from_secs(13 * 3600)));
    assert_eq!(
        wait,
        Wait::Reenqueue {
            delay_secs: 900,
            not_before: at
        }
    );
    // Exactly at the clamp still fits on the message.
    assert_eq!(
        wait_until(NOW, NOW.plus(Duration::from_secs(MAX_VISIBILITY_SECS))),
        Wait::Visibility {
            secs: MAX_VISIBILITY_SECS as u32
        }
    );
    assert!(matches!(
        wait_until(NOW, NOW.plus(Duration::from_secs(MAX_VISIBILITY_SECS + 1))),
        Wait::Reenqueue { .. }
    ));
    const { assert!(MAX_VISIBILITY_SECS < 12 * 3600) };
}

#[test]
fn throttle_spends_no_attempt_and_honours_retry_after() {
    let p = policy();
    let retry_after = parse_retry_after("30", NOW);
    let next = run(
        &p,
        Spent {
            attempts: 2,
            throttles: 0,
        },
        &Outcome::Throttled { retry_after },
    );
    let Next::Retry {
        at,
        spends_attempt,
        wait,
        class,
    } = next
    else {
        panic!("{next:?}")
    };
    assert!(!spends_attempt);
    assert_eq!(class, OutcomeClass::Throttled);
    assert!(at >= NOW.plus(Duration::from_secs(30)));
    assert!(at <= NOW.plus(Duration::from_secs(33)));
    assert!(matches!(wait, Wait::Visibility { secs } if secs >= 30));
}

#[test]
fn throttle_with_an_http_date_in_the_future() {
    let now = Timestamp::from_millis(784_111_777_000 - 90_000);
    let retry_after = parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now);
    let next = decide(
        &policy(),
        Spent::default(),
        &Outcome::Throttled { retry_after },
        true,
        now.plus(Duration::from_secs(3600)),
        now,
        &mut rng(),
    );
    let Next::Retry { at, .. } = next else {
        panic!("{next:?}")
    };
    assert!(at >= Timestamp::from_millis(784_111_777_000));
}

#[test]
fn throttle_with_retry_after_in_the_past_or_malformed_still_waits() {
    let p = policy();
    for header in ["Sun, 06 Nov 1994 08:49:37 GMT", "soon", "-3"] {
        let retry_after = parse_retry_after(header, NOW);
        let Next::Retry { at, wait, .. } =
            run(&p, Spent::default(), &Outcome::Throttled { retry_after })
        else {
            panic!()
        };
        assert!(at >= NOW, "{header}");
        assert!(
            matches!(wait, Wait::Visibility { secs } if secs >= 1),
            "{header}"
        );
    }
}

#[test]
fn a_blocked_partition_waits_like_a_throttle() {
    let until = NOW.plus(Duration::from_secs(900));
    let blocked = Outcome::Blocked {
        error: "account_suspended".into(),
        retry_after: until,
    };
    let Next::Retry {
        at,
        spends_attempt,
        class,
        ..
    } = run(&policy(), Spent::default(), &blocked)
    else {
        panic!()
    };
    assert!(at >= until && !spends_attempt);
    assert_eq!(class, OutcomeClass::Throttled);
}

#[test]
fn throttle_budget_is_bounded() {
    let mut p = policy();
    p.max_throttle_deferrals = 3;
    let at_limit = Spent {
        attempts: 0,
        throttles: 2,
    };
    assert!(matches!(
        run(&p, at_limit, &Outcome::Throttled { retry_after: None }),
        Next::Retry { .. }
    ));
    let over = Spent {
        attempts: 0,
        throttles: 3,
    };
    assert_eq!(
        run(&p, over, &Outcome::Throttled { retry_after: None }),
        Next::Dead(DeadReason::ThrottleExhausted)
    );
}

#[test]
fn a_retry_past_freshness_expires_instead() {
    let p = policy();
    let retry_after = parse_retry_after("600", NOW);
    let next = decide(
        &p,
        Spent::default(),
        &Outcome::Throttled { retry_after },
        true,
        NOW.plus(Duration::from_secs(300)),
        NOW,
        &mut rng(),
    );
    assert_eq!(next, Next::Expire);
}

#[test]
fn ambiguous_retries_only_with_an_idempotent_provider() {
    let p = policy();
    let amb = Outcome::Ambiguous {
        error: "timeout_after_write".into(),
    };
    let idem = decide(&p, Spent::default(), &amb, true, far(), NOW, &mut rng());
    assert!(matches!(
        idem,
        Next::Retry {
            spends_attempt: true,
            class: OutcomeClass::Ambiguous,
            ..
        }
    ));
    let not_idem = decide(&p, Spent::default(), &amb, false, far(), NOW, &mut rng());
    assert_eq!(not_idem, Next::Dead(DeadReason::Ambiguous));
    let mut strict = p.clone();
    strict.ambiguous = AmbiguousRule::Dead;
    let strict_next = decide(
        &strict,
        Spent::default(),
        &amb,
        true,
        far(),
        NOW,
        &mut rng(),
    );
    assert_eq!(strict_next, Next::Dead(DeadReason::Ambiguous));
}

#[test]
fn same_seed_same_decision() {
    let p = policy();
    let a = decide(
        &p,
        Spent::default(),
        &transient(),
        true,
        far(),
        NOW,
        &mut rng(),
    );
    let b = decide(
        &p,
        Spent::default(),
        &transient(),
        true,
        far(),
        NOW,
        &mut rng(),
    );
    assert_eq!(a, b);
}

proptest! {
    #[test]
    fn never_before_retry_after_and_always_sqs_sized(
        secs in 0u64..200_000,
        throttles in 0u32..50,
        seed in any::<u64>(),
    ) {
        let mut p = policy();
        p.max_throttle_deferrals = 100;
        let retry_after = Some(NOW.plus(Duration::from_secs(secs)));
        let next = decide(&p, Spent { attempts: 0, throttles }, &Outcome::Throttled { retry_after },
            true, far(), NOW, &mut StdRng::seed_from_u64(seed));
        let Next::Retry { at, wait, spends_attempt, .. } = next else { panic!("{next:?}") };
        prop_assert!(!spends_attempt);
        prop_assert!(at >= NOW.plus(Duration::from_secs(secs)));
        match wait {
            Wait::Visibility { secs: v } => {
                prop_assert!(u64::from(v) <= MAX_VISIBILITY_SECS);
                prop_assert!(NOW.plus(Duration::from_secs(u64::from(v))) >= at);
            }
            Wait::Reenqueue { delay_secs, not_before } => {
                prop_assert!(u64::from(delay_secs) <= MAX_DELAY_SECS);
                prop_assert_eq!(not_before, at);
            }
        }
    }

    #[test]
    fn retry_after_parsing_never_panics(s in "\\PC*") {
        let _ = parse_retry_after(&s, NOW);
    }
}
