//! Subscriber preferences (docs/design.md, "Preferences and quiet hours"): the channels a
//! subscriber opted out of, quiet hours per channel, a fallback order; and what they decide for one
//! delivery before any send.
//!
//! The stored and API shape is [`PreferencesWire`]:
//! `{"opted_out": ["sms"], "quiet_hours": {"push": {"start": "22:00", "end": "07:00",
//! "zone": "Europe/Paris"}}, "fallback": ["push", "email"], "time_zone": "Europe/Paris"}`. Every field may be left out
//! (no preferences: today's behaviour). [`Preferences`] (de)serialises through it, so a bad
//! value is refused with the field at fault (`quiet_hours.push.zone: unknown IANA time zone`)
//! and never echoed.

mod quiet;

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

pub use quiet::{LocalTime, QuietHours, Zone};

use super::ids::Channel;
use super::reminder::{freshness, Freshness, CLOCK_MARGIN};
use crate::clock::Timestamp;

/// One subscriber's preferences, validated.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "PreferencesWire", into = "PreferencesWire")]
pub struct Preferences {
    pub opted_out: BTreeSet<Channel>,
    pub quiet_hours: BTreeMap<Channel, QuietHours>,
    /// Channels in the order they take over from one another; no channel twice.
    pub fallback: Vec<Channel>,
    /// The subscriber's own zone: a series in the zone `"subscriber"` makes each occurrence
    /// in it (docs/design.md, "Recurring series"), so a traveller's 08:00 follows them.
    pub time_zone: Option<Zone>,
}

/// What preferences say about one delivery, before the send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Send,
    /// Inside the channel's quiet hours, and still fresh when they end: no attempt spent.
    Hold {
        until: Timestamp,
    },
    /// The subscriber opted out of the channel (this wins over quiet hours).
    OptedOut,
    /// Inside the channel's quiet hours and stale by their end: `expired_quiet_hours`, or the
    /// fallback channel.
    QuietUntilStale,
}

impl Preferences {
    /// The decision for a delivery on `channel` considered at `at`, fresh until `fresh_until`
    /// (by the one freshness rule, [`freshness`]). Staleness at `at` itself is the caller's
    /// check, as for any delivery; this only asks whether holding would outlive freshness.
    ///
    /// A clock may be off by up to [`CLOCK_MARGIN`]: a delivery is held when any instant
    /// within the margin of `at` is inside a window, until every one is past its end, and
    /// gives up when it would not be fresh by every clock then.
    pub fn decide(&self, channel: Channel, at: Timestamp, fresh_until: Timestamp) -> Decision {
        if self.opted_out.contains(&channel) {
            return Decision::OptedOut;
        }
        let hold = self.quiet_hours.get(&channel).and_then(|q| {
            [at.minus(CLOCK_MARGIN), at, at.plus(CLOCK_MARGIN)]
                .into_iter()
                .filter_map(|t| q.hold_until(t))
                .max()
                .map(|end| end.plus(CLOCK_MARGIN))
        });
        match hold {
            None => Decision::Send,
            Some(until) if freshness(fresh_until, until) != Freshness::Fresh => {
                Decision::QuietUntilStale
            }
            Some(until) => Decision::Hold { until },
        }
    }

    /// The channel after `channel` in the fallback order: `None` when `channel` is last, is
    /// not in the order, or there is no order (a reminder's channels are then all sent, as
    /// before preferences existed).
    pub fn fallback_after(&self, channel: Channel) -> Option<Channel> {
        let i = self.fallback.iter().position(|c| *c == channel)?;
        self.fallback.get(i + 1).copied()
    }

    /// The channel a dead delivery on `channel` falls back to, for a reminder that lists the
    /// channels `listed` gives: the next one in the order that the reminder has an address
    /// for (a channel it lacks is passed over).
    pub fn fallback_for(
        &self,
        channel: Channel,
        listed: impl Fn(Channel) -> bool,
    ) -> Option<Channel> {
        let i = self.fallback.iter().position(|c| *c == channel)?;
        self.fallback[i + 1..].iter().copied().find(|c| listed(*c))
    }

    /// Whether `channel` waits in standby for a reminder listing `listed`: it is in the
    /// fallback order behind a channel the reminder also lists, so it is sent only when that
    /// one's delivery dies (as a fallback), never alongside it.
    pub fn is_standby(&self, channel: Channel, listed: impl Fn(Channel) -> bool) -> bool {
        self.standby_behind(channel, listed).is_some()
    }

    /// The channel a standby `channel` waits behind: the nearest one before it in the order
    /// that the reminder lists.
    pub fn standby_behind(
        &self,
        channel: Channel,
        listed: impl Fn(Channel) -> bool,
    ) -> Option<Channel> {
        let i = self.fallback.iter().position(|c| *c == channel)?;
        self.fallback[..i]
            .iter()
            .rev()
            .copied()
            .find(|c| listed(*c))
    }
}

/// The stored and API shape, before validation.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreferencesWire {
    #[serde(default)]
    pub opted_out: Vec<String>,
    #[serde(default)]
    pub quiet_hours: BTreeMap<String, QuietHoursWire>,
    #[serde(default)]
    pub fallback: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuietHoursWire {
    pub start: String,
    pub end: String,
    pub zone: String,
}

/// Why preferences are refused: the field at fault ([`PreferencesError::field`]) and what it
/// must hold. A bad value is never quoted back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PreferencesError {
    #[error("opted_out[{0}]: unknown channel (expected push, email or sms)")]
    OptedOutChannel(usize),
    #[error("quiet_hours: keys must be channels (push, email or sms)")]
    QuietHoursChannel,
    #[error("quiet_hours.{channel}.{part}: must be HH:MM (00:00 to 23:59)")]
    BadTime {
        channel: Channel,
        part: &'static str,
    },
    #[error("quiet_hours.{0}.zone: unknown IANA time zone")]
    UnknownZone(Channel),
    #[error("fallback[{0}]: unknown channel (expected push, email or sms)")]
    FallbackChannel(usize),
    #[error("fallback: lists {0} twice")]
    FallbackRepeats(Channel),
    #[error("time_zone: unknown IANA time zone")]
    TimeZone,
}

impl PreferencesError {
    /// The attribute at fault (`quiet_hours.push.zone`, `fallback`).
    pub fn field(&self) -> String {
        match self {
            PreferencesError::OptedOutChannel(i) => format!("opted_out[{i}]"),
            PreferencesError::QuietHoursChannel => "quiet_hours".into(),
            PreferencesError::BadTime { channel, part } => format!("quiet_hours.{channel}.{part}"),
            PreferencesError::UnknownZone(c) => format!("quiet_hours.{c}.zone"),
            PreferencesError::FallbackChannel(i) => format!("fallback[{i}]"),
            PreferencesError::FallbackRepeats(_) => "fallback".into(),
            PreferencesError::TimeZone => "time_zone".into(),
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
}

impl TryFrom<PreferencesWire> for Preferences {
    type Error = PreferencesError;

    /// Checked in field order (opted_out, quiet_hours by channel name, fallback, time_zone); the first
    /// fault is the answer.
    fn try_from(w: PreferencesWire) -> Result<Self, PreferencesError> {
        let mut opted_out = BTreeSet::new();
        for (i, name) in w.opted_out.iter().enumerate() {
            // A repeated opt-out says the same thing twice: harmless, kept once.
            let c = name
                .parse()
                .map_err(|_| PreferencesError::OptedOutChannel(i))?;
            opted_out.insert(c);
        }
        let mut quiet_hours = BTreeMap::new();
        for (name, q) in &w.quiet_hours {
            let channel: Channel = name
                .parse()
                .map_err(|_| PreferencesError::QuietHoursChannel)?;
            quiet_hours.insert(channel, quiet_from_wire(channel, q)?);
        }
        let mut fallback: Vec<Channel> = Vec::new();
        for (i, name) in w.fallback.iter().enumerate() {
            let c = name
                .parse()
                .map_err(|_| PreferencesError::FallbackChannel(i))?;
            if fallback.contains(&c) {
                return Err(PreferencesError::FallbackRepeats(c));
            }
            fallback.push(c);
        }
        let time_zone = w
            .time_zone
            .as_deref()
            .map(|z| Zone::parse(z).ok_or(PreferencesError::TimeZone))
            .transpose()?;
        Ok(Self {
            opted_out,
            quiet_hours,
            fallback,
            time_zone,
        })
    }
}

fn quiet_from_wire(channel: Channel, q: &QuietHoursWire) -> Result<QuietHours, PreferencesError> {
    let time =
        |s: &str, part| LocalTime::parse(s).ok_or(PreferencesError::BadTime { channel, part });
    Ok(QuietHours {
        start: time(&q.start, "start")?,
        end: time(&q.end, "end")?,
        zone: Zone::parse(&q.zone).ok_or(PreferencesError::UnknownZone(channel))?,
    })
}

impl From<Preferences> for PreferencesWire {
    fn from(p: Preferences) -> Self {
        let name = |c: &Channel| c.as_str().to_owned();
        Self {
            opted_out: p.opted_out.iter().map(name).collect(),
            quiet_hours: p
                .quiet_hours
                .iter()
                .map(|(c, q)| {
                    let wire = QuietHoursWire {
                        start: q.start.to_string(),
                        end: q.end.to_string(),
                        zone: q.zone.name().to_owned(),
                    };
                    (name(c), wire)
                })
                .collect(),
            fallback: p.fallback.iter().map(name).collect(),
            time_zone: p.time_zone.as_ref().map(|z| z.name().to_owned()),
        }
    }
}

#[cfg(test)]
mod tests;
