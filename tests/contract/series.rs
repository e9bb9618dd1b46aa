//! The [`SeriesStore`] contract, on memory and on DynamoDB (the emulator): a create never
//! overwrites; a write lands only over the version and the progress it read, and a refused one
//! answers the series as stored; the maker finds an active series when its next occurrence comes
//! within the make-ahead, never a cancelled one; a subscriber's series come a page at a time, and
//! never another subscriber's (nor a reminder of the same subscriber); a page by cursor goes on
//! after a series deleted since.

use std::time::Duration;

use reminders::aws::dynamo::DynamoReminderStore;
use reminders::clock::Timestamp;
use reminders::domain::series::{NewSeries, Series, SeriesStatus, MAKE_AHEAD};
use reminders::domain::{Channel, Content, Recipient, Reminder, SeriesId, SubscriberId};
use reminders::ports::series::{SeriesCursor, Written};
use reminders::ports::{
    Deleted, Eraser, ExpectedSeries, MemoryReminderStore, ReminderStore, SeriesStore,
    SubscriberIndex,
};
use reminders_test_support::a_reminder;

use crate::common;

/// 2027-01-15T08:00:00Z.
const T0: Timestamp = Timestamp::from_millis(1_800_000_000_000);

fn series(id: &str, subscriber: &str, starts_at: Timestamp) -> Series {
    let new = NewSeries {
        series_id: SeriesId::parse(id).unwrap(),
        subscriber_id: SubscriberId::parse(subscriber).unwrap(),
        rule: "FREQ=DAILY;BYHOUR=9;BYMINUTE=15".into(),
        zone: "Europe/Paris".into(),
        starts_at,
        until: None,
        fresh_for: Some(Duration::from_secs(1800)),
        content: Content::Text {
            subject: "Standup".into(),
            body: "in 5 minutes".into(),
        },
        recipients: vec![
            Recipient::parse(Channel::Push, "device-token").unwrap(),
            Recipient::parse(Channel::Email, "a@example.com").unwrap(),
        ],
    };
    Series::new(new, Duration::from_secs(600)).unwrap()
}

async fn suite<S: SeriesStore + ReminderStore + SubscriberIndex + Eraser>(store: &S) {
    let s = series("standup", "u-42", T0);
    assert_eq!(store.get_series(&s.series_id).await.unwrap(), None);
    assert_eq!(
        store.put_series(&s, ExpectedSeries::Absent).await.unwrap(),
        Written::Written
    );
    assert_eq!(
        store.get_series(&s.series_id).await.unwrap().as_ref(),
        Some(&s)
    );
    // A second create finds it there, and says what is stored.
    let again = store.put_series(&s, ExpectedSeries::Absent).await.unwrap();
    assert_eq!(again, Written::Conflict(Some(Box::new(s.clone()))));

    // The maker's progress: written over what it read; a stale reading is refused.
    let mut made = s.clone();
    made.made_through = Some(T0.plus(MAKE_AHEAD));
    made.remember(T0.plus(Duration::from_secs(60)));
    assert!(made.detach(T0.plus(Duration::from_secs(86_400))));
    assert_eq!(
        store
            .put_series(&made, ExpectedSeries::of(&s))
            .await
            .unwrap(),
        Written::Written
    );
    let mut edit = s.clone();
    edit.version = 2;
    let refused = store
        .put_series(&edit, ExpectedSeries::of(&s))
        .await
        .unwrap();
    assert_eq!(refused, Written::Conflict(Some(Box::new(made.clone()))));
    let mut edit = made.clone();
    edit.version = 2;
    assert_eq!(
        store
            .put_series(&edit, ExpectedSeries::of(&made))
            .await
            .unwrap(),
        Written::Written
    );

    // Due for the maker once its next occurrence (09:15 Paris, 08:15Z) is within the
    // make-ahead of `until`; not before.
    let next = edit.next_after(edit.made_through).unwrap();
    let early = Timestamp::from_millis(next.as_millis() - MAKE_AHEAD.as_millis() as i64 - 1000);
    let due = |until| async move { store.series_due(until, 10).await.unwrap() };
    assert!(due(early).await.is_empty(), "not yet due");
    let later = Timestamp::from_millis(next.as_millis() - MAKE_AHEAD.as_millis() as i64);
    assert_eq!(due(later).await, vec![edit.clone()]);
    // Cancelled: never again.
    let mut cancelled = edit.clone();
    cancelled.status = SeriesStatus::Cancelled;
    cancelled.version = 3;
    store
        .put_series(&cancelled, ExpectedSeries::of(&edit))
        .await
        .unwrap();
    assert!(due(next).await.is_empty(), "a cancelled series is not made");

    // In the zone "subscriber": the zone last read is stored with it, and the maker's index
    // follows it (re-aimed from Paris to Tokyo, the next 09:15 is 00:15Z the next day, not
    // 08:15Z: found due then, and not at Paris' time).
    let mut follows = series("traveller", "u-9", T0);
    follows.zone = reminders::domain::series::SUBSCRIBER_ZONE.into();
    follows.local_zone = Some("Europe/Paris".into());
    store
        .put_series(&follows, ExpectedSeries::Absent)
        .await
        .unwrap();
    let stored = store.get_series(&follows.series_id).await.unwrap().unwrap();
    assert_eq!(stored, follows);
    let paris_next = follows.next_after(None).unwrap();
    let mut tokyo = follows.clone();
    tokyo.localise(Some("Asia/Tokyo"));
    let tokyo_next = tokyo.next_after(None).unwrap();
    assert!(tokyo_next != paris_next, "{tokyo_next} {paris_next}");
    store
        .put_series(&tokyo, ExpectedSeries::of(&follows))
        .await
        .unwrap();
    let at = Timestamp::from_millis(tokyo_next.as_millis() - MAKE_AHEAD.as_millis() as i64);
    let found = store.series_due(at, 10).await.unwrap();
    assert!(
        found
            .iter()
            .any(|s| s.local_zone.as_deref() == Some("Asia/Tokyo")),
        "due at Tokyo's time: {found:?}"
    );
    let before = Timestamp::from_millis(at.as_millis() - 1000);
    let found = store.series_due(before, 10).await.unwrap();
    assert!(
        found.iter().all(|s| s.series_id != tokyo.series_id),
        "not before it: {found:?}"
    );

    // A subscriber's series, a page at a time, by start; nobody else's, and no reminder.
    for (i, id) in ["b", "a", "c"].into_iter().enumerate() {
        let start = T0.plus(Duration::from_secs(3600 * (i as u64 + 1)));
        let other = series(id, "u-7", start);
        store
            .put_series(&other, ExpectedSeries::Absent)
            .await
            .unwrap();
    }
    store
        .put_series(&series("elsewhere", "u-8", T0), ExpectedSeries::Absent)
        .await
        .unwrap();
    store.insert(&reminder("u-7")).await.unwrap();
    let sub = SubscriberId::parse("u-7").unwrap();
    let first = store.series_of(&sub, None, 2).await.unwrap();
    let ids: Vec<&str> = first.items.iter().map(|s| s.series_id.as_str()).collect();
    assert_eq!(ids, ["b", "a"]);
    let rest = store.series_of(&sub, first.next.as_ref(), 2).await.unwrap();
    let ids: Vec<&str> = rest.items.iter().map(|s| s.series_id.as_str()).collect();
    assert_eq!(ids, ["c"]);
    assert_eq!(rest.next, None);
    // The reminders' list of the same subscriber holds no series.
    let reminders = store.by_subscriber(&sub, None, 10).await.unwrap();
    assert_eq!(reminders.items.len(), 1, "{reminders:?}");

    // By cursor (the last one's start and id): the next page goes on after it once it is
    // gone, as an erasure deletes each page before it reads the next; it never starts over.
    let first = store.series_after(&sub, None, 2).await.unwrap();
    let ids: Vec<&str> = first.items.iter().map(|s| s.series_id.as_str()).collect();
    assert_eq!(ids, ["b", "a"]);
    let cursor = first.next.clone().expect("a second page");
    assert_eq!(SeriesCursor::decode(&cursor.encode()), Some(cursor.clone()));
    assert_eq!(SeriesCursor::decode("a b"), None);
    assert_eq!(
        store.delete_series(&cursor.series_id).await.unwrap(),
        Deleted::Deleted
    );
    let rest = store.series_after(&sub, Some(&cursor), 2).await.unwrap();
    let ids: Vec<&str> = rest.items.iter().map(|s| s.series_id.as_str()).collect();
    assert_eq!(ids, ["c"]);
    assert_eq!(rest.next, None);
}

fn reminder(subscriber: &str) -> Reminder {
    a_reminder("plain-1", T0)
        .of(subscriber)
        .text("s", "b")
        .to_address(Channel::Push, "tok")
        .default_freshness(Duration::from_secs(600))
        .build()
}

#[tokio::test]
async fn memory_series_store_meets_the_contract() {
    suite(&MemoryReminderStore::new(4)).await;
}

#[tokio::test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn dynamodb_series_store_meets_the_contract() {
    let client = common::dynamo().await;
    let table = common::reminders_table(&client).await;
    suite(&DynamoReminderStore::new(client, table, 4)).await;
}

/// A deploy in progress: a series a newer version wrote, with a field this version does not
/// know. The maker of this version writes its progress over it, and the field is still there.
#[tokio::test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn dynamodb_series_store_keeps_what_a_newer_version_wrote() {
    use aws_sdk_dynamodb::types::AttributeValue;
    let client = common::dynamo().await;
    let table = common::reminders_table(&client).await;
    let store = DynamoReminderStore::new(client.clone(), table.clone(), 4);
    let s = series("newer", "u-newer", T0);
    assert_eq!(
        store.put_series(&s, ExpectedSeries::Absent).await.unwrap(),
        Written::Written
    );
    let key = AttributeValue::S("series#newer".into());
    let doc = |item: &std::collections::HashMap<String, AttributeValue>| -> serde_json::Value {
        serde_json::from_str(item["series"].as_s().unwrap()).unwrap()
    };
    let get = || {
        client
            .get_item()
            .table_name(&table)
            .key("reminder_id", key.clone())
            .consistent_read(true)
            .send()
    };
    let mut newer = doc(&get().await.unwrap().item.unwrap());
    newer["newer_field"] = serde_json::json!({"kept": [1, "x"]});
    client
        .update_item()
        .table_name(&table)
        .key("reminder_id", key.clone())
        .update_expression("SET series = :d")
        .expression_attribute_values(":d", AttributeValue::S(newer.to_string()))
        .send()
        .await
        .unwrap();
    let read = store.get_series(&s.series_id).await.unwrap().unwrap();
    let mut made = read.clone();
    made.made_through = Some(T0.plus(MAKE_AHEAD));
    assert_eq!(
        store
            .put_series(&made, ExpectedSeries::of(&read))
            .await
            .unwrap(),
        Written::Written
    );
    let after = doc(&get().await.unwrap().item.unwrap());
    assert_eq!(
        after["newer_field"],
        serde_json::json!({"kept": [1, "x"]}),
        "dropped by this version's write: {after}"
    );
}
