//! Redrive Lambda: replays a bounded, filtered, audited batch from one channel's DLQ back to
//! its queue, with the same delivery keys (the ledger makes a replay send nothing twice).
//! Input is a JSON `RedriveRequest` (see the README), dry run unless `"dry_run": false`;
//! output is the summary by reason. All of it is `reminders::redrive`; this file wires.

use lambda_runtime::{run, service_fn, Error, LambdaEvent};
use reminders::clock::SystemClock;
use reminders::domain::PerChannel;
use reminders::ports::PortSet;
use reminders::providers::AnyProvider;
use reminders::redrive::{RedriveConfig, RedriveRequest, RedriveSummary, Redriver};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    let adapters = reminders::wiring::cold_start("redrive").await?.adapters;
    let ports = PortSet {
        clock: SystemClock,
        reminders: adapters.reminders,
        ledger: adapters.ledger,
        gate: adapters.gate,
        queue: adapters.queues,
        dead_letters: adapters.dead_letters,
        // Redrive never sends to a provider.
        providers: PerChannel::from_fn(|_| AnyProvider::<SystemClock>::Disabled),
    };
    let redriver = Redriver::new(ports, RedriveConfig::from_env()?, rand::random());
    let redriver = &redriver;
    run(service_fn(
        move |event: LambdaEvent<RedriveRequest>| async move {
            let now = reminders::clock::Clock::now(&SystemClock);
            let deadline = reminders::wiring::invocation_deadline(event.context.deadline, now);
            Ok::<RedriveSummary, Error>(redriver.run(&event.payload, deadline).await?)
        },
    ))
    .await
}
