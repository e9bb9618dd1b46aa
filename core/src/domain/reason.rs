//! Why a delivery died: one enum, fixed wire strings (docs/design.md, "Dead reasons"), shared by
//! the consumer, redrive, metrics and the CLI. The wire strings are an interface: never rename one.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DeadReason {
    /// The message could not be decoded, had an unknown version or a mismatched key.
    Schema,
    /// The reminder the message names does not exist.
    UnknownReminder,
    /// The provider refused it for good (invalid recipient, unverified sender, …).
    Rejected,
    AttemptsExhausted,
    ThrottleExhausted,
    /// The provider may or may not have sent it, and cannot deduplicate: reconcile by hand.
    Ambiguous,
    /// Reached the DLQ through the queue's redrive policy (a crash loop), with no reason.
    ReceiveCountExceeded,
    /// The stored reminder cannot be read or sent (a malformed field, a listed channel without
    /// a valid recipient, an unknown content kind or status): the evidence names the field.
    /// Redrivable once the item is fixed.
    InvalidReminder,
    /// The subscriber opted out of the channel (docs/design.md, "Preferences and quiet hours"), and
    /// no fallback took it over. Decided before any send: no attempt spent.
    OptedOut,
    /// The (channel, address) is suppressed: a provider declared the address dead earlier.
    /// Decided before any send: no attempt spent.
    Suppressed,
    /// Due inside the channel's quiet hours and stale before they end. No attempt spent.
    ExpiredQuietHours,
    /// An SMS number outside the calling codes the stack allows (`SMS_ALLOWED_COUNTRY_CODES`):
    /// decided before any claim, no attempt spent, nothing sent. The operator's policy, not the
    /// person's choice: a DLQ copy is made. Like a rejected address, the channel cannot reach
    /// the person, so the fallback order hands the reminder on; without one, a redrive after
    /// the list is widened sends it.
    CountryNotAllowed,
    /// A reason this version does not know, written by a newer one (a deploy rolling out a
    /// new reason): read, carried on with its wire string, logged and published as it is,
    /// never refused. It falls back to nothing and is no recipient's choice: a DLQ copy is
    /// made, and a redrive names it like any other.
    Unknown(&'static str),
}

impl DeadReason {
    pub const ALL: [DeadReason; 12] = [
        DeadReason::Schema,
        DeadReason::UnknownReminder,
        DeadReason::Rejected,
        DeadReason::AttemptsExhausted,
        DeadReason::ThrottleExhausted,
        DeadReason::Ambiguous,
        DeadReason::ReceiveCountExceeded,
        DeadReason::InvalidReminder,
        DeadReason::OptedOut,
        DeadReason::Suppressed,
        DeadReason::ExpiredQuietHours,
        DeadReason::CountryNotAllowed,
    ];

    /// The recipient's rules ended it, not a failure (docs/design.md, "Recipient rules"): the
    /// ledger and the events say so, but no DLQ copy is made — there is nothing for an operator to
    /// fix or redrive, and a DLQ alarm would page for a recipient's choice.
    /// Whether a death for this reason hands the reminder to the subscriber's fallback
    /// channel (docs/design.md, "Fallback chain"): the channel cannot reach the person (a
    /// rejected address, an opt-out, a suppressed address, quiet hours outlasting freshness, an
    /// SMS number outside the allowed countries). A budget spent, an ambiguous send or a bad
    /// reminder does not.
    pub const fn falls_back(self) -> bool {
        matches!(
            self,
            DeadReason::Rejected
                | DeadReason::OptedOut
                | DeadReason::Suppressed
                | DeadReason::ExpiredQuietHours
                | DeadReason::CountryNotAllowed
        )
    }

    /// Whether a delivery dies for this reason before any claim (no lease, nothing sent): the
    /// reminder is missing or unreadable, or the SMS number is outside the allowed countries.
    pub const fn dies_unclaimed(self) -> bool {
        matches!(
            self,
            DeadReason::UnknownReminder
                | DeadReason::InvalidReminder
                | DeadReason::CountryNotAllowed
        )
    }

    pub const fn is_recipients_choice(self) -> bool {
        matches!(
            self,
            DeadReason::OptedOut | DeadReason::Suppressed | DeadReason::ExpiredQuietHours
        )
    }

    pub const fn as_str(self) -> &'static str {
        match self {
            DeadReason::Schema => "schema",
            DeadReason::UnknownReminder => "unknown_reminder",
            DeadReason::Rejected => "rejected",
            DeadReason::AttemptsExhausted => "attempts_exhausted",
            DeadReason::ThrottleExhausted => "throttle_exhausted",
            DeadReason::Ambiguous => "ambiguous",
            DeadReason::ReceiveCountExceeded => "receive_count_exceeded",
            DeadReason::InvalidReminder => "invalid_reminder",
            DeadReason::OptedOut => "opted_out",
            DeadReason::Suppressed => "suppressed",
            DeadReason::ExpiredQuietHours => "expired_quiet_hours",
            DeadReason::CountryNotAllowed => "country_not_allowed",
            DeadReason::Unknown(s) => s,
        }
    }

    /// A stored or received wire string: a listed reason, or one this version does not know
    /// ([`DeadReason::Unknown`], logged once per read).
    pub fn read(s: &str) -> DeadReason {
        s.parse().unwrap_or_else(|_| {
            tracing::warn!(
                reason = s,
                "dead reason unknown to this version: carried on as it is"
            );
            DeadReason::Unknown(super::wire::intern(s))
        })
    }
}

impl Serialize for DeadReason {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for DeadReason {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = std::borrow::Cow::<'de, str>::deserialize(d)?;
        Ok(DeadReason::read(&s))
    }
}

impl fmt::Display for DeadReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown dead reason {0:?}")]
pub struct UnknownReason(pub String);

impl FromStr for DeadReason {
    type Err = UnknownReason;
    fn from_str(s: &str) -> Result<Self, UnknownReason> {
        DeadReason::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| UnknownReason(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_strings_are_fixed() {
        let wire: Vec<&str> = DeadReason::ALL.iter().map(|r| r.as_str()).collect();
        assert_eq!(
            wire,
            [
                "schema",
                "unknown_reminder",
                "rejected",
                "attempts_exhausted",
                "throttle_exhausted",
                "ambiguous",
                "receive_count_exceeded",
                "invalid_reminder",
                "opted_out",
                "suppressed",
                "expired_quiet_hours",
                "country_not_allowed"
            ]
        );
        for r in DeadReason::ALL {
            assert_eq!(r.as_str().parse::<DeadReason>(), Ok(r));
            assert_eq!(serde_json::to_string(&r).unwrap(), format!("\"{r}\""));
        }
        assert!("bogus".parse::<DeadReason>().is_err());
    }

    #[test]
    fn a_reason_from_a_newer_version_is_carried_on_as_it_is() {
        let r: DeadReason = serde_json::from_str("\"bounced_later\"").unwrap();
        assert_eq!(r, DeadReason::Unknown("bounced_later"));
        assert_eq!(r.as_str(), "bounced_later");
        assert_eq!(serde_json::to_string(&r).unwrap(), "\"bounced_later\"");
        assert!(!r.falls_back() && !r.is_recipients_choice());
        for known in DeadReason::ALL {
            assert_eq!(DeadReason::read(known.as_str()), known);
        }
    }
}
