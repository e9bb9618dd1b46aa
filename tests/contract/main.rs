//! Contract tests: one suite per port with an AWS adapter, run against the in-memory
//! implementation and against the adapter on the emulator (moto server, started by
//! `infra/test.sh`), so the two cannot drift.
//!
//! Emulator tests need `AWS_ENDPOINT_URL`; without it they fail, never skip.

mod common;
mod eraser;
mod gate;
mod ledger;
mod queue;
mod reminders;
mod series;
