use std::sync::Arc;
use std::time::Duration;

use reminders::clock::{ManualClock, Timestamp};
use reminders::domain::{Channel, DeliveryMessage, PerChannel};
use reminders::ports::queue::OP_SEND_ENTRY;
use reminders::ports::{
    DeliveryQueue, FaultPoint, Faults, MemoryGate, MemoryLedger, MemoryQueue, MemoryReminderStore,
    PortSet, ReminderStore,
};
use reminders::providers::AnyProvider;
use reminders::scheduler::{Scheduler, SchedulerConfig};

use crate::reminder;

const T0: Timestamp = Timestamp::from_millis(1_800_000_000_000);

type MemPorts = PortSet<
    ManualClock,
    Arc<MemoryReminderStore>,
    Arc<MemoryLedger>,
    Arc<MemoryGate>,
    Arc<MemoryQueue<ManualClock>>,
    Arc<MemoryQueue<ManualClock>>,
    AnyProvider<ManualClock>,
>;

struct World {
    clock: ManualClock,
    store: Arc<MemoryReminderStore>,
    queue: Arc<MemoryQueue<ManualClock>>,
    queue_faults: Faults,
    scheduler: Scheduler<MemPorts>,
}

fn world(cfg: SchedulerConfig) -> World {
    let clock = ManualClock::at(T0);
    let store = Arc::new(MemoryReminderStore::new(4));
    let queue_faults = Faults::default();
    let queue = Arc::new(MemoryQueue::with_faults(
        clock.clone(),
        queue_faults.clone(),
    ));
    let ports = PortSet {
        clock: clock.clone(),
        reminders: store.clone(),
        ledger: Arc::new(MemoryLedger::default()),
        gate: Arc::new(MemoryGate::default()),
        queue: queue.clone(),
        dead_letters: Arc::new(MemoryQueue::new(clock.clone())),
        providers: PerChannel::from_fn(|_| AnyProvider::Disabled),
    };
    World {
        clock: clock.clone(),
        store,
        queue,
        queue_faults,
        scheduler: Scheduler::new(ports, cfg),
    }
}

#[tokio::test]
async fn reminders_due_inside_the_look_ahead_arrive_on_time() {
    let w = world(SchedulerConfig::default());
    let r = reminder(
        "soon",
        "s1",
        T0.plus(Duration::from_millis(45_500)),
        &[Channel::Push],
    );
    w.store.insert(&r).await.unwrap();
    let later = reminder(
        "later",
        "s1",
        T0.plus(Duration::from_secs(121)),
        &[Channel::Push],
    );
    w.store.insert(&later).await.unwrap();
    let report = w.scheduler.run(None).await.unwrap();
    assert_eq!(
        report.enqueued, 1,
        "only what is due within the 120 s look-ahead"
    );
    // Hidden by DelaySeconds until its due time (rounded up), then visible.
    w.clock.advance(Duration::from_secs(45));
    assert!(w
        .queue
        .receive(Channel::Push, 10, 30)
        .await
        .unwrap()
        .is_empty());
    w.clock.advance(Duration::from_secs(1));
    let got = w.queue.receive(Channel::Push, 10, 30).await.unwrap();
    assert_eq!(got.len(), 1);
    let msg = DeliveryMessage::decode(&got[0].body).unwrap();
    assert_eq!(msg.reminder_id, r.reminder_id);
    assert_eq!(msg.due_at, r.due_at);
}

#[tokio::test]
async fn a_partial_batch_failure_is_retried_for_the_failed_entries_only() {
    let w = world(SchedulerConfig::default());
    for i in 0..10 {
        let r = reminder(&format!("r{i}"), &format!("s{i}"), T0, &[Channel::Sms]);
        w.store.insert(&r).await.unwrap();
    }
    // Entries 3, 4 and 5 of the first batch fail (not the sender's fault).
    w.queue_faults
        .fail_after(OP_SEND_ENTRY, FaultPoint::Before, 3, 3);
    let report = w.scheduler.run(None).await.unwrap();
    assert_eq!(
        report.requests.send_batches, 2,
        "one retry, of the failed entries"
    );
    assert_eq!(report.messages_sent, 10);
    assert_eq!(report.enqueued, 10);
    assert_eq!(w.queue.len(Channel::Sms), 10, "no entry was sent twice");
}

#[tokio::test]
async fn a_message_that_never_goes_out_leaves_its_reminder_for_the_next_run() {
    let cfg = SchedulerConfig {
        send_retries: 1,
        ..SchedulerConfig::default()
    };
    let w = world(cfg);
    let r = reminder("multi", "s1", T0, &[Channel::Sms, Channel::Email]);
    w.store.insert(&r).await.unwrap();
    // The email entry fails on both tries; the SMS one goes out.
    w.queue_faults
        .fail_after(OP_SEND_ENTRY, FaultPoint::Before, 0, 2);
    let report = w.scheduler.run(None).await.unwrap();
    assert_eq!((report.enqueued, report.send_failed), (0, 1));
    let again = w.scheduler.run(None).await.unwrap();
    assert_eq!(again.enqueued, 1, "marked once every message went out");
}
