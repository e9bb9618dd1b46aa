//! # reminders-test-support — what the test suites share
//!
//! One crate every suite depends on (a dev-dependency: no function links it):
//!
//! | item | what |
//! |---|---|
//! | [`AwsWorld`] (this file) | an emulator world: fresh tables and channel queues, the reminders table, ledger and DLQs wrapped in a fault plan, a scripted provider, an event-source-mapping stand-in |
//! | [`build`] | reminders for tests: [`a_reminder`]`(id, due_at)` with the suites' usual values, each changed by name |
//! | [`edit_before_mark`] | a hook on a reminders store by which an application's edit lands between a writer's read and its mark |
//! | [`server`] | a local HTTP server that answers as scripted and records each request (the HTTP provider's remote) |
//! | [`runtime_api`] | a Lambda Runtime API stub: each function's bootstrap run for real, its AWS calls read from its logs |
//! | [`suppression_key`] | a suppression key secret on the emulator |

pub mod build;
pub mod edit_before_mark;
pub mod runtime_api;
pub mod server;
pub mod suppression_key;

use std::sync::Arc;
use std::time::Duration;

use reminders::aws::bootstrap::{
    create_channel_queues, create_deliveries_table, create_reminders_table,
    create_reminders_table_without_recipients_index, QueueSpec,
};
use reminders::aws::dynamo::{DynamoGate, DynamoLedger, DynamoReminderStore};
use reminders::aws::{ChannelUrls, SqsDeadLetters, SqsQueues};
use reminders::clock::{Clock, SystemClock, Timestamp};
use reminders::consumer::{Consumer, ConsumerConfig};
use reminders::domain::{Channel, PerChannel, Reminder};
use reminders::ports::PortSet;
use reminders_harness::around::{Around, Faults, Faulty};
use reminders_harness::ScriptedProvider;

pub use build::{a_reminder, address, ReminderSpec};

pub type AwsPorts = PortSet<
    SystemClock,
    Faulty<DynamoReminderStore>,
    Faulty<DynamoLedger>,
    DynamoGate,
    SqsQueues,
    Faulty<SqsDeadLetters>,
    Arc<ScriptedProvider<SystemClock>>,
>;

pub struct AwsWorld {
    pub ports: AwsPorts,
    pub provider: Arc<ScriptedProvider<SystemClock>>,
    /// Shared by the reminder store, ledger and DLQ wrappers (op names tell them apart).
    pub faults: Faults,
    pub queues: ChannelUrls,
    pub dlqs: ChannelUrls,
    pub dynamo: aws_sdk_dynamodb::Client,
    pub reminders_table: String,
    pub deliveries_table: String,
}

pub fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{prefix}-{}-{nanos}", std::process::id())
}

pub fn now() -> Timestamp {
    SystemClock.now()
}

impl AwsWorld {
    pub async fn new(spec: QueueSpec) -> Self {
        Self::build(spec, true).await
    }

    /// With the reminders table as stacks deployed before `due-recipients-index` have it.
    pub async fn without_recipients_index(spec: QueueSpec) -> Self {
        Self::build(spec, false).await
    }

    async fn build(spec: QueueSpec, recipients_index: bool) -> Self {
        std::env::var("AWS_ENDPOINT_URL")
            .expect("AWS_ENDPOINT_URL is not set: run the emulator tests through infra/test.sh");
        let sdk = reminders::aws::sdk_config().await;
        let dynamo = aws_sdk_dynamodb::Client::new(&sdk);
        let sqs = aws_sdk_sqs::Client::new(&sdk);
        let (rem, del) = (unique("rem"), unique("del"));
        match recipients_index {
            true => create_reminders_table(&dynamo, &rem).await.unwrap(),
            false => create_reminders_table_without_recipients_index(&dynamo, &rem)
                .await
                .unwrap(),
        }
        create_deliveries_table(&dynamo, &del).await.unwrap();
        let (queues, dlqs) = create_channel_queues(&sqs, &unique("w"), spec)
            .await
            .unwrap();
        let provider = Arc::new(ScriptedProvider::new(SystemClock, true));
        let faults = Faults::default();
        let wrap = |inner| Around::new(inner, faults.clone());
        let ports = PortSet {
            clock: SystemClock,
            reminders: Around::new(
                DynamoReminderStore::new(dynamo.clone(), &rem, 4),
                faults.clone(),
            ),
            ledger: wrap(DynamoLedger::new(dynamo.clone(), &del)),
            gate: DynamoGate::new(dynamo.clone(), &del),
            queue: SqsQueues::new(sqs.clone(), queues.clone()),
            dead_letters: Around::new(SqsDeadLetters::new(sqs, dlqs.clone()), faults.clone()),
            providers: PerChannel::from_fn(|_| provider.clone()),
        };
        Self {
            ports,
            provider,
            faults,
            queues,
            dlqs,
            dynamo,
            reminders_table: rem,
            deliveries_table: del,
        }
    }

    pub fn consumer(&self) -> Consumer<AwsPorts> {
        let cfg = ConsumerConfig {
            emit_metrics: false,
            ..ConsumerConfig::default()
        };
        Consumer::new(self.ports.clone(), cfg, self.queues.clone(), 11)
    }

    /// Play the event source mapping on one channel until its queue stays empty.
    pub async fn consume(&self, consumer: &Consumer<AwsPorts>, channel: Channel) {
        for _ in 0..100 {
            let polled = reminders_harness::mapping::Mapping::new(&self.queues, channel, 10, 30)
                .poll(consumer, None)
                .await
                .unwrap();
            if polled.is_none() {
                return;
            }
        }
        panic!("queue did not drain");
    }
}

/// A reminder due a minute ago, fresh for an hour.
pub fn reminder(id: &str, channel: Channel) -> Reminder {
    let due_at = now().minus(Duration::from_secs(60));
    a_reminder(id, due_at)
        .to(&[channel])
        .fresh_for(Duration::from_secs(3600))
        .build()
}
