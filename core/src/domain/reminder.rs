//! A reminder (docs/design.md, "Reminders"): who, when, until when it is worth sending, what, and
//! where to.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::ids::{Channel, ReminderId, SubscriberId};
use super::recipient::Recipient;
use crate::clock::Timestamp;

/// How far ahead a reminder may be due, and how long after it is due it may stay fresh: the
/// TTL is `fresh_until` + retention, so these bound how long a recipient stays stored. The
/// API, `remindctl remind create` and every edit hold them ([`Reminder::new`],
/// [`check_due_ahead`]).
pub const MAX_DUE_AHEAD: Duration = Duration::from_secs(10 * 366 * 86_400);
pub const MAX_FRESHNESS: Duration = Duration::from_secs(366 * 86_400);

pub const MAX_SUBJECT_LEN: usize = 998;
pub const MAX_BODY_LEN: usize = 64 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReminderStatus {
    Scheduled,
    Enqueued,
    Cancelled,
    Expired,
    /// Quarantined by the scheduler: the item could not be scheduled (`invalid_reason` names
    /// the field). It left the due index; fixing the item and writing it back as `scheduled`
    /// (with its `due_shard`) schedules it again.
    Invalid,
}

impl ReminderStatus {
    pub const fn as_str(self) -> &'static str {
        match self {
            ReminderStatus::Scheduled => "scheduled",
            ReminderStatus::Enqueued => "enqueued",
            ReminderStatus::Cancelled => "cancelled",
            ReminderStatus::Expired => "expired",
            ReminderStatus::Invalid => "invalid",
        }
    }
}

/// What is sent: literal text, or a provider template and its data (JSON object as text).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Content {
    Text {
        subject: String,
        body: String,
    },
    Template {
        template_id: String,
        template_data: String,
    },
}

/// Why a reminder is refused: the one set of rules for reminders built here, items stored by
/// anyone (the scheduler's decoder) and bodies sent to the HTTP API. Each names the attribute
/// at fault ([`ReminderError::field`]) and never quotes a recipient or the content.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReminderError {
    #[error("fresh_until: must be more than one second (the clock margin) after due_at")]
    FreshBeforeDue,
    #[error("fresh_until: a reminder may stay fresh for at most 366 days after it is due")]
    FreshTooLong,
    #[error("due_at: must be within 10 years")]
    DueTooFar,
    #[error("recipients: must name at least one channel's recipient")]
    NoRecipients,
    #[error("content.{part}: must be at most {limit} bytes", limit = content_limit(part))]
    ContentTooLarge { part: &'static str },
    #[error("content.template_data: must be a JSON object (as text)")]
    BadTemplateData,
    #[error("recipients.{0}: two recipients for one channel")]
    DuplicateChannel(Channel),
    /// Stale by every clock within the margin when it would be stored: it could only expire.
    #[error("fresh_until: must end ahead of now; the reminder would be stale already and could never be sent (give a due time or a freshness that ends later)")]
    StaleAlready,
}

impl ReminderError {
    /// The attribute at fault, as the stored item names it (`content.body`, `recipients`).
    pub fn field(&self) -> String {
        match self {
            ReminderError::FreshBeforeDue
            | ReminderError::FreshTooLong
            | ReminderError::StaleAlready => "fresh_until".into(),
            ReminderError::DueTooFar => "due_at".into(),
            ReminderError::NoRecipients => "recipients".into(),
            ReminderError::ContentTooLarge { part } => format!("content.{part}"),
            ReminderError::BadTemplateData => "content.template_data".into(),
            ReminderError::DuplicateChannel(c) => format!("recipients.{c}"),
        }
    }

    /// What the attribute must hold, without the field's name.
    pub fn requirement(&self) -> String {
        let full = self.to_string();
        match full.split_once(": ") {
            Some((_, rule)) => rule.to_owned(),
            None => full,
        }
    }

    /// Refused for its size, not its shape (HTTP 413).
    pub fn is_too_large(&self) -> bool {
        matches!(self, ReminderError::ContentTooLarge { .. })
    }
}

/// A reminder due at `due_at` may be created or moved there at `now`: within
/// [`MAX_DUE_AHEAD`].
pub fn check_due_ahead(due_at: Timestamp, now: Timestamp) -> Result<(), ReminderError> {
    if due_at > now.plus(MAX_DUE_AHEAD) {
        return Err(ReminderError::DueTooFar);
    }
    Ok(())
}

fn content_limit(part: &str) -> usize {
    match part {
        "subject" => MAX_SUBJECT_LEN,
        _ => MAX_BODY_LEN,
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reminder {
    pub reminder_id: ReminderId,
    pub subscriber_id: SubscriberId,
    pub due_at: Timestamp,
    pub fresh_until: Timestamp,
    pub content: Content,
    /// One recipient per channel the reminder goes to.
    pub recipients: BTreeMap<Channel, Recipient>,
    /// Bumped on every edit; the consumer sends the current version.
    pub payload_version: u64,
    pub status: ReminderStatus,
    /// Why the scheduler quarantined it (status `invalid`), naming the field.
    pub invalid_reason: Option<String>,
    /// Channels the stored item lists but cannot send to (no recipient, or one that does not
    /// validate), each with the reason naming the field: those deliveries are dead letters,
    /// the others go out. Empty for reminders built by [`Reminder::new`].
    pub unsendable: BTreeMap<Channel, String>,
    /// DynamoDB TTL, epoch seconds: `fresh_until` + retention.
    pub expires_at: i64,
    /// Channels enqueued before an edit put the reminder back into scheduling (it added a
    /// channel): the scheduler enqueues only the others.
    pub enqueued: BTreeSet<Channel>,
    /// The caller that created it (the API's authorizer), `None` when written without one.
    /// Never changes: every edit and cancel of another owner finds nothing.
    pub owner: Option<super::Owner>,
    /// An occurrence of a series (docs/design.md, "Recurring series") edited through its own id:
    /// the series' later edits leave it as it is. `false` for every other reminder.
    pub detached: bool,
    /// The item's attributes a newer version wrote that this one does not know: carried
    /// through every edit and written back, so a deploy in progress drops none of them.
    pub unknown: super::wire::Unknown,
}

/// What an application supplies to create a reminder.
#[derive(Debug, Clone)]
pub struct NewReminder {
    pub reminder_id: ReminderId,
    pub subscriber_id: SubscriberId,
    pub due_at: Timestamp,
    /// `None`: `due_at` + the policy's freshness window.
    pub fresh_until: Option<Timestamp>,
    pub content: Content,
    pub recipients: Vec<Recipient>,
}

impl Reminder {
    /// Validate and build a reminder at payload version 1, status `scheduled`.
    pub fn new(
        new: NewReminder,
        default_freshness: Duration,
        retention: Duration,
    ) -> Result<Self, ReminderError> {
        let fresh_until = new
            .fresh_until
            .unwrap_or_else(|| new.due_at.plus(default_freshness));
        // Sent only while fresh by every clock within the margin: a window no longer than
        // it could never be sent (docs/design.md, "Clock margin").
        if fresh_until <= new.due_at.plus(CLOCK_MARGIN) {
            return Err(ReminderError::FreshBeforeDue);
        }
        if fresh_until.since(new.due_at) > MAX_FRESHNESS {
            return Err(ReminderError::FreshTooLong);
        }
        if new.recipients.is_empty() {
            return Err(ReminderError::NoRecipients);
        }
        check_content(&new.content)?;
        let mut recipients = BTreeMap::new();
        for r in new.recipients {
            let channel = r.channel();
            if recipients.insert(channel, r).is_some() {
                return Err(ReminderError::DuplicateChannel(channel));
            }
        }
        Ok(Self {
            reminder_id: new.reminder_id,
            subscriber_id: new.subscriber_id,
            due_at: new.due_at,
            fresh_until,
            content: new.content,
            recipients,
            payload_version: 1,
            status: ReminderStatus::Scheduled,
            invalid_reason: None,
            unsendable: BTreeMap::new(),
            enqueued: BTreeSet::new(),
            owner: None,
            detached: false,
            unknown: Default::default(),
            expires_at: super::Retention(retention).expires_at(fresh_until),
        })
    }

    pub fn channels(&self) -> impl Iterator<Item = Channel> + '_ {
        self.recipients.keys().copied()
    }

    /// Every channel the item lists: those with a recipient, and those it cannot send to.
    pub fn listed_channels(&self) -> impl Iterator<Item = Channel> + '_ {
        let unsendable = self.unsendable.keys().copied();
        self.channels()
            .chain(unsendable.filter(|c| !self.recipients.contains_key(c)))
    }

    pub fn is_stale_at(&self, now: Timestamp) -> bool {
        is_stale(self.fresh_until, now)
    }
}

/// The one staleness rule (docs/design.md, "Clock margin"): a delivery is stale once `now` is past
/// `fresh_until`; at `fresh_until` itself it is still fresh. The scheduler, the consumer and
/// redrive all ask this.
pub fn is_stale(fresh_until: Timestamp, now: Timestamp) -> bool {
    now > fresh_until
}

/// How far the clock of a function that judges freshness may be off the true time, at most
/// (docs/design.md, "Clock margin"). A delivery is sent only while fresh by every clock within it
/// of the reading, and ends expired only once stale by every one: between the two it waits, so a
/// clock off by up to this never sends a stale reminder nor calls a fresh one expired. Lambda's
/// clocks keep to the Amazon Time Sync Service, far inside it; the chaos worlds run workers off by
/// up to it (`remindctl chaos --skew-ms`).
pub const CLOCK_MARGIN: Duration = Duration::from_secs(1);

/// What a clock reading `now` can know of a freshness deadline, within [`CLOCK_MARGIN`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Freshness {
    /// Fresh by every clock within the margin: it may be sent.
    Fresh,
    /// Too close to call: neither sent nor expired before `until`, when it is surely stale.
    Unsure { until: Timestamp },
    /// Stale by every clock within the margin: it may end expired.
    Stale,
}

/// [`Freshness`] of a deadline read at `now`: the rule the consumer and the scheduler share.
pub fn freshness(fresh_until: Timestamp, now: Timestamp) -> Freshness {
    if now.plus(CLOCK_MARGIN) <= fresh_until {
        Freshness::Fresh
    } else if is_stale(fresh_until.plus(CLOCK_MARGIN), now) {
        Freshness::Stale
    } else {
        Freshness::Unsure {
            until: surely_stale_at(fresh_until),
        }
    }
}

/// The last instant a delivery may still be sent: fresh by every clock within
/// [`CLOCK_MARGIN`]. Retries, holds and redrives aim at or before it.
pub fn last_sendable(fresh_until: Timestamp) -> Timestamp {
    fresh_until.minus(CLOCK_MARGIN)
}

/// The first instant every clock within [`CLOCK_MARGIN`] calls `fresh_until` past: where a
/// delivery that can no longer be sent waits, to be expired then.
pub fn surely_stale_at(fresh_until: Timestamp) -> Timestamp {
    fresh_until.plus(CLOCK_MARGIN + Duration::from_millis(1))
}

/// The content rules, for reminders built here and items stored by anyone.
pub fn check_content(content: &Content) -> Result<(), ReminderError> {
    match content {
        Content::Text { subject, body } => {
            if subject.len() > MAX_SUBJECT_LEN {
                return Err(ReminderError::ContentTooLarge { part: "subject" });
            }
            if body.len() > MAX_BODY_LEN {
                return Err(ReminderError::ContentTooLarge { part: "body" });
            }
        }
        Content::Template { template_data, .. } => {
            if template_data.len() > MAX_BODY_LEN {
                return Err(ReminderError::ContentTooLarge {
                    part: "template_data",
                });
            }
            let parsed: Result<serde_json::Map<String, serde_json::Value>, _> =
                serde_json::from_str(template_data);
            if parsed.is_err() {
                return Err(ReminderError::BadTemplateData);
            }
        }
    }
    Ok(())
}

/// serde's type and value errors (the stored-item decoder's and the HTTP API's alike) quote the value they met (`invalid type: string "…"`), which
/// could be a recipient or the content: keep what was expected, never the value.
pub fn redact(message: &str) -> String {
    if message.starts_with("Failed to parse") {
        // serde_dynamo's number errors quote the value and Rust's parser.
        return "must be a whole number (times are epoch milliseconds)".to_owned();
    }
    for kind in [
        "invalid type",
        "invalid value",
        "invalid length",
        "unknown field",
        "unknown variant",
    ] {
        if message.starts_with(kind) {
            return match message.find(", expected") {
                Some(i) => format!("{kind}{}", &message[i..]),
                None => kind.to_owned(),
            };
        }
    }
    message.to_owned()
}

/// The virtual shards of the due index: writers spread over `DUE_SHARDS` of them (1 to this),
/// the scheduler reads them all, so changing `DUE_SHARDS` strands nothing.
pub const MAX_DUE_SHARDS: u32 = 64;
/// The due index's shards when `DUE_SHARDS` is not set (the template's default).
pub const DEFAULT_DUE_SHARDS: u32 = 8;

/// The due-index shard of a reminder: the first 8 bytes of SHA-256(reminder_id), big-endian,
/// modulo the shard count. Fixed forever for a given shard count (documented in
/// docs/data-formats.md).
pub fn due_shard(reminder_id: &ReminderId, shards: u32) -> u32 {
    let digest = Sha256::digest(reminder_id.as_str().as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    (u64::from_be_bytes(first) % u64::from(shards.max(1))) as u32
}

#[cfg(test)]
#[path = "reminder_tests.rs"]
mod tests;
