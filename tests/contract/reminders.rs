//! ReminderStore contract: create/edit, the sparse sharded due index (oldest first, paged,
//! bounded by time), and the conditional marks that take a reminder out of it.

use std::collections::BTreeSet;
use std::time::Duration;

use reminders::aws::dynamo::DynamoReminderStore;
use reminders::clock::Timestamp;
use reminders::domain::{
    Channel, Content, Preferences, Reminder, ReminderId, ReminderStatus, SubscriberId,
};
use reminders::ports::{
    DueCursor, DueEntry, DueQuery, Inserted, Listed, Marked, MemoryReminderStore, PortError,
    ReminderStore, SubscriberIndex,
};
use reminders_test_support::a_reminder;

use crate::common;

const SHARDS: u32 = 4;
const T0: Timestamp = Timestamp::from_millis(1_800_000_000_000);

fn reminder(id: &str, due_offset_secs: u64) -> Reminder {
    reminder_of(id, "sub-1", due_offset_secs)
}

fn reminder_of(id: &str, subscriber: &str, due_offset_secs: u64) -> Reminder {
    a_reminder(id, T0.plus(Duration::from_secs(due_offset_secs)))
        .of(subscriber)
        .text("Pickup", "Your order is ready")
        .to_address(Channel::Email, "a@example.com")
        .to(&[Channel::Sms])
        .default_freshness(Duration::from_secs(600))
        .build()
}

/// Every due id of one shard, page by page, checking order within the shard.
async fn drain_shard<S: ReminderStore>(
    store: &S,
    shard: u32,
    until: Timestamp,
    skip: &BTreeSet<SubscriberId>,
) -> Vec<String> {
    let mut ids = Vec::new();
    let mut cursor: Option<DueCursor> = None;
    let mut last_due = Timestamp::from_millis(0);
    for _ in 0..100 {
        let q = DueQuery {
            shard,
            until,
            limit: 2,
            after: cursor.as_ref(),
            skip,
        };
        let page = store.query_due(&q).await.unwrap();
        if skip.is_empty() {
            assert!(page.items.len() <= 2);
        }
        for entry in &page.items {
            let DueEntry::Due(item) = entry else {
                panic!("a valid reminder came back unschedulable: {entry:?}");
            };
            assert!(
                !skip.contains(&item.subscriber_id),
                "skipped subscribers are filtered"
            );
            if item.expiring {
                continue;
            }
            assert!(item.due_at >= last_due, "oldest first within a shard");
            assert!(item.due_at <= until);
            assert_eq!(item.channels, vec![Channel::Email, Channel::Sms]);
            last_due = item.due_at;
            ids.push(item.reminder_id.to_string());
        }
        match page.next {
            Some(next) => cursor = Some(next),
            None => return ids,
        }
    }
    panic!("pagination did not end")
}

/// Whether `id` is in the due index as an expiry not yet finished.
async fn expiring<S: ReminderStore>(store: &S, id: &ReminderId, until: Timestamp) -> bool {
    for shard in 0..store.shards() {
        if let Some(expiring) = expiring_in(store, shard, id, until).await {
            return expiring;
        }
    }
    false
}

async fn expiring_in<S: ReminderStore>(
    store: &S,
    shard: u32,
    id: &ReminderId,
    until: Timestamp,
) -> Option<bool> {
    let mut cursor: Option<DueCursor> = None;
    loop {
        let q = DueQuery {
            shard,
            until,
            limit: 100,
            after: cursor.as_ref(),
            skip: &BTreeSet::new(),
        };
        let page = store.query_due(&q).await.unwrap();
        for entry in &page.items {
            if let DueEntry::Due(d) = entry {
                if d.reminder_id == *id {
                    return Some(d.expiring);
                }
            }
        }
        match page.next {
            Some(next) => cursor = Some(next),
            None => return None,
        }
    }
}

async fn all_due<S: ReminderStore>(store: &S, until: Timestamp) -> BTreeSet<String> {
    all_due_skipping(store, until, &BTreeSet::new()).await
}

async fn all_due_skipping<S: ReminderStore>(
    store: &S,
    until: Timestamp,
    skip: &BTreeSet<SubscriberId>,
) -> BTreeSet<String> {
    let mut all = BTreeSet::new();
    for shard in 0..store.shards() {
        for id in drain_shard(store, shard, until, skip).await {
            assert!(all.insert(id), "each reminder appears in one shard only");
        }
    }
    all
}

async fn suite<S: ReminderStore + SubscriberIndex>(store: &S) {
    // The scheduler reads at least every shard the store writes (DynamoDB: all 64 virtual
    // shards, whatever DUE_SHARDS wrote an item).
    assert!(store.shards() >= SHARDS);
    let first = reminder("r-00", 0);
    assert_eq!(store.insert(&first).await.unwrap(), Inserted::Created);
    assert_eq!(store.insert(&first).await.unwrap(), Inserted::AlreadyExists);
    assert_eq!(
        store.get(&first.reminder_id).await.unwrap().as_ref(),
        Some(&first)
    );
    assert_eq!(
        store
            .get(&ReminderId::parse("nope").unwrap())
            .await
            .unwrap(),
        None
    );
    for i in 1..12 {
        store
            .insert(&reminder(&format!("r-{i:02}"), i * 10))
            .await
            .unwrap();
    }
    let until = T0.plus(Duration::from_secs(75));
    let expected: BTreeSet<String> = (0..=7).map(|i| format!("r-{i:02}")).collect();
    assert_eq!(all_due(store, until).await, expected);

    // Marks are conditional on the version and take the reminder out of the index.
    let r1 = ReminderId::parse("r-01").unwrap();
    assert_eq!(
        store.mark(&r1, 2, ReminderStatus::Enqueued).await.unwrap(),
        Marked::Changed
    );
    assert_eq!(
        store.mark(&r1, 1, ReminderStatus::Enqueued).await.unwrap(),
        Marked::Marked
    );
    assert_eq!(
        store.mark(&r1, 1, ReminderStatus::Enqueued).await.unwrap(),
        Marked::Changed
    );
    assert_eq!(
        store
            .mark(
                &ReminderId::parse("nope").unwrap(),
                1,
                ReminderStatus::Enqueued
            )
            .await
            .unwrap(),
        Marked::Missing
    );
    let r2 = ReminderId::parse("r-02").unwrap();
    assert_eq!(
        store.mark(&r2, 1, ReminderStatus::Expired).await.unwrap(),
        Marked::Marked
    );
    // An expiry stays in the index, `expiring`, until the scheduler has written the ledger and
    // takes it out (a stale edit racing the expiry): a run that stops between the two is finished
    // by the next, and an edit that lands first makes the mark fail before any ledger write.
    assert!(
        expiring(store, &r2, until).await,
        "marked expired: still indexed, expiring"
    );
    assert_eq!(
        store.mark(&r2, 1, ReminderStatus::Expired).await.unwrap(),
        Marked::Changed,
        "marked once"
    );
    let mut edit = reminder("r-02", 20);
    edit.payload_version = 2;
    assert_eq!(
        store
            .replace(&edit, 1, ReminderStatus::Expired)
            .await
            .unwrap(),
        Marked::Changed,
        "an expired reminder cannot be edited back"
    );
    assert_eq!(
        store.quarantine(r2.as_str(), "expired").await.unwrap(),
        Marked::Changed,
        "a settled item only leaves the index"
    );
    assert!(!expiring(store, &r2, until).await, "out of the index");
    assert_eq!(
        store.get(&r2).await.unwrap().unwrap().status,
        ReminderStatus::Expired
    );
    // Cancel works from enqueued, too, at the version the cancel read (a cancel against an edit: a
    // version edited since is refused, so the cancel reads again and covers what the edit added).
    assert_eq!(
        store.mark(&r1, 0, ReminderStatus::Cancelled).await.unwrap(),
        Marked::Changed
    );
    assert_eq!(
        store.mark(&r1, 1, ReminderStatus::Cancelled).await.unwrap(),
        Marked::Marked
    );
    assert_eq!(
        store.get(&r1).await.unwrap().unwrap().status,
        ReminderStatus::Cancelled
    );

    // An edit: conditional on the version it replaces; moving due_at moves it in the index.
    let mut edited = reminder("r-03", 500);
    edited.payload_version = 2;
    let sched = ReminderStatus::Scheduled;
    assert_eq!(
        store.replace(&edited, 5, sched).await.unwrap(),
        Marked::Changed
    );
    assert_eq!(
        store.replace(&edited, 1, sched).await.unwrap(),
        Marked::Marked
    );
    assert_eq!(
        store
            .replace(&reminder("ghost", 0), 1, sched)
            .await
            .unwrap(),
        Marked::Missing
    );
    // An owner's reminder: an edit lands only as that owner's (owners never change), and
    // the owner is stored, read back and listed.
    let mut owned = reminder("r-owned", 600);
    owned.owner = Some(reminders::domain::Owner::parse("app-a").unwrap());
    assert_eq!(store.insert(&owned).await.unwrap(), Inserted::Created);
    let mut by_b = owned.clone();
    by_b.payload_version = 2;
    by_b.owner = Some(reminders::domain::Owner::parse("app-b").unwrap());
    assert_eq!(
        store.replace(&by_b, 1, sched).await.unwrap(),
        Marked::Changed
    );
    by_b.owner = None;
    assert_eq!(
        store.replace(&by_b, 1, sched).await.unwrap(),
        Marked::Changed
    );
    // An unowned one takes no owner by an edit either.
    let mut claimed = edited.clone();
    claimed.payload_version = 3;
    claimed.owner = owned.owner.clone();
    assert_eq!(
        store.replace(&claimed, 2, sched).await.unwrap(),
        Marked::Changed
    );
    let stored = store.get(&owned.reminder_id).await.unwrap().unwrap();
    assert_eq!(stored, owned, "unchanged, its owner read back");
    let mut by_a = owned.clone();
    by_a.payload_version = 2;
    assert_eq!(
        store.replace(&by_a, 1, sched).await.unwrap(),
        Marked::Marked
    );
    let page = store
        .by_subscriber(&owned.subscriber_id, None, 100)
        .await
        .unwrap();
    let owner_of = |id: &ReminderId| {
        page.items.iter().find_map(|i| match i {
            Listed::Summary(s) if &s.reminder_id == id => Some(s.owner.clone()),
            _ => None,
        })
    };
    assert_eq!(
        owner_of(&owned.reminder_id),
        Some(owned.owner.clone()),
        "a list reads each reminder's owner"
    );
    assert_eq!(
        owner_of(&edited.reminder_id),
        Some(None),
        "an unowned reminder is listed without one"
    );
    store
        .mark(&owned.reminder_id, 2, ReminderStatus::Cancelled)
        .await
        .unwrap();

    // An edit names the status it keeps: a cancelled reminder cannot be edited back into the
    // index, and an enqueued one stays out of it.
    let mut revived = reminder("r-01", 5);
    revived.payload_version = 2;
    assert_eq!(
        store.replace(&revived, 1, sched).await.unwrap(),
        Marked::Changed
    );
    let cancelled = ReminderStatus::Cancelled;
    assert_eq!(
        store.replace(&revived, 1, cancelled).await.unwrap(),
        Marked::Changed
    );
    revived.status = ReminderStatus::Cancelled;
    assert_eq!(
        store.replace(&revived, 1, cancelled).await.unwrap(),
        Marked::Changed
    );
    let r4 = ReminderId::parse("r-04").unwrap();
    assert_eq!(
        store.mark(&r4, 1, ReminderStatus::Enqueued).await.unwrap(),
        Marked::Marked
    );
    let mut late_edit = reminder("r-04", 40);
    late_edit.payload_version = 2;
    late_edit.status = ReminderStatus::Enqueued;
    let enqueued = ReminderStatus::Enqueued;
    assert_eq!(
        store.replace(&late_edit, 1, sched).await.unwrap(),
        Marked::Changed,
        "an edit names the status it read"
    );
    assert_eq!(
        store.replace(&late_edit, 1, enqueued).await.unwrap(),
        Marked::Marked
    );
    // The consumer's expiry of an enqueued reminder found stale: at the version it read
    // (the edit above came first), and it does not put the reminder back in the index.
    assert_eq!(
        store.mark(&r4, 1, ReminderStatus::Expired).await.unwrap(),
        Marked::Changed,
        "an edit that landed first wins"
    );
    assert_eq!(
        store.mark(&r4, 2, ReminderStatus::Expired).await.unwrap(),
        Marked::Marked
    );
    assert!(!expiring(store, &r4, until).await, "enqueued: not indexed");
    assert_eq!(
        store
            .replace(&late_edit, 2, ReminderStatus::Expired)
            .await
            .unwrap(),
        Marked::Changed,
        "no edit lands once expired"
    );
    let mut expected = expected;
    for gone in ["r-01", "r-02", "r-03", "r-04"] {
        expected.remove(gone);
    }
    assert_eq!(all_due(store, until).await, expected);
    assert_eq!(
        store.get(&edited.reminder_id).await.unwrap().as_ref(),
        Some(&edited)
    );
    skip_and_quarantine(store, until, expected).await;
    extend_freshness(store).await;
    preferences(store, until).await;
    suppressions(store, until).await;
}

fn prefs(json: &str) -> Preferences {
    serde_json::from_str(json).unwrap()
}

/// Preferences: none until put, read back equal, a second put replaces the whole; the item
/// sits in neither index (no due entry, no sweep entry, no subscriber summary).
async fn preferences<S: ReminderStore + SubscriberIndex>(store: &S, until: Timestamp) {
    let sub = SubscriberId::parse("sub-prefs").unwrap();
    assert_eq!(store.preferences(&sub).await.unwrap(), None);
    let first = prefs(
        r#"{"opted_out": ["sms"], "quiet_hours": {"push": {"start": "22:00", "end": "07:00",
        "zone": "Europe/Paris"}}, "fallback": ["push", "email"]}"#,
    );
    store.put_preferences(&sub, &first).await.unwrap();
    assert_eq!(store.preferences(&sub).await.unwrap(), Some(first));
    let second = prefs(r#"{"opted_out": ["email"]}"#);
    store.put_preferences(&sub, &second).await.unwrap();
    assert_eq!(
        store.preferences(&sub).await.unwrap(),
        Some(second),
        "a put replaces the whole preferences, it does not merge"
    );
    let other = SubscriberId::parse("sub-1").unwrap();
    assert_eq!(store.preferences(&other).await.unwrap(), None);
    store.put_preferences(&other, &prefs("{}")).await.unwrap();

    // In neither index: the subscriber lists only its reminder, and neither a due query over
    // every shard nor a sweep of the index finds a `prefs#` item.
    let r = reminder_of("p-01", "sub-prefs", 10);
    store.insert(&r).await.unwrap();
    let page = store.by_subscriber(&sub, None, 100).await.unwrap();
    let listed: Vec<String> = page
        .items
        .iter()
        .map(|l| match l {
            Listed::Summary(s) => s.reminder_id.to_string(),
            Listed::Unreadable { reminder_id, .. } => format!("unreadable {reminder_id}"),
        })
        .collect();
    assert_eq!(listed, ["p-01"]);
    assert_eq!(page.next, None);
    let due = all_due(store, until).await;
    assert!(due.contains("p-01"), "{due:?}");
    assert!(!due.iter().any(|id| id.contains('#')), "{due:?}");
    let mut swept = Vec::new();
    let mut after = None;
    loop {
        let page = store.sweep_index(after.as_ref(), 100).await.unwrap();
        swept.extend(page.items.into_iter().map(|i| i.key));
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    assert!(swept.iter().any(|k| k == "p-01"), "{swept:?}");
    assert!(!swept.iter().any(|k| k.contains('#')), "{swept:?}");
}

/// Suppressions: none until put, read back by hash, the first one stands, another channel's
/// hash of the same text is another suppression; the items sit in no index.
async fn suppressions<S: ReminderStore>(store: &S, until: Timestamp) {
    use reminders::domain::{
        AddressHash, Channel, Recipient, Suppression, SuppressionKey, SuppressionSource,
    };
    let key = SuppressionKey::new(b"contract tests' suppression key".to_vec()).unwrap();
    let email = Recipient::parse(Channel::Email, "Gone@Example.org").unwrap();
    let hash = AddressHash::of(&key, &email);
    assert_eq!(store.suppression(&hash).await.unwrap(), None);
    let at = Timestamp::from_millis(1_800_000_000_000);
    let first = Suppression::record(&key, &email, SuppressionSource::SesInvalidAddress, at);
    store.put_suppression(&first).await.unwrap();
    assert_eq!(store.suppression(&hash).await.unwrap(), Some(first.clone()));
    let later = Suppression::record(
        &key,
        &email,
        SuppressionSource::Operator,
        at.plus(Duration::from_secs(60)),
    );
    store.put_suppression(&later).await.unwrap();
    assert_eq!(
        store.suppression(&hash).await.unwrap(),
        Some(first),
        "the first suppression stands"
    );
    // The lowercased address is the same suppression; a push token of the same text is not.
    let lower = Recipient::parse(Channel::Email, "gone@example.org").unwrap();
    assert!(store
        .suppression(&AddressHash::of(&key, &lower))
        .await
        .unwrap()
        .is_some());
    let token = Recipient::parse(Channel::Push, "gone@example.org").unwrap();
    assert_eq!(
        store
            .suppression(&AddressHash::of(&key, &token))
            .await
            .unwrap(),
        None
    );
    let due = all_due(store, until).await;
    assert!(!due.iter().any(|id| id.contains('#')), "{due:?}");

    // The consumer's one read: both items, either, or neither, each as read alone.
    let sub = SubscriberId::parse("sub-prefs").unwrap();
    let prefs = store.preferences(&sub).await.unwrap();
    assert!(prefs.is_some(), "the preferences test left some");
    let sup = store.suppression(&hash).await.unwrap();
    assert_eq!(
        store.recipient_rules(&sub, Some(&hash)).await.unwrap(),
        (prefs.clone(), sup.clone())
    );
    assert_eq!(
        store.recipient_rules(&sub, None).await.unwrap(),
        (prefs, None)
    );
    let nobody = SubscriberId::parse("sub-nobody").unwrap();
    assert_eq!(
        store.recipient_rules(&nobody, Some(&hash)).await.unwrap(),
        (None, sup)
    );
    let unknown = AddressHash::of(&key, &token);
    assert_eq!(
        store
            .recipient_rules(&nobody, Some(&unknown))
            .await
            .unwrap(),
        (None, None)
    );
}

// The memory store keeps preferences as the validated type, so a malformed one cannot be
// stored there: the Corrupt answer is the DynamoDB adapter's alone (`unreadable_preferences`).

/// Freshness moves by two attributes, conditional on the version; nothing else changes.
async fn extend_freshness<S: ReminderStore>(store: &S) {
    let id = ReminderId::parse("r-06").unwrap();
    let before = store.get(&id).await.unwrap().unwrap();
    let later = before.fresh_until.plus(Duration::from_secs(600));
    let ttl = before.expires_at + 600;
    assert_eq!(
        store.extend_freshness(&id, 9, later, ttl).await.unwrap(),
        Marked::Changed
    );
    assert_eq!(
        store.extend_freshness(&id, 1, later, ttl).await.unwrap(),
        Marked::Marked
    );
    let after = store.get(&id).await.unwrap().unwrap();
    assert_eq!((after.fresh_until, after.expires_at), (later, ttl));
    assert_eq!(
        (after.recipients, after.content, after.payload_version),
        (before.recipients, before.content, before.payload_version)
    );
    let ghost = ReminderId::parse("ghost-2").unwrap();
    assert_eq!(
        store.extend_freshness(&ghost, 1, later, ttl).await.unwrap(),
        Marked::Missing
    );
}

/// A skipped subscriber's items are filtered by the store; a quarantined item leaves the
/// index as `invalid` with its reason, once.
async fn skip_and_quarantine<S: ReminderStore>(
    store: &S,
    until: Timestamp,
    mut expected: BTreeSet<String>,
) {
    for i in 0..5 {
        let heavy = reminder_of(&format!("h-{i:02}"), "heavy", i * 10);
        store.insert(&heavy).await.unwrap();
    }
    let skip = BTreeSet::from([SubscriberId::parse("heavy").unwrap()]);
    assert_eq!(all_due_skipping(store, until, &skip).await, expected);
    let r5 = "r-05";
    assert_eq!(
        store.quarantine(r5, "channels: empty").await.unwrap(),
        Marked::Marked
    );
    assert_eq!(
        store.quarantine(r5, "again").await.unwrap(),
        Marked::Changed,
        "only an item still in the index is quarantined"
    );
    assert_eq!(
        store.quarantine("nope", "x").await.unwrap(),
        Marked::Missing
    );
    let got = store
        .get(&ReminderId::parse(r5).unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.status, ReminderStatus::Invalid);
    assert_eq!(got.invalid_reason.as_deref(), Some("channels: empty"));
    expected.remove(r5);
    assert_eq!(all_due_skipping(store, until, &skip).await, expected);
}

#[tokio::test]
async fn memory_store_meets_the_contract() {
    suite(&MemoryReminderStore::new(SHARDS)).await;
}

#[tokio::test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn dynamodb_store_meets_the_contract() {
    let client = common::dynamo().await;
    let table = common::reminders_table(&client).await;
    suite(&DynamoReminderStore::new(
        client.clone(),
        table.clone(),
        SHARDS,
    ))
    .await;
    unreadable_preferences(client.clone(), table.clone()).await;
    operators_list_and_lift_suppressions(client, table).await;
}

/// What `remindctl suppression list | remove` runs on: every suppression (and the key of an
/// unreadable item, which fails the consumer's read as Corrupt), lifted by hash, once.
async fn operators_list_and_lift_suppressions(client: aws_sdk_dynamodb::Client, table: String) {
    use aws_sdk_dynamodb::types::AttributeValue as Av;
    use reminders::aws::dynamo::suppression::suppression_key;
    use reminders::domain::AddressHash;
    let store = DynamoReminderStore::new(client.clone(), table.clone(), SHARDS);
    let (found, unreadable) = store.suppressions().await.unwrap();
    assert_eq!(found.len(), 1, "the suite's one suppression: {found:?}");
    assert!(unreadable.is_empty(), "{unreadable:?}");
    let bad = AddressHash::parse("s1_0123456789abcdef0123456789abcdef").unwrap();
    client
        .put_item()
        .table_name(&table)
        .item("reminder_id", Av::S(suppression_key(&bad)))
        .item("kind", Av::S("suppression".into()))
        .item("suppression", Av::S("not a map".into()))
        .send()
        .await
        .expect("raw put");
    match store.suppression(&bad).await {
        Err(PortError::Corrupt { message, .. }) => {
            assert!(message.starts_with("suppression"), "{message}");
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
    let sub = SubscriberId::parse("sub-1").unwrap();
    assert!(
        matches!(
            store.recipient_rules(&sub, Some(&bad)).await,
            Err(PortError::Corrupt { .. })
        ),
        "the batch read refuses it too"
    );
    let (found, unreadable) = store.suppressions().await.unwrap();
    assert_eq!((found.len(), unreadable), (1, vec![suppression_key(&bad)]));
    assert!(matches!(
        store.lift_suppression(&bad).await,
        Ok(Some(Err(_)))
    ));
    let good = found[0].address_hash.clone();
    assert!(matches!(store.lift_suppression(&good).await, Ok(Some(Ok(s))) if s == found[0]));
    assert!(
        matches!(store.lift_suppression(&good).await, Ok(None)),
        "lifted once"
    );
    assert_eq!(store.suppression(&good).await.unwrap(), None);
    assert_eq!(store.suppressions().await.unwrap(), (vec![], vec![]));
}

/// A preferences item another writer stored badly fails the read as Corrupt, naming the
/// attribute: sending against an opt-out that cannot be read is worse than retrying.
async fn unreadable_preferences(client: aws_sdk_dynamodb::Client, table: String) {
    use aws_sdk_dynamodb::types::AttributeValue as Av;
    use reminders::aws::dynamo::reminders::preferences_key;
    let store = DynamoReminderStore::new(client.clone(), table.clone(), SHARDS);
    let map =
        |pairs: Vec<(&str, Av)>| Av::M(pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect());
    let window = map(vec![
        ("start", Av::S("22:00".into())),
        ("end", Av::S("07:00".into())),
        ("zone", Av::S("Mars/Olympus_Mons".into())),
    ]);
    let bad_zone = map(vec![("quiet_hours", map(vec![("push", window)]))]);
    let bad_channel = map(vec![("opted_out", Av::L(vec![Av::S("pigeon".into())]))]);
    for (sub, value) in [
        ("bad-zone", Some(bad_zone)),
        ("bad-channel", Some(bad_channel)),
        ("bad-type", Some(Av::S("opted out of sms".into()))),
        ("bad-missing", None),
    ] {
        let sub = SubscriberId::parse(sub).unwrap();
        let mut put = client
            .put_item()
            .table_name(&table)
            .item("reminder_id", Av::S(preferences_key(&sub)))
            .item("kind", Av::S("preferences".into()))
            .item("subscriber", Av::S(sub.as_str().into()));
        if let Some(v) = value {
            put = put.item("preferences", v);
        }
        put.send().await.expect("raw put");
        match store.preferences(&sub).await {
            Err(PortError::Corrupt { message, .. }) => {
                assert!(message.starts_with("preferences"), "{sub}: {message}");
            }
            other => panic!("{sub}: expected Corrupt, got {other:?}"),
        }
    }
}

/// A deploy in progress: a newer version wrote an attribute this one does not know onto a
/// reminder's item (at the top level, a map and a plain value). This version's edit, which
/// writes the item whole, keeps both as they were.
#[tokio::test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn dynamodb_store_keeps_what_a_newer_version_wrote_on_a_reminder() {
    use aws_sdk_dynamodb::types::AttributeValue as A;
    use reminders::reminder_writes::{self, Edit, Edited, Retention};
    let client = common::dynamo().await;
    let table = common::reminders_table(&client).await;
    let store = DynamoReminderStore::new(client.clone(), table.clone(), SHARDS);
    let r = reminder("newer-attrs", 3_600);
    assert_eq!(store.insert(&r).await.unwrap(), Inserted::Created);
    let newer = A::M([("kept".to_owned(), A::L(vec![A::S("x".into())]))].into());
    client
        .update_item()
        .table_name(&table)
        .key("reminder_id", A::S("newer-attrs".into()))
        .update_expression("SET newer_map = :m, newer_flag = :f")
        .expression_attribute_values(":m", newer.clone())
        .expression_attribute_values(":f", A::Bool(true))
        .send()
        .await
        .unwrap();
    let edit = Edit {
        content: Some(Content::Text {
            subject: "Pickup".into(),
            body: "Moved to the side door".into(),
        }),
        ..Edit::default()
    };
    let ledger = reminders::ports::MemoryLedger::default();
    let edited = reminder_writes::edit(
        &store,
        &ledger,
        &r.reminder_id,
        edit,
        T0,
        Retention::default(),
    );
    assert!(matches!(edited.await.unwrap(), Edited::Edited(_)));
    let item = common::stored_item(&client, &table, ("reminder_id", "newer-attrs")).await;
    assert_eq!(
        item["payload_version"],
        A::N("2".into()),
        "the edit landed: {item:?}"
    );
    assert_eq!(
        item.get("newer_map"),
        Some(&newer),
        "dropped by this version's edit"
    );
    assert_eq!(
        item.get("newer_flag"),
        Some(&A::Bool(true)),
        "dropped by this version's edit"
    );
}
