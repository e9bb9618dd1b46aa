//! The scheduler judges staleness by the consumer's rule (docs/design.md, "Clock margin"): it
//! expires only what every clock within the margin calls stale; one read inside the margin of its
//! `fresh_until` is enqueued, and the consumer holds it until it is surely stale.

use std::time::Duration;

use reminders::clock::Timestamp;
use reminders::domain::reminder::{surely_stale_at, CLOCK_MARGIN};
use reminders::domain::Channel;
use reminders::ports::ReminderStore;
use reminders::providers::AnyProvider;
use reminders::scheduler::{Scheduler, SchedulerConfig};
use reminders_harness::{ManualClock, MemoryStack};

use crate::reminder;

const T0: Timestamp = Timestamp::from_millis(1_800_000_000_000);

/// One run at `now` over a reminder due at T0 and fresh for a minute: (enqueued, expired).
async fn run_at(now: Timestamp) -> (u32, u32) {
    let stack = MemoryStack::on(ManualClock::at(now));
    let mut r = reminder("margin", "s1", T0, &[Channel::Push]);
    r.fresh_until = T0.plus(Duration::from_secs(60));
    stack.store.insert(&r).await.unwrap();
    let ports = stack.ports(AnyProvider::<ManualClock>::Disabled);
    let report = Scheduler::new(ports, SchedulerConfig::default())
        .run(None)
        .await
        .unwrap();
    (report.enqueued, report.expired)
}

#[tokio::test]
async fn inside_the_margin_after_fresh_until_it_is_enqueued_not_expired() {
    let fresh_until = T0.plus(Duration::from_secs(60));
    let (enqueued, expired) = run_at(fresh_until.plus(CLOCK_MARGIN / 2)).await;
    assert_eq!(
        (enqueued, expired),
        (1, 0),
        "expired while a clock may call it fresh"
    );
    let (enqueued, expired) = run_at(surely_stale_at(fresh_until)).await;
    assert_eq!(
        (enqueued, expired),
        (0, 1),
        "surely stale: expired, never enqueued"
    );
}
