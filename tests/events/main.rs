//! Outcome events on the emulator: the ledger's real stream, the player (`local run`'s event
//! source mapping for it) and EventBridge with a rule into a tap queue.
//!
//! - The kill test: the publisher dies between the ledger write and `PutEvents`, and the
//!   event still arrives from a fresh player; it dies after `PutEvents` but before its
//!   checkpoint, and the event arrives twice, recognisable by the same key and transition.
//! - The local path: reminders played by the local runner end as exactly one event per
//!   settled delivery, with the keys the provider saw, a cancelled one as `cancelled`.

use reminders_test_support as support;

mod pipeline;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use reminders::aws::bootstrap::{create_events_tap, EventsTap};
use reminders::aws::eventbridge::EventBridgeBus;
use reminders::aws::streams::DynamoStream;
use reminders::events::player::{play_once, Checkpoint};
use reminders::ports::PortError;
use reminders_harness::around::{Around, Call, Hook, Next, Value};

/// The tap (bus, rule, queue), the ledger's stream and a bus adapter, for `world`.
pub struct Events {
    pub tap: EventsTap,
    pub stream: DynamoStream,
    pub bus: EventBridgeBus,
    pub sqs: aws_sdk_sqs::Client,
    /// This test's checkpoint file.
    pub checkpoint: PathBuf,
}

impl Events {
    pub async fn new(world: &support::AwsWorld, deliveries_table: &str, tag: &str) -> Self {
        let sdk = reminders::aws::sdk_config().await;
        let sqs = aws_sdk_sqs::Client::new(&sdk);
        let bridge = aws_sdk_eventbridge::Client::new(&sdk);
        let tap = create_events_tap(&bridge, &sqs, &support::unique(tag))
            .await
            .unwrap();
        let streams = aws_sdk_dynamodbstreams::Client::new(&sdk);
        let stream = DynamoStream::of_table(&world.dynamo, streams, deliveries_table)
            .await
            .unwrap()
            .expect("the deliveries table has a stream");
        let checkpoint = std::env::temp_dir().join(format!("{}.json", support::unique(tag)));
        let bus = EventBridgeBus::new(bridge, tap.bus.clone());
        Self {
            tap,
            stream,
            bus,
            sqs,
            checkpoint,
        }
    }

    /// Every event in the tap queue (deleted), waiting up to 20 s for `expect` of them, then
    /// one more empty poll so that nothing else is on its way.
    pub async fn drain(&self, expect: usize) -> Vec<serde_json::Value> {
        let started = Instant::now();
        let mut events = Vec::new();
        loop {
            let got = self
                .sqs
                .receive_message()
                .queue_url(&self.tap.queue_url)
                .max_number_of_messages(10)
                .wait_time_seconds(1)
                .send()
                .await
                .unwrap()
                .messages
                .unwrap_or_default();
            let empty = got.is_empty();
            for m in got {
                events.push(serde_json::from_str(m.body().unwrap_or_default()).unwrap());
                let handle = m.receipt_handle.unwrap();
                let delete = self.sqs.delete_message().queue_url(&self.tap.queue_url);
                delete.receipt_handle(handle).send().await.unwrap();
            }
            if empty && (events.len() >= expect || started.elapsed() > Duration::from_secs(20)) {
                return events;
            }
        }
    }
}

/// `(delivery_key, transition)` of each event: the consumer's dedup id.
pub fn ids(events: &[serde_json::Value]) -> Vec<(String, u64)> {
    events
        .iter()
        .map(|e| {
            let d = &e["detail"];
            let key = d["delivery_key"].as_str().unwrap().to_owned();
            (key, d["transition"].as_u64().unwrap())
        })
        .collect()
}

/// The delivery key of a one-channel test reminder.
pub fn key_of(r: &reminders::domain::Reminder) -> reminders::domain::DeliveryKey {
    let channel = r.listed_channels().next().unwrap();
    reminders::domain::DeliveryKey::derive(&r.reminder_id, &r.subscriber_id, channel)
}

/// A hook on a bus by which its publisher is killed mid-publish: before `PutEvents` (nothing
/// published) or after it (published, but the process dies before it can checkpoint).
#[derive(Clone)]
struct Killed {
    after_put: bool,
}

impl Hook for Killed {
    async fn around<R: Value>(&self, _: &Call<'_>, next: Next<'_, R>) -> Result<R, PortError> {
        if self.after_put {
            next().await?;
        }
        panic!("publisher killed");
    }
}

/// One pass of a player process that `bus` kills: it dies (its task panics), and its
/// checkpoint is lost with it, except for what it wrote to its file.
async fn killed_pass(events: &Events, bus: Around<EventBridgeBus, Killed>) {
    let (stream, path) = (events.stream.clone(), events.checkpoint.clone());
    let died = tokio::spawn(async move {
        let mut checkpoint = Checkpoint::load(&path).unwrap();
        play_once(&stream, &bus, &mut checkpoint).await
    })
    .await;
    assert!(died.unwrap_err().is_panic(), "the publisher was killed");
}

/// A fresh player process: a pass from the checkpoint file, with the real bus.
async fn fresh_pass(events: &Events) -> u32 {
    let mut checkpoint = Checkpoint::load(&events.checkpoint).unwrap();
    let pass = play_once(&events.stream, &events.bus, &mut checkpoint)
        .await
        .unwrap();
    assert_eq!((pass.failed, pass.given_up), (0, 0), "{pass:?}");
    pass.published
}

#[tokio::test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn an_event_survives_a_publisher_killed_before_or_after_put_events() {
    use reminders::aws::bootstrap::QueueSpec;
    use reminders::ports::Ledger;
    let world = support::AwsWorld::new(QueueSpec::default()).await;
    let events = Events::new(&world, &world.deliveries_table, "kill").await;
    let retention = reminders::consumer::ConsumerConfig::default().retention;

    // A delivery settles in the ledger (a cancel): its stream record exists.
    let first = support::reminder("killed-before", reminders::domain::Channel::Sms);
    reminders::ports::ReminderStore::insert(&world.ports.reminders, &first)
        .await
        .unwrap();
    let now = support::now();
    let cancelled = reminders::reminder_writes::cancel(
        &world.ports.reminders,
        &world.ports.ledger,
        &first.reminder_id,
        now,
        retention,
    )
    .await
    .unwrap();
    assert!(cancelled.is_some());
    let key = key_of(&first);
    let settled = world.ports.ledger.get(&key).await.unwrap().unwrap();

    // Killed between the ledger write and PutEvents: nothing published, nothing lost.
    let before = Around::new(events.bus.clone(), Killed { after_put: false });
    killed_pass(&events, before).await;
    assert_eq!(fresh_pass(&events).await, 1);
    let got = events.drain(1).await;
    assert_eq!(ids(&got), [(key.as_str().to_owned(), settled.seq())]);
    assert_eq!(got[0]["detail"]["outcome"], "cancelled");
    assert_eq!(fresh_pass(&events).await, 0, "the checkpoint moved past it");

    // Killed after PutEvents, before its checkpoint: the fresh player publishes again, and
    // the consumer sees the same key and transition twice — one event, delivered twice.
    let second = support::reminder("killed-after", reminders::domain::Channel::Sms);
    reminders::ports::ReminderStore::insert(&world.ports.reminders, &second)
        .await
        .unwrap();
    reminders::reminder_writes::cancel(
        &world.ports.reminders,
        &world.ports.ledger,
        &second.reminder_id,
        now,
        retention,
    )
    .await
    .unwrap();
    let after = Around::new(events.bus.clone(), Killed { after_put: true });
    killed_pass(&events, after).await;
    assert_eq!(fresh_pass(&events).await, 1);
    let got = ids(&events.drain(2).await);
    let second_key = key_of(&second);
    let seq = world
        .ports
        .ledger
        .get(&second_key)
        .await
        .unwrap()
        .unwrap()
        .seq();
    let once = (second_key.as_str().to_owned(), seq);
    assert_eq!(
        got,
        [once.clone(), once],
        "the same event twice, and nothing else"
    );
    let distinct: BTreeMap<_, usize> = got.iter().fold(BTreeMap::new(), |mut m, id| {
        *m.entry(id.clone()).or_default() += 1;
        m
    });
    assert_eq!(
        distinct.len(),
        1,
        "deduplicated on (key, transition): one event"
    );
}
