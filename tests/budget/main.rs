//! The happy-path budget (docs/design.md, "Budgets"), counted at every port: per delivered reminder
//! the consumer makes one read (the reminder), one more for the recipient's rules (docs/design.md,
//! "Recipient rules": preferences and the address's suppression in one batched call, after the
//! claim), two conditional writes (claim, outcome), at most 0.05 gate
//! reads (one shared, single-flight read per partition while the warm copy lasts), and no SQS
//! call of its own (the event source mapping deletes what succeeded). Counts, not timings.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reminders::clock::{ManualClock, Timestamp};
use reminders::consumer::event::{arn_for_url, to_sqs_event};
use reminders::consumer::{Consumer, ConsumerConfig};
use reminders::domain::{
    AddressHash, Channel, Content, DeliveryKey, DeliveryMessage, NewReminder, PerChannel,
    Preferences, Recipient, Reminder, ReminderId, ReminderStatus, SubscriberId, Suppression,
    SuppressionKey,
};
use reminders::ledger::DeliveryRecord;
use reminders::ports::gate::{BreakerChange, GateState};
use reminders::ports::{
    Cas, DeliveryQueue, DuePage, DueQuery, Expected, Gate, GatePartition, Inserted, Ledger, Marked,
    MemoryGate, MemoryLedger, MemoryQueue, MemoryReminderStore, OutgoingMessage, PortError,
    PortSet, QueueDepth, ReceivedMessage, ReminderStore, ScriptedProvider, SendFailure,
};

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

struct Counted<T> {
    inner: T,
    calls: Calls,
}

impl<T: Ledger> Ledger for Counted<T> {
    async fn get(&self, key: &DeliveryKey) -> Result<Option<DeliveryRecord>, PortError> {
        self.calls.hit("ledger.get");
        self.inner.get(key).await
    }
    async fn put_if(&self, r: &DeliveryRecord, e: Expected) -> Result<Cas, PortError> {
        self.calls.hit("ledger.write");
        self.inner.put_if(r, e).await
    }
    async fn delete_if(&self, k: &DeliveryKey, e: Expected) -> Result<Cas, PortError> {
        self.calls.hit("ledger.write");
        self.inner.delete_if(k, e).await
    }
}

impl<T: Gate> Gate for Counted<T> {
    async fn state(&self, p: &GatePartition) -> Result<GateState, PortError> {
        self.calls.hit("gate.get");
        self.inner.state(p).await
    }
    async fn throttle(&self, p: &GatePartition, until: Timestamp) -> Result<(), PortError> {
        self.calls.hit("gate.throttle");
        self.inner.throttle(p, until).await
    }
    async fn failed(&self, p: &GatePartition, now: Timestamp) -> Result<GateState, PortError> {
        self.calls.hit("gate.failed");
        self.inner.failed(p, now).await
    }
    async fn breaker(&self, p: &GatePartition, c: BreakerChange) -> Result<bool, PortError> {
        self.calls.hit("gate.breaker");
        self.inner.breaker(p, c).await
    }
}

impl<T: ReminderStore> ReminderStore for Counted<T> {
    fn shards(&self) -> u32 {
        self.inner.shards()
    }
    async fn sweep_index(
        &self,
        after: Option<&reminders::ports::SweepCursor>,
        limit: u32,
    ) -> Result<reminders::ports::SweepPage, PortError> {
        self.calls.hit("reminders.sweep");
        self.inner.sweep_index(after, limit).await
    }
    async fn insert(&self, r: &Reminder) -> Result<Inserted, PortError> {
        self.inner.insert(r).await
    }
    async fn replace(&self, r: &Reminder, v: u64, st: ReminderStatus) -> Result<Marked, PortError> {
        self.calls.hit("reminders.write");
        self.inner.replace(r, v, st).await
    }
    async fn get(&self, id: &ReminderId) -> Result<Option<Reminder>, PortError> {
        self.calls.hit("reminders.get");
        self.inner.get(id).await
    }
    async fn query_due(&self, q: &DueQuery<'_>) -> Result<DuePage, PortError> {
        self.calls.hit("reminders.query");
        self.inner.query_due(q).await
    }
    async fn quarantine(&self, key: &str, reason: &str) -> Result<Marked, PortError> {
        self.calls.hit("reminders.write");
        self.inner.quarantine(key, reason).await
    }
    async fn extend_freshness(
        &self,
        id: &ReminderId,
        v: u64,
        fresh_until: Timestamp,
        expires_at: i64,
    ) -> Result<Marked, PortError> {
        self.calls.hit("reminders.write");
        self.inner
            .extend_freshness(id, v, fresh_until, expires_at)
            .await
    }
    async fn mark(&self, id: &ReminderId, v: u64, to: ReminderStatus) -> Result<Marked, PortError> {
        self.calls.hit("reminders.write");
        self.inner.mark(id, v, to).await
    }
    async fn preferences(&self, s: &SubscriberId) -> Result<Option<Preferences>, PortError> {
        self.calls.hit("reminders.preferences");
        self.inner.preferences(s).await
    }
    async fn suppression(&self, a: &AddressHash) -> Result<Option<Suppression>, PortError> {
        self.calls.hit("reminders.suppression");
        self.inner.suppression(a).await
    }
    /// One call to the store (a `BatchGetItem` on DynamoDB), counted as one read.
    async fn recipient_rules(
        &self,
        s: &SubscriberId,
        a: Option<&AddressHash>,
    ) -> Result<(Option<Preferences>, Option<Suppression>), PortError> {
        self.calls.hit("reminders.rules");
        self.inner.recipient_rules(s, a).await
    }
}

impl<T: DeliveryQueue> DeliveryQueue for Counted<T> {
    async fn send_batch(
        &self,
        c: Channel,
        m: &[OutgoingMessage],
    ) -> Result<Vec<SendFailure>, PortError> {
        self.calls.hit("sqs");
        self.inner.send_batch(c, m).await
    }
    async fn change_visibility(&self, c: Channel, r: &str, s: u32) -> Result<(), PortError> {
        self.calls.hit("sqs");
        self.inner.change_visibility(c, r, s).await
    }
    async fn delete(&self, c: Channel, r: &str) -> Result<(), PortError> {
        self.calls.hit("sqs");
        self.inner.delete(c, r).await
    }
    async fn receive(
        &self,
        c: Channel,
        max: u32,
        v: u32,
    ) -> Result<Vec<ReceivedMessage>, PortError> {
        self.calls.hit("sqs");
        self.inner.receive(c, max, v).await
    }
    async fn depth(&self, c: Channel) -> Result<QueueDepth, PortError> {
        self.inner.depth(c).await
    }
}

#[tokio::test]
async fn a_delivered_reminder_costs_one_read_two_conditional_writes_and_a_twentieth_of_a_gate_read()
{
    let t0 = Timestamp::from_millis(1_800_000_000_000);
    let clock = ManualClock::at(t0);
    let calls = Calls::default();
    let store = Arc::new(MemoryReminderStore::new(4));
    let queue = Arc::new(MemoryQueue::new(clock.clone()));
    let ports = PortSet {
        clock: clock.clone(),
        reminders: Counted {
            inner: store.clone(),
            calls: calls.clone(),
        },
        ledger: Counted {
            inner: Arc::new(MemoryLedger::default()),
            calls: calls.clone(),
        },
        gate: Counted {
            inner: Arc::new(MemoryGate::default()),
            calls: calls.clone(),
        },
        queue: Counted {
            inner: queue.clone(),
            calls: calls.clone(),
        },
        dead_letters: Arc::new(MemoryQueue::new(clock.clone())),
        providers: PerChannel::from_fn(|_| Arc::new(ScriptedProvider::new(clock.clone(), true))),
    };
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
    for b in 0..batches {
        for i in 0..per_batch {
            enqueue(&store, &queue, format!("b{b}-{i}"), t0).await;
        }
        let received = queue.receive(Channel::Push, 10, 180).await.unwrap();
        assert_eq!(received.len(), per_batch as usize);
        let event = to_sqs_event(&arn_for_url(urls.get(Channel::Push), "x"), &received);
        let out = consumer.handle(event, None).await;
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
