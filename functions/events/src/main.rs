//! Events Lambda: the ledger's DynamoDB stream in, one EventBridge event per settled
//! delivery out (`PutEvents` to `EVENT_BUS_NAME`), and a partial batch response naming the
//! first failed record and every one after it. The event source mapping must enable
//! `ReportBatchItemFailures` (else one failure retries the whole batch), and bound the
//! retries with `MaximumRetryAttempts`, `BisectBatchOnFunctionError` and an on-failure
//! destination, so a bad record cannot hold its shard forever. All of it is
//! `reminders::events`; this file wires.

use aws_lambda_events::event::dynamodb::Event;
use aws_lambda_events::event::streams::DynamoDbEventResponse;
use lambda_runtime::{run, service_fn, Error, LambdaEvent};
use reminders::aws::eventbridge::EventBridgeBus;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    // The shared settings (tables, queues) are read like every function's, so a missing
    // variable fails the cold start the same way; this function uses only the bus.
    let sdk = reminders::wiring::cold_start("events").await?.sdk;
    let client = aws_sdk_eventbridge::Client::new(&sdk);
    let bus = EventBridgeBus::from_lookup(client, reminders::config::env)?;
    let bus = &bus;
    run(service_fn(move |event: LambdaEvent<Event>| async move {
        let handled = reminders::events::handle(bus, &event.payload.records).await;
        tracing::info!(
            records = event.payload.records.len(),
            published = handled.published,
            failed = handled.response.batch_item_failures.len(),
            // Items a newer writer wrote: published with the values this version did not
            // know, or failed (retried, then the events DLQ) when not readable at all.
            newer = handled.newer,
            unreadable = handled.unreadable,
            "stream batch"
        );
        Ok::<DynamoDbEventResponse, Error>(handled.response)
    }))
    .await
}
