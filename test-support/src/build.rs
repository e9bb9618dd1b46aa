//! Reminders for tests: one builder with the suites' usual values, each changed by name, so a
//! test says only what matters to it.

use std::time::Duration;

use reminders::clock::Timestamp;
use reminders::domain::{
    Channel, Content, NewReminder, Recipient, Reminder, ReminderId, SubscriberId,
};

/// A reminder being described ([`a_reminder`]); [`ReminderSpec::build`] makes it as an
/// application's create would (`Reminder::new`).
#[derive(Debug, Clone)]
pub struct ReminderSpec {
    id: String,
    subscriber: String,
    due_at: Timestamp,
    fresh_until: Option<Timestamp>,
    subject: String,
    body: String,
    recipients: Vec<Recipient>,
    default_freshness: Duration,
    retention: Duration,
}

/// Reminder `id`, due at `due_at`, for `sub-1`: the text "Reminder" / "Something is due", no
/// recipient yet, fresh for the default hour, its item kept a day past its freshness.
pub fn a_reminder(id: impl Into<String>, due_at: Timestamp) -> ReminderSpec {
    ReminderSpec {
        id: id.into(),
        subscriber: "sub-1".into(),
        due_at,
        fresh_until: None,
        subject: "Reminder".into(),
        body: "Something is due".into(),
        recipients: Vec::new(),
        default_freshness: Duration::from_secs(3600),
        retention: Duration::from_secs(86_400),
    }
}

/// The address the suites send `channel` to.
pub fn address(channel: Channel) -> Recipient {
    let raw = match channel {
        Channel::Sms => "+14155550123",
        Channel::Email => "person@example.com",
        Channel::Push => "device-token-1",
    };
    Recipient::parse(channel, raw).unwrap()
}

impl ReminderSpec {
    /// For `subscriber`.
    pub fn of(mut self, subscriber: impl Into<String>) -> Self {
        self.subscriber = subscriber.into();
        self
    }

    /// To each of `channels`, at its usual [`address`].
    pub fn to(mut self, channels: &[Channel]) -> Self {
        self.recipients.extend(channels.iter().map(|&c| address(c)));
        self
    }

    /// To `channel` at `raw`.
    pub fn to_address(mut self, channel: Channel, raw: &str) -> Self {
        self.recipients
            .push(Recipient::parse(channel, raw).unwrap());
        self
    }

    /// Fresh until `d` after it is due (the application says so).
    pub fn fresh_for(mut self, d: Duration) -> Self {
        self.fresh_until = Some(self.due_at.plus(d));
        self
    }

    /// Fresh for `d` when the application does not say (the deployment's default).
    pub fn default_freshness(mut self, d: Duration) -> Self {
        self.default_freshness = d;
        self
    }

    /// With this subject and body.
    pub fn text(mut self, subject: &str, body: &str) -> Self {
        self.subject = subject.into();
        self.body = body.into();
        self
    }

    pub fn build(self) -> Reminder {
        Reminder::new(
            NewReminder {
                reminder_id: ReminderId::parse(self.id).unwrap(),
                subscriber_id: SubscriberId::parse(self.subscriber).unwrap(),
                due_at: self.due_at,
                fresh_until: self.fresh_until,
                content: Content::Text {
                    subject: self.subject,
                    body: self.body,
                },
                recipients: self.recipients,
            },
            self.default_freshness,
            self.retention,
        )
        .unwrap()
    }
}
