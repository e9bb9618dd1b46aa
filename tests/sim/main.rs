//! The embedded pipeline: deterministic for a seed, no duplicates with an idempotent provider,
//! and the planner's arithmetic reproduced by the engine.

use std::time::Duration;

use reminders_harness::sim::plan::{estimate, plan, PlanInput};
use reminders_harness::sim::{simulate, Profile, SimConfig};

mod choices;
mod fairness;
mod limits;
mod series;
mod stated_load;

fn small(seed: u64) -> SimConfig {
    SimConfig {
        reminders: 1_500,
        window: Duration::from_secs(600),
        seed,
        ..SimConfig::default()
    }
}

#[tokio::test]
async fn the_same_seed_gives_the_same_report_and_no_duplicates() {
    let a = simulate(&small(7), |_, _| {}).await;
    let b = simulate(&small(7), |_, _| {}).await;
    assert_eq!(a.to_json(), b.to_json());
    assert_eq!(a.samples, b.samples);
    assert_eq!(a.duplicates, 0, "idempotent provider: nothing seen twice");
    assert_eq!(a.pending, 0, "everything settled");
    let settled = a.delivered + a.expired + a.cancelled + a.dead.values().sum::<u64>();
    assert_eq!(settled, a.reminders);
    assert!(a.provider_calls >= a.delivered);
    let json: serde_json::Value = serde_json::from_str(&a.to_json()).unwrap();
    for key in [
        "delivered",
        "duplicates",
        "expired",
        "dead",
        "provider_calls",
        "lateness_ms",
    ] {
        assert!(json.get(key).is_some(), "{key} missing");
    }
    for p in ["p50", "p95", "p99"] {
        assert!(json["lateness_ms"][p].is_i64(), "{p}");
    }
    let c = simulate(&small(8), |_, _| {}).await;
    assert_ne!(a.to_json(), c.to_json(), "another seed, another run");
}

#[tokio::test]
async fn a_provider_without_idempotency_flags_ambiguous_sends_instead_of_repeating_them() {
    let cfg = SimConfig {
        profile: Profile {
            rate_timeout: 0.2,
            idempotent: false,
            ..Profile::default()
        },
        ..small(3)
    };
    let r = simulate(&cfg, |_, _| {}).await;
    assert_eq!(r.duplicates, 0, "never resent after an ambiguous timeout");
    let ambiguous = r
        .dead
        .get(&reminders::domain::DeadReason::Ambiguous)
        .copied()
        .unwrap_or(0);
    assert!(
        ambiguous > 100,
        "each one flagged for reconciliation: {ambiguous}"
    );
}

/// 10,000 reminders due at once, 40 sends/s, 20% of the first wave timing out once:
/// 250 s for the first wave plus 50 s of retry work.
#[tokio::test]
async fn plan_reproduces_the_arithmetic() {
    let input = PlanInput {
        timeout_rate: 0.2,
        ..PlanInput::deployed(10_000, 40.0)
    };
    let e = estimate(&input);
    assert_eq!(
        (e.first_wave_secs, e.retry_secs, e.drain_secs),
        (250.0, 50.0, 300.0)
    );
    let p = plan(&input).await;
    let drained = p.simulated.drain_time_s.expect("drains");
    // The plan runs the deployed policy: a first-wave timeout is retried 19 to 38 s later
    // (fitted to an hour of freshness), so the wave's last retries land up to ~40 s after
    // the estimate's 300 s of work (it counts sends, not waits), and a few of them queue
    // behind the wave. The tail moves with the retries' jitter: 350 s before the clock
    // margin, 370 s with it (retries fitted to a second less), p99 lateness 313 s and 314 s.
    assert!(
        (300..=380).contains(&drained),
        "the engine drains in about 300 s of simulated time, got {drained}"
    );
    assert_eq!(p.simulated.delivered, 10_000);
    assert_eq!(p.simulated.duplicates, 0);
}

/// An outage: a five-minute outage a minute in. The breaker holds every delivery (no attempt
/// spent) instead of letting each spend its budget against a provider known to be down; all
/// 10,000 arrive fresh, drained about when the estimate says.
#[tokio::test]
async fn an_outage_kills_nothing_and_drains_when_the_estimate_says() {
    let input = PlanInput {
        outage: Some((60, 300)),
        ..PlanInput::deployed(10_000, 40.0)
    };
    let e = estimate(&input);
    assert_eq!(e.drain_secs, 550.0);
    let s = plan(&input).await.simulated;
    assert_eq!(s.dead, Default::default(), "nothing dead");
    assert_eq!((s.expired, s.pending, s.duplicates), (0, 0, 0));
    assert_eq!(s.delivered, 10_000);
    let drained = s.drain_time_s.expect("drains");
    assert!((550..=600).contains(&drained), "drained after {drained} s");
}

/// The same plan with a policy and no breaker to hold: the checker's counterpart — the
/// breaker off (a threshold no run of failures reaches) and the old five-attempt 1 s
/// schedule, most of the outage's deliveries die `attempts_exhausted`.
#[tokio::test]
async fn without_the_breaker_the_same_outage_kills_fresh_reminders() {
    use reminders::policy::{Backoff, BreakerPolicy, RetryPolicy};
    use reminders_harness::sim::{simulate, SimConfig};
    let input = PlanInput {
        outage: Some((60, 300)),
        ..PlanInput::deployed(10_000, 40.0)
    };
    let mut cfg: SimConfig = reminders_harness::sim::plan::config(&input);
    cfg.policy = RetryPolicy {
        backoff: Backoff::Schedule {
            schedule_secs: vec![0, 1],
        },
        ..RetryPolicy::default()
    };
    cfg.breaker = BreakerPolicy {
        failures: u32::MAX,
        ..BreakerPolicy::default()
    };
    let s = simulate(&cfg, |_, _| {}).await;
    let exhausted = s
        .dead
        .get(&reminders::domain::DeadReason::AttemptsExhausted)
        .copied()
        .unwrap_or(0);
    assert!(exhausted > 5_000, "{exhausted} died of the outage");
}

/// The demo's default profile, seed 7 (its five-minute SMS outage included): the breaker
/// holds the outage's deliveries, so none dies of spent attempts; every delivery not
/// rejected for good is delivered, none twice.
#[tokio::test]
async fn the_default_demo_loses_nothing_to_its_outage() {
    let r = simulate(
        &SimConfig {
            seed: 7,
            ..SimConfig::default()
        },
        |_, _| {},
    )
    .await;
    let dead = |reason| r.dead.get(&reason).copied().unwrap_or(0);
    assert_eq!(
        dead(reminders::domain::DeadReason::AttemptsExhausted),
        0,
        "{r:?}"
    );
    let rejected = dead(reminders::domain::DeadReason::Rejected);
    assert_eq!(r.delivered + rejected, r.reminders, "{r:?}");
    assert_eq!(r.duplicates, 0);
}

/// The scheduler scales out: at modelled AWS latency, four schedules enqueue about four times
/// what one does in a minute, and one run is bounded by its deadline, not by a small cap
/// (with tables and shards that take its marks).
#[tokio::test]
async fn four_schedules_enqueue_four_times_what_one_does() {
    let per_minute = |parallelism| async move {
        let cfg = SimConfig {
            reminders: 400_000,
            subscribers: 400_000,
            channels: vec![reminders::domain::Channel::Push],
            scheduler_parallelism: parallelism,
            // DynamoDB out of the way (the scheduler's own ceiling is what this measures):
            // four schedules mark about 10,000 a second, more than a new on-demand table or
            // eight due-index partitions take (tests/sim/limits.rs shows those limits).
            tables: reminders_harness::sim::capacity::TableMode::Provisioned {
                writes: 40_000,
                reads: 40_000,
            },
            due_shards: 64,
            ..SimConfig::default()
        };
        reminders_harness::sim::enqueued_per_minute(&cfg).await
    };
    let one = per_minute(1).await;
    let four = per_minute(4).await;
    eprintln!("enqueued in a minute: {one} with one schedule, {four} with four");
    assert!(
        one > 2_000 * 10,
        "one run is not held to the old 2,000 cap: {one}"
    );
    assert!(four as f64 > 3.5 * one as f64, "{four} vs {one}");
}

/// The simulation's `duplicates` can fail: a key sent again after the provider confirmed it
/// counts, even though an idempotent provider would show the recipient one message.
#[tokio::test]
async fn a_resend_after_a_confirmation_counts_as_a_duplicate() {
    use reminders::clock::Timestamp;
    use reminders::domain::{Channel, Content, DeliveryKey, Recipient, ReminderId, SubscriberId};
    use reminders::ports::{Provider, SendRequest};
    use reminders_harness::sim::{Profile, SimProvider};
    use reminders_harness::ManualClock;
    let calm = Profile {
        rate_429: 0.0,
        rate_5xx: 0.0,
        rate_timeout: 0.0,
        rate_permanent: 0.0,
        outage_start_secs: None,
        ..Profile::default()
    };
    let provider = SimProvider::new(ManualClock::at(Timestamp::from_millis(0)), calm, 1);
    let id = ReminderId::parse("r").unwrap();
    let sub = SubscriberId::parse("s").unwrap();
    let request = SendRequest {
        delivery_key: DeliveryKey::derive(&id, &sub, Channel::Push),
        recipient: Recipient::parse(Channel::Push, "device-00000001").unwrap(),
        content: Content::Text {
            subject: "s".into(),
            body: "b".into(),
        },
        payload_version: 1,
    };
    provider.send(&request).await;
    assert_eq!(provider.duplicates(), 0);
    provider.send(&request).await;
    assert_eq!(provider.duplicates(), 1);
}

#[test]
fn the_default_window_keeps_the_default_density() {
    use std::time::Duration;
    assert_eq!(SimConfig::default_window(1), Duration::from_secs(1_800));
    assert_eq!(
        SimConfig::default_window(10_000),
        Duration::from_secs(1_800)
    );
    assert_eq!(
        SimConfig::default_window(100_000),
        Duration::from_secs(18_000)
    );
    assert_eq!(
        SimConfig::default_window(1_000_000),
        Duration::from_secs(180_000)
    );
}

/// The demo's recipient profile: opted-out SMS ends `opted_out`, email inside London's night
/// ends `expired_quiet_hours`, push held by New York's 17:25-17:40 still goes out; without
/// the profile neither reason appears.
#[tokio::test]
async fn the_recipient_profile_shows_opt_outs_and_quiet_hours() {
    use reminders::domain::DeadReason;
    // Due over 30 minutes from 17:13 New York, across the push quiet hours.
    let plain = SimConfig {
        window: Duration::from_secs(1_800),
        ..small(3)
    };
    let cfg = SimConfig {
        recipient_rules: true,
        ..plain.clone()
    };
    let r = simulate(&cfg, |_, _| {}).await;
    let dead = |reason| r.dead.get(&reason).copied().unwrap_or(0);
    assert!(dead(DeadReason::OptedOut) > 0, "{}", r.to_json());
    assert!(dead(DeadReason::ExpiredQuietHours) > 0, "{}", r.to_json());
    assert_eq!(r.pending, 0);
    assert_eq!(r.duplicates, 0);
    let plain = simulate(&plain, |_, _| {}).await;
    assert_eq!(plain.dead.get(&DeadReason::OptedOut), None);
    assert_eq!(plain.dead.get(&DeadReason::ExpiredQuietHours), None);
    // Pushes held until 17:40 New York go out late, not never.
    assert!(
        r.lateness_ms.p99 > plain.lateness_ms.p99 + 60_000,
        "{}",
        r.to_json()
    );
}
