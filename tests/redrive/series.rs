//! A dead occurrence of a series, on the emulator: an acknowledged edit that no longer makes
//! it ends it for good, though it was already stale when the edit came (an edit brings in line
//! only the occurrences still fresh), and a redrive that extends freshness never revives it.

use std::time::Duration;

use reminders::clock::Timestamp;
use reminders::domain::series::{NewSeries, Series};
use reminders::domain::{
    Access, Content, DeadReason, DeliveryKey, Recipient, ReminderStatus, Retention, SeriesId,
    SubscriberId,
};
use reminders::ledger::Status;
use reminders::ports::{DeadLetters, ExpectedSeries, Ledger, ReminderStore, SeriesStore};
use reminders::series::{self, Put};

use super::support::{now, unique, AwsWorld};
use super::{dlq_len, letter, queue_messages, redriver, request, support_message, SMS};
use reminders::aws::bootstrap::QueueSpec;

fn daily(id: &SeriesId, at: Timestamp, minute: i64) -> Series {
    let hour = at.as_millis() / 3_600_000 % 24;
    let new = NewSeries {
        series_id: id.clone(),
        subscriber_id: SubscriberId::parse("sub-1").unwrap(),
        rule: format!("FREQ=DAILY;BYHOUR={hour};BYMINUTE={minute}"),
        zone: "UTC".into(),
        starts_at: at,
        until: None,
        fresh_for: Some(Duration::from_secs(60)),
        content: Content::Text {
            subject: "Standup".into(),
            body: "in 5 minutes".into(),
        },
        recipients: vec![Recipient::parse(SMS, "+14155550123").unwrap()],
    };
    Series::new(new, Duration::from_secs(600)).unwrap()
}

#[tokio::test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn a_stale_dead_occurrence_an_edit_moved_is_not_redriven_on_the_emulator() {
    let w = AwsWorld::new(QueueSpec::default()).await;
    let store = &w.ports.reminders;
    // Two hours ago, to the minute, fresh for a minute: enqueued, rejected, dead-lettered.
    let at = Timestamp::from_millis((now().as_millis() - 7_200_000) / 60_000 * 60_000);
    let minute = at.as_millis() / 60_000 % 60;
    let id = SeriesId::parse(unique("standup")).unwrap();
    let mut s = daily(&id, at, minute);
    s.remember(at);
    s.made_through = Some(at);
    store.put_series(&s, ExpectedSeries::Absent).await.unwrap();
    let occurrence = s.occurrence(at, Retention::default());
    store.insert(&occurrence).await.unwrap();
    let marked = store
        .mark(&occurrence.reminder_id, 1, ReminderStatus::Enqueued)
        .await
        .unwrap();
    assert_eq!(marked, reminders::ports::Marked::Marked);
    let msg = support_message(&occurrence);
    w.ports
        .dead_letters
        .dead_letter(SMS, &msg.encode(), &letter(DeadReason::Rejected))
        .await
        .unwrap();

    // The application moves the series a minute later: acknowledged.
    let moved = daily(&id, at, (minute + 1) % 60);
    let put = series::put(
        store,
        &w.ports.ledger,
        &Access::Any,
        moved,
        now(),
        Retention::default(),
    );
    assert!(matches!(put.await.unwrap(), Ok(Put::Edited(_))));

    let mut req = request(&[DeadReason::Rejected], 10, false);
    req.extend_freshness_secs = Some(3600);
    let summary = redriver(&w).run(&req, None).await.unwrap();
    let total = summary.total();
    assert_eq!((total.moved, total.skipped), (0, 1), "{summary:?}");
    assert!(
        queue_messages(&w).await.is_empty(),
        "the old time re-enqueued"
    );
    assert_eq!(dlq_len(&w).await, 0, "its copy is done with");
    let read = store.get(&occurrence.reminder_id).await.unwrap().unwrap();
    assert_eq!(read.status, ReminderStatus::Cancelled);
    let key = DeliveryKey::derive(&occurrence.reminder_id, &occurrence.subscriber_id, SMS);
    let rec = w.ports.ledger.get(&key).await.unwrap().expect("its cancel");
    assert_eq!(rec.status(), Status::Cancelled);
}
