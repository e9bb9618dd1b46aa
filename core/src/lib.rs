//! # reminders-core — reminder delivery, without the cloud
//!
//! Deliver each reminder over push, email and SMS **at most once per logical delivery, close to
//! its due time, never after it went stale**, and explain every failure. The design is
//! `docs/design.md`. This crate holds every decision: the vocabulary, the policy, the ledger,
//! the ports (with their plain in-memory forms) and the pipelines over them. It depends on no
//! AWS SDK: the adapters that implement its ports on DynamoDB, SQS, EventBridge and the
//! providers are the `reminders` crate, which re-exports this one. The test harness is
//! `reminders-harness`, which no function links.
//!
//! ## Layout
//!
//! Configuration and the vocabulary sit at the bottom, the state machine and the ports (which
//! speak the ledger's record type) above them, and the pipelines over the ports.
//!
//! | module | owns |
//! |---|---|
//! | [`config`] | the bottom floor: `ConfigError`, the variable lookup, the shared parsers |
//! | [`clock`] | epoch-millisecond [`clock::Timestamp`] and the `Clock` port |
//! | [`domain`] | identities, recipients, the delivery key, reminders, retention, queue messages, dead reasons |
//! | [`policy`] | outcome classes, the versioned retry policy, `decide` and the ambiguous rule, Retry-After parsing |
//! | [`ledger`] | the ledger's record and its state machine (pure: every write is a change applied to the item read) |
//! | [`delivery`] | the ledger's claim / outcome / cancel operations over the ledger port |
//! | [`deadletter`] | the DLQ evidence format |
//! | [`ports`] | the port traits, each with its in-memory implementation (no fault code: the harness wraps ports in fault plans) |
//! | [`sync`] | the lock the in-memory ports keep their state under |
//! | `packed` | the compact byte form the in-memory ledger and reminders table keep their items in |
//! | [`reminder_writes`] | create, edit and cancel reminders (what applications call) |
//! | [`listing`] | a subscriber's series and reminders as one caller sees them, a page at a time, behind sealed cursors |
//! | [`erasure`] | erase a subscriber: cancel, then delete their reminders, preferences and suppressions |
//! | [`series`] | recurring series: occurrences made ahead, a series' edit and cancel |
//! | [`scheduler`] | the scheduler run: due scan, fair fan-out, enqueue and mark |
//! | [`consumer`] | the consumer: SQS batch in, partial batch response out; one record's pipeline in steps (`intake` → `claim` → send → `settle`) |
//! | [`events`] | outcome events: which ledger writes settle a delivery, the stream handler that publishes them, the local stream player |
//! | [`redrive`] | bounded, filtered, audited replay of a channel's DLQ |
//! | [`feedback`] | SES bounces and complaints in, suppressions out |
//! | [`telemetry`] | JSON log setup for the binaries (`RUST_LOG`; the AWS SDK's calls as one line each, by their tracing target) |
//!
//! Pure code (`domain`, `policy`, `ledger`) takes time and randomness as parameters.
//! The ports are generic traits (`async fn` returning `Send` futures), so the same pipeline runs
//! on AWS, on an emulator and in memory. That no pipeline imports an AWS adapter is a boundary
//! the compiler keeps: this crate cannot name one.

pub mod clock;
pub mod config;
pub mod consumer;
pub mod deadletter;
pub mod delivery;
pub mod domain;
pub mod erasure;
pub mod events;
pub mod feedback;
pub mod ledger;
pub mod listing;
mod packed;
pub mod policy;
pub mod ports;
pub mod redrive;
pub mod reminder_writes;
pub mod scheduler;
pub mod series;
pub mod sync;
pub mod telemetry;
