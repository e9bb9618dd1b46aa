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

/// Upper bound of one DynamoDB or SQS call, retries included.
pub const STORAGE_OPERATION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

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

/// What a function builds once per cold start.
pub struct ColdStart {
    pub settings: Settings,
    pub adapters: Adapters,
    pub sdk: aws_config::SdkConfig,
}

/// Everything a function does once per cold start: JSON logs, typed configuration (failing
/// with the variable's name), one SDK configuration, the adapters. No network is touched.
pub async fn cold_start(function: &'static str) -> Result<ColdStart, ConfigError> {
    crate::telemetry::init();
    let settings = Settings::from_env()?;
    let sdk = sdk_config().await;
    let adapters = Adapters::new(&sdk, &settings);
    tracing::info!(function, due_shards = settings.due_shards, "cold start");
    Ok(ColdStart {
        settings,
        adapters,
        sdk,
    })
}
