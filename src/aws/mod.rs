//! AWS adapters, apart from the domain: DynamoDB ([`dynamo`]) and SQS ([`sqs`]), typed
//! configuration read once at cold start ([`config`]), and creation of the same tables and
//! queues the template declares ([`bootstrap`], for emulators and tests).
//!
//! Endpoints come only from the standard AWS configuration chain (`AWS_ENDPOINT_URL`,
//! profiles, …): the same binary runs on AWS, LocalStack and moto.

pub mod bootstrap;
pub mod config;
pub mod dynamo;
pub(crate) mod error;
pub mod sqs;

pub use bootstrap::sdk_config;
pub use config::{ConfigError, Settings};
pub use sqs::{ChannelUrls, SqsDeadLetters, SqsQueues};

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
        let dynamo = aws_sdk_dynamodb::Client::new(sdk);
        let sqs = aws_sdk_sqs::Client::new(sdk);
        Self {
            reminders: dynamo::DynamoReminderStore::new(
                dynamo.clone(),
                &settings.reminders_table,
                settings.due_shards,
            ),
            ledger: dynamo::DynamoLedger::new(dynamo.clone(), &settings.deliveries_table),
            gate: dynamo::DynamoGate::new(dynamo, &settings.deliveries_table),
            queues: SqsQueues::new(sqs.clone(), settings.queue_urls.clone()),
            dead_letters: SqsDeadLetters::new(sqs, settings.dlq_urls.clone()),
        }
    }
}

/// Everything a function does once per cold start: JSON logs, typed configuration (failing
/// with the variable's name), one SDK configuration, the adapters. No network is touched.
pub async fn cold_start(function: &'static str) -> Result<(Settings, Adapters), ConfigError> {
    crate::telemetry::init();
    let settings = Settings::from_env()?;
    let sdk = sdk_config().await;
    let adapters = Adapters::new(&sdk, &settings);
    tracing::info!(function, due_shards = settings.due_shards, "cold start");
    Ok((settings, adapters))
}
