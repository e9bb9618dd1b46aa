//! The consumer on in-memory ports with real providers chosen by configuration: the world both
//! end-to-end provider tests run in.

use std::collections::HashMap;
use std::time::Duration;

use reminders::clock::Timestamp;
use reminders::consumer::{BatchOutcome, Consumer, ConsumerConfig};
use reminders::domain::{Channel, DeliveryKey, DeliveryMessage, PerChannel, Reminder};
use reminders::ledger::DeliveryRecord;
use reminders::ports::{DeliveryQueue, Ledger, OutgoingMessage, ReminderStore};
use reminders::providers::{from_lookup, AnyProvider};
use reminders_harness::stack::{MemoryPorts, MemoryStack};
use reminders_harness::ManualClock;

type Ports = MemoryPorts<ManualClock, AnyProvider<ManualClock>>;

pub struct World {
    pub clock: ManualClock,
    pub consumer: Consumer<Ports>,
    urls: PerChannel<String>,
}

impl World {
    /// Providers from `env` alone, as the consumer Lambda builds them.
    pub fn from_env(env: &[(&str, &str)], now: Timestamp, sdk: &aws_config::SdkConfig) -> Self {
        let env: HashMap<String, String> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let clock = ManualClock::at(now);
        let providers = from_lookup(
            |k| env.get(k).cloned(),
            clock.clone(),
            Duration::from_secs(5),
            sdk,
        )
        .unwrap();
        let ports = MemoryStack::on(clock.clone())
            .with_shards(2)
            .ports_with(providers);
        let cfg = ConsumerConfig {
            emit_metrics: false,
            ..ConsumerConfig::default()
        };
        let urls = PerChannel::from_fn(|c| format!("http://127.0.0.1/000000000000/q-{c}"));
        Self {
            clock,
            consumer: Consumer::new(ports, cfg, urls.clone(), 1),
            urls,
        }
    }

    /// Store the reminder and enqueue its message for `channel`.
    pub async fn enqueue(&self, r: &Reminder, channel: Channel) -> DeliveryMessage {
        let ports = self.consumer.ports();
        let _ = ports.reminders.insert(r).await.unwrap();
        let msg = DeliveryMessage::new(
            r.reminder_id.clone(),
            r.subscriber_id.clone(),
            channel,
            r.payload_version,
            r.due_at,
            r.fresh_until,
        );
        let entry = OutgoingMessage {
            entry_id: "0".into(),
            body: msg.encode(),
            delay_secs: 0,
        };
        ports.queue.send_batch(channel, &[entry]).await.unwrap();
        msg
    }

    /// One event source mapping poll of the channel.
    pub async fn poll(&self, channel: Channel) -> Option<BatchOutcome> {
        reminders_harness::mapping::Mapping::new(&self.urls, channel, 10, 180)
            .poll(&self.consumer, None)
            .await
            .unwrap()
    }

    pub async fn record(&self, key: &DeliveryKey) -> DeliveryRecord {
        self.consumer
            .ports()
            .ledger
            .get(key)
            .await
            .unwrap()
            .unwrap()
    }
}
