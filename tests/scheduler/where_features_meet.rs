//! A stale edit racing the expiry: the scheduler's expiry against an application's edit. The expiry
//! marks the reminder first, conditional on the version the scan read, and writes the ledger
//! only once that mark held; an edit that landed first wins and is sent. A run that stops
//! between the mark and the ledger leaves the reminder in the index as `expiring`, finished by
//! the next run.

use std::sync::Arc;

use crate::support::edit_before_mark::EditBeforeMark;
use std::time::Duration;

use reminders::clock::Timestamp;
use reminders::domain::{Channel, DeliveryKey, PerChannel, Reminder, ReminderStatus};
use reminders::ledger::Status;
use reminders::ports::{
    FaultPoint, Ledger, MemoryGate, MemoryLedger, MemoryQueue, MemoryReminderStore, PortSet,
    ReminderStore,
};
use reminders::providers::AnyProvider;
use reminders::reminder_writes::Edit;
use reminders::scheduler::{Scheduler, SchedulerConfig};
use reminders_harness::around::{Around, Faults};
use reminders_harness::ManualClock;

use crate::reminder;

const T0: Timestamp = Timestamp::from_millis(1_800_000_000_000);

type Ports<S, L> = PortSet<
    ManualClock,
    S,
    L,
    Arc<MemoryGate>,
    Arc<MemoryQueue<ManualClock>>,
    Arc<MemoryQueue<ManualClock>>,
    AnyProvider<ManualClock>,
>;

fn ports<S: ReminderStore, L: Ledger>(
    clock: &ManualClock,
    store: S,
    ledger: L,
    queue: Arc<MemoryQueue<ManualClock>>,
) -> Ports<S, L> {
    PortSet {
        clock: clock.clone(),
        reminders: store,
        ledger,
        gate: Arc::new(MemoryGate::default()),
        queue,
        dead_letters: Arc::new(MemoryQueue::new(clock.clone())),
        providers: PerChannel::from_fn(|_| AnyProvider::Disabled),
    }
}

fn stale_reminder(id: &str) -> Reminder {
    let mut r = reminder(id, "s1", T0, &[Channel::Push]);
    r.fresh_until = T0.plus(Duration::from_secs(60));
    r
}

/// An accepted reschedule that lands between the scan and the expiry is sent, and the
/// ledger never says `expired` for it (before: `expired` was written first, the mark then
/// failed, and the edited version was acknowledged as finished).
#[tokio::test]
async fn an_edit_that_lands_during_the_expiry_wins() {
    let now = T0.plus(Duration::from_secs(120));
    let clock = ManualClock::at(now);
    let inner = Arc::new(MemoryReminderStore::new(4));
    let ledger = Arc::new(MemoryLedger::default());
    let queue = Arc::new(MemoryQueue::new(clock.clone()));
    let r = stale_reminder("w41");
    inner.insert(&r).await.unwrap();
    let reschedule = Edit {
        due_at: Some(now.plus(Duration::from_secs(30))),
        fresh_until: Some(now.plus(Duration::from_secs(3600))),
        ..Edit::default()
    };
    let store = EditBeforeMark::around(inner.clone(), ledger.clone(), reschedule, now);
    let scheduler = Scheduler::new(
        ports(&clock, store, ledger.clone(), queue.clone()),
        SchedulerConfig::default(),
    );
    let report = scheduler.run(None).await.unwrap();
    assert_eq!((report.expired, report.changed), (0, 1), "{report:?}");
    let key = DeliveryKey::derive(&r.reminder_id, &r.subscriber_id, Channel::Push);
    assert!(
        ledger.get(&key).await.unwrap().is_none(),
        "no `expired` on the ledger for a reminder the application rescheduled"
    );
    let v2 = inner.get(&r.reminder_id).await.unwrap().unwrap();
    assert_eq!(
        (v2.status, v2.payload_version),
        (ReminderStatus::Scheduled, 2)
    );
    // The next run enqueues the rescheduled version.
    let report = scheduler.run(None).await.unwrap();
    assert_eq!(report.enqueued, 1, "{report:?}");
    assert_eq!(queue.len(Channel::Push), 1);
}

/// The ledger write fails after the mark held: the reminder stays indexed as `expiring`, and
/// the next run writes the ledger's `expired` and takes it out of the index.
#[tokio::test]
async fn an_expiry_cut_short_after_its_mark_is_finished_by_the_next_run() {
    let clock = ManualClock::at(T0.plus(Duration::from_secs(120)));
    let store = Arc::new(MemoryReminderStore::new(4));
    let inner = Arc::new(MemoryLedger::default());
    let faults = Faults::default();
    let ledger = Around::new(inner.clone(), faults.clone());
    let queue = Arc::new(MemoryQueue::new(clock.clone()));
    let r = stale_reminder("w41b");
    store.insert(&r).await.unwrap();
    let scheduler = Scheduler::new(
        ports(&clock, store.clone(), ledger, queue.clone()),
        SchedulerConfig::default(),
    );
    faults.fail(reminders::ports::ledger::OP_PUT, FaultPoint::Before, 1);
    let report = scheduler.run(None).await.unwrap();
    assert_eq!((report.expired, report.mark_failed), (0, 1), "{report:?}");
    let key = DeliveryKey::derive(&r.reminder_id, &r.subscriber_id, Channel::Push);
    assert!(inner.get(&key).await.unwrap().is_none());
    assert_eq!(
        store.get(&r.reminder_id).await.unwrap().unwrap().status,
        ReminderStatus::Expired
    );
    let report = scheduler.run(None).await.unwrap();
    assert_eq!(report.expired, 1, "{report:?}");
    let rec = inner.get(&key).await.unwrap().unwrap();
    assert_eq!(rec.status(), Status::Expired);
    let report = scheduler.run(None).await.unwrap();
    assert_eq!((report.picked, report.expired), (0, 0), "out of the index");
    assert_eq!(queue.len(Channel::Push), 0, "never enqueued");
}
