//! Consumer tests at the handler level: the whole matrix on in-memory ports with a virtual
//! clock ([`memory`]), and the starred cases again on the emulator ([`emulator`]).

mod before_claim;
mod breaker_probe;
mod chains;
mod chains_handing_on;
mod claims;
mod clock;
mod countries;
mod direct;
mod emulator;
mod emulator_reads;
mod give_back;
mod harness;
mod memory;
mod newer_status;
mod retention;
mod rules;
mod write_rules;
use reminders_test_support as support;
mod where_features_meet;
mod windows;
