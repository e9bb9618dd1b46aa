//! Consumer tests at the handler level: the whole matrix on in-memory ports with a virtual
//! clock ([`memory`]), and the starred cases again on the emulator ([`emulator`]).

mod breaker_probe;
mod countries;
mod emulator;
mod harness;
mod memory;
mod newer_status;
mod outbox_rules;
mod retention;
mod rules;
#[path = "../support/mod.rs"]
mod support;
mod windows;
mod windows4;
