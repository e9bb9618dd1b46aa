//! Consumer Lambda: SQS trigger with partial batch responses. Claims each delivery in the
//! ledger, sends it with its delivery key as idempotency key, records the outcome, and backs
//! off through the message's visibility. All of it is `reminders::consumer`; this file wires.
//!
//! The event source mapping must enable `ReportBatchItemFailures`: without it a single failed
//! record makes SQS redeliver the whole batch.

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use lambda_runtime::{run, service_fn, Error, LambdaEvent};
use reminders::clock::SystemClock;
use reminders::consumer::{Consumer, ConsumerConfig};
use reminders::ports::PortSet;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    let start = reminders::wiring::cold_start("consumer").await?;
    let (settings, adapters) = (start.settings, start.adapters);
    let cfg = ConsumerConfig::from_env()?;
    let providers = reminders::providers::from_lookup(
        reminders::config::env,
        SystemClock,
        cfg.provider_timeout,
        &start.sdk,
    )?;
    let ports = PortSet {
        clock: SystemClock,
        reminders: adapters.reminders,
        ledger: adapters.ledger,
        gate: adapters.gate,
        queue: adapters.queues,
        dead_letters: adapters.dead_letters,
        providers,
    };
    // Required on Lambda; the secret itself is read on first use.
    let suppression_key =
        reminders::providers::secret::suppression_key(reminders::config::env, &start.sdk)?;
    let consumer = Consumer::new(ports, cfg, settings.queue_urls, rand::random())
        .with_metrics_namespace(settings.metrics_namespace)
        .with_suppression_key(suppression_key);
    let consumer = &consumer;
    run(service_fn(move |event: LambdaEvent<SqsEvent>| async move {
        let now = reminders::clock::Clock::now(&SystemClock);
        let deadline = reminders::wiring::invocation_deadline(event.context.deadline, now);
        let outcome = consumer.handle(event.payload, deadline).await;
        Ok::<SqsBatchResponse, Error>(outcome.response)
    }))
    .await
}
