//! Provider adapters against real peers on loopback: the HTTP provider against a local test
//! server that answers each status class, hangs, or drops the connection; SES and SNS against
//! the emulator.

mod aws;
mod http;
mod secret;
use reminders_test_support::server;
mod world;
