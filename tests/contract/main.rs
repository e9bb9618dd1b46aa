//! Contract tests: one suite per port with an AWS adapter, run against the in-memory
//! implementation and against the adapter on the emulator (moto server, started by
//! `infra/test.sh`), so the two cannot drift.
//!
//! The emulator tests run with the `emulator` feature (infra/test.sh turns it on; without it
//! they are listed as ignored); with it they need `AWS_ENDPOINT_URL`, and fail without it,
//! never skip.

mod common;
mod eraser;
mod gate;
mod ledger;
mod queue;
mod reminders;
mod series;
