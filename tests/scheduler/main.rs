//! Scheduler tests: sub-minute precision and partial batch failures on in-memory ports with a
//! virtual clock ([`memory`]); shards, budgets, fairness, idempotence, cancel, edit and stale
//! on the emulator ([`emulator`]).

mod clock;
mod emulator;
mod memory;
mod one_read;
mod poison;
use reminders_test_support as support;
mod where_features_meet;

use std::time::Duration;

use reminders::clock::Timestamp;
use reminders::domain::{
    Channel, Content, NewReminder, Recipient, Reminder, ReminderId, SubscriberId,
};

pub fn reminder(id: &str, subscriber: &str, due_at: Timestamp, channels: &[Channel]) -> Reminder {
    let recipients = channels
        .iter()
        .map(|c| match c {
            Channel::Sms => Recipient::parse(*c, "+14155550123").unwrap(),
            Channel::Email => Recipient::parse(*c, "person@example.com").unwrap(),
            Channel::Push => Recipient::parse(*c, "device-token-1").unwrap(),
        })
        .collect();
    Reminder::new(
        NewReminder {
            reminder_id: ReminderId::parse(id).unwrap(),
            subscriber_id: SubscriberId::parse(subscriber).unwrap(),
            due_at,
            fresh_until: Some(due_at.plus(Duration::from_secs(3 * 3600))),
            content: Content::Text {
                subject: "Reminder".into(),
                body: "Something is due".into(),
            },
            recipients,
        },
        Duration::from_secs(3600),
        Duration::from_secs(86_400),
    )
    .unwrap()
}
