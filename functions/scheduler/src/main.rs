//! Scheduler Lambda: every minute, finds due reminders and fans them out, one SQS message per delivery.
//!
//! `main` wires everything once per cold start — tracing, typed configuration (failing fast
//! with the variable's name), one SDK configuration, the adapters — and hands them by reference
//! to the handler. Endpoints come from the standard AWS chain only (`AWS_ENDPOINT_URL`).

use lambda_runtime::{run, service_fn, Error, LambdaEvent};
use reminders::aws::Adapters;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    let (_settings, adapters) = reminders::aws::cold_start("scheduler").await?;
    run(service_fn(|event: LambdaEvent<serde_json::Value>| {
        handle(&adapters, event)
    }))
    .await
}

/// The handler lands with its own issue; until then an invocation fails loudly rather than
/// pretending to have done the work.
async fn handle(
    _adapters: &Adapters,
    event: LambdaEvent<serde_json::Value>,
) -> Result<serde_json::Value, Error> {
    tracing::error!(request_id = %event.context.request_id, "scheduler handler is not implemented yet");
    Err("scheduler handler is not implemented yet".into())
}
