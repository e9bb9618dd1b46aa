//! An in-memory world for the consumer: ports with handles kept for inspection, a virtual
//! clock, and an event-source-mapping stand-in (receive, build the `SqsEvent`, handle, delete
//! what succeeded).

use std::sync::Arc;
use std::time::Duration;

use reminders::clock::Timestamp;
use reminders::consumer::{BatchOutcome, Consumer, ConsumerConfig};
use reminders::deadletter::DeadLetter;
use reminders::domain::{
    Channel, DeliveryKey, DeliveryMessage, PerChannel, Reminder, ReminderId, ReminderStatus,
};
use reminders::ledger::DeliveryRecord;
use reminders::ports::{
    DeadLetters, DeliveryQueue, Ledger, MemoryGate, MemoryLedger, MemoryQueue, MemoryReminderStore,
    OutgoingMessage, PortSet, ReminderStore,
};
use reminders::reminder_writes::{self, Edit, Edited, WriteError};
use reminders_harness::around::{Around, Faults, Faulty, SingleReads};
use reminders_harness::ScriptedProvider;
use reminders_harness::{ManualClock, MemoryStack};
use reminders_test_support::a_reminder;

pub const T0: Timestamp = Timestamp::from_millis(1_800_000_000_000);
/// The channel queues' visibility timeout, as the template sets it.
pub const QUEUE_VISIBILITY: u32 = 180;

pub type MemPorts = PortSet<
    ManualClock,
    Around<Arc<MemoryReminderStore>, (Faults, SingleReads)>,
    Faulty<Arc<MemoryLedger>>,
    Arc<MemoryGate>,
    Faulty<Arc<MemoryQueue<ManualClock>>>,
    Arc<MemoryQueue<ManualClock>>,
    Arc<ScriptedProvider<ManualClock>>,
>;

pub fn queue_urls() -> PerChannel<String> {
    PerChannel::from_fn(|c| format!("http://127.0.0.1/000000000000/app-{c}"))
}

pub fn test_config() -> ConsumerConfig {
    ConsumerConfig {
        emit_metrics: false,
        ..ConsumerConfig::default()
    }
}

pub struct Mem {
    pub clock: ManualClock,
    pub store: Arc<MemoryReminderStore>,
    pub ledger: Arc<MemoryLedger>,
    /// The fault plans around the consumer's ledger, reminders table (whose compound reads are
    /// its single reads, as the memory store makes them) and queue.
    pub ledger_faults: Faults,
    pub store_faults: Faults,
    pub queue_faults: Faults,
    pub queue: Arc<MemoryQueue<ManualClock>>,
    pub dlq: Arc<MemoryQueue<ManualClock>>,
    pub provider: Arc<ScriptedProvider<ManualClock>>,
    /// The provider gate the consumer reads (throttle a partition to close it).
    pub gate: Arc<MemoryGate>,
    pub consumer: Consumer<MemPorts>,
}

impl Mem {
    pub fn new(cfg: ConsumerConfig, idempotent: bool) -> Self {
        Self::build(cfg, idempotent, None)
    }

    /// With the queues' redrive policy (maxReceiveCount) into the DLQs, as on AWS.
    pub fn with_redrive(cfg: ConsumerConfig, idempotent: bool, max_receive_count: u32) -> Self {
        Self::build(cfg, idempotent, Some(max_receive_count))
    }

    fn build(cfg: ConsumerConfig, idempotent: bool, redrive: Option<u32>) -> Self {
        let stack = MemoryStack::on(ManualClock::at(T0));
        let stack = match redrive {
            Some(max) => stack.with_redrive(max),
            None => stack,
        };
        let provider = Arc::new(ScriptedProvider::new(stack.clock.clone(), idempotent));
        let store_faults = Faults::default();
        let ledger_faults = Faults::default();
        let queue_faults = Faults::default();
        let ports = stack
            .ports(provider.clone())
            .map_reminders(|r| Around::new(r, (store_faults.clone(), SingleReads)))
            .map_ledger(|l| Around::new(l, ledger_faults.clone()))
            .map_queue(|q| Around::new(q, queue_faults.clone()));
        let MemoryStack {
            clock,
            store,
            ledger,
            gate,
            queue,
            dlq,
        } = stack;
        let consumer = Consumer::new(ports, cfg, queue_urls(), 42).with_suppression_key(Some(
            reminders::providers::secret::SuppressionKeySource::Fixed(suppression_key()),
        ));
        Self {
            clock,
            store,
            ledger,
            ledger_faults,
            store_faults,
            queue_faults,
            queue,
            dlq,
            provider,
            gate,
            consumer,
        }
    }

    /// A reminder due at T0, fresh for an hour, going to `channels`.
    pub async fn reminder(&self, id: &str, channels: &[Channel]) -> Reminder {
        let r = reminder(id, channels);
        self.store.insert(&r).await.unwrap();
        r
    }

    /// The scheduler's mark: `r`'s version enqueued.
    pub async fn mark_enqueued(&self, r: &Reminder) {
        let marked = self
            .store
            .mark(&r.reminder_id, r.payload_version, ReminderStatus::Enqueued)
            .await
            .unwrap();
        assert_eq!(marked, reminders::ports::Marked::Marked);
    }

    /// An application's edit of `id` at T0, as the API makes it (default retention).
    pub async fn edit(&self, id: &ReminderId, edit: Edit) -> Result<Edited, WriteError> {
        reminder_writes::edit(
            &*self.store,
            &*self.ledger,
            id,
            edit,
            T0,
            reminders::domain::Retention::default(),
        )
        .await
    }

    pub async fn enqueue(&self, msg: &DeliveryMessage) {
        let entry = OutgoingMessage {
            entry_id: "0".into(),
            body: msg.encode(),
            delay_secs: 0,
        };
        assert!(self
            .queue
            .send_batch(msg.channel, &[entry])
            .await
            .unwrap()
            .is_empty());
    }

    pub async fn enqueue_raw(&self, channel: Channel, body: &str) {
        let entry = OutgoingMessage {
            entry_id: "0".into(),
            body: body.into(),
            delay_secs: 0,
        };
        self.queue.send_batch(channel, &[entry]).await.unwrap();
    }

    /// One poll of the event source mapping: up to 10 visible messages, handled, successes
    /// deleted. `None` when nothing was visible.
    pub async fn run(&self, channel: Channel) -> Option<BatchOutcome> {
        self.run_with_deadline(channel, None).await
    }

    pub async fn run_with_deadline(
        &self,
        channel: Channel,
        deadline: Option<Timestamp>,
    ) -> Option<BatchOutcome> {
        let urls = queue_urls();
        reminders_harness::mapping::Mapping::new(&urls, channel, 10, QUEUE_VISIBILITY)
            .poll(&self.consumer, deadline)
            .await
            .unwrap()
    }

    /// Poll until a poll finds nothing, advancing `step_secs` between polls; fails the test
    /// if that takes more than `max_polls`.
    pub async fn run_until_idle(&self, channel: Channel, step_secs: u64, max_polls: u32) {
        for _ in 0..max_polls {
            if self.run(channel).await.is_none() {
                return;
            }
            self.advance(step_secs);
        }
        panic!("still busy after {max_polls} polls");
    }

    pub async fn record(&self, key: &DeliveryKey) -> Option<DeliveryRecord> {
        self.ledger.get(key).await.unwrap()
    }

    pub async fn dead_letters(&self, channel: Channel) -> Vec<(String, DeadLetter)> {
        self.dlq
            .receive_dead(channel, 10, 0)
            .await
            .unwrap()
            .into_iter()
            .map(|m| (m.message.body, m.letter))
            .collect()
    }

    pub fn advance(&self, secs: u64) {
        self.clock.advance(Duration::from_secs(secs));
    }
}

/// The key the in-memory consumer hashes suppressed addresses with.
pub fn suppression_key() -> reminders::domain::SuppressionKey {
    reminders::domain::SuppressionKey::new(b"consumer tests' suppression key".to_vec()).unwrap()
}

pub fn reminder(id: &str, channels: &[Channel]) -> Reminder {
    a_reminder(id, T0)
        .to(channels)
        .fresh_for(Duration::from_secs(3600))
        .text("Pickup", "Your order is ready")
        .build()
}

pub fn message(r: &Reminder, channel: Channel) -> DeliveryMessage {
    DeliveryMessage::new(
        r.reminder_id.clone(),
        r.subscriber_id.clone(),
        channel,
        r.payload_version,
        r.due_at,
        r.fresh_until,
    )
}

/// [`message`] as the scheduler makes it for a reminder listing `channel` alone: marked sole,
/// with the address's hash under [`suppression_key`] (the consumer's one-read path).
pub fn sole_message(r: &Reminder, channel: Channel) -> DeliveryMessage {
    let hash = reminders::domain::AddressHash::of(&suppression_key(), &r.recipients[&channel]);
    message(r, channel).sole(Some(hash))
}

/// The in-memory ports of [`Custom`], with the ledger, DLQ and provider a test picks.
pub type CustomPorts<L, D, P> = PortSet<
    ManualClock,
    Arc<MemoryReminderStore>,
    L,
    Arc<MemoryGate>,
    Arc<MemoryQueue<ManualClock>>,
    D,
    P,
>;

/// A consumer on ports a test picks (a slowed ledger, a provider of its own, a DLQ that
/// yields), with one reminder stored and an in-memory channel queue.
pub struct Custom<L, D, P>
where
    L: reminders::ports::Ledger,
    D: DeadLetters,
    P: reminders::ports::Provider,
{
    pub consumer: Arc<Consumer<CustomPorts<L, D, P>>>,
    pub queue: Arc<MemoryQueue<ManualClock>>,
}

impl<L, D, P> Custom<L, D, P>
where
    L: reminders::ports::Ledger,
    D: DeadLetters,
    P: reminders::ports::Provider + Clone,
{
    pub async fn new(
        clock: &ManualClock,
        r: &Reminder,
        ports: (L, D, P),
        cfg: ConsumerConfig,
    ) -> Self {
        let queue = Arc::new(MemoryQueue::new(clock.clone()));
        Self::on_queue(clock, r, ports, cfg, queue).await
    }

    /// On a channel queue the test made (and may hand to its provider).
    pub async fn on_queue(
        clock: &ManualClock,
        r: &Reminder,
        (ledger, dead_letters, provider): (L, D, P),
        cfg: ConsumerConfig,
        queue: Arc<MemoryQueue<ManualClock>>,
    ) -> Self {
        let store = Arc::new(MemoryReminderStore::new(4));
        store.insert(r).await.unwrap();
        let ports = PortSet {
            clock: clock.clone(),
            reminders: store,
            ledger,
            gate: Arc::new(MemoryGate::default()),
            queue: queue.clone(),
            dead_letters,
            providers: PerChannel::from_fn(|_| provider.clone()),
        };
        let consumer = Arc::new(Consumer::new(ports, cfg, queue_urls(), 9));
        Self { consumer, queue }
    }

    pub async fn enqueue(&self, msg: &DeliveryMessage) {
        let entry = OutgoingMessage {
            entry_id: "0".into(),
            body: msg.encode(),
            delay_secs: 0,
        };
        self.queue.send_batch(msg.channel, &[entry]).await.unwrap();
    }

    /// One poll of the event source mapping, which must find a message.
    pub async fn poll(&self, channel: Channel, visibility_secs: u32) -> BatchOutcome {
        self.poll_by(channel, visibility_secs, None).await
    }

    /// One poll by an invocation that must end by `deadline`.
    pub async fn poll_by(
        &self,
        channel: Channel,
        visibility_secs: u32,
        deadline: Option<Timestamp>,
    ) -> BatchOutcome {
        let urls = queue_urls();
        let consumer = &*self.consumer;
        reminders_harness::mapping::Mapping::new(&urls, channel, 10, visibility_secs)
            .poll(consumer, deadline)
            .await
            .unwrap()
            .expect("a message to poll")
    }
}
