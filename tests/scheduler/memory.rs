use std::sync::Arc;
use std::time::Duration;

use reminders::clock::{Clock, Timestamp};
use reminders::domain::{Channel, DeliveryMessage};
use reminders::ports::queue::OP_SEND_ENTRY;
use reminders::ports::{
    DeliveryQueue, FaultPoint, MemoryGate, MemoryLedger, MemoryQueue, MemoryReminderStore, PortSet,
    ReminderStore,
};
use reminders::providers::AnyProvider;
use reminders::scheduler::{Scheduler, SchedulerConfig};
use reminders_harness::around::{Around, Call, Faults, Hook};
use reminders_harness::{ManualClock, MemoryStack};

use crate::reminder;

const T0: Timestamp = Timestamp::from_millis(1_800_000_000_000);

type MemPorts = PortSet<
    ManualClock,
    Arc<MemoryReminderStore>,
    Arc<MemoryLedger>,
    Arc<MemoryGate>,
    Around<Arc<MemoryQueue<ManualClock>>, Faults>,
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
    let stack = MemoryStack::on(ManualClock::at(T0));
    let queue_faults = Faults::default();
    let ports = stack
        .ports(AnyProvider::Disabled)
        .map_queue(|q| Around::new(q, queue_faults.clone()));
    World {
        clock: stack.clock,
        store: stack.store,
        queue: stack.queue,
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

/// Storage and queue calls each take 200 ms of virtual time; a run has 20 s before its
/// deadline, far less than the backlog needs. Every run marks everything it sent, no message
/// is sent twice, and consecutive runs drain the backlog.
#[tokio::test]
async fn slow_dependencies_mark_everything_sent_and_never_send_twice() {
    use reminders::ports::{DueEntry, DueQuery};
    use reminders_harness::around::Latency;
    let stack = MemoryStack::on(ManualClock::at(T0));
    let latency = Latency {
        clock: stack.clock.clone(),
        latency: Duration::from_millis(200),
    };
    let ports = stack
        .ports(AnyProvider::<ManualClock>::Disabled)
        .map_reminders(|r| Around::new(r, latency.clone()))
        .map_queue(|q| Around::new(q, latency));
    let MemoryStack {
        clock,
        store,
        queue,
        ..
    } = stack;
    let scheduler = Scheduler::new(ports, SchedulerConfig::default());
    let backlog = 400;
    for i in 0..backlog {
        let due = T0.minus(Duration::from_secs(600 - i));
        let channels: &[Channel] = match i % 3 {
            0 => &[Channel::Push],
            1 => &[Channel::Email, Channel::Sms],
            _ => &[Channel::Sms],
        };
        let r = reminder(&format!("slow-{i:04}"), &format!("s{i}"), due, channels);
        store.insert(&r).await.unwrap();
    }
    let expected_messages: usize = (0..backlog).map(|i| if i % 3 == 1 { 2 } else { 1 }).sum();
    let mut enqueued = 0;
    let mut runs = 0;
    while enqueued < backlog {
        runs += 1;
        assert!(runs <= 40, "the backlog stopped draining");
        let deadline = clock.now().plus(Duration::from_secs(20));
        let report = scheduler.run(Some(deadline)).await.unwrap();
        assert!(clock.now() <= deadline, "run {runs} outlived its deadline");
        assert_eq!(report.mark_failed, 0);
        enqueued += u64::from(report.enqueued);
        // Everything sent so far is marked: the queue holds exactly the enqueued reminders'
        // messages, each once.
        let mut per_reminder = std::collections::BTreeMap::<String, u32>::new();
        let mut total = 0;
        for c in Channel::ALL {
            for m in queue.peek_all(c) {
                let msg = DeliveryMessage::decode(&m).unwrap();
                *per_reminder
                    .entry(format!("{}/{}", msg.reminder_id, msg.channel))
                    .or_default() += 1;
                total += 1;
            }
        }
        assert!(
            per_reminder.values().all(|n| *n == 1),
            "a message was sent twice"
        );
        let sent_reminders: std::collections::BTreeSet<String> = per_reminder
            .keys()
            .map(|k| k.split('/').next().unwrap().to_owned())
            .collect();
        assert_eq!(
            sent_reminders.len() as u64,
            enqueued,
            "run {runs}: a reminder was sent but not marked"
        );
        assert!(total <= expected_messages);
    }
    assert!(
        runs >= 2,
        "the backlog must need more than one run ({runs})"
    );
    let skip = std::collections::BTreeSet::new();
    for shard in 0..store.shards() {
        let q = DueQuery {
            shard,
            until: clock.now(),
            limit: 10,
            after: None,
            skip: &skip,
        };
        let page = store.query_due(&q).await.unwrap();
        assert!(
            page.items.iter().all(|e| !matches!(e, DueEntry::Due(_))),
            "nothing left in the index"
        );
    }
}

/// A channel added to an enqueued reminder is sent: the reminder re-enters scheduling, and
/// only the new channel's delivery is new.
#[tokio::test]
async fn a_channel_added_after_enqueue_is_scheduled() {
    use reminders::domain::{Recipient, ReminderStatus};
    use reminders::reminder_writes::{self, Edit, Edited, Retention};
    let w = world(SchedulerConfig::default());
    let ledger = reminders::ports::MemoryLedger::default();
    let r = reminder("grow", "s1", T0, &[Channel::Push]);
    w.store.insert(&r).await.unwrap();
    assert_eq!(w.scheduler.run(None).await.unwrap().enqueued, 1);
    let changes = Edit {
        recipients: Some(vec![
            Recipient::parse(Channel::Push, "device-token-1").unwrap(),
            Recipient::parse(Channel::Sms, "+14155550123").unwrap(),
        ]),
        ..Edit::default()
    };
    let retention = Retention::default();
    let Edited::Edited(v2) =
        reminder_writes::edit(&*w.store, &ledger, &r.reminder_id, changes, T0, retention)
            .await
            .unwrap()
    else {
        panic!("edit refused")
    };
    assert_eq!(v2.status, ReminderStatus::Scheduled, "back into scheduling");
    let again = w.scheduler.run(None).await.unwrap();
    assert_eq!(again.enqueued, 1);
    assert_eq!(w.queue.len(Channel::Sms), 1, "the new channel goes out");
    assert_eq!(
        w.queue.len(Channel::Push),
        1,
        "an edit past the horizon: the old one is not enqueued again"
    );
    // An edit that adds nothing leaves an enqueued reminder out of the index.
    let same = reminder_writes::edit(
        &*w.store,
        &ledger,
        &r.reminder_id,
        Edit::default(),
        T0,
        retention,
    )
    .await
    .unwrap();
    assert!(matches!(same, Edited::Edited(ref e) if e.status == ReminderStatus::Enqueued));
    assert_eq!(w.scheduler.run(None).await.unwrap().enqueued, 0);
}

/// An edit past the ledger's horizon: a delivered channel, then an edit that moves the reminder
/// 30 days out (past the old TTL of its proof) and adds a channel. The proof's TTL moves with the
/// reminder, and only the added channel is enqueued again when the new due time comes, so the
/// delivered one is never sent twice even once its old TTL has passed.
#[tokio::test]
async fn an_edit_far_out_enqueues_only_the_added_channel_and_keeps_the_proof() {
    use reminders::domain::{DeliveryKey, Recipient, ReminderStatus};
    use reminders::ledger::{apply, Change, Ctx, LeaseToken, Status};
    use reminders::policy::RetryPolicy;
    use reminders::ports::{Expected, Ledger};
    use reminders::reminder_writes::{self, Edit, Edited, Retention};
    let w = world(SchedulerConfig::default());
    let ledger = MemoryLedger::default();
    let retention = Retention(Duration::from_secs(86_400));
    let r = reminder("far-edit", "s1", T0, &[Channel::Push]);
    w.store.insert(&r).await.unwrap();
    assert_eq!(w.scheduler.run(None).await.unwrap().enqueued, 1);
    // The push delivery is delivered; its proof lives until the old fresh_until + a day.
    let key = DeliveryKey::derive(&r.reminder_id, &r.subscriber_id, Channel::Push);
    let ctx = Ctx {
        key: key.clone(),
        now: T0,
        expires_at: retention.expires_at(r.fresh_until),
        origin: None,
    };
    let token = LeaseToken::generate(&mut rand::rng());
    let claim = Change::Claim {
        token: token.clone(),
        lease_expires_at: T0.plus(Duration::from_secs(60)),
        payload_version: 1,
        policy: RetryPolicy::default(),
    };
    let sending = apply(None, claim, &ctx).unwrap();
    let receipt = Some("r".into());
    let delivered = apply(Some(&sending), Change::Deliver { token, receipt }, &ctx).unwrap();
    ledger.put_if(&delivered, Expected::Absent).await.unwrap();
    let month = Duration::from_secs(30 * 86_400);
    let changes = Edit {
        due_at: Some(r.due_at.plus(month)),
        fresh_until: Some(r.fresh_until.plus(month)),
        recipients: Some(vec![
            Recipient::parse(Channel::Push, "device-token-1").unwrap(),
            Recipient::parse(Channel::Sms, "+14155550123").unwrap(),
        ]),
        ..Edit::default()
    };
    let Edited::Edited(v2) =
        reminder_writes::edit(&*w.store, &ledger, &r.reminder_id, changes, T0, retention)
            .await
            .unwrap()
    else {
        panic!("edit refused")
    };
    assert_eq!(v2.status, ReminderStatus::Scheduled);
    let proof = ledger.get(&key).await.unwrap().unwrap();
    assert_eq!(proof.status(), Status::Delivered);
    assert_eq!(
        proof.expires_at(),
        retention.expires_at(v2.fresh_until),
        "the proof moved"
    );
    w.clock.advance(month);
    let again = w.scheduler.run(None).await.unwrap();
    assert_eq!(again.enqueued, 1);
    assert_eq!(w.queue.len(Channel::Sms), 1, "the added channel goes out");
    assert_eq!(
        w.queue.len(Channel::Push),
        1,
        "the delivered one is not enqueued again"
    );
    let stored = w.store.get(&r.reminder_id).await.unwrap().unwrap();
    assert_eq!(stored.status, ReminderStatus::Enqueued);
}

/// A hook on a reminders table by which its query of one shard always fails (a lasting
/// failure of one shard).
struct FailingShard(u32);

impl Hook for FailingShard {
    async fn before(&self, call: &Call<'_>) -> Result<(), reminders::ports::PortError> {
        match call {
            Call::QueryDue { query } if query.shard == self.0 => {
                Err(reminders::ports::PortError::Unavailable {
                    op: "reminders.query_due",
                    message: "InternalServerError".into(),
                })
            }
            _ => Ok(()),
        }
    }
}

/// A shard whose query keeps failing is reported on every run, with how many runs in a row, in
/// the run's report and its metrics, not only in a log line; the other shards go on.
#[tokio::test]
async fn a_shard_that_keeps_failing_is_reported_run_after_run() {
    let stack = MemoryStack::on(ManualClock::at(T0));
    let MemoryStack { clock, store, .. } = stack.clone();
    let stuck = reminder("stuck", "s1", T0, &[Channel::Push]);
    let shard = reminders::domain::due_shard(&stuck.reminder_id, store.shards());
    let fine = (0..100)
        .map(|i| reminder(&format!("fine-{i}"), "s2", T0, &[Channel::Push]))
        .find(|r| reminders::domain::due_shard(&r.reminder_id, store.shards()) != shard)
        .unwrap();
    store.insert(&stuck).await.unwrap();
    store.insert(&fine).await.unwrap();
    let ports = stack
        .ports(AnyProvider::<ManualClock>::Disabled)
        .map_reminders(|r| Around::new(r, FailingShard(shard)));
    let scheduler = Scheduler::new(ports, SchedulerConfig::default());
    let first = scheduler.run(None).await.unwrap();
    assert_eq!(first.enqueued, 1, "the other shards go on");
    assert_eq!(first.failed_shards.len(), 1);
    assert_eq!(
        (
            first.failed_shards[0].shard,
            first.failed_shards[0].runs_in_a_row
        ),
        (shard, 1)
    );
    assert_eq!(
        first.shards_failing_repeatedly(),
        0,
        "one failure is a blip"
    );
    clock.advance(Duration::from_secs(60));
    let second = scheduler.run(None).await.unwrap();
    assert_eq!(second.failed_shards[0].runs_in_a_row, 2);
    assert_eq!(second.shards_failing_repeatedly(), 1);
    let emf: serde_json::Value = serde_json::from_str(&second.emf(T0, "Reminders")).unwrap();
    assert_eq!(emf["scheduler_shards_failing"], 1);
    assert_eq!(emf["scheduler_query_failures"], 1);
}

/// On the run's clock, the sweep runs once every `sweep_every`, not on every run; an item that
/// can never become due, written after a sweep, is quarantined by the next one.
#[tokio::test]
async fn the_sweep_runs_once_per_period() {
    use reminders::domain::ReminderStatus;
    let w = world(SchedulerConfig::default());
    assert!(
        w.scheduler.run(None).await.unwrap().swept == 0,
        "an empty index"
    );
    // Due a year out, fresh until before that: never due, and no query would reach it soon.
    let mut never = reminder(
        "never",
        "s1",
        T0.plus(Duration::from_secs(365 * 86_400)),
        &[Channel::Push],
    );
    never.fresh_until = T0.plus(Duration::from_secs(3_600));
    w.store.insert(&never).await.unwrap();
    w.clock.advance(Duration::from_secs(60));
    let between = w.scheduler.run(None).await.unwrap();
    assert_eq!((between.swept, between.quarantined), (0, 0), "not yet");
    w.clock.advance(SchedulerConfig::default().sweep_every);
    let next = w.scheduler.run(None).await.unwrap();
    assert_eq!((next.swept, next.quarantined), (1, 1), "{next:?}");
    let stored = w.store.get(&never.reminder_id).await.unwrap().unwrap();
    assert_eq!(stored.status, ReminderStatus::Invalid);
    assert_eq!(
        stored.invalid_reason.as_deref(),
        Some("fresh_until: not after due_at")
    );
}

/// The heartbeat and the backlog, as the alarms read them: every run that answers says so
/// (`scheduler_runs`), and says how late the oldest due reminder it found was.
#[tokio::test]
async fn each_run_emits_a_heartbeat_and_its_backlog_age() {
    let w = world(SchedulerConfig::default());
    let late = reminder(
        "late",
        "s1",
        T0.minus(Duration::from_secs(95)),
        &[Channel::Sms],
    );
    let on_time = reminder("on-time", "s2", T0, &[Channel::Sms]);
    w.store.insert(&late).await.unwrap();
    w.store.insert(&on_time).await.unwrap();
    let first = w.scheduler.run(None).await.unwrap();
    assert_eq!((first.enqueued, first.backlog_age_secs), (2, 95));
    let emf: serde_json::Value = serde_json::from_str(&first.emf(T0, "Reminders/s1")).unwrap();
    assert_eq!(emf["scheduler_runs"], 1);
    assert_eq!(emf["scheduler_backlog_age_seconds"], 95);
    let declared = &emf["_aws"]["CloudWatchMetrics"][0];
    assert_eq!(declared["Namespace"], "Reminders/s1");
    let units: Vec<(String, String)> = declared["Metrics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["Name"].as_str().unwrap().into(),
                m["Unit"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert!(units.contains(&("scheduler_runs".into(), "Count".into())));
    assert!(units.contains(&("scheduler_backlog_age_seconds".into(), "Seconds".into())));
    // Nothing left: no backlog.
    w.clock.advance(Duration::from_secs(60));
    let second = w.scheduler.run(None).await.unwrap();
    assert_eq!((second.enqueued, second.backlog_age_secs), (0, 0));
}

/// The per-subscriber cap holds across the stack's schedules. Four schedules run in the same
/// minute over disjoint shares take at most the cap of one subscriber's backlog between them
/// (each took up to the whole cap before: four times it), and everyone else's reminders all go.
#[tokio::test]
async fn the_per_subscriber_cap_holds_across_shares() {
    use reminders::scheduler::Share;
    let cfg = SchedulerConfig {
        per_subscriber_cap: 100,
        ..SchedulerConfig::default()
    };
    let w = world(cfg);
    for i in 0..1_000 {
        let r = reminder(&format!("heavy-{i}"), "heavy", T0, &[Channel::Push]);
        w.store.insert(&r).await.unwrap();
    }
    for i in 0..12 {
        let r = reminder(
            &format!("light-{i}"),
            &format!("l{i}"),
            T0,
            &[Channel::Push],
        );
        w.store.insert(&r).await.unwrap();
    }
    let mut picked = 0;
    for k in 0..4 {
        let report = w
            .scheduler
            .run_share(None, Share::new(k, 4).unwrap())
            .await
            .unwrap();
        assert!(report.picked >= 1, "share {k} took its part");
        picked += report.picked;
    }
    assert_eq!(
        picked,
        100 + 12,
        "the heavy subscriber's cap once across the four shares, and every light reminder"
    );
    // The next minute takes the next hundred of the backlog.
    w.clock.advance(Duration::from_secs(60));
    let mut next = 0;
    for k in 0..4 {
        next += w
            .scheduler
            .run_share(None, Share::new(k, 4).unwrap())
            .await
            .unwrap()
            .picked;
    }
    assert_eq!(next, 100);
}
