//! The [`Eraser`] contract, on memory and on DynamoDB (the emulator): a reminder still to be
//! sent is never deleted unless forced, a settled one is, a missing one says so; preferences and
//! suppressions go once.

use std::time::Duration;

use reminders::aws::dynamo::DynamoReminderStore;
use reminders::clock::Timestamp;
use reminders::domain::{
    AddressHash, Channel, Content, NewReminder, Preferences, Recipient, Reminder, ReminderId,
    ReminderStatus, SubscriberId, Suppression, SuppressionKey, SuppressionSource,
};
use reminders::ports::{Deleted, Eraser, MemoryReminderStore, ReminderStore, SubscriberIndex};

use crate::common;

const T0: Timestamp = Timestamp::from_millis(1_800_000_000_000);

fn reminder(id: &str) -> Reminder {
    Reminder::new(
        NewReminder {
            reminder_id: ReminderId::parse(id).unwrap(),
            subscriber_id: SubscriberId::parse("sub-e").unwrap(),
            due_at: T0,
            fresh_until: None,
            content: Content::Text {
                subject: "Pickup".into(),
                body: "at five".into(),
            },
            recipients: vec![Recipient::parse(Channel::Email, "a@example.com").unwrap()],
        },
        Duration::from_secs(600),
        Duration::from_secs(86_400),
    )
    .unwrap()
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

#[tokio::test]
async fn memory_eraser_meets_the_contract() {
    suite(&MemoryReminderStore::new(4)).await;
}

#[tokio::test]
async fn dynamodb_eraser_meets_the_contract() {
    let client = common::dynamo().await;
    let table = common::reminders_table(&client).await;
    suite(&DynamoReminderStore::new(client, table, 4)).await;
}
