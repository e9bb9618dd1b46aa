//! The breaker's probe at its edges: a probe answered 429 ends with no reopening counted, and a
//! failed probe's cool-down follows the count of failed probes as stored, not as a container's
//! copy remembers it.

use std::time::Duration;

use reminders::clock::{Clock, Timestamp};
use reminders::consumer::ConsumerConfig;
use reminders::domain::Channel;
use reminders::ledger::Status;
use reminders::ports::gate::{BreakerChange, OpenBreaker};
use reminders::ports::{Gate, GatePartition, MemoryGate};
use reminders_harness::scripted::Answer;

use crate::harness::{message, test_config, Mem, T0};

fn at(ms: i64) -> Timestamp {
    T0.plus(Duration::from_millis(ms as u64))
}

/// The scripted provider's push partition.
fn push_partition() -> GatePartition {
    GatePartition::new(Channel::Push, "scripted")
}

/// Another worker's failed probes on `gate`, from an open breaker whose cool-down ended at
/// `from_ms`: `n` of them, each ending its cool-down a moment later; the last ends at
/// `from_ms + 100·n`.
async fn failed_probes(gate: &MemoryGate, from_ms: i64, n: u32) {
    let p = push_partition();
    for i in 0..n {
        let now = from_ms + 100 * i64::from(i);
        let probe = BreakerChange::Probe {
            now: at(now),
            probe_until: at(now + 50),
            reopens: i,
        };
        assert!(gate.breaker(&p, probe).await.unwrap(), "probe {i}");
        let reopen = BreakerChange::Reopen {
            probe_until: at(now + 50),
            until: at(now + 100),
        };
        assert!(gate.breaker(&p, reopen).await.unwrap(), "reopen {i}");
    }
}

fn breaker(gate: &MemoryGate) -> OpenBreaker {
    gate.peek(&push_partition())
        .breaker
        .expect("the breaker is open")
}

/// A probe answered 429 shows a provider that is up and shedding load: no reopening is
/// counted (the cool-down does not double), the probe is released, and the 429 gate holds
/// the partition until the provider's Retry-After; the probe after it closes the breaker.
#[tokio::test]
async fn a_probe_answered_429_counts_no_reopening() {
    let w = Mem::new(test_config(), true);
    let gate = w.consumer.ports().gate.clone();
    let open = BreakerChange::Open {
        now: T0,
        until: at(1_000),
    };
    assert!(gate.breaker(&push_partition(), open).await.unwrap());
    failed_probes(&gate, 1_000, 2).await;
    assert_eq!(breaker(&gate).reopens, 2);
    w.advance(2);
    let now = w.clock.now();
    let r = w.reminder("probe429", &[Channel::Push]).await;
    let push = message(&r, Channel::Push);
    w.provider
        .script_for(&push.delivery_key, [Answer::ThrottleSecs(60)]);
    w.enqueue(&push).await;
    w.run(Channel::Push).await.unwrap();
    assert_eq!(
        w.provider.calls_for(&push.delivery_key),
        1,
        "the probe sent"
    );
    let retry_after = now.plus(Duration::from_secs(60));
    let b = breaker(&gate);
    assert_eq!(b.reopens, 2, "a 429 is no failed probe");
    assert_eq!(b.probe_until, None, "the probe is released");
    assert_eq!(
        b.until, retry_after,
        "the next probe after the Retry-After, not a doubled cool-down"
    );
    let state = gate.peek(&push_partition());
    assert_eq!(
        state.throttled_until,
        Some(retry_after),
        "the 429 gate holds"
    );
    let rec = w.record(&push.delivery_key).await.unwrap();
    assert_eq!(rec.status(), Status::Deferred);
    assert_eq!((rec.attempt_count(), rec.throttle_count()), (0, 1));
    // After the Retry-After the next look probes again, and its delivery closes the breaker.
    w.advance(125);
    w.run(Channel::Push).await.unwrap();
    assert_eq!(w.provider.calls_for(&push.delivery_key), 2);
    let rec = w.record(&push.delivery_key).await.unwrap();
    assert_eq!(rec.status(), Status::Delivered);
    assert_eq!(gate.peek(&push_partition()).breaker, None, "closed");
}

/// A container's copy of the gate, read before another worker's three failed probes, says no
/// probe has failed while the item says three. The probe this container then makes is won
/// at the stored count, so its failure's cool-down is the fourth (capped at 30 s), not the
/// first (5–10 s).
#[tokio::test]
async fn a_failed_probes_cool_down_follows_the_stored_count_not_a_stale_copy() {
    // A copy kept 5 s, so that it outlives the other worker's probes.
    let cfg = ConsumerConfig {
        gate_cache: Duration::from_secs(5),
        ..test_config()
    };
    let w = Mem::new(cfg, true);
    let gate = w.consumer.ports().gate.clone();
    let open = BreakerChange::Open {
        now: T0,
        until: at(1_000),
    };
    assert!(gate.breaker(&push_partition(), open).await.unwrap());
    let r = w.reminder("stalecopy", &[Channel::Push]).await;
    let push = message(&r, Channel::Push);
    w.provider
        .script_for(&push.delivery_key, [Answer::Transient]);
    w.clock.advance(Duration::from_millis(500));
    w.enqueue(&push).await;
    w.run(Channel::Push).await.unwrap();
    assert_eq!(
        w.provider.calls_for(&push.delivery_key),
        0,
        "held while open; the copy now says no failed probe"
    );
    failed_probes(&gate, 1_000, 3).await;
    assert_eq!(breaker(&gate).reopens, 3);
    w.clock.advance(Duration::from_millis(2_500));
    for _ in 0..10 {
        if w.provider.calls_for(&push.delivery_key) > 0 {
            break;
        }
        w.run(Channel::Push).await;
        w.advance(1);
    }
    assert_eq!(
        w.provider.calls_for(&push.delivery_key),
        1,
        "one probe sent"
    );
    let b = breaker(&gate);
    assert_eq!(b.reopens, 4);
    let cooldown = b.until.since(w.clock.now());
    assert!(
        cooldown >= Duration::from_secs(14),
        "the fourth failed probe's cool-down is 15–30 s, got {cooldown:?}"
    );
    let rec = w.record(&push.delivery_key).await.unwrap();
    assert_eq!(rec.attempt_count(), 0, "a failed probe spends nothing");
}
