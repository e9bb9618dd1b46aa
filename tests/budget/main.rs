//! The happy-path budget (docs/design.md, "Budgets"), counted at every port: per delivered reminder
//! the consumer makes one read (the reminder), one more for the recipient's rules (docs/design.md,
//! "Recipient rules": preferences and the address's suppression in one batched call, after the
//! claim), two conditional writes (claim, outcome), at most 0.05 gate
//! reads (one shared, single-flight read per partition while the warm copy lasts), and no SQS
//! call of its own (the event source mapping deletes what succeeded). Counts, not timings.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reminders::clock::Timestamp;
use reminders::consumer::{Consumer, ConsumerConfig};
use reminders::domain::{
    Channel, Content, DeliveryMessage, NewReminder, PerChannel, Recipient, Reminder, ReminderId,
    SubscriberId, SuppressionKey,
};
use reminders::ports::{
    DeliveryQueue, MemoryQueue, MemoryReminderStore, OutgoingMessage, PortError, ReminderStore,
};
use reminders_harness::around::{Around, Call, Hook};
use reminders_harness::mapping::Mapping;
use reminders_harness::stack::MemoryStack;
use reminders_harness::ManualClock;
use reminders_harness::ScriptedProvider;

#[derive(Clone, Default)]
struct Calls(Arc<Mutex<BTreeMap<&'static str, u32>>>);

impl Calls {
    fn hit(&self, op: &'static str) {
        *self.0.lock().unwrap().entry(op).or_default() += 1;
    }
    fn take(&self) -> BTreeMap<&'static str, u32> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

/// Counts each call the consumer makes, by what it costs: a ledger read or write, a reminders
/// table read (the reminder, the rules in one batch, or either single read) or write, a gate
/// call, an SQS call.
impl Hook for Calls {
    async fn before(&self, call: &Call<'_>) -> Result<(), PortError> {
        let counted = match call {
            Call::LedgerGet { .. } => "ledger.get",
            Call::PutIf { .. } | Call::DeleteIf { .. } => "ledger.write",
            Call::GateState { .. } => "gate.get",
            Call::Throttle { .. } => "gate.throttle",
            Call::Failed { .. } => "gate.failed",
            Call::Breaker { .. } => "gate.breaker",
            Call::SweepIndex { .. } => "reminders.sweep",
            Call::Get { .. } => "reminders.get",
            Call::QueryDue { .. } => "reminders.query",
            Call::Preferences { .. } => "reminders.preferences",
            Call::Suppression { .. } => "reminders.suppression",
            // One call to the store (a `BatchGetItem` on DynamoDB), counted as one read.
            Call::RecipientRules { .. } => "reminders.rules",
            Call::DeliveryRead { .. } => "reminders.delivery_read",
            Call::Replace { .. }
            | Call::Quarantine { .. }
            | Call::ExtendFreshness { .. }
            | Call::Mark { .. }
            | Call::PutPreferences { .. }
            | Call::PutSuppression { .. } => "reminders.write",
            Call::SendBatch { .. }
            | Call::ChangeVisibility { .. }
            | Call::Delete { .. }
            | Call::Receive { .. } => "sqs",
            _ => return Ok(()),
        };
        self.hit(counted);
        Ok(())
    }
}

#[tokio::test]
async fn a_delivered_reminder_costs_one_read_two_conditional_writes_and_a_twentieth_of_a_gate_read()
{
    let t0 = Timestamp::from_millis(1_800_000_000_000);
    let stack = MemoryStack::on(ManualClock::at(t0));
    let MemoryStack {
        clock,
        store,
        queue,
        ..
    } = stack.clone();
    let calls = Calls::default();
    let ports = stack
        .ports_with(PerChannel::from_fn(|_| {
            Arc::new(ScriptedProvider::new(clock.clone(), true))
        }))
        .map_reminders(|r| Around::new(r, calls.clone()))
        .map_ledger(|l| Around::new(l, calls.clone()))
        .map_gate(|g| Around::new(g, calls.clone()))
        .map_queue(|q| Around::new(q, calls.clone()));
    let urls = PerChannel::from_fn(|c| format!("http://q/000000000000/q-{c}"));
    let cfg = ConsumerConfig {
        emit_metrics: false,
        ..ConsumerConfig::default()
    };
    // Suppressions on, as the template deploys the consumer: the address's suppression is
    // read with the preferences.
    let key = SuppressionKey::new(b"budget test suppression key".to_vec()).unwrap();
    let consumer = Consumer::new(ports, cfg, urls.clone(), 1).with_suppression_key(Some(
        reminders::providers::secret::SuppressionKeySource::Fixed(key),
    ));
    // Five batches of ten, 200 ms apart: a warm container's steady state at 50 deliveries a
    // second. The copy lasts a second (docs/design.md, "Provider gate"), so the read is shared by
    // every batch in it; at 20 deliveries a second or more the gate costs at most 0.05 reads per
    // delivery.
    let (batches, per_batch) = (5u32, 10u32);
    let n = batches * per_batch;
    let mut delivered = 0;
    let mapping = Mapping::new(&urls, Channel::Push, 10, 180);
    for b in 0..batches {
        for i in 0..per_batch {
            enqueue(&store, &queue, format!("b{b}-{i}"), t0).await;
        }
        let batch = mapping.receive(&queue).await.unwrap().expect("a batch");
        assert_eq!(batch.messages.len(), per_batch as usize);
        let out = consumer.handle(batch.event, None).await;
        delivered += out.metrics.get(Channel::Push).delivered;
        clock.advance(Duration::from_millis(200));
    }
    assert_eq!(delivered, n);
    let counts = calls.take();
    assert_eq!(counts.get("reminders.get"), Some(&n), "{counts:?}");
    // The recipient's rules (docs/design.md, "Recipient rules"): preferences and suppression, one
    // batched read per delivery after the claim; never the two reads apart.
    assert_eq!(counts.get("reminders.rules"), Some(&n), "{counts:?}");
    assert_eq!(counts.get("reminders.preferences"), None, "{counts:?}");
    assert_eq!(counts.get("reminders.suppression"), None, "{counts:?}");
    assert_eq!(counts.get("ledger.write"), Some(&(2 * n)), "{counts:?}");
    assert_eq!(
        counts.get("ledger.get"),
        None,
        "no ledger read on the happy path"
    );
    let gate_reads = counts.get("gate.get").copied().unwrap_or(0);
    assert!(
        f64::from(gate_reads) / f64::from(n) <= 0.05,
        "{gate_reads} gate reads for {n} deliveries: {counts:?}"
    );
    assert_eq!(gate_reads, 1, "one read while the copy lasts: {counts:?}");
    assert_eq!(counts.get("gate.throttle"), None);
    assert_eq!(counts.get("sqs"), None, "no SQS call of the consumer's own");
    assert_eq!(counts.get("reminders.write"), None);
}

async fn enqueue(
    store: &MemoryReminderStore,
    queue: &MemoryQueue<ManualClock>,
    id: String,
    t0: Timestamp,
) {
    let r = Reminder::new(
        NewReminder {
            reminder_id: ReminderId::parse(id).unwrap(),
            subscriber_id: SubscriberId::parse("s").unwrap(),
            due_at: t0,
            fresh_until: None,
            content: Content::Text {
                subject: "s".into(),
                body: "b".into(),
            },
            recipients: vec![Recipient::parse(Channel::Push, "tok").unwrap()],
        },
        Duration::from_secs(3600),
        Duration::from_secs(3600),
    )
    .unwrap();
    store.insert(&r).await.unwrap();
    let msg = DeliveryMessage::new(
        r.reminder_id,
        r.subscriber_id,
        Channel::Push,
        1,
        t0,
        r.fresh_until,
    );
    let entry = OutgoingMessage {
        entry_id: "0".into(),
        body: msg.encode(),
        delay_secs: 0,
    };
    queue.send_batch(Channel::Push, &[entry]).await.unwrap();
}
