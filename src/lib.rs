//! # reminders — reminder delivery on AWS
//!
//! Deliver each reminder over push, email and SMS **at most once per logical delivery, close to
//! its due time, never after it went stale**, and explain every failure. The design is
//! `shared/DESIGN.md`; this crate is the library every function, the CLI and the embedded
//! simulation share. Decisions live here; the function crates only translate events.
//!
//! ## Layout
//!
//! | module | owns |
//! |---|---|
//! | [`domain`] | identities, recipients, the delivery key, reminders, queue messages, dead reasons |
//! | [`clock`] | epoch-millisecond [`clock::Timestamp`] and the `Clock` port |
//! | [`policy`] | outcome classes, the versioned retry policy, `decide`, Retry-After parsing |
//! | [`delivery`] | the ledger state machine and its claim / outcome / cancel operations |
//! | [`deadletter`] | the DLQ evidence format |
//! | [`local`] | the local pipeline runner: schedule and event source mappings, played |
//! | [`outbox`] | create, edit and cancel reminders (what applications call) |
//! | [`redrive`] | bounded, filtered, audited replay of a channel's DLQ |
//! | [`scheduler`] | the scheduler run: due scan, fair fan-out, enqueue and mark |
//! | [`ports`] | the port traits, each with its in-memory implementation and fault injection |
//! | [`aws`] | the DynamoDB and SQS adapters, typed configuration, resource bootstrap |
//! | [`consumer`] | the consumer pipeline: SQS batch in, partial batch response out |
//! | [`providers`] | real providers (generic HTTP), chosen per channel by configuration |
//! | [`sim`] | the embedded pipeline: real scheduler and consumer, virtual clock, simulated provider |
//! | [`telemetry`] | JSON log setup for the binaries |
//!
//! Pure code (`domain`, `policy`, `delivery::state`) takes time and randomness as parameters.
//! The ports are generic traits (`async fn` returning `Send` futures), so the same pipeline runs
//! on AWS, on an emulator and in memory.

pub mod aws;
pub mod clock;
pub mod consumer;
pub mod deadletter;
pub mod delivery;
pub mod domain;
pub mod local;
pub mod outbox;
pub mod policy;
pub mod ports;
pub mod providers;
pub mod redrive;
pub mod scheduler;
pub mod sim;
pub mod telemetry;
