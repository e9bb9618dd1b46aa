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
