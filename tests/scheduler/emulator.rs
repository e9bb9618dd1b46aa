//! The scheduler against DynamoDB and SQS on the emulator, with the consumer where a test
//! needs to prove one send per delivery.

use std::collections::BTreeMap;
use std::time::Duration;

use reminders::aws::bootstrap::QueueSpec;
use reminders::aws::dynamo::DynamoReminderStore;
use reminders::consumer::Consumer;
use reminders::domain::{Channel, DeliveryKey, DeliveryMessage, ReminderId, ReminderStatus};
use reminders::ledger::Status;
use reminders::ports::reminders::OP_MARK;
use reminders::ports::{DeliveryQueue, FaultPoint, Ledger, ReminderStore};
use reminders::reminder_writes::{self, Edit, Edited, Retention};
use reminders::scheduler::{RunReport, Scheduler, SchedulerConfig};
use reminders_harness::around::Faulty;

use crate::reminder;
use crate::support::{now, AwsPorts, AwsWorld};

struct World {
    aws: AwsWorld,
    scheduler: Scheduler<AwsPorts>,
    consumer: Consumer<AwsPorts>,
}

async fn world(cfg: SchedulerConfig) -> World {
    let aws = AwsWorld::new(QueueSpec::default()).await;
    World {
        scheduler: Scheduler::new(aws.ports.clone(), cfg),
        consumer: aws.consumer(),
        aws,
    }
}

impl World {
    fn store(&self) -> &Faulty<DynamoReminderStore> {
        &self.aws.ports.reminders
    }

    async fn status(&self, id: &ReminderId) -> ReminderStatus {
        self.store().get(id).await.unwrap().unwrap().status
    }

    /// Receive and delete everything in a channel queue (keeps the emulator's queue shallow);
    /// returns the decoded messages.
    async fn drain(&self, channel: Channel) -> Vec<DeliveryMessage> {
        let q = &self.scheduler.ports().queue;
        let mut out = Vec::new();
        loop {
            let got = q.receive(channel, 10, 60).await.unwrap();
            if got.is_empty() {
                return out;
            }
            for m in got {
                out.push(DeliveryMessage::decode(&m.body).unwrap());
                q.delete(channel, &m.receipt_handle).await.unwrap();
            }
        }
    }

    /// Play the event source mapping until the channel queue is empty.
    async fn consume(&self, channel: Channel) {
        self.aws.consume(&self.consumer, channel).await;
    }
}

fn ids(report: &RunReport) -> Vec<String> {
    report
        .enqueued_ids
        .iter()
        .map(|(id, _)| id.to_string())
        .collect()
}

#[tokio::test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn a_backlog_larger_than_a_run_drains_across_runs_in_due_order() {
    let cfg = SchedulerConfig {
        max_per_run: 12,
        page_size: 5,
        ..SchedulerConfig::default()
    };
    let w = world(cfg).await;
    let start = now().minus(Duration::from_secs(1800));
    for i in 0..30u64 {
        // Ids deliberately not in due order, spread over the 4 shards.
        let id = format!("b-{:02}", (i * 7) % 30);
        let due = start.plus(Duration::from_secs(i * 30));
        w.store()
            .insert(&reminder(&id, &format!("s{i}"), due, &[Channel::Email]))
            .await
            .unwrap();
    }
    let mut dues = Vec::new();
    let mut per_run = Vec::new();
    for _ in 0..4 {
        let report = w.scheduler.run(None).await.unwrap();
        per_run.push(report.enqueued);
        dues.extend(report.enqueued_ids.iter().map(|(_, due)| *due));
    }
    assert_eq!(per_run, [12, 12, 6, 0]);
    assert_eq!(dues.len(), 30);
    assert!(
        dues.windows(2).all(|w| w[0] < w[1]),
        "oldest first, across runs"
    );
    assert_eq!(w.drain(Channel::Email).await.len(), 30);
}

#[tokio::test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn fairness_caps_a_heavy_subscriber_per_run() {
    let cfg = SchedulerConfig {
        per_subscriber_cap: 100,
        ..SchedulerConfig::default()
    };
    let w = world(cfg).await;
    // Due within the last hour; fresh for three (none goes stale during the test).
    let start = now().minus(Duration::from_secs(3600));
    for i in 0..1000u64 {
        let due = start.plus(Duration::from_millis(i * 100));
        let r = reminder(&format!("heavy-{i:04}"), "heavy", due, &[Channel::Push]);
        w.store().insert(&r).await.unwrap();
    }
    let light_start = start.plus(Duration::from_secs(200));
    for i in 0..20u64 {
        let due = light_start.plus(Duration::from_secs(i));
        let r = reminder(
            &format!("light-{i:02}"),
            &format!("light-{i}"),
            due,
            &[Channel::Push],
        );
        w.store().insert(&r).await.unwrap();
    }
    let first = w.scheduler.run(None).await.unwrap();
    let first_ids = ids(&first);
    let heavy: Vec<&String> = first_ids
        .iter()
        .filter(|i| i.starts_with("heavy"))
        .collect();
    let light = first_ids.iter().filter(|i| i.starts_with("light")).count();
    assert_eq!((heavy.len(), light), (100, 20));
    assert_eq!(heavy[0], "heavy-0000");
    assert_eq!(heavy[99], "heavy-0099");
    assert_eq!(w.drain(Channel::Push).await.len(), 120);
    let mut next_heavy = 100;
    for run in 1..10 {
        let report = w.scheduler.run(None).await.unwrap();
        let expected: Vec<String> = (next_heavy..next_heavy + 100)
            .map(|i| format!("heavy-{i:04}"))
            .collect();
        assert_eq!(
            ids(&report),
            expected,
            "run {run}: the next 100, in due order"
        );
        next_heavy += 100;
        assert_eq!(w.drain(Channel::Push).await.len(), 100);
    }
    assert_eq!(w.scheduler.run(None).await.unwrap().enqueued, 0);
}

#[tokio::test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn double_runs_and_a_crash_between_send_and_mark_send_once_per_delivery() {
    let w = world(SchedulerConfig::default()).await;
    let due = now().minus(Duration::from_secs(10));
    let mut keys = Vec::new();
    for i in 0..5 {
        let r = reminder(&format!("c-{i}"), "s", due, &[Channel::Sms]);
        w.store().insert(&r).await.unwrap();
        keys.push(DeliveryKey::derive(
            &r.reminder_id,
            &r.subscriber_id,
            Channel::Sms,
        ));
    }
    // Crash between send and mark: every mark of this run fails after the sends.
    w.aws.faults.fail(OP_MARK, FaultPoint::Before, 5);
    let crashed = w.scheduler.run(None).await.unwrap();
    assert_eq!(
        (crashed.messages_sent, crashed.enqueued, crashed.mark_failed),
        (5, 0, 5)
    );
    let retried = w.scheduler.run(None).await.unwrap();
    assert_eq!(retried.enqueued, 5, "the next run enqueues them again");
    let double = w.scheduler.run(None).await.unwrap();
    assert_eq!(double.enqueued, 0, "a double run finds nothing left");
    w.consume(Channel::Sms).await;
    for key in &keys {
        assert_eq!(w.aws.provider.calls_for(key), 1, "one send per delivery");
    }
}

#[tokio::test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn cancelled_edited_and_stale_reminders() {
    let w = world(SchedulerConfig::default()).await;
    let due = now().minus(Duration::from_secs(10));
    let cancelled = reminder("cancel-me", "s", due, &[Channel::Sms, Channel::Email]);
    let edited = reminder("edit-me", "s", due, &[Channel::Sms]);
    let mut stale = reminder(
        "stale",
        "s",
        now().minus(Duration::from_secs(7200)),
        &[Channel::Sms],
    );
    stale.fresh_until = now().minus(Duration::from_secs(60));
    for r in [&cancelled, &edited, &stale] {
        w.store().insert(r).await.unwrap();
    }
    let retention = Retention(Duration::from_secs(86_400));
    let ledger = &w.scheduler.ports().ledger;
    let report =
        reminder_writes::cancel(w.store(), ledger, &cancelled.reminder_id, now(), retention)
            .await
            .unwrap()
            .unwrap();
    assert_eq!(report.deliveries.len(), 2);
    let changes = Edit {
        content: Some(reminders::domain::Content::Text {
            subject: "Moved".into(),
            body: "to 6pm".into(),
        }),
        ..Edit::default()
    };
    let Edited::Edited(v2) = reminder_writes::edit(
        w.store(),
        ledger,
        &edited.reminder_id,
        changes,
        now(),
        retention,
    )
    .await
    .unwrap() else {
        panic!("edit applies")
    };
    assert_eq!(v2.payload_version, 2);
    let run = w.scheduler.run(None).await.unwrap();
    assert_eq!((run.enqueued, run.expired), (1, 1));
    let sent = w.drain(Channel::Sms).await;
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].reminder_id, edited.reminder_id);
    assert_eq!(
        sent[0].payload_version, 2,
        "enqueued at its current version"
    );
    assert!(
        w.drain(Channel::Email).await.is_empty(),
        "cancelled is never enqueued"
    );
    assert_eq!(w.status(&stale.reminder_id).await, ReminderStatus::Expired);
    assert_eq!(
        w.status(&cancelled.reminder_id).await,
        ReminderStatus::Cancelled
    );
    let key = DeliveryKey::derive(
        &cancelled.reminder_id,
        &cancelled.subscriber_id,
        Channel::Sms,
    );
    assert_eq!(
        ledger.get(&key).await.unwrap().unwrap().status(),
        Status::Cancelled
    );
    // An edit after enqueue is allowed but never puts it back into the index.
    let after = reminder_writes::edit(
        w.store(),
        ledger,
        &edited.reminder_id,
        Edit::default(),
        now(),
        retention,
    )
    .await
    .unwrap();
    assert!(matches!(after, Edited::Edited(_)));
    assert_eq!(w.scheduler.run(None).await.unwrap().enqueued, 0);
    let requests = BTreeMap::from([
        ("queries", run.requests.queries),
        ("send_batches", run.requests.send_batches),
        ("writes", run.requests.writes),
    ]);
    eprintln!("requests for one run of 3 reminders: {requests:?}");
}
