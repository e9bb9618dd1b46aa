//! The [`Eraser`] contract, on memory and on DynamoDB (the emulator): a reminder still to be
//! sent is never deleted unless forced, a settled one is, a missing one says so; preferences and
//! suppressions go once; a series goes once, and an erasure takes a subscriber's series (with
//! the occurrences they made) however many pages of them there are.

use std::time::Duration;

use reminders::aws::dynamo::{DynamoLedger, DynamoReminderStore};
use reminders::clock::Timestamp;
use reminders::domain::series::{occurrence_id, NewSeries, Series};
use reminders::domain::{
    Access, AddressHash, Channel, Content, Preferences, Recipient, Reminder, ReminderStatus,
    Retention, SeriesId, SubscriberId, Suppression, SuppressionKey, SuppressionSource,
};
use reminders::ports::{
    Deleted, Eraser, ExpectedSeries, Ledger, MemoryLedger, MemoryReminderStore, ReminderStore,
    SeriesStore, SubscriberIndex,
};
use reminders::series::Put;
use reminders_test_support::a_reminder;

use crate::common;

const T0: Timestamp = Timestamp::from_millis(1_800_000_000_000);

fn reminder(id: &str) -> Reminder {
    a_reminder(id, T0)
        .of("sub-e")
        .text("Pickup", "at five")
        .to_address(Channel::Email, "a@example.com")
        .default_freshness(Duration::from_secs(600))
        .build()
}

async fn suite<S: ReminderStore + SubscriberIndex + Eraser>(store: &S) {
    let pending = reminder("e-pending");
    store.insert(&pending).await.unwrap();
    let id = &pending.reminder_id;
    assert_eq!(
        store.delete_reminder(id, false).await.unwrap(),
        Deleted::Pending
    );
    assert!(store.get(id).await.unwrap().is_some(), "still there");
    let settled = reminder("e-settled");
    store.insert(&settled).await.unwrap();
    let sid = &settled.reminder_id;
    let v = settled.payload_version;
    store.mark(sid, v, ReminderStatus::Cancelled).await.unwrap();
    assert_eq!(
        store.delete_reminder(sid, false).await.unwrap(),
        Deleted::Deleted
    );
    assert_eq!(store.get(sid).await.unwrap(), None);
    assert_eq!(
        store.delete_reminder(sid, false).await.unwrap(),
        Deleted::Missing
    );
    // Forced: whatever is stored.
    assert_eq!(
        store.delete_reminder(id, true).await.unwrap(),
        Deleted::Deleted
    );
    let sub = SubscriberId::parse("sub-e").unwrap();
    let page = store.by_subscriber(&sub, None, 10).await.unwrap();
    assert!(page.items.is_empty(), "out of the index too: {page:?}");
    let prefs: Preferences = serde_json::from_str(r#"{"opted_out": ["sms"]}"#).unwrap();
    store.put_preferences(&sub, &prefs).await.unwrap();
    assert_eq!(
        store.delete_preferences(&sub).await.unwrap(),
        Deleted::Deleted
    );
    assert_eq!(store.preferences(&sub).await.unwrap(), None);
    assert_eq!(
        store.delete_preferences(&sub).await.unwrap(),
        Deleted::Missing
    );
    let key = SuppressionKey::new(b"eraser contract suppression key".to_vec()).unwrap();
    let a = Recipient::parse(Channel::Email, "a@example.com").unwrap();
    let sup = Suppression::record(&key, &a, SuppressionSource::SesBounce, T0);
    store.put_suppression(&sup).await.unwrap();
    assert_eq!(
        store.lift_suppression(&sup.address_hash).await.unwrap(),
        Deleted::Deleted
    );
    assert_eq!(store.suppression(&sup.address_hash).await.unwrap(), None);
    let other = AddressHash::parse("s1_0123456789abcdef0123456789abcdef").unwrap();
    assert_eq!(
        store.lift_suppression(&other).await.unwrap(),
        Deleted::Missing
    );
}

/// A daily 09:15 Paris series of `subscriber` from T0 (its first occurrence 08:15Z, inside
/// the make-ahead of T0).
fn series(id: &str, subscriber: &str) -> Series {
    let new = NewSeries {
        series_id: SeriesId::parse(id).unwrap(),
        subscriber_id: SubscriberId::parse(subscriber).unwrap(),
        rule: "FREQ=DAILY;BYHOUR=9;BYMINUTE=15".into(),
        zone: "Europe/Paris".into(),
        starts_at: T0,
        until: None,
        fresh_for: Some(Duration::from_secs(1800)),
        content: Content::Text {
            subject: "Standup".into(),
            body: "in 5 minutes".into(),
        },
        recipients: vec![Recipient::parse(Channel::Email, "a@example.com").unwrap()],
    };
    Series::new(new, Duration::from_secs(600)).unwrap()
}

/// A series is deleted once, whatever its status; an erasure cancels and deletes each of a
/// subscriber's series, more than one page of them (the erasure reads 100 a page), and the
/// occurrence one of them made: nothing of them is left to read, list or make.
async fn series_suite<S, L>(store: &S, ledger: &L)
where
    S: ReminderStore + SubscriberIndex + Eraser + SeriesStore,
    L: Ledger,
{
    let alone = series("e-alone", "sub-alone");
    let id = &alone.series_id;
    store
        .put_series(&alone, ExpectedSeries::Absent)
        .await
        .unwrap();
    assert_eq!(store.delete_series(id).await.unwrap(), Deleted::Deleted);
    assert_eq!(store.get_series(id).await.unwrap(), None);
    assert_eq!(store.delete_series(id).await.unwrap(), Deleted::Missing);

    // Through the library's put, as the API creates one: its first occurrence made at once.
    let retention = Retention::default();
    let made = series("e-made", "sub-s");
    let put = reminders::series::put(store, ledger, &Access::Any, made.clone(), T0, retention)
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(put, Put::Created(_)), "{put:?}");
    let first = occurrence_id(&made.series_id, T0.plus(Duration::from_secs(15 * 60)));
    assert!(store.get(&first).await.unwrap().is_some(), "made at once");
    const MORE: usize = 130;
    for i in 0..MORE {
        let s = series(&format!("e-{i:03}"), "sub-s");
        store.put_series(&s, ExpectedSeries::Absent).await.unwrap();
    }
    let sub = SubscriberId::parse("sub-s").unwrap();
    let erased = reminders::erasure::erase(store, ledger, None, &sub, T0, retention)
        .await
        .unwrap();
    assert_eq!(erased.series_deleted, MORE + 1, "{erased:?}");
    assert!(
        erased.reminders_deleted >= 1,
        "the occurrence made: {erased:?}"
    );
    assert!(erased.complete, "{erased:?}");
    assert_eq!(store.get_series(&made.series_id).await.unwrap(), None);
    let last = SeriesId::parse(format!("e-{:03}", MORE - 1)).unwrap();
    assert_eq!(store.get_series(&last).await.unwrap(), None);
    let left = store.series_of(&sub, None, 1000).await.unwrap();
    assert!(left.items.is_empty() && left.next.is_none(), "{left:?}");
    assert_eq!(store.get(&first).await.unwrap(), None);
    let reminders = store.by_subscriber(&sub, None, 1000).await.unwrap();
    assert!(reminders.items.is_empty(), "{reminders:?}");
    let far = T0.plus(Duration::from_secs(400 * 86_400));
    let due = store.series_due(far, 1000).await.unwrap();
    assert!(due.is_empty(), "none left for the maker: {due:?}");
    // Again: nothing left to erase.
    let again = reminders::erasure::erase(store, ledger, None, &sub, T0, retention)
        .await
        .unwrap();
    assert_eq!(again.series_deleted, 0, "{again:?}");
}

#[tokio::test]
async fn memory_eraser_meets_the_contract() {
    let store = MemoryReminderStore::new(4);
    suite(&store).await;
    series_suite(&store, &MemoryLedger::default()).await;
}

#[tokio::test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn dynamodb_eraser_meets_the_contract() {
    let client = common::dynamo().await;
    let table = common::reminders_table(&client).await;
    let deliveries = common::deliveries_table(&client).await;
    let store = DynamoReminderStore::new(client.clone(), table, 4);
    suite(&store).await;
    series_suite(&store, &DynamoLedger::new(client, deliveries)).await;
}
