//! AWS adapters, apart from the domain: DynamoDB ([`dynamo`]) and SQS ([`sqs`]), EventBridge
//! ([`eventbridge`]) and the ledger's stream ([`streams`], read by the local player), where the
//! resources are ([`config`], read once at cold start), and creation of the same tables and
//! queues the template declares ([`bootstrap`], for emulators and tests). This module depends
//! on the ports it implements and on [`crate::config`]; no pipeline depends on it.
//!
//! Endpoints come only from the standard AWS configuration chain (`AWS_ENDPOINT_URL`,
//! profiles, …): the same binary runs on AWS, LocalStack and moto.

pub mod bootstrap;
pub mod config;
pub mod dynamo;
pub(crate) mod error;
pub mod eventbridge;
pub mod sqs;
pub mod streams;

pub use bootstrap::sdk_config;
pub use config::Settings;
pub use sqs::{ChannelUrls, FeedbackDeadLetters, SqsDeadLetters, SqsQueues};

use crate::ports::STORAGE_OPERATION_TIMEOUT;

/// The AWS adapters a function needs, built once per cold start from one SDK configuration.
/// Building touches no network: credentials resolve lazily on the first call.
#[derive(Debug, Clone)]
pub struct Adapters {
    pub reminders: dynamo::DynamoReminderStore,
    pub ledger: dynamo::DynamoLedger,
    pub gate: dynamo::DynamoGate,
    pub queues: SqsQueues,
    pub dead_letters: SqsDeadLetters,
}

impl Adapters {
    pub fn new(sdk: &aws_config::SdkConfig, settings: &Settings) -> Self {
        // Bounded calls: a record can never outlive its lease waiting on storage (the lease
        // is checked at cold start to exceed the provider timeout plus this).
        let timeouts = aws_config::timeout::TimeoutConfig::builder()
            .operation_timeout(STORAGE_OPERATION_TIMEOUT)
            .operation_attempt_timeout(STORAGE_OPERATION_TIMEOUT / 2)
            .build();
        let bounded = sdk.to_builder().timeout_config(timeouts).build();
        let dynamo = aws_sdk_dynamodb::Client::new(&bounded);
        let sqs = aws_sdk_sqs::Client::new(&bounded);
        Self {
            reminders: dynamo::DynamoReminderStore::new(
                dynamo.clone(),
                &settings.reminders_table,
                settings.due_shards,
            ),
            ledger: dynamo::DynamoLedger::new(dynamo.clone(), &settings.deliveries_table),
            gate: dynamo::DynamoGate::new(dynamo, &settings.deliveries_table),
            queues: SqsQueues::new(sqs.clone(), settings.queue_urls.clone()),
            // Long polls on the DLQs: a short poll samples a subset of SQS's servers and can
            // look empty when it is not.
            dead_letters: SqsDeadLetters::new(sqs, settings.dlq_urls.clone()).with_long_poll(1),
        }
    }
}
