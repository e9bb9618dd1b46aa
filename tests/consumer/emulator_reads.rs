//! On the emulator, with the adapters as deployed (the reminder store and the DLQ inside
//! `AwsWorld`'s fault wrapper, with no fault planted: it passes the rules' batch read through,
//! so the count here is the deployed one): the read requests one delivered single-channel
//! reminder costs, counted by moto's own request recorder (`/moto-api/recorder/…`), and the
//! claim's ordering of an opt-out, a suppression and a cancel that land right before it
//! ([`crate::before_claim`]).

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use reminders::aws::dynamo::{DynamoGate, DynamoLedger, DynamoReminderStore};
use reminders::aws::{SqsDeadLetters, SqsQueues};
use reminders::clock::SystemClock;
use reminders::consumer::{Action, Consumer, ConsumerConfig};
use reminders::domain::{
    Channel, DeadReason, PerChannel, Reminder, Suppression, SuppressionKey, SuppressionSource,
};
use reminders::ledger::{DeliveryRecord, Status};
use reminders::ports::{DeliveryQueue, Ledger, OutgoingMessage, PortSet, ReminderStore};
use reminders::providers::secret::SuppressionKeySource;
use reminders_harness::around::{Around, Faulty};
use reminders_harness::ScriptedProvider;
use tokio::sync::Mutex;

use crate::before_claim::{opted_out_of, BeforeClaim, Landing};
use crate::harness::{message, sole_message, suppression_key};
use crate::support::{now, reminder, AwsWorld};

const SMS: Channel = Channel::Sms;

type Ports = PortSet<
    SystemClock,
    Faulty<DynamoReminderStore>,
    Around<DynamoLedger, BeforeClaim<DynamoLedger, DynamoReminderStore>>,
    DynamoGate,
    SqsQueues,
    Faulty<SqsDeadLetters>,
    Arc<ScriptedProvider<SystemClock>>,
>;

/// One single-channel SMS delivery on the emulator, consumed once.
struct Ran {
    action: Action,
    record: DeliveryRecord,
    calls: u32,
    landed: bool,
    /// What moto recorded while the consumer handled the message.
    counted: Counted,
    /// The path: one-read claims, and of them the ones given back.
    path: (u32, u32),
}

/// The emulator's recorder is one per server: only the counting tests use it (the ordering
/// tests run beside others), and they take turns: this lock under plain `cargo test` (one
/// process), a nextest test group of one thread under nextest (.config/nextest.toml).
static RECORDER: Mutex<()> = Mutex::const_new(());

async fn recorder(verb: &str) -> String {
    let base = std::env::var("AWS_ENDPOINT_URL").expect("AWS_ENDPOINT_URL");
    let url = format!("{}/moto-api/recorder/{verb}", base.trim_end_matches('/'));
    let got = reqwest::Client::new().post(&url).send().await;
    let got = got.unwrap_or_else(|e| panic!("{url}: {e}"));
    assert!(got.status().is_success(), "{url}: {}", got.status());
    got.text().await.unwrap()
}

/// DynamoDB requests the emulator recorded on two tables, by operation; reads of gate items
/// (the provider gate's cached breaker state, under `gate#` in the deliveries table) apart,
/// as BENCHMARKS.md counts them.
#[derive(Debug, Default)]
struct Counted {
    reads: Vec<String>,
    /// Whether each read asked for strong consistency (`"ConsistentRead":true`).
    consistent: Vec<bool>,
    gate_reads: u32,
    writes: Vec<String>,
}

const READS: [&str; 5] = [
    "GetItem",
    "BatchGetItem",
    "Query",
    "Scan",
    "TransactGetItems",
];

fn count(recording: &str, tables: [&str; 2]) -> Counted {
    let mut c = Counted::default();
    for line in recording.lines().filter(|l| !l.trim().is_empty()) {
        let entry: serde_json::Value = serde_json::from_str(line).unwrap();
        let headers = entry["headers"].as_object().expect("recorded headers");
        let target = headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("x-amz-target"))
            .and_then(|(_, v)| v.as_str())
            .unwrap_or("");
        let Some(op) = target.strip_prefix("DynamoDB_20120810.") else {
            continue;
        };
        let raw = entry["body"].as_str().unwrap_or("");
        let body = if entry["body_encoded"].as_bool() == Some(true) {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(raw)
                .unwrap();
            String::from_utf8_lossy(&bytes).into_owned()
        } else {
            raw.to_owned()
        };
        // Other tests share the server: only requests naming this test's tables count.
        if !tables.iter().any(|t| body.contains(&format!("\"{t}\""))) {
            continue;
        }
        if READS.contains(&op) && body.contains("\"gate#") {
            c.gate_reads += 1;
        } else if READS.contains(&op) {
            c.reads.push(op.to_owned());
            let compact: String = body.chars().filter(|ch| !ch.is_whitespace()).collect();
            c.consistent
                .push(compact.contains("\"ConsistentRead\":true"));
        } else {
            c.writes.push(op.to_owned());
        }
    }
    c
}

/// A reminder on SMS only, delivered by a consumer that keeps suppressions (as deployed),
/// with `landing` written right before its claim; with `count_requests`, the requests moto recorded
/// while it ran.
async fn deliver_with(
    id: &str,
    count_requests: bool,
    sole: bool,
    landing: impl FnOnce(&Reminder, &SuppressionKey) -> Option<Landing>,
) -> Ran {
    let world = AwsWorld::new(reminders::aws::bootstrap::QueueSpec::default()).await;
    let store = world.ports.reminders.inner.clone();
    let ledger = world.ports.ledger.inner.clone();
    let r = reminder(id, SMS);
    store.insert(&r).await.unwrap();
    let key = suppression_key();
    let landing = Arc::new(std::sync::Mutex::new(landing(&r, &key)));
    let ports: Ports = PortSet {
        clock: SystemClock,
        reminders: world.ports.reminders.clone(),
        ledger: BeforeClaim::around(ledger.clone(), store, landing.clone()),
        gate: world.ports.gate.clone(),
        queue: world.ports.queue.clone(),
        dead_letters: world.ports.dead_letters.clone(),
        providers: PerChannel::from_fn(|_| world.provider.clone()),
    };
    let cfg = ConsumerConfig {
        emit_metrics: false,
        ..ConsumerConfig::default()
    };
    let consumer = Consumer::new(ports, cfg, world.queues.clone(), 13)
        .with_suppression_key(Some(SuppressionKeySource::Fixed(key)));
    let msg = match sole {
        true => sole_message(&r, SMS),
        false => message(&r, SMS),
    };
    let entry = OutgoingMessage {
        entry_id: "0".into(),
        body: msg.encode(),
        delay_secs: 0,
    };
    let queue = &world.ports.queue;
    assert!(queue.send_batch(SMS, &[entry]).await.unwrap().is_empty());
    let turn = if count_requests {
        let turn = RECORDER.lock().await;
        recorder("reset-recording").await;
        recorder("start-recording").await;
        Some(turn)
    } else {
        None
    };
    let mut out = None;
    for _ in 0..50 {
        let polled = reminders_harness::mapping::Mapping::new(&world.queues, SMS, 10, 30)
            .poll(&consumer, None)
            .await
            .unwrap();
        if polled.is_some() {
            out = polled;
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let recording = match turn {
        Some(turn) => {
            recorder("stop-recording").await;
            let recording = recorder("download-recording").await;
            drop(turn);
            recording
        }
        None => String::new(),
    };
    let out = out.expect("the message came back from the queue");
    let tables = [
        world.reminders_table.as_str(),
        world.deliveries_table.as_str(),
    ];
    let landed = landing.lock().unwrap().is_none();
    Ran {
        action: out.records[0].action,
        record: ledger
            .get(&msg.delivery_key)
            .await
            .unwrap()
            .expect("a ledger item"),
        calls: world.provider.calls_for(&msg.delivery_key),
        landed,
        counted: count(&recording, tables),
        path: {
            let m = out.metrics.get(SMS);
            (m.one_read, m.one_read_released)
        },
    }
}

/// The one-read target: a sole channel's message, as the scheduler makes it (marked sole, with
/// the address's keyed hash), costs one read request: the reminder, the preferences and the
/// suppression in one strongly consistent `BatchGetItem` after the claim. Held exactly, so a
/// read added to the path (or the batch split in two) shows here.
#[tokio::test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn a_delivered_single_channel_reminder_costs_one_read_request_on_the_emulator() {
    let ran = deliver_with("reads-one", true, true, |_, _| None).await;
    assert_eq!(ran.record.status(), Status::Delivered);
    assert_eq!(ran.calls, 1);
    let c = &ran.counted;
    eprintln!("emulator's count for one delivery: {c:?}");
    assert_eq!(c.reads, ["BatchGetItem"], "{c:?}");
    assert_eq!(c.consistent, [true], "strongly consistent: {c:?}");
    assert_eq!(c.writes, ["PutItem", "PutItem"], "claim and outcome: {c:?}");
    assert_eq!(ran.path, (1, 0), "the one-read path, nothing given back");
}

/// A message without the marks (the previous release's scheduler, the first due index, a
/// key the scheduler could not read) costs two: the reminder (`GetItem`, before the claim),
/// then the preferences and the suppression (one `BatchGetItem`, after it).
#[tokio::test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn a_message_without_the_sole_marks_costs_two_read_requests_on_the_emulator() {
    let ran = deliver_with("reads-plain", true, false, |_, _| None).await;
    assert_eq!(ran.record.status(), Status::Delivered);
    assert_eq!(ran.calls, 1);
    let c = &ran.counted;
    assert_eq!(c.reads, ["GetItem", "BatchGetItem"], "{c:?}");
    assert_eq!(c.writes, ["PutItem", "PutItem"], "claim and outcome: {c:?}");
}

#[tokio::test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn an_opt_out_landing_right_before_the_claim_wins_on_the_emulator() {
    for sole in [false, true] {
        let ran = deliver_with(
            &format!("optout-before-claim-{sole}"),
            false,
            sole,
            |r, _| {
                Some(Landing::Preferences(
                    r.subscriber_id.clone(),
                    opted_out_of(SMS),
                ))
            },
        )
        .await;
        assert!(ran.landed, "the opt-out was written before the claim");
        assert_eq!(ran.path, (u32::from(sole), 0), "the path taken");
        assert_eq!(ran.calls, 0, "never sent");
        assert_eq!(ran.record.status(), Status::Dead);
        assert_eq!(ran.record.dead_reason(), Some(DeadReason::OptedOut));
        assert_eq!(ran.record.attempt_count(), 0);
    }
}

#[tokio::test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn a_suppression_landing_right_before_the_claim_wins_on_the_emulator() {
    for sole in [false, true] {
        let ran = deliver_with(
            &format!("suppressed-before-claim-{sole}"),
            false,
            sole,
            |r, key| {
                let sup = Suppression::record(
                    key,
                    &r.recipients[&SMS],
                    SuppressionSource::Operator,
                    now(),
                );
                Some(Landing::Suppress(sup))
            },
        )
        .await;
        assert!(ran.landed, "the suppression was written before the claim");
        assert_eq!(ran.path, (u32::from(sole), 0), "the path taken");
        assert_eq!(ran.calls, 0, "never sent");
        assert_eq!(ran.record.status(), Status::Dead);
        assert_eq!(ran.record.dead_reason(), Some(DeadReason::Suppressed));
    }
}

#[tokio::test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn a_cancel_landing_right_before_the_claim_wins_on_the_emulator() {
    for sole in [false, true] {
        let ran = deliver_with(
            &format!("cancel-before-claim-{sole}"),
            false,
            sole,
            |r, _| Some(Landing::Cancel(r.reminder_id.clone(), now())),
        )
        .await;
        assert!(ran.landed, "the cancel was written before the claim");
        assert_eq!(ran.calls, 0, "never sent");
        assert_eq!(ran.record.status(), Status::Cancelled);
        assert_eq!(ran.action, Action::Ack);
    }
}
