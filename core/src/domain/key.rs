//! The delivery key: the permanent name of one logical delivery `(reminder, subscriber, channel)`.
//!
//! ## Derivation, version 1 (stable: applications may store keys)
//!
//! ```text
//! input  = "reminders/delivery-key/v1" 0x00
//!          len(reminder_id) as u32 big-endian ‖ reminder_id
//!          len(subscriber_id) as u32 big-endian ‖ subscriber_id
//!          channel wire name ("push" | "email" | "sms")
//! key    = "d1_" ‖ base64url_nopad(SHA-256(input))          (46 characters)
//! ```
//!
//! The length prefixes make the encoding unambiguous; the `d1_` prefix names the version, so a
//! later derivation can coexist. The key never depends on a queue message id. It is at most 64
//! characters of `[A-Za-z0-9_-]`, so it fits SQS, DynamoDB and providers' idempotency headers,
//! and it can never start with the ledger's gate prefix (`gate#`).

use std::fmt;

use base64::Engine;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::ids::{Channel, ReminderId, SubscriberId};

pub const MAX_KEY_LEN: usize = 64;
const DOMAIN_V1: &[u8] = b"reminders/delivery-key/v1\0";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("delivery key must be 1 to 64 characters of [A-Za-z0-9_-]")]
    Malformed,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct DeliveryKey(String);

impl DeliveryKey {
    /// Derive the key of a delivery (version 1, above).
    ///
    /// ```
    /// use reminders_core::domain::{Channel, DeliveryKey, ReminderId, SubscriberId};
    ///
    /// let key = DeliveryKey::derive(
    ///     &ReminderId::parse("r-1").unwrap(),
    ///     &SubscriberId::parse("s-1").unwrap(),
    ///     Channel::Email,
    /// );
    /// assert_eq!(key.as_str(), "d1_dK19NehLAozS56lr4H9D3O_rdBhO9JeoF5TXe0cCuT0");
    /// ```
    pub fn derive(reminder: &ReminderId, subscriber: &SubscriberId, channel: Channel) -> Self {
        let mut h = Sha256::new();
        h.update(DOMAIN_V1);
        for part in [reminder.as_str(), subscriber.as_str()] {
            h.update((part.len() as u32).to_be_bytes());
            h.update(part.as_bytes());
        }
        h.update(channel.as_str().as_bytes());
        let digest = h.finalize();
        let encoded = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest);
        Self(format!("d1_{encoded}"))
    }

    /// Accept a key that came from outside (a message, a CLI flag).
    pub fn parse(s: impl Into<String>) -> Result<Self, KeyError> {
        let s = s.into();
        let ok = !s.is_empty()
            && s.len() <= MAX_KEY_LEN
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        ok.then_some(Self(s)).ok_or(KeyError::Malformed)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for DeliveryKey {
    type Error = KeyError;
    fn try_from(s: String) -> Result<Self, KeyError> {
        Self::parse(s)
    }
}

impl From<DeliveryKey> for String {
    fn from(k: DeliveryKey) -> String {
        k.0
    }
}

impl fmt::Display for DeliveryKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(r: &str, s: &str, c: Channel) -> DeliveryKey {
        DeliveryKey::derive(
            &ReminderId::parse(r).unwrap(),
            &SubscriberId::parse(s).unwrap(),
            c,
        )
    }

    /// Test vectors (cross-checked against an independent Python implementation of the
    /// documented derivation): these values are permanent. If this test fails, the derivation changed and
    /// every stored key and in-flight message would be orphaned: add a v2, never edit v1.
    #[test]
    fn v1_test_vectors_are_pinned() {
        assert_eq!(
            key("r-1", "s-1", Channel::Email).as_str(),
            "d1_dK19NehLAozS56lr4H9D3O_rdBhO9JeoF5TXe0cCuT0"
        );
        assert_eq!(
            key("r-1", "s-1", Channel::Sms).as_str(),
            "d1_3u2ZCSA1H4m2B89QJ1EqqgPaoggjJdHVcxJUSTVHoXc"
        );
        assert_eq!(
            key("order:42.pickup", "user_7", Channel::Push).as_str(),
            "d1_s9dlwOD3-65ibrie3dHU4wt5OyKejIqFYL1JpHfdUXc"
        );
    }

    #[test]
    fn keys_fit_the_alphabet_and_length() {
        let k = key(&"r".repeat(128), &"s".repeat(128), Channel::Push);
        assert!(k.as_str().len() <= MAX_KEY_LEN);
        assert_eq!(DeliveryKey::parse(k.as_str()), Ok(k.clone()));
    }

    #[test]
    fn framing_is_unambiguous() {
        assert_ne!(key("ab", "c", Channel::Sms), key("a", "bc", Channel::Sms));
        assert_ne!(key("a", "b", Channel::Sms), key("a", "b", Channel::Push));
    }

    #[test]
    fn parse_refuses_foreign_shapes() {
        for bad in ["", "gate#sms#x", "a b", &"x".repeat(65)] {
            assert_eq!(DeliveryKey::parse(bad), Err(KeyError::Malformed), "{bad}");
        }
    }
}
