//! Scheduler Lambda (EventBridge Scheduler, rate 1 minute): finds due reminders and fans them
//! out, one SQS message per delivery, with DelaySeconds for sub-minute precision. All of it is
//! `reminders::scheduler`; this file wires. The schedule passes its input as raw JSON with no
//! envelope: `{"share": i, "shares": n}` names the share of the due index this schedule owns
//! (one of `SchedulerParallelism`); any other JSON runs over the whole index.

use lambda_runtime::{run, service_fn, Error, LambdaEvent};
use reminders::clock::SystemClock;
use reminders::domain::PerChannel;
use reminders::ports::PortSet;
use reminders::providers::AnyProvider;
use reminders::scheduler::{RunReport, Scheduler, SchedulerConfig, Share};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    let start = reminders::wiring::cold_start("scheduler").await?;
    let (adapters, namespace) = (start.adapters, start.settings.metrics_namespace.clone());
    let namespace = namespace.as_str();
    let cfg = SchedulerConfig::from_env()?;
    let ports = PortSet {
        clock: SystemClock,
        reminders: adapters.reminders,
        ledger: adapters.ledger,
        gate: adapters.gate,
        queue: adapters.queues,
        dead_letters: adapters.dead_letters,
        // The scheduler never sends to a provider.
        providers: PerChannel::from_fn(|_| AnyProvider::<SystemClock>::Disabled),
    };
    let retention = reminders::domain::Retention::from_env()?;
    // Hashes a sole channel's address for the consumer's one read; read on first use.
    let suppression_key =
        reminders::providers::secret::suppression_key(reminders::config::env, &start.sdk)?;
    let scheduler = Scheduler::new(ports, cfg).with_suppression_key(suppression_key);
    let scheduler = &scheduler;
    run(service_fn(
        move |event: LambdaEvent<serde_json::Value>| async move {
            let now = reminders::clock::Clock::now(&SystemClock);
            let deadline = reminders::wiring::invocation_deadline(event.context.deadline, now);
            let share = Share::from_event(&event.payload)?;
            let report = scheduler.run_share(deadline, share).await?;
            if share.index == 0 {
                // Recurring series (docs/design.md, "Recurring series"): the first share, after its
                // scan (which no backlog of occurrences delays), makes those due within the
                // make-ahead: the next runs enqueue them on time.
                let p = scheduler.ports();
                let at = reminders::clock::Clock::now(&SystemClock);
                let made =
                    reminders::series::make_due(&p.reminders, &p.ledger, at, retention).await;
                tracing::info!(
                    series = made.series,
                    made = made.made,
                    existed = made.existed,
                    raced = made.raced,
                    failed = made.failed,
                    "series made"
                );
            }

            // EMF must be a bare JSON line on stdout: the heartbeat, backlog, failing shards,
            // quarantined items and early stops alarm on it.
            let at = reminders::clock::Clock::now(&SystemClock);
            println!("{}", report.emf(at, namespace));
            Ok::<RunReport, Error>(report)
        },
    ))
    .await
}
