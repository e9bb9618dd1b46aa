//! Bad items beside a valid reminder, written as another application might write them: the
//! valid one is delivered in the same run; each bad one is quarantined by the scheduler
//! (status `invalid`, `invalid_reason` naming the field) or dead-lettered by the consumer at
//! once as `invalid_reminder` with evidence naming the field — never a failed run, never a
//! retry loop, never a silent cancel.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use reminders::aws::bootstrap::QueueSpec;
use reminders::domain::{
    Channel, DeadReason, DeliveryKey, ReminderId, ReminderStatus, SubscriberId,
};
use reminders::ledger::Status;
use reminders::ports::{DeadLetters, Ledger, ReminderStore};
use reminders::scheduler::{Scheduler, SchedulerConfig};

use crate::support::{now, AwsWorld};

type Item = HashMap<String, AttributeValue>;

fn s(v: &str) -> AttributeValue {
    AttributeValue::S(v.to_owned())
}

fn n(v: i64) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

/// A well-formed scheduled SMS reminder, as stored, due a minute ago.
fn item(id: &str) -> Item {
    let due = now().minus(Duration::from_secs(60)).as_millis();
    let content = HashMap::from([
        ("kind".to_owned(), s("text")),
        ("subject".to_owned(), s("Reminder")),
        ("body".to_owned(), s("Something is due")),
    ]);
    HashMap::from([
        ("reminder_id".to_owned(), s(id)),
        ("subscriber_id".to_owned(), s("sub-poison")),
        ("due_at".to_owned(), n(due)),
        ("fresh_until".to_owned(), n(due + 3_600_000)),
        ("payload_version".to_owned(), n(1)),
        ("status".to_owned(), s("scheduled")),
        ("channels".to_owned(), AttributeValue::L(vec![s("sms")])),
        (
            "recipients".to_owned(),
            AttributeValue::M(HashMap::from([("sms".to_owned(), s("+14155550123"))])),
        ),
        ("content".to_owned(), AttributeValue::M(content)),
        ("expires_at".to_owned(), n(due / 1000 + 86_400)),
        ("due_shard".to_owned(), n(3)),
    ])
}

/// The item as stored, attributes and all (it may not decode as a reminder).
async fn raw_item(w: &AwsWorld, id: &str) -> Item {
    w.dynamo
        .get_item()
        .table_name(&w.reminders_table)
        .key("reminder_id", s(id))
        .send()
        .await
        .unwrap()
        .item
        .unwrap()
}

fn without(mut i: Item, attr: &str) -> Item {
    i.remove(attr);
    i
}

fn with(mut i: Item, attr: &str, v: AttributeValue) -> Item {
    i.insert(attr.to_owned(), v);
    i
}

/// Bad in the index: the scheduler cannot schedule them. (id, item, field the reason names)
fn index_poison() -> Vec<(String, Item, &'static str)> {
    vec![
        (
            "p-no-channels".into(),
            without(item("p-no-channels"), "channels"),
            "channels",
        ),
        (
            "p-no-sub".into(),
            without(item("p-no-sub"), "subscriber_id"),
            "subscriber_id",
        ),
        (
            "p-no-fresh".into(),
            without(item("p-no-fresh"), "fresh_until"),
            "fresh_until",
        ),
        (
            "p-no-version".into(),
            without(item("p-no-version"), "payload_version"),
            "payload_version",
        ),
        (
            "p-fax".into(),
            with(item("p-fax"), "channels", AttributeValue::L(vec![s("fax")])),
            "channels",
        ),
        ("p space".into(), item("p space"), "reminder_id"),
        (
            "p-empty-channels".into(),
            with(
                item("p-empty-channels"),
                "channels",
                AttributeValue::L(vec![]),
            ),
            "channels",
        ),
        (
            "p-bogus".into(),
            with(item("p-bogus"), "status", s("bogus")),
            "status",
        ),
        // The same kind of fault as those above: a field of the wrong type, not a missing one.
        (
            "p-fresh-text".into(),
            with(item("p-fresh-text"), "fresh_until", s("tomorrow")),
            "fresh_until",
        ),
    ]
}

/// Fine in the index, bad as an item: the consumer cannot send them on the channel given.
/// (id, item, field the reason names, channel at fault)
fn item_poison() -> Vec<(String, Item, &'static str, Channel)> {
    let recipients = |k: &str, v: &str| AttributeValue::M(HashMap::from([(k.to_owned(), s(v))]));
    let video = AttributeValue::M(HashMap::from([("kind".to_owned(), s("video"))]));
    let two = AttributeValue::L(vec![s("sms"), s("email")]);
    let email_only = AttributeValue::L(vec![s("email")]);
    let bad_email = with(item("c-bad-email"), "channels", email_only);
    let bad_email = with(
        bad_email,
        "recipients",
        recipients("email", "not-an-address"),
    );
    let bad_phone = with(
        item("c-bad-phone"),
        "recipients",
        recipients("sms", "555-0100"),
    );
    // Content written as a plain string by another application: the error must not echo it.
    let text = s("Dear Ana, your code is 4711");
    let not_json = AttributeValue::M(HashMap::from([
        ("kind".to_owned(), s("template")),
        ("template_id".to_owned(), s("pickup")),
        ("template_data".to_owned(), s("{not json")),
    ]));
    vec![
        (
            "c-bad-email".into(),
            bad_email,
            "recipients.email",
            Channel::Email,
        ),
        (
            "c-bad-phone".into(),
            bad_phone,
            "recipients.sms",
            Channel::Sms,
        ),
        (
            "c-no-recipients".into(),
            without(item("c-no-recipients"), "recipients"),
            "recipients",
            Channel::Sms,
        ),
        (
            "c-no-content".into(),
            without(item("c-no-content"), "content"),
            "content",
            Channel::Sms,
        ),
        (
            "c-video".into(),
            with(item("c-video"), "content", video),
            "content",
            Channel::Sms,
        ),
        (
            "c-content-text".into(),
            with(item("c-content-text"), "content", text),
            "content",
            Channel::Sms,
        ),
        (
            "c-unlisted".into(),
            with(item("c-unlisted"), "channels", two),
            "recipients.email",
            Channel::Email,
        ),
        // Template data that is not JSON never reaches the provider as it is.
        (
            "c-template-not-json".into(),
            with(item("c-template-not-json"), "content", not_json),
            "content.template_data",
            Channel::Sms,
        ),
    ]
}

#[tokio::test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn bad_items_are_quarantined_or_dead_lettered_beside_a_valid_one() {
    let w = AwsWorld::new(QueueSpec::default()).await;
    let valid = crate::support::reminder("p-valid", Channel::Sms);
    w.ports.reminders.insert(&valid).await.unwrap();
    let stray = with(item("p-stray"), "status", s("enqueued"));
    let items = index_poison().into_iter().map(|(_, it, _)| it);
    let items = items.chain(item_poison().into_iter().map(|(_, it, _, _)| it));
    for it in items.chain([stray]) {
        w.dynamo
            .put_item()
            .table_name(&w.reminders_table)
            .set_item(Some(it))
            .send()
            .await
            .unwrap();
    }
    let scheduler = Scheduler::new(w.ports.clone(), SchedulerConfig::default());
    let report = scheduler
        .run(None)
        .await
        .expect("one bad item never fails a run");
    assert_eq!(report.quarantined, 9, "{report:?}");
    // The valid one and the item-level poison go out (c-unlisted with two messages); the
    // enqueued item with a stray due_shard only leaves the index, its status untouched.
    assert_eq!(report.enqueued, 1 + 8, "{report:?}");
    let stray = ReminderId::parse("p-stray").unwrap();
    let stray = w.ports.reminders.get(&stray).await.unwrap().unwrap();
    assert_eq!(
        stray.status,
        ReminderStatus::Enqueued,
        "a settled status is left alone"
    );

    for (id, _, field) in index_poison() {
        let got = raw_item(&w, &id).await;
        assert_eq!(got.get("status"), Some(&s("invalid")), "{id}");
        assert!(!got.contains_key("due_shard"), "{id} left the due index");
        let reason = match got.get("invalid_reason") {
            Some(AttributeValue::S(r)) => r.clone(),
            other => panic!("{id}: no invalid_reason: {other:?}"),
        };
        eprintln!("quarantined {id}: {reason}");
        assert!(
            reason.contains(field),
            "{id}: {reason:?} does not name {field}"
        );
        assert_in_operator_words(&reason);
    }
    if let Ok(id) = ReminderId::parse("p-bogus") {
        let r = w.ports.reminders.get(&id).await.unwrap().unwrap();
        assert_eq!(r.status, ReminderStatus::Invalid);
    }
    assert_eq!(
        scheduler.run(None).await.unwrap().enqueued,
        0,
        "nothing is re-sent"
    );

    let consumer = w.consumer();
    w.consume(&consumer, Channel::Sms).await;
    w.consume(&consumer, Channel::Email).await;
    let key = |id: &str, c| {
        DeliveryKey::derive(
            &ReminderId::parse(id).unwrap(),
            &SubscriberId::parse(if id == "p-valid" {
                "sub-1"
            } else {
                "sub-poison"
            })
            .unwrap(),
            c,
        )
    };
    let ledger = &w.ports.ledger;
    let delivered = ledger
        .get(&key("p-valid", Channel::Sms))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        delivered.status(),
        Status::Delivered,
        "the valid one, in the same run"
    );

    let mut letters = BTreeMap::new();
    for channel in [Channel::Sms, Channel::Email] {
        for m in w
            .ports
            .dead_letters
            .receive_dead(channel, 10, 60)
            .await
            .unwrap()
        {
            let msg = reminders::domain::DeliveryMessage::decode(&m.message.body).unwrap();
            letters.insert((msg.reminder_id.to_string(), channel), m.letter);
        }
    }
    for (id, _, field, channel) in item_poison() {
        let rec = ledger.get(&key(&id, channel)).await.unwrap().unwrap();
        assert_eq!(rec.status(), Status::Dead, "{id}");
        assert_eq!(rec.dead_reason(), Some(DeadReason::InvalidReminder), "{id}");
        let letter = &letters[&(id.clone(), channel)];
        assert_eq!(letter.reason, DeadReason::InvalidReminder, "{id}");
        let error = letter
            .evidence
            .as_ref()
            .unwrap()
            .last_error
            .clone()
            .unwrap();
        eprintln!("dead-lettered {id}: {error}");
        assert!(
            error.contains(field),
            "{id}: {error:?} does not name {field}"
        );
        assert_in_operator_words(&error);
        assert!(
            !["not-an-address", "555-0100", "Ana", "4711"]
                .iter()
                .any(|v| error.contains(v)),
            "no PII: {error}"
        );
    }
    // The listed channel without a recipient is a dead letter, not a silent cancel; the
    // reminder's other channel still goes out.
    let unlisted = ledger
        .get(&key("c-unlisted", Channel::Email))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(unlisted.dead_reason(), Some(DeadReason::InvalidReminder));
    let sms = ledger
        .get(&key("c-unlisted", Channel::Sms))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(sms.status(), Status::Delivered);
}

/// `DUE_SHARDS` lowered and raised with reminders waiting: the scheduler reads every virtual
/// shard, so items written under any shard count are found.
#[tokio::test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn changing_due_shards_loses_nothing() {
    use reminders::aws::dynamo::DynamoReminderStore;
    use reminders::domain::MAX_DUE_SHARDS;
    let w = AwsWorld::new(QueueSpec::default()).await;
    let store_with =
        |shards| DynamoReminderStore::new(w.dynamo.clone(), &w.reminders_table, shards);
    let mut ids = Vec::new();
    for (shards, prefix) in [
        (8, "eight"),
        (2, "two"),
        (MAX_DUE_SHARDS, "all"),
        (1, "one"),
    ] {
        let store = store_with(shards);
        for i in 0..6 {
            let r = crate::support::reminder(&format!("{prefix}-{i}"), Channel::Email);
            store.insert(&r).await.unwrap();
            ids.push(r.reminder_id);
        }
    }
    // A scheduler configured with fewer shards than some writers used, then with more.
    let mut enqueued = 0;
    for shards in [2, 8] {
        let mut ports = w.ports.clone();
        ports.reminders.inner = store_with(shards);
        let report = Scheduler::new(ports, SchedulerConfig::default())
            .run(None)
            .await
            .unwrap();
        enqueued += report.enqueued;
    }
    assert_eq!(
        enqueued, 24,
        "every reminder found, whatever shard count wrote it"
    );
    for id in &ids {
        let r = w.ports.reminders.get(id).await.unwrap().unwrap();
        assert_eq!(r.status, ReminderStatus::Enqueued, "{id}");
    }
}

/// A subscriber far over its cap costs no one else's scan budget (smaller than production
/// limits, same shape): everyone else's reminders are taken in the first run.
#[tokio::test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn a_heavy_subscriber_does_not_use_up_the_scan_budget() {
    let w = AwsWorld::new(QueueSpec::default()).await;
    let base = now().minus(Duration::from_secs(3600));
    for i in 0..300u64 {
        let mut r = crate::support::reminder(&format!("heavy-{i:03}"), Channel::Push);
        r.subscriber_id = SubscriberId::parse("heavy").unwrap();
        r.due_at = base.plus(Duration::from_millis(i));
        w.ports.reminders.insert(&r).await.unwrap();
    }
    for i in 0..20 {
        // Due after every heavy item: oldest-first alone would never reach them.
        let r = crate::support::reminder(&format!("light-{i:02}"), Channel::Push);
        let mut r = r;
        r.subscriber_id = SubscriberId::parse(format!("light-{i:02}")).unwrap();
        w.ports.reminders.insert(&r).await.unwrap();
    }
    let cfg = SchedulerConfig {
        per_subscriber_cap: 10,
        max_scan: 100,
        page_size: 50,
        ..SchedulerConfig::default()
    };
    let report = Scheduler::new(w.ports.clone(), cfg)
        .run(None)
        .await
        .unwrap();
    assert_eq!(
        report.enqueued, 30,
        "10 of the heavy one, all 20 others: {report:?}"
    );
    assert!(report.scanned <= 100, "{report:?}");
    for i in 0..20 {
        let id = ReminderId::parse(format!("light-{i:02}")).unwrap();
        let r = w.ports.reminders.get(&id).await.unwrap().unwrap();
        assert_eq!(r.status, ReminderStatus::Enqueued, "{id}");
    }
}

/// Items no shard query reaches (a `due_shard` outside the shards) or that can never become due
/// (a `due_at` of 1e30) are found by the sweep and quarantined with a reason, in the first run;
/// the valid reminder beside them goes out.
#[tokio::test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn the_sweep_quarantines_items_no_query_reaches() {
    let w = AwsWorld::new(QueueSpec::default()).await;
    let valid = crate::support::reminder("w6-valid", Channel::Sms);
    w.ports.reminders.insert(&valid).await.unwrap();
    let far_shard = with(item("w6-shard-77"), "due_shard", n(77));
    let never_due = with(
        item("w6-never-due"),
        "due_at",
        AttributeValue::N("1e30".into()),
    );
    for it in [far_shard, never_due] {
        w.dynamo
            .put_item()
            .table_name(&w.reminders_table)
            .set_item(Some(it))
            .send()
            .await
            .unwrap();
    }
    let scheduler = Scheduler::new(w.ports.clone(), SchedulerConfig::default());
    let report = scheduler.run(None).await.unwrap();
    assert_eq!((report.quarantined, report.enqueued), (2, 1), "{report:?}");
    assert!(
        report.swept >= 2,
        "the two, swept after the valid one left the index: {report:?}"
    );
    for (id, field) in [("w6-shard-77", "due_shard"), ("w6-never-due", "due_at")] {
        let r = w.ports.reminders.get(&ReminderId::parse(id).unwrap()).await;
        let reason = match r {
            Ok(Some(r)) => {
                assert_eq!(r.status, ReminderStatus::Invalid, "{id}");
                r.invalid_reason.unwrap_or_default()
            }
            // An item whose due_at cannot be read cannot be read whole either: read the raw
            // attributes.
            _ => {
                let got = raw_item(&w, id).await;
                assert_eq!(got.get("status"), Some(&s("invalid")), "{id}");
                match got.get("invalid_reason") {
                    Some(AttributeValue::S(r)) => r.clone(),
                    other => panic!("{id}: {other:?}"),
                }
            }
        };
        eprintln!("quarantined {id}: {reason}");
        assert!(reason.starts_with(field), "{id}: {reason}");
    }
}

/// An item whose `due_at` is text makes the emulator fail every query of its shard, and its scan
/// of the index too (real DynamoDB refuses the write; any lasting failure of one shard looks the
/// same). The valid reminder in that shard waits, and each run reports the shard with how many
/// runs in a row it failed, not only a log line.
#[tokio::test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn a_failing_shard_is_reported_on_every_run() {
    let w = AwsWorld::new(QueueSpec::default()).await;
    let valid = crate::support::reminder("w7-valid", Channel::Sms);
    w.ports.reminders.insert(&valid).await.unwrap();
    let stored = raw_item(&w, "w7-valid").await;
    let shard = stored["due_shard"].clone();
    let text_due = with(item("w7-text-due"), "due_at", s("soon"));
    let text_due = with(text_due, "due_shard", shard.clone());
    w.dynamo
        .put_item()
        .table_name(&w.reminders_table)
        .set_item(Some(text_due))
        .send()
        .await
        .unwrap();
    let scheduler = Scheduler::new(w.ports.clone(), SchedulerConfig::default());
    let want: u32 = match &shard {
        AttributeValue::N(v) => v.parse().unwrap(),
        other => panic!("{other:?}"),
    };
    for run in 1..=2 {
        let report = scheduler.run(None).await.unwrap();
        assert_eq!(report.failed_shards.len(), 1, "{report:?}");
        let f = &report.failed_shards[0];
        assert_eq!((f.shard, f.runs_in_a_row), (want, run), "{report:?}");
        assert!(!f.error.is_empty());
        assert_eq!(report.shards_failing_repeatedly(), u32::from(run > 1));
    }
}

/// A reason says what the attribute should hold, never the decoder's internals (the type
/// names and parser messages operators once met).
fn assert_in_operator_words(reason: &str) {
    for internal in [
        "internally tagged",
        "Expected seq",
        "expected seq",
        "Failed to parse",
        "invalid digit",
        "enum Content",
        "struct ",
    ] {
        assert!(
            !reason.contains(internal),
            "decoder internals in {reason:?}"
        );
    }
}
