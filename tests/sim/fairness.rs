//! Fairness at scale, in the embedded pipeline (real scheduler and consumer, in-memory ports,
//! virtual time, the production scheduler limits): one subscriber with 100,000 overdue
//! reminders and 1,000 other subscribers with one reminder each, overdue or due in the next
//! three minutes. Every other subscriber's reminder is delivered within one schedule period
//! of its due time (or of the first run, for the overdue ones).

use std::sync::Arc;
use std::time::Duration;

use reminders::clock::{Clock, Timestamp};
use reminders::consumer::{Consumer, ConsumerConfig};
use reminders::domain::{Channel, DeliveryKey, PerChannel, Reminder};
use reminders::ledger::Status;
use reminders::ports::{Ledger, ReminderStore};
use reminders::scheduler::{Scheduler, SchedulerConfig};
use reminders_harness::stack::MemoryStack;
use reminders_harness::ManualClock;
use reminders_harness::ScriptedProvider;
use reminders_test_support::a_reminder;

const T0: Timestamp = Timestamp::from_millis(1_800_000_000_000);
const PERIOD: Duration = Duration::from_secs(60);

fn reminder(id: String, subscriber: &str, due_at: Timestamp) -> Reminder {
    a_reminder(id, due_at)
        .of(subscriber)
        .to(&[Channel::Push])
        .fresh_for(Duration::from_secs(6 * 3600))
        .build()
}

#[tokio::test(flavor = "current_thread")]
async fn a_subscriber_with_100k_overdue_delays_no_one_else_past_one_period() {
    let stack = MemoryStack::on(ManualClock::at(T0)).with_shards(8);
    let provider = Arc::new(ScriptedProvider::new(stack.clock.clone(), true));
    let ports = stack.ports(provider.clone());
    let MemoryStack {
        clock,
        store,
        ledger,
        ..
    } = stack;
    let urls = PerChannel::from_fn(|c| format!("http://sim/000000000000/fair-{c}"));
    let cfg = ConsumerConfig {
        emit_metrics: false,
        ..ConsumerConfig::default()
    };
    let consumer = Consumer::new(ports.clone(), cfg, urls.clone(), 3);
    // The production limits: cap 100 per subscriber, 2,000 per run, 20,000 scanned.
    let scheduler = Scheduler::new(ports, SchedulerConfig::default());

    for i in 0..100_000u64 {
        let due = T0
            .minus(Duration::from_secs(7200))
            .plus(Duration::from_millis(i));
        store
            .insert(&reminder(format!("heavy-{i:06}"), "heavy", due))
            .await
            .unwrap();
    }
    let mut others = Vec::new();
    for i in 0..1_000u64 {
        // Half overdue (behind the whole heavy backlog), half due over the next 3 minutes.
        let due = if i % 2 == 0 {
            T0.minus(Duration::from_secs(60 + i))
        } else {
            T0.plus(Duration::from_millis(i * 180))
        };
        let r = reminder(format!("other-{i:04}"), &format!("sub-{i:04}"), due);
        store.insert(&r).await.unwrap();
        others.push(r);
    }

    // Four schedule periods: the scheduler at the start of each, the event source mapping
    // polling every second in between.
    for _ in 0..4 {
        let run = scheduler.run(None).await.unwrap();
        assert!(run.picked <= 2_000 && run.scanned <= 20_000, "{run:?}");
        for _ in 0..PERIOD.as_secs() {
            while reminders_harness::mapping::Mapping::new(&urls, Channel::Push, 10, 30)
                .poll(&consumer, None)
                .await
                .unwrap()
                .is_some()
            {}
            clock.advance(Duration::from_secs(1));
        }
    }
    let mut worst = Duration::ZERO;
    for r in &others {
        let key = DeliveryKey::derive(&r.reminder_id, &r.subscriber_id, Channel::Push);
        let rec = ledger.get(&key).await.unwrap().unwrap_or_else(|| {
            panic!("{} was never claimed", r.reminder_id);
        });
        assert_eq!(rec.status(), Status::Delivered, "{}", r.reminder_id);
        // Late by how much past its due time, or past the first run for the overdue ones.
        let reference = if r.due_at < T0 { T0 } else { r.due_at };
        let late = rec.updated_at().since(reference);
        worst = worst.max(late);
        assert!(
            late <= PERIOD,
            "{} delivered {late:?} after {reference}",
            r.reminder_id
        );
    }
    eprintln!("others: 1000 delivered, worst delay past due (or first run) {worst:?}");
    assert!(clock.now() > T0);
}
