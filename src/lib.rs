//! # reminders — reminder delivery on AWS
//!
//! Deliver each reminder over push, email and SMS **at most once per logical delivery, close to
//! its due time, never after it went stale**, and explain every failure. The design is
//! `docs/design.md`. The decisions live in `reminders-core` (re-exported here, so
//! `reminders::domain` is `reminders_core::domain`), which knows no AWS SDK; this crate adds
//! what runs them on AWS, and every function and the CLI's AWS commands link it. The test harness (the system
//! checker, the embedded pipeline, the local runner) is `reminders-harness`, which no function
//! links.
//!
//! | module | owns |
//! |---|---|
//! | [`aws`] | the DynamoDB, SQS, EventBridge and DynamoDB Streams adapters of the core's ports, resource settings, resource bootstrap |
//! | [`providers`] | real providers (SES v2, SNS, generic HTTP), chosen per channel by configuration; secrets read from Secrets Manager |
//! | [`wiring`] | the top: which variables each function reads, and the shared cold start |
//!
//! [`aws`] imports no pipeline: the pipelines are generic over the ports it implements.

pub use reminders_core::{
    clock, config, consumer, deadletter, delivery, domain, erasure, events, feedback, ledger,
    listing, policy, ports, redrive, reminder_writes, scheduler, series, sync, telemetry,
};

pub mod aws;
pub mod providers;
pub mod wiring;
