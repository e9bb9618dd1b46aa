//! CPU cost of the consumer's per-record pipeline on in-memory ports (docs/design.md, "Budgets":
//! microseconds, not milliseconds), and of the pure decision functions.
//! `cargo bench --bench pipeline`.

use std::sync::Arc;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use rand::rngs::StdRng;
use rand::SeedableRng;
use reminders::clock::Timestamp;
use reminders::consumer::{Consumer, ConsumerConfig};
use reminders::domain::{
    Channel, Content, DeliveryKey, DeliveryMessage, NewReminder, PerChannel, Recipient, Reminder,
    ReminderId, SubscriberId,
};
use reminders::policy::{decide, Outcome, RetryPolicy, Spent};
use reminders::ports::{DeliveryQueue, ReminderStore};
use reminders_harness::mapping::Mapping;
use reminders_harness::stack::{MemoryPorts, MemoryStack};
use reminders_harness::ManualClock;
use reminders_harness::ScriptedProvider;

const T0: Timestamp = Timestamp::from_millis(1_800_000_000_000);

type Ports = MemoryPorts<ManualClock, Arc<ScriptedProvider<ManualClock>>>;

/// A consumer and one batch of ten fresh deliveries, ready to handle.
fn setup(
    rt: &tokio::runtime::Runtime,
) -> (Consumer<Ports>, aws_lambda_events::event::sqs::SqsEvent) {
    rt.block_on(async {
        let stack = MemoryStack::on(ManualClock::at(T0));
        let provider = Arc::new(ScriptedProvider::new(stack.clock.clone(), true));
        let ports = stack.ports(provider);
        let MemoryStack { store, queue, .. } = stack;
        let urls = PerChannel::from_fn(|c| format!("http://q/000000000000/q-{c}"));
        let cfg = ConsumerConfig {
            emit_metrics: false,
            ..ConsumerConfig::default()
        };
        for i in 0..10 {
            let r = Reminder::new(
                NewReminder {
                    reminder_id: ReminderId::parse(format!("r{i}")).unwrap(),
                    subscriber_id: SubscriberId::parse("s").unwrap(),
                    due_at: T0,
                    fresh_until: None,
                    content: Content::Text {
                        subject: "Pickup".into(),
                        body: "at 5pm".into(),
                    },
                    recipients: vec![Recipient::parse(Channel::Sms, "+14155550123").unwrap()],
                },
                Duration::from_secs(3600),
                Duration::from_secs(3600),
            )
            .unwrap();
            store.insert(&r).await.unwrap();
            let msg = DeliveryMessage::new(
                r.reminder_id,
                r.subscriber_id,
                Channel::Sms,
                1,
                T0,
                r.fresh_until,
            );
            let entry = reminders::ports::OutgoingMessage {
                entry_id: "0".into(),
                body: msg.encode(),
                delay_secs: 0,
            };
            queue.send_batch(Channel::Sms, &[entry]).await.unwrap();
        }
        let mapping = Mapping::new(&urls, Channel::Sms, 10, 180);
        let event = mapping
            .receive(&queue)
            .await
            .unwrap()
            .expect("a batch")
            .event;
        (Consumer::new(ports, cfg, urls, 1), event)
    })
}

fn consumer_batch(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut g = c.benchmark_group("consumer");
    g.throughput(Throughput::Elements(10));
    g.bench_function("batch_of_10_delivered", |b| {
        b.iter_batched(
            || setup(&rt),
            |(consumer, event)| rt.block_on(consumer.handle(event, None)),
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

fn pure(c: &mut Criterion) {
    let r = ReminderId::parse("order-42").unwrap();
    let s = SubscriberId::parse("user-7").unwrap();
    c.bench_function("delivery_key_derive", |b| {
        b.iter(|| DeliveryKey::derive(&r, &s, Channel::Sms))
    });
    let msg = DeliveryMessage::new(r.clone(), s.clone(), Channel::Sms, 3, T0, T0);
    let body = msg.encode();
    c.bench_function("message_decode", |b| {
        b.iter(|| DeliveryMessage::decode(&body))
    });
    let policy = RetryPolicy::default();
    let mut rng = StdRng::seed_from_u64(1);
    let outcome = Outcome::Transient {
        error: "http_503".into(),
    };
    c.bench_function("policy_decide", |b| {
        b.iter(|| {
            decide(
                &policy,
                Spent::default(),
                &outcome,
                true,
                T0.plus(Duration::from_secs(3600)),
                T0,
                &mut rng,
            )
        })
    });
}

criterion_group!(benches, consumer_batch, pure);
criterion_main!(benches);
