//! A recurring series (docs/design.md, "Recurring series"): a rule, a zone and the fields of a
//! reminder. Each occurrence is an ordinary [`Reminder`] whose id derives from the series id and
//! the occurrence's instant ([`super::occurrence_id()`]), so that everything promised of a reminder holds
//! per occurrence.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::occurrence_id::{occurrence_id, OCCURRENCE_SEPARATOR};
use super::rule::{Rule, RuleError};
use crate::clock::Timestamp;
use crate::domain::{
    Channel, Content, Owner, Recipient, Reminder, ReminderError, ReminderStatus, Retention,
    SeriesId, SubscriberId, MAX_FRESHNESS,
};

/// A series id leaves room for the separator and the instant (`20270104T081500Z`) within a
/// reminder id's 128 characters.
pub const MAX_SERIES_ID_LEN: usize = 110;
/// Occurrences due within this of now are made ahead: more than one scheduler period (a
/// minute) plus its look-ahead, so that an occurrence is in the due index before its time and
/// keeps the scheduler's sub-minute precision.
pub const MAKE_AHEAD: Duration = Duration::from_secs(15 * 60);
/// The zone of a series that follows its subscriber: each occurrence is made in the zone of
/// the subscriber's preferences (`time_zone`) as read when it is made.
pub const SUBSCRIBER_ZONE: &str = "subscriber";
/// How many of the latest occurrences made (or brought in line by an edit or a cancel) a
/// series remembers: for an edit or a cancel, and the maker finishing one, to find them again
/// (a rule's instants past its freshness need no memory). A series' GET shows the latest 20.
pub const MADE_KEPT: usize = 2_000;
/// How many occurrences of one series may be edited or made through their own id before the
/// maker made them ([`Series::detached`]): each is kept for as long as the series lives, so a
/// `PUT` beyond this many is refused.
pub const MAX_DETACHED: usize = 1_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SeriesStatus {
    /// Occurrences are made as they come due.
    Active,
    /// Cancelled: no occurrence is made again, and those not yet sent were cancelled.
    Cancelled,
    /// The rule has no occurrence left (its `COUNT`, `UNTIL` or the body's `until`).
    Ended,
}

impl SeriesStatus {
    pub const fn as_str(self) -> &'static str {
        match self {
            SeriesStatus::Active => "active",
            SeriesStatus::Cancelled => "cancelled",
            SeriesStatus::Ended => "ended",
        }
    }
}

/// Why a series is refused, naming the body's field (`rule`, `zone`, `until`, …).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SeriesError {
    #[error("rule: {0}")]
    Rule(RuleError),
    #[error("zone: {0}")]
    Zone(String),
    #[error("until: {0}")]
    Until(String),
    #[error("fresh_for_secs: {0}")]
    FreshFor(String),
    #[error("id: {0}")]
    Id(String),
    #[error("{0}")]
    Reminder(ReminderError),
}

impl SeriesError {
    /// The body's field at fault.
    pub fn field(&self) -> String {
        match self {
            SeriesError::Rule(_) => "rule".into(),
            SeriesError::Zone(_) => "zone".into(),
            SeriesError::Until(_) => "until".into(),
            SeriesError::FreshFor(_) => "fresh_for_secs".into(),
            SeriesError::Id(_) => "id".into(),
            SeriesError::Reminder(e) => e.field(),
        }
    }

    /// What the field must hold, without its name.
    pub fn requirement(&self) -> String {
        match self {
            SeriesError::Rule(e) => e.to_string(),
            SeriesError::Zone(m)
            | SeriesError::Until(m)
            | SeriesError::FreshFor(m)
            | SeriesError::Id(m) => m.clone(),
            SeriesError::Reminder(e) => e.requirement(),
        }
    }
}

/// What an application supplies to create or edit a series.
#[derive(Debug, Clone)]
pub struct NewSeries {
    pub series_id: SeriesId,
    pub subscriber_id: SubscriberId,
    pub rule: String,
    /// An IANA zone name, or [`SUBSCRIBER_ZONE`].
    pub zone: String,
    pub starts_at: Timestamp,
    pub until: Option<Timestamp>,
    /// `None`: the policy's freshness window.
    pub fresh_for: Option<Duration>,
    pub content: Content,
    pub recipients: Vec<Recipient>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Series {
    pub series_id: SeriesId,
    pub subscriber_id: SubscriberId,
    pub owner: Option<Owner>,
    pub rule: Rule,
    /// As the body gave it: an IANA name, or [`SUBSCRIBER_ZONE`].
    pub zone: String,
    /// For a series in [`SUBSCRIBER_ZONE`]: the subscriber's `time_zone` as last read, the
    /// zone its latest occurrences were made in (`None` for any other series).
    pub local_zone: Option<String>,
    pub starts_at: Timestamp,
    pub until: Option<Timestamp>,
    pub fresh_for: Duration,
    pub content: Content,
    pub recipients: BTreeMap<Channel, Recipient>,
    pub status: SeriesStatus,
    /// Bumped by every edit and by the cancel.
    pub version: u64,
    /// Every occurrence at or before this instant has been made (`None`: none yet).
    pub made_through: Option<Timestamp>,
    /// The latest occurrences made, oldest first, at most [`MADE_KEPT`].
    pub made: Vec<Timestamp>,
    /// Instants whose occurrence was made through its own id before the maker reached it
    /// (`PUT /v1/reminders/{series}::{instant}`), oldest first, at most [`MAX_DETACHED`],
    /// never forgotten while the series lives: the maker and an edit never make one of them
    /// again (its item may be gone with its TTL after it was sent, moved earlier), and a cancel
    /// reaches each wherever it was moved.
    pub detached: Vec<Timestamp>,
    /// Set when the series was created with its `starts_at` in the past: no occurrence at or
    /// before this instant is owed (each would only expire, or be sent at once, for a time
    /// before the series existed). Kept by every edit.
    pub owed_after: Option<Timestamp>,
    /// What a newer version wrote in the series that this one does not know (kept).
    pub unknown: crate::domain::wire::Unknown,
    /// Written with an edit or a cancel, cleared once its occurrences were brought in line:
    /// while set, the maker looks at it at once and finishes the job (a failure midway, a
    /// timeout, a client that gave up).
    pub pending: bool,
}

impl Series {
    /// Validate and build a series at version 1, active, nothing made.
    pub fn new(new: NewSeries, default_freshness: Duration) -> Result<Self, SeriesError> {
        if new.series_id.as_str().len() > MAX_SERIES_ID_LEN {
            return Err(SeriesError::Id(format!(
                "must be at most {MAX_SERIES_ID_LEN} characters"
            )));
        }
        if new.series_id.as_str().contains(OCCURRENCE_SEPARATOR) {
            return Err(SeriesError::Id(format!(
                "must not contain {OCCURRENCE_SEPARATOR:?}"
            )));
        }
        let rule = Rule::parse(&new.rule).map_err(SeriesError::Rule)?;
        if new.zone != SUBSCRIBER_ZONE && jiff::tz::db().get(&new.zone).is_err() {
            return Err(SeriesError::Zone(format!(
                "{:?} is not an IANA time zone name (nor \"{SUBSCRIBER_ZONE}\")",
                crate::domain::reminder::redact(&new.zone)
            )));
        }
        if let Some(until) = new.until {
            if rule.until().is_some() {
                return Err(SeriesError::Until(
                    "the rule has an UNTIL of its own: give one or the other".into(),
                ));
            }
            if until < new.starts_at {
                return Err(SeriesError::Until("must not be before starts_at".into()));
            }
        }
        let fresh_for = new.fresh_for.unwrap_or(default_freshness);
        // More than the clock margin, or no occurrence could ever be sent (docs/design.md,
        // "Clock margin").
        if fresh_for <= crate::domain::reminder::CLOCK_MARGIN || fresh_for > MAX_FRESHNESS {
            return Err(SeriesError::FreshFor(
                "must be from 2 seconds to 366 days".into(),
            ));
        }
        if new.recipients.is_empty() {
            return Err(SeriesError::Reminder(ReminderError::NoRecipients));
        }
        crate::domain::reminder::check_content(&new.content).map_err(SeriesError::Reminder)?;
        let mut recipients = BTreeMap::new();
        for r in new.recipients {
            let channel = r.channel();
            if recipients.insert(channel, r).is_some() {
                return Err(SeriesError::Reminder(ReminderError::DuplicateChannel(
                    channel,
                )));
            }
        }
        Ok(Self {
            series_id: new.series_id,
            subscriber_id: new.subscriber_id,
            owner: None,
            rule,
            zone: new.zone,
            local_zone: None,
            starts_at: new.starts_at,
            until: new.until,
            fresh_for,
            content: new.content,
            recipients,
            status: SeriesStatus::Active,
            version: 1,
            made_through: None,
            made: Vec::new(),
            detached: Vec::new(),
            owed_after: None,
            unknown: Default::default(),
            pending: false,
        })
    }

    /// Whether its occurrences are made in the subscriber's own zone.
    pub fn follows_subscriber(&self) -> bool {
        self.zone == SUBSCRIBER_ZONE
    }

    /// The zone its occurrences are made in now: its own, or the subscriber's as last read.
    pub fn effective_zone(&self) -> Option<&str> {
        if self.follows_subscriber() {
            self.local_zone.as_deref()
        } else {
            Some(&self.zone)
        }
    }

    /// Take the subscriber's `time_zone` (from their preferences, read now) for the
    /// occurrences made from here on; `None` (none set, or erased) keeps the last one read.
    pub fn localise(&mut self, subscriber_zone: Option<&str>) {
        if self.follows_subscriber() {
            if let Some(z) = subscriber_zone {
                self.local_zone = Some(z.to_owned());
            }
        }
    }

    fn tz(&self) -> jiff::tz::TimeZone {
        // Validated by `new` (and a subscriber's zone by their preferences); the bundled
        // database never loses a zone it had. A series that follows a subscriber who never
        // had one is refused when created, so UTC here is only a stored item's last resort.
        self.effective_zone()
            .and_then(|z| jiff::tz::db().get(z).ok())
            .unwrap_or(jiff::tz::TimeZone::UTC)
    }

    /// The rule's occurrences strictly after `after` (all of them for `None`), in order.
    pub fn instants_after(&self, after: Option<Timestamp>) -> Vec<Timestamp> {
        self.instants_between(after, None, usize::MAX)
    }

    /// At most `max` occurrences strictly after `after` and at or before `through`.
    pub fn instants_between(
        &self,
        after: Option<Timestamp>,
        through: Option<Timestamp>,
        max: usize,
    ) -> Vec<Timestamp> {
        let tz = self.tz();
        self.rule
            .occurrences(&tz, self.starts_at, self.until)
            .skip_while(|t| after.is_some_and(|a| *t <= a))
            .take_while(|t| through.is_none_or(|end| *t <= end))
            .take(max)
            .collect()
    }

    /// The first occurrence strictly after `after`.
    pub fn next_after(&self, after: Option<Timestamp>) -> Option<Timestamp> {
        let tz = self.tz();
        self.rule
            .occurrences(&tz, self.starts_at, self.until)
            .find(|t| after.is_none_or(|a| *t > a))
    }

    /// Whether the rule produces `at`.
    pub fn produces(&self, at: Timestamp) -> bool {
        let tz = self.tz();
        self.rule
            .occurrences(&tz, self.starts_at, self.until)
            .take_while(|t| *t <= at)
            .any(|t| t == at)
    }

    /// The wall time of `at` in the series' zone (`2027-01-04T09:15:00+01:00[Europe/Paris]`).
    pub fn wall_time(&self, at: Timestamp) -> String {
        jiff::Timestamp::from_millisecond(at.as_millis())
            .map(|t| t.to_zoned(self.tz()).to_string())
            .unwrap_or_default()
    }

    /// The occurrence at `at` as a reminder: due then, fresh for the series' window, owned as
    /// the series is.
    pub fn occurrence(&self, at: Timestamp, retention: Retention) -> Reminder {
        let fresh_until = at.plus(self.fresh_for);
        Reminder {
            reminder_id: occurrence_id(&self.series_id, at),
            subscriber_id: self.subscriber_id.clone(),
            due_at: at,
            fresh_until,
            content: self.content.clone(),
            recipients: self.recipients.clone(),
            payload_version: 1,
            status: ReminderStatus::Scheduled,
            invalid_reason: None,
            unsendable: BTreeMap::new(),
            expires_at: retention.expires_at(fresh_until),
            enqueued: Default::default(),
            owner: self.owner.clone(),
            detached: false,
            unknown: Default::default(),
        }
    }

    /// The same series as `other` asks for (an idempotent PUT): every field a body sets.
    pub fn same_body(&self, other: &Series) -> bool {
        self.subscriber_id == other.subscriber_id
            && self.rule == other.rule
            && self.zone == other.zone
            && self.starts_at == other.starts_at
            && self.until == other.until
            && self.fresh_for == other.fresh_for
            && self.content == other.content
            && self.recipients == other.recipients
    }

    /// Nothing left to make, and its last occurrence is due by `now`: the series has ended.
    pub fn ended_by(&self, now: Timestamp) -> bool {
        self.next_after(self.made_through).is_none() && self.made.last().is_none_or(|l| *l <= now)
    }

    /// Record `at` as made through its own id ([`Series::detached`]); `false` when
    /// [`MAX_DETACHED`] are recorded already.
    pub fn detach(&mut self, at: Timestamp) -> bool {
        if self.is_detached(at) {
            return true;
        }
        if self.detached.len() >= MAX_DETACHED {
            return false;
        }
        self.detached.push(at);
        self.detached.sort();
        true
    }

    /// Whether the occurrence at `at` was made through its own id: neither the maker nor an
    /// edit makes it.
    pub fn is_detached(&self, at: Timestamp) -> bool {
        self.detached.binary_search(&at).is_ok()
    }

    /// Remember `at` as made (the latest [`MADE_KEPT`]).
    pub fn remember(&mut self, at: Timestamp) {
        if !self.made.contains(&at) {
            self.made.push(at);
            self.made.sort();
        }
        let over = self.made.len().saturating_sub(MADE_KEPT);
        self.made.drain(..over);
    }
}

#[cfg(test)]
#[path = "definition_tests.rs"]
mod tests;
