//! Redrive Lambda: replays a bounded, filtered, audited batch from one channel's DLQ back to
//! its queue, with the same delivery keys (the ledger makes a replay send nothing twice).
//! Input is a JSON `RedriveRequest` (see docs/operate.md, "Redrive"), dry run unless `"dry_run":
//! false`; output is the summary by reason. All of it is `reminders::redrive`; this file wires.

use lambda_runtime::{run, service_fn, Diagnostic, Error, LambdaEvent};
use reminders::clock::SystemClock;
use reminders::domain::PerChannel;
use reminders::ports::PortSet;
use reminders::providers::AnyProvider;
use reminders::redrive::{RedriveConfig, RedriveError, RedriveRequest, Redriver};

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
        move |event: LambdaEvent<serde_json::Value>| async move {
            let now = reminders::clock::Clock::now(&SystemClock);
            let deadline = reminders::wiring::invocation_deadline(event.context.deadline, now);
            let request: RedriveRequest =
                serde_path_to_error::deserialize(event.payload).map_err(|e| {
                    diagnostic("InvalidRequest", format!("invalid redrive request: {e}"))
                })?;
            redriver
                .run(&request, deadline)
                .await
                .map_err(|e| diagnostic(error_type(&e), e.to_string()))
        },
    ))
    .await
}

/// The `errorType` an operator reads in the invocation result: what went wrong, in the
/// words of docs/operate.md ("Redrive"), not a Rust type name.
fn error_type(e: &RedriveError) -> &'static str {
    match e {
        RedriveError::Invalid(_) => "InvalidRequest",
        RedriveError::Port(p) if p.is_invariant() => "InvariantBroken",
        RedriveError::Port(_) => "StorageUnavailable",
    }
}

fn diagnostic(error_type: &str, error_message: String) -> Diagnostic {
    Diagnostic {
        error_type: error_type.to_owned(),
        error_message,
    }
}
