//! Erasure on the in-memory ports: what goes, what stays (the ledger's history), and that a
//! second erasure finds nothing.

use std::time::Duration;

use super::*;
use crate::domain::{
    Channel, Content, DeliveryKey, NewReminder, Preferences, Recipient, ReminderStatus,
    Suppression, SuppressionSource,
};
use crate::ledger::Status;
use crate::ports::{MemoryLedger, MemoryReminderStore};
use rand::SeedableRng;

const NOW: Timestamp = Timestamp::from_millis(1_796_385_600_000);

/// `n`, created as the API creates it (an hour's default freshness).
async fn stored(store: &MemoryReminderStore, n: NewReminder) -> crate::domain::Reminder {
    let hour = Duration::from_secs(3600);
    let retention = Retention::default();
    reminder_writes::create(store, n, hour, retention, NOW)
        .await
        .unwrap()
        .unwrap()
}

fn new(id: &str, sub: &str, email: &str) -> NewReminder {
    NewReminder {
        reminder_id: ReminderId::parse(id).unwrap(),
        subscriber_id: SubscriberId::parse(sub).unwrap(),
        due_at: NOW.plus(Duration::from_secs(3600)),
        fresh_until: None,
        content: Content::Text {
            subject: "Pickup".into(),
            body: "at five".into(),
        },
        recipients: vec![
            Recipient::parse(Channel::Email, email).unwrap(),
            Recipient::parse(Channel::Sms, "+14155550123").unwrap(),
        ],
    }
}

#[tokio::test]
async fn erasure_cancels_deletes_and_leaves_only_the_ledger() {
    let store = MemoryReminderStore::new(4);
    let ledger = MemoryLedger::default();
    let key = SuppressionKey::new(b"erasure tests' suppression key".to_vec()).unwrap();
    let retention = Retention::default();
    for (id, sub) in [("e-1", "u-1"), ("e-2", "u-1"), ("o-1", "u-2")] {
        stored(&store, new(id, sub, "gone@example.org")).await;
    }
    let sub = SubscriberId::parse("u-1").unwrap();
    let prefs: Preferences =
        serde_json::from_value(serde_json::json!({"opted_out": ["sms"]})).unwrap();
    store.put_preferences(&sub, &prefs).await.unwrap();
    let gone = Recipient::parse(Channel::Email, "gone@example.org").unwrap();
    let sup = Suppression::record(&key, &gone, SuppressionSource::SesBounce, NOW);
    store.put_suppression(&sup).await.unwrap();

    let out = erase(&store, &ledger, Some(&key), &sub, NOW, retention)
        .await
        .unwrap();
    assert_eq!(
        out,
        Erased {
            subscriber_id: "u-1".into(),
            reminders_cancelled: 2,
            reminders_deleted: 2,
            preferences_deleted: true,
            suppressions_lifted: Some(1),
            series_deleted: 0,
            reminders_left: 0,
            complete: true,
        }
    );
    for id in ["e-1", "e-2"] {
        let id = ReminderId::parse(id).unwrap();
        assert_eq!(
            store.get(&id).await.unwrap(),
            None,
            "{id}: the item is gone"
        );
        // The ledger keeps the cancel: a message still queued acks it, never sends.
        for channel in [Channel::Email, Channel::Sms] {
            let k = DeliveryKey::derive(&id, &sub, channel);
            let rec = ledger
                .get(&k)
                .await
                .unwrap()
                .expect("the ledger's history stays");
            assert_eq!(rec.status(), Status::Cancelled);
            let shown = format!("{rec:?}");
            assert!(
                !shown.contains("gone@") && !shown.contains("4155550123"),
                "{shown}"
            );
        }
    }
    assert_eq!(store.preferences(&sub).await.unwrap(), None);
    assert_eq!(store.suppression(&sup.address_hash).await.unwrap(), None);
    let page = store.by_subscriber(&sub, None, 10).await.unwrap();
    assert!(page.items.is_empty(), "{page:?}");
    // Another subscriber's reminder is untouched.
    let other = ReminderId::parse("o-1").unwrap();
    assert_eq!(
        store.get(&other).await.unwrap().unwrap().status,
        ReminderStatus::Scheduled
    );
    // Again: nothing left to erase.
    let again = erase(&store, &ledger, Some(&key), &sub, NOW, retention)
        .await
        .unwrap();
    assert_eq!(
        again,
        Erased {
            subscriber_id: "u-1".into(),
            suppressions_lifted: Some(0),
            complete: true,
            ..Erased::default()
        }
    );
}

#[tokio::test]
async fn a_settled_reminder_is_deleted_without_a_cancel_and_no_key_lifts_nothing() {
    let store = MemoryReminderStore::new(4);
    let ledger = MemoryLedger::default();
    let retention = Retention::default();
    let r = stored(&store, new("s-1", "u-3", "a@example.org")).await;
    store
        .mark(&r.reminder_id, r.payload_version, ReminderStatus::Enqueued)
        .await
        .unwrap();
    reminder_writes::cancel(&store, &ledger, &r.reminder_id, NOW, retention)
        .await
        .unwrap();
    let sub = SubscriberId::parse("u-3").unwrap();
    let out = erase(&store, &ledger, None, &sub, NOW, retention)
        .await
        .unwrap();
    assert_eq!((out.reminders_cancelled, out.reminders_deleted), (0, 1));
    assert_eq!(out.suppressions_lifted, None, "no key: no hash to find");
    assert!(!out.preferences_deleted);
}

/// A send in flight when the erasure comes (claimed before it): the reminder is cancelled but
/// its item is left, counted, so the send's outcome and its next look still find it; once the
/// outcome is written, the next erasure deletes it.
#[tokio::test]
async fn a_send_in_flight_leaves_its_reminder_for_the_next_erasure() {
    use crate::ledger::{Change, Ctx, LeaseToken, Origin};
    let store = MemoryReminderStore::new(4);
    let ledger = MemoryLedger::default();
    let retention = Retention::default();
    let mut n = new("f-1", "u-4", "a@example.org");
    n.recipients.truncate(1);
    let r = stored(&store, n).await;
    let sub = r.subscriber_id.clone();
    let key = DeliveryKey::derive(&r.reminder_id, &sub, Channel::Email);
    let ctx = Ctx {
        key: key.clone(),
        now: NOW,
        expires_at: retention.expires_at(r.fresh_until),
        origin: Some(Origin {
            reminder_id: r.reminder_id.clone(),
            subscriber_id: sub.clone(),
            channel: Channel::Email,
            fallback_from: None,
            chain_head: false,
            chain: Vec::new(),
            unknown: Default::default(),
        }),
    };
    let token = LeaseToken::generate(&mut rand::rngs::StdRng::seed_from_u64(1));
    let claim = Change::Claim {
        token: token.clone(),
        lease_expires_at: NOW.plus(Duration::from_secs(60)),
        payload_version: r.payload_version,
        policy: crate::policy::RetryPolicy::default(),
    };
    crate::delivery::transition(&ledger, None, claim, &ctx)
        .await
        .unwrap();
    let out = erase(&store, &ledger, None, &sub, NOW, retention)
        .await
        .unwrap();
    assert_eq!(
        (
            out.reminders_cancelled,
            out.reminders_deleted,
            out.reminders_left
        ),
        (1, 0, 1)
    );
    assert!(
        store.get(&r.reminder_id).await.unwrap().is_some(),
        "left while in flight"
    );
    // The send's outcome lands; the next erasure deletes the item.
    let sending = ledger.get(&key).await.unwrap();
    let deliver = Change::Deliver {
        token,
        receipt: None,
    };
    crate::delivery::transition(&ledger, sending, deliver, &ctx)
        .await
        .unwrap();
    let out = erase(&store, &ledger, None, &sub, NOW, retention)
        .await
        .unwrap();
    assert_eq!(
        (out.reminders_deleted, out.reminders_left, out.complete),
        (1, 0, true)
    );
}

/// More reminders than one call erases: each call goes on where the last stopped, until
/// `complete`.
#[tokio::test]
async fn a_large_subscriber_is_erased_over_several_calls() {
    let store = MemoryReminderStore::new(4);
    let ledger = MemoryLedger::default();
    let retention = Retention::default();
    let total = MAX_PER_CALL + 150;
    for i in 0..total {
        stored(&store, new(&format!("m-{i:04}"), "u-5", "b@example.org")).await;
    }
    let sub = SubscriberId::parse("u-5").unwrap();
    let first = erase(&store, &ledger, None, &sub, NOW, retention)
        .await
        .unwrap();
    assert!(!first.complete);
    assert_eq!(first.reminders_deleted, MAX_PER_CALL);
    let second = erase(&store, &ledger, None, &sub, NOW, retention)
        .await
        .unwrap();
    assert!(second.complete);
    assert_eq!(first.reminders_deleted + second.reminders_deleted, total);
    assert!(store
        .by_subscriber(&sub, None, 10)
        .await
        .unwrap()
        .items
        .is_empty());
}

/// A subscriber's series go with them: cancelled (so the maker makes no more), then deleted, and
/// the occurrences made of them are erased as their reminders.
#[tokio::test]
async fn an_erasure_cancels_and_deletes_the_subscribers_series() {
    use crate::domain::series::{NewSeries, Series};
    use crate::ports::SeriesStore;
    let store = MemoryReminderStore::new(4);
    let ledger = MemoryLedger::default();
    let sub = SubscriberId::parse("u-1").unwrap();
    let new = NewSeries {
        series_id: crate::domain::SeriesId::parse("standup").unwrap(),
        subscriber_id: sub.clone(),
        rule: "FREQ=DAILY;BYHOUR=9;BYMINUTE=15".into(),
        zone: "UTC".into(),
        starts_at: NOW,
        until: None,
        fresh_for: None,
        content: crate::domain::Content::Text {
            subject: "s".into(),
            body: "b".into(),
        },
        recipients: vec![
            crate::domain::Recipient::parse(crate::domain::Channel::Push, "tok").unwrap(),
        ],
    };
    let s = Series::new(new, std::time::Duration::from_secs(600)).unwrap();
    let retention = crate::domain::Retention::default();
    let access = crate::domain::Access::Any;
    // Its first occurrences made now (a 09:15 within the make-ahead, or none yet).
    crate::series::put(&store, &ledger, &access, s.clone(), NOW, retention)
        .await
        .unwrap()
        .unwrap();
    let out = erase(&store, &ledger, None, &sub, NOW, retention)
        .await
        .unwrap();
    assert_eq!(out.series_deleted, 1, "{out:?}");
    assert_eq!(store.get_series(&s.series_id).await.unwrap(), None);
    let again = erase(&store, &ledger, None, &sub, NOW, retention)
        .await
        .unwrap();
    assert_eq!(again.series_deleted, 0);
    let page = crate::ports::SubscriberIndex::by_subscriber(&store, &sub, None, 10)
        .await
        .unwrap();
    assert!(page.items.is_empty(), "no occurrence left: {page:?}");
}
