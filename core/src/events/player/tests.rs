//! The player on in-memory ports: the checkpoint moves only past what succeeded, survives
//! the process (its file), and a record that keeps failing is given up on after a bound.

use aws_lambda_events::event::dynamodb::EventRecord;

use super::*;
use crate::domain::{Channel, DeliveryKey, ReminderId, SubscriberId};
use crate::ledger::{apply, Change, Ctx, Origin};
use crate::ports::{MemoryBus, MemoryStream};

/// A stream record of reminder `id`'s sms delivery being cancelled (a settlement).
fn cancel_record(seq: u32, id: &str) -> EventRecord {
    let o = Origin {
        reminder_id: ReminderId::parse(id).unwrap(),
        subscriber_id: SubscriberId::parse("u").unwrap(),
        channel: Channel::Sms,
        fallback_from: None,
        chain_head: false,
        chain: Vec::new(),
        unknown: Default::default(),
    };
    let ctx = Ctx {
        key: DeliveryKey::derive(&o.reminder_id, &o.subscriber_id, o.channel),
        now: crate::clock::Timestamp::from_millis(1_800_000_000_000),
        expires_at: 1_900_000_000,
        origin: Some(o),
    };
    let item = apply(None, Change::Cancel, &ctx).unwrap();
    let mut r = EventRecord::default();
    r.event_name = "INSERT".into();
    r.change.sequence_number = Some(format!("{seq:05}"));
    r.change.new_image = serde_dynamo::to_item(&item).unwrap();
    r
}

fn scratch(name: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("player-{name}-{}.json", std::process::id()));
    let _ = std::fs::remove_file(&path);
    path
}

fn ids(bus: &MemoryBus) -> Vec<String> {
    bus.published()
        .into_iter()
        .filter_map(|e| e.reminder_id.map(String::from))
        .collect()
}

#[tokio::test]
async fn the_checkpoint_survives_the_process_and_nothing_publishes_twice() {
    let stream = MemoryStream::default();
    stream.push("s1", cancel_record(1, "a"));
    stream.push("s2", cancel_record(1, "b"));
    let (bus, path) = (MemoryBus::default(), scratch("survives"));
    let mut cp = Checkpoint::load(&path).unwrap();
    let pass = play_once(&stream, &bus, &mut cp).await.unwrap();
    assert_eq!((pass.records, pass.published, pass.failed), (2, 2, 0));
    stream.push("s1", cancel_record(2, "c"));
    // A new process: the file says where each shard got to.
    let mut again = Checkpoint::load(&path).unwrap();
    assert_eq!(again.position("s1"), Some("00001"));
    let pass = play_once(&stream, &bus, &mut again).await.unwrap();
    assert_eq!((pass.records, pass.published), (1, 1));
    assert_eq!(ids(&bus), ["a", "b", "c"]);
}

#[tokio::test]
async fn a_failed_publish_leaves_the_checkpoint_and_the_next_pass_publishes() {
    let stream = MemoryStream::default();
    stream.push("s1", cancel_record(1, "a"));
    let (bus, path) = (MemoryBus::default(), scratch("failed"));
    let mut cp = Checkpoint::load(&path).unwrap();
    // The bus cannot be reached for the first pass.
    let unreachable = crate::ports::events::Unreachable;
    let pass = play_once(&stream, &unreachable, &mut cp).await.unwrap();
    assert_eq!((pass.published, pass.failed), (0, 1));
    assert_eq!(cp.position("s1"), None);
    let pass = play_once(&stream, &bus, &mut cp).await.unwrap();
    assert_eq!((pass.published, pass.failed), (1, 0));
    assert_eq!(ids(&bus), ["a"]);
}

/// An item no version can read (no `status` at all) is skipped at once (logged), never
/// blocking the next.
#[tokio::test]
async fn an_unreadable_item_is_skipped_and_the_next_publishes() {
    let stream = MemoryStream::default();
    let mut bad = cancel_record(1, "bad");
    bad.change.new_image.remove("status");
    stream.push("s1", bad);
    stream.push("s1", cancel_record(2, "after"));
    let (bus, path) = (MemoryBus::default(), scratch("unreadable-item"));
    let mut cp = Checkpoint::load(&path).unwrap();
    let pass = play_once(&stream, &bus, &mut cp).await.unwrap();
    assert_eq!((pass.failed, pass.given_up, pass.published), (0, 0, 1));
    assert_eq!(ids(&bus), ["after"]);
    assert_eq!(cp.position("s1"), Some("00002"));
}

/// An event the bus keeps refusing is given up on after the bound, so one record cannot
/// stop local publishing (on AWS the mapping retries while the stream holds it).
#[tokio::test]
async fn a_record_that_keeps_failing_is_given_up_after_the_bound() {
    let stream = MemoryStream::default();
    let refused = cancel_record(1, "refused");
    stream.push("s1", refused);
    stream.push("s1", cancel_record(2, "after"));
    let bus = MemoryBus::default();
    bus.refuse(reminders_key("refused"));
    let path = scratch("bound");
    let mut cp = Checkpoint::load(&path).unwrap();
    for _ in 1..MAX_ATTEMPTS {
        let pass = play_once(&stream, &bus, &mut cp).await.unwrap();
        assert_eq!((pass.failed, pass.given_up, pass.published), (2, 0, 0));
    }
    let pass = play_once(&stream, &bus, &mut cp).await.unwrap();
    assert_eq!((pass.given_up, pass.published), (1, 1));
    // The bus took the later event in every call (at least once: the same key and
    // transition each time); the refused one never.
    let ids = ids(&bus);
    assert_eq!(
        ids.len() as u32,
        MAX_ATTEMPTS + 1,
        "each pass, and once past it: {ids:?}"
    );
    assert!(ids.iter().all(|i| i == "after"), "{ids:?}");
    assert_eq!(cp.position("s1"), Some("00002"));
}

fn reminders_key(id: &str) -> crate::domain::DeliveryKey {
    crate::domain::DeliveryKey::derive(
        &ReminderId::parse(id).unwrap(),
        &SubscriberId::parse("u").unwrap(),
        Channel::Sms,
    )
}

#[test]
fn an_unreadable_checkpoint_is_an_error_naming_the_file() {
    let path = scratch("unreadable");
    std::fs::write(&path, "not json").unwrap();
    let err = Checkpoint::load(&path).unwrap_err();
    assert!(err.contains(&path.display().to_string()), "{err}");
}
