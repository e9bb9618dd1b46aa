//! What an operator asks of a redrive, validated at the edge (the Lambda's JSON input and the
//! CLI's flags parse into this), and what it reports back.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::clock::Timestamp;
use crate::deadletter::DeadLetter;
use crate::domain::{Channel, DeadReason};

/// Hard ceiling on one run's `max_messages`.
pub const MAX_MESSAGES_LIMIT: u32 = 10_000;

fn listed_reasons<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<BTreeSet<DeadReason>, D::Error> {
    let names = Vec::<String>::deserialize(d)?;
    names
        .iter()
        .map(|n| n.parse().map_err(serde::de::Error::custom))
        .collect()
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedriveRequest {
    pub channel: Channel,
    /// One or more reasons; there is no "everything". Only reasons this version lists: an
    /// operator's typo is refused, not read as a newer version's reason.
    #[serde(deserialize_with = "listed_reasons")]
    pub reasons: BTreeSet<DeadReason>,
    #[serde(default)]
    pub first_seen_after: Option<Timestamp>,
    #[serde(default)]
    pub first_seen_before: Option<Timestamp>,
    #[serde(default)]
    pub dead_after: Option<Timestamp>,
    #[serde(default)]
    pub dead_before: Option<Timestamp>,
    /// A hard upper bound on messages moved (required).
    pub max_messages: u32,
    #[serde(default = "default_rate")]
    pub max_per_second: u32,
    #[serde(default = "default_true")]
    pub dry_run: bool,
    pub operator: String,
    #[serde(default)]
    pub note: String,
    /// Give stale reminders this many more seconds of freshness (explicit opt-in).
    #[serde(default)]
    pub extend_freshness_secs: Option<u64>,
    /// Required to redrive `ambiguous`: the send may have happened, and a provider that
    /// ignores idempotency keys would deliver it twice.
    #[serde(default)]
    pub accept_duplicates: bool,
}

fn default_rate() -> u32 {
    10
}

fn default_true() -> bool {
    true
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    #[error("reasons: name at least one dead reason (there is no redrive-everything)")]
    NoReasons,
    #[error("max_messages must be 1 to {MAX_MESSAGES_LIMIT}")]
    BadMax,
    #[error("max_per_second must be at least 1")]
    BadRate,
    #[error("operator is required")]
    NoOperator,
    #[error("note is longer than 500 characters")]
    LongNote,
    #[error("{0}: the `after` bound is not before the `before` bound, so nothing can match")]
    EmptyWindow(&'static str),
    #[error("redriving ambiguous may deliver twice through a provider that ignores idempotency keys: set accept_duplicates (--accept-duplicates)")]
    AmbiguousNeedsConsent,
    #[error("extend_freshness_secs must be 2 to 31622400 (more than the one-second clock margin, at most 366 days)")]
    BadExtension,
}

impl RedriveRequest {
    pub fn validate(&self) -> Result<(), RequestError> {
        if self.reasons.is_empty() {
            return Err(RequestError::NoReasons);
        }
        if !(1..=MAX_MESSAGES_LIMIT).contains(&self.max_messages) {
            return Err(RequestError::BadMax);
        }
        if self.max_per_second == 0 {
            return Err(RequestError::BadRate);
        }
        if self.operator.trim().is_empty() {
            return Err(RequestError::NoOperator);
        }
        if self.note.chars().count() > 500 {
            return Err(RequestError::LongNote);
        }
        if self.reasons.contains(&DeadReason::Ambiguous) && !self.accept_duplicates {
            return Err(RequestError::AmbiguousNeedsConsent);
        }
        // Freshness a delivery could be sent in: more than the clock margin, at most what a
        // reminder may have.
        if let Some(secs) = self.extend_freshness_secs {
            let max = crate::domain::reminder::MAX_FRESHNESS.as_secs();
            if !(2..=max).contains(&secs) {
                return Err(RequestError::BadExtension);
            }
        }
        let windows = [
            ("dead_after/dead_before", self.dead_after, self.dead_before),
            (
                "first_seen_after/first_seen_before",
                self.first_seen_after,
                self.first_seen_before,
            ),
        ];
        for (name, after, before) in windows {
            if let (Some(a), Some(b)) = (after, before) {
                if a >= b {
                    return Err(RequestError::EmptyWindow(name));
                }
            }
        }
        Ok(())
    }

    /// Whether a dead letter falls in the selection. Time filters need evidence: a message
    /// without it (a crash loop) matches only when no time filter is given.
    pub fn matches(&self, letter: &DeadLetter) -> bool {
        if !self.reasons.contains(&letter.reason) {
            return false;
        }
        let timed = [
            self.first_seen_after,
            self.first_seen_before,
            self.dead_after,
            self.dead_before,
        ]
        .iter()
        .any(Option::is_some);
        let Some(ev) = &letter.evidence else {
            return !timed;
        };
        let within = |t: Option<Timestamp>, after: Option<Timestamp>, before: Option<Timestamp>| {
            after.is_none_or(|a| t.is_some_and(|t| t >= a))
                && before.is_none_or(|b| t.is_some_and(|t| t < b))
        };
        within(
            ev.first_seen_at,
            self.first_seen_after,
            self.first_seen_before,
        ) && within(Some(ev.dead_at), self.dead_after, self.dead_before)
    }
}

/// Per reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub seen: u32,
    pub matched: u32,
    pub moved: u32,
    /// Already delivered (or otherwise final): removed from the DLQ, never resent.
    pub skipped: u32,
    /// Past `fresh_until`: left in the DLQ.
    pub stale: u32,
    /// Held during the run and made visible again at its end.
    pub released: u32,
    /// The ledger holds the delivery dead for a reason the request did not select (a stale
    /// or crash-looped copy): left in the DLQ.
    pub refused: u32,
    pub failed: u32,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RedriveSummary {
    pub batch_id: String,
    pub dry_run: bool,
    pub by_reason: BTreeMap<DeadReason, Counts>,
    pub stopped_at_deadline: bool,
}

impl RedriveSummary {
    pub fn total(&self) -> Counts {
        self.by_reason
            .values()
            .fold(Counts::default(), |a, c| Counts {
                seen: a.seen + c.seen,
                matched: a.matched + c.matched,
                moved: a.moved + c.moved,
                skipped: a.skipped + c.skipped,
                stale: a.stale + c.stale,
                released: a.released + c.released,
                refused: a.refused + c.refused,
                failed: a.failed + c.failed,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(json: &str) -> RedriveRequest {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn a_time_window_that_cannot_match_is_refused() {
        let base = r#""channel":"sms","reasons":["rejected"],"max_messages":5,"operator":"ana""#;
        let bad = request(&format!("{{{base},\"dead_after\":20,\"dead_before\":10}}"));
        assert_eq!(
            bad.validate(),
            Err(RequestError::EmptyWindow("dead_after/dead_before"))
        );
        let bad = request(&format!(
            "{{{base},\"first_seen_after\":5,\"first_seen_before\":5}}"
        ));
        assert!(matches!(bad.validate(), Err(RequestError::EmptyWindow(_))));
        let ok = request(&format!("{{{base},\"dead_after\":10,\"dead_before\":20}}"));
        assert_eq!(ok.validate(), Ok(()));
    }
}
