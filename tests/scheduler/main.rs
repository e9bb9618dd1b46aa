//! Scheduler tests: sub-minute precision and partial batch failures on in-memory ports with a
//! virtual clock ([`memory`]); shards, budgets, fairness, idempotence, cancel, edit and stale
//! on the emulator ([`emulator`]).

mod clock;
mod emulator;
mod memory;
mod one_read;
mod poison;
use reminders_test_support as support;
use reminders_test_support::a_reminder;
mod where_features_meet;

use std::time::Duration;

use reminders::clock::Timestamp;
use reminders::domain::{Channel, Reminder};

pub fn reminder(id: &str, subscriber: &str, due_at: Timestamp, channels: &[Channel]) -> Reminder {
    a_reminder(id, due_at)
        .of(subscriber)
        .to(channels)
        .fresh_for(Duration::from_secs(3 * 3600))
        .build()
}
