//! The scheduler's marks for the consumer's one read: a channel a reminder lists alone at its
//! first version goes marked sole, with the address's keyed hash when the scheduler holds the
//! suppression key; anything else goes plain. In memory, and on the emulator with
//! `due-recipients-index` (which projects the addresses) and without it (the stacks deployed
//! before: the scheduler reads `due-index`, and its messages are plain).

use std::collections::BTreeMap;
use std::time::Duration;

use reminders::aws::bootstrap::QueueSpec;
use reminders::clock::Timestamp;
use reminders::domain::{
    AddressHash, Channel, DeliveryMessage, Reminder, ReminderId, Retention, SuppressionKey,
};
use reminders::ports::{DeliveryQueue, ReminderStore};
use reminders::providers::secret::SuppressionKeySource;
use reminders::providers::AnyProvider;
use reminders::reminder_writes::{self, Edit, Edited};
use reminders::scheduler::{Scheduler, SchedulerConfig};
use reminders_harness::stack::{MemoryPorts, MemoryStack};
use reminders_harness::ManualClock;

use crate::reminder;
use crate::support::{now, AwsWorld};

const T0: Timestamp = Timestamp::from_millis(1_800_000_000_000);

fn key() -> SuppressionKey {
    SuppressionKey::new(b"the scheduler's and consumer's key".to_vec()).unwrap()
}

fn hash(r: &Reminder, channel: Channel) -> AddressHash {
    AddressHash::of(&key(), &r.recipients[&channel])
}

struct Mem {
    stack: MemoryStack<ManualClock>,
    scheduler: Scheduler<MemoryPorts<ManualClock, AnyProvider<ManualClock>>>,
}

fn mem(key: Option<SuppressionKey>) -> Mem {
    let stack = MemoryStack::on(ManualClock::at(T0));
    let scheduler = Scheduler::new(
        stack.ports(AnyProvider::Disabled),
        SchedulerConfig::default(),
    )
    .with_suppression_key(key.map(SuppressionKeySource::Fixed));
    Mem { stack, scheduler }
}

/// Every message in `channel`'s queue, by reminder id.
async fn received(
    queue: &impl DeliveryQueue,
    channel: Channel,
) -> BTreeMap<ReminderId, DeliveryMessage> {
    let mut out = BTreeMap::new();
    loop {
        let got = queue.receive(channel, 10, 60).await.unwrap();
        if got.is_empty() {
            return out;
        }
        for m in got {
            let msg = DeliveryMessage::decode(&m.body).unwrap();
            queue.delete(channel, &m.receipt_handle).await.unwrap();
            assert!(
                out.insert(msg.reminder_id.clone(), msg).is_none(),
                "sent twice"
            );
        }
    }
}

fn id(s: &str) -> ReminderId {
    ReminderId::parse(s).unwrap()
}

/// Single-channel, two-channel, and single-channel edited (version 2) reminders.
async fn three_in_memory(w: &Mem) -> (Reminder, Reminder) {
    let single = reminder("single", "s1", T0, &[Channel::Sms]);
    let two = reminder("two", "s2", T0, &[Channel::Sms, Channel::Email]);
    let edited = reminder("edited", "s3", T0, &[Channel::Sms]);
    for r in [&single, &two, &edited] {
        w.stack.store.insert(r).await.unwrap();
    }
    let later = Edit {
        fresh_until: Some(edited.fresh_until.plus(Duration::from_secs(60))),
        ..Edit::default()
    };
    let got = reminder_writes::edit(
        &*w.stack.store,
        &*w.stack.ledger,
        &edited.reminder_id,
        later,
        T0,
        Retention::default(),
    )
    .await
    .unwrap();
    let Edited::Edited(v2) = got else {
        panic!("edit refused: {got:?}")
    };
    assert_eq!(v2.payload_version, 2);
    (single, v2)
}

#[tokio::test]
async fn in_memory_a_reminder_listing_one_channel_at_its_first_version_goes_sole_with_its_hash() {
    let w = mem(Some(key()));
    let (single, edited) = three_in_memory(&w).await;
    let report = w.scheduler.run(None).await.unwrap();
    assert_eq!(report.enqueued, 3);
    let sms = received(&*w.stack.queue, Channel::Sms).await;
    let email = received(&*w.stack.queue, Channel::Email).await;
    assert_eq!((sms.len(), email.len()), (3, 1));

    let m = &sms[&id("single")];
    assert!(m.sole_channel);
    assert_eq!(m.address_hash, Some(hash(&single, Channel::Sms)));
    let other = SuppressionKey::new(b"some other key, as long as keys must be".to_vec()).unwrap();
    let under_other = AddressHash::of(&other, &single.recipients[&Channel::Sms]);
    assert_ne!(
        m.address_hash,
        Some(under_other),
        "hashed under the key given"
    );

    // Two channels, and an edited one: plain.
    for m in [&sms[&id("two")], &email[&id("two")], &sms[&id("edited")]] {
        assert!(!m.sole_channel, "{}: marked sole", m.delivery_key);
        assert_eq!(m.address_hash, None);
    }
    assert_eq!(sms[&id("edited")].payload_version, edited.payload_version);
}

#[tokio::test]
async fn in_memory_a_scheduler_without_a_key_marks_sole_without_a_hash() {
    let w = mem(None);
    three_in_memory(&w).await;
    w.scheduler.run(None).await.unwrap();
    let sms = received(&*w.stack.queue, Channel::Sms).await;
    let m = &sms[&id("single")];
    assert!(m.sole_channel);
    assert_eq!(m.address_hash, None);
    assert!(!sms[&id("two")].sole_channel);
    assert!(!sms[&id("edited")].sole_channel);
}

/// A single-channel and a two-channel reminder due a minute ago, scheduled once with the key.
async fn scheduled_on_the_emulator(
    w: &AwsWorld,
) -> (
    Reminder,
    BTreeMap<ReminderId, DeliveryMessage>,
    BTreeMap<ReminderId, DeliveryMessage>,
) {
    let due = now().minus(Duration::from_secs(60));
    let single = reminder("single", "s1", due, &[Channel::Push]);
    let two = reminder("two", "s2", due, &[Channel::Push, Channel::Email]);
    for r in [&single, &two] {
        w.ports.reminders.insert(r).await.unwrap();
    }
    let scheduler = Scheduler::new(w.ports.clone(), SchedulerConfig::default())
        .with_suppression_key(Some(SuppressionKeySource::Fixed(key())));
    let report = scheduler.run(None).await.unwrap();
    assert_eq!(report.enqueued, 2, "{report:?}");
    assert_eq!(report.messages_sent, 3);
    let push = received(&w.ports.queue, Channel::Push).await;
    let email = received(&w.ports.queue, Channel::Email).await;
    assert_eq!((push.len(), email.len()), (2, 1));
    assert!(!push[&id("two")].sole_channel, "two channels: plain");
    assert!(!email[&id("two")].sole_channel, "two channels: plain");
    (single, push, email)
}

#[tokio::test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn on_the_emulator_the_recipients_index_gives_sole_messages_their_hash() {
    let w = AwsWorld::new(QueueSpec::default()).await;
    let (single, push, _) = scheduled_on_the_emulator(&w).await;
    let m = &push[&id("single")];
    assert!(m.sole_channel, "{m:?}");
    assert_eq!(m.address_hash, Some(hash(&single, Channel::Push)));
}

#[tokio::test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn on_the_emulator_without_the_recipients_index_everything_goes_plain() {
    let w = AwsWorld::without_recipients_index(QueueSpec::default()).await;
    let (_, push, _) = scheduled_on_the_emulator(&w).await;
    let m = &push[&id("single")];
    assert!(!m.sole_channel, "no addresses from due-index: {m:?}");
    assert_eq!(m.address_hash, None);
}
