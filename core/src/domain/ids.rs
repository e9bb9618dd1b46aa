//! Identities parsed at the edge: [`ReminderId`], [`SubscriberId`], [`Channel`].
//!
//! Identities travel in queue messages and DLQs, so they are restricted to a safe alphabet
//! (`[A-Za-z0-9._:-]`, 1–128 characters): no personal data fits in an opaque id by accident of
//! encoding, and no id can smuggle separators into a delivery key.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

pub const MAX_ID_LEN: usize = 128;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    #[error("{kind} is empty")]
    Empty { kind: &'static str },
    #[error("{kind} is longer than {MAX_ID_LEN} characters")]
    TooLong { kind: &'static str },
    #[error("{kind} contains a character outside [A-Za-z0-9._:-]")]
    BadCharacter { kind: &'static str },
    #[error("unknown channel {0:?} (expected push, email or sms)")]
    UnknownChannel(String),
}

fn validate_id(kind: &'static str, s: &str) -> Result<(), IdError> {
    if s.is_empty() {
        return Err(IdError::Empty { kind });
    }
    if s.len() > MAX_ID_LEN {
        return Err(IdError::TooLong { kind });
    }
    let ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-');
    if !s.chars().all(ok) {
        return Err(IdError::BadCharacter { kind });
    }
    Ok(())
}

macro_rules! id_newtype {
    ($(#[$doc:meta])* $name:ident, $kind:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            pub fn parse(s: impl Into<String>) -> Result<Self, IdError> {
                let s = s.into();
                validate_id($kind, &s)?;
                Ok(Self(s))
            }
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl TryFrom<String> for $name {
            type Error = IdError;
            fn try_from(s: String) -> Result<Self, IdError> {
                Self::parse(s)
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

id_newtype!(
    /// The application's id of a reminder.
    ReminderId,
    "reminder_id"
);
id_newtype!(
    /// The application's id of the person a reminder belongs to (opaque, never an address).
    SubscriberId,
    "subscriber_id"
);
id_newtype!(
    /// The application's id of a recurring series (docs/design.md, "Recurring series"); its
    /// occurrences' ids derive from it (`crate::domain::series::occurrence_id`).
    SeriesId,
    "series_id"
);

/// A delivery channel; one queue, DLQ and event source mapping each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Channel {
    Push,
    Email,
    Sms,
}

impl Channel {
    pub const ALL: [Channel; 3] = [Channel::Push, Channel::Email, Channel::Sms];

    /// The wire name, used in messages, keys, attribute values and configuration.
    pub const fn as_str(self) -> &'static str {
        match self {
            Channel::Push => "push",
            Channel::Email => "email",
            Channel::Sms => "sms",
        }
    }
}

impl fmt::Display for Channel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

impl FromStr for Channel {
    type Err = IdError;
    fn from_str(s: &str) -> Result<Self, IdError> {
        Channel::ALL
            .into_iter()
            .find(|c| c.as_str() == s)
            .ok_or_else(|| IdError::UnknownChannel(s.to_owned()))
    }
}

/// One value per channel: queue URLs, providers, counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PerChannel<T> {
    pub push: T,
    pub email: T,
    pub sms: T,
}

impl<T> PerChannel<T> {
    pub fn from_fn(mut f: impl FnMut(Channel) -> T) -> Self {
        Self {
            push: f(Channel::Push),
            email: f(Channel::Email),
            sms: f(Channel::Sms),
        }
    }

    pub fn get(&self, channel: Channel) -> &T {
        match channel {
            Channel::Push => &self.push,
            Channel::Email => &self.email,
            Channel::Sms => &self.sms,
        }
    }

    pub fn get_mut(&mut self, channel: Channel) -> &mut T {
        match channel {
            Channel::Push => &mut self.push,
            Channel::Email => &mut self.email,
            Channel::Sms => &mut self.sms,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_accept_the_safe_alphabet_only() {
        assert!(ReminderId::parse("r-1.a_b:c").is_ok());
        assert_eq!(
            ReminderId::parse(""),
            Err(IdError::Empty {
                kind: "reminder_id"
            })
        );
        assert!(matches!(
            SubscriberId::parse("alice@example.com"),
            Err(IdError::BadCharacter { .. })
        ));
        assert!(matches!(
            ReminderId::parse("a\u{0}b"),
            Err(IdError::BadCharacter { .. })
        ));
        assert!(matches!(
            ReminderId::parse("x".repeat(129)),
            Err(IdError::TooLong { .. })
        ));
        assert!(ReminderId::parse("x".repeat(128)).is_ok());
    }

    #[test]
    fn ids_reject_bad_input_when_deserialized() {
        let bad: Result<ReminderId, _> = serde_json::from_str("\"a b\"");
        assert!(bad.is_err());
    }

    #[test]
    fn channels_round_trip_their_wire_names() {
        for c in Channel::ALL {
            assert_eq!(c.as_str().parse::<Channel>(), Ok(c));
            assert_eq!(serde_json::to_string(&c).unwrap(), format!("\"{c}\""));
        }
        assert!("fax".parse::<Channel>().is_err());
    }
}
