//! Suppressions (docs/design.md, "Suppressions"): a (channel, address) a provider declared dead,
//! recorded so later deliveries to it end `suppressed` (or fall back) without a provider call.
//!
//! The address is never stored or shown in clear: a suppression holds a keyed hash of it
//! ([`AddressHash`], looked up by) beside its masked form ([`Recipient::masked`], read by
//! people). The hash is HMAC-SHA256 under a secret key over `channel 0x00 address`, so the same
//! address on two channels gives two hashes, and without the key a hash cannot be tested
//! against a list of guessed addresses. Written `s1_` and the first 128 bits in lowercase hex;
//! `s1` names this recipe (the input and the cut). Email addresses are lowercased first: a
//! bounce for `User@Example.org` suppresses `user@example.org`; numbers and push tokens are
//! taken as they are. A new key makes every stored hash unfindable: rotating it lifts all
//! suppressions.

use std::fmt;
use std::str::FromStr;

use hmac::{Hmac, KeyInit, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use super::ids::Channel;
use super::recipient::Recipient;
use crate::clock::Timestamp;

/// The shortest key accepted, in bytes (128 bits).
pub const MIN_KEY_LEN: usize = 16;
const PREFIX: &str = "s1_";
const HASH_BYTES: usize = 16;

/// The secret the address hashes are keyed with. Its `Debug` never prints it.
#[derive(Clone)]
pub struct SuppressionKey(Vec<u8>);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SuppressionError {
    #[error("suppression key: must be at least {MIN_KEY_LEN} bytes")]
    ShortKey,
    #[error("address_hash: must be s1_ and 32 lowercase hex digits")]
    BadHash,
    #[error("unknown suppression source (expected one of {})", SOURCE_NAMES)]
    UnknownSource,
}

impl SuppressionKey {
    pub fn new(bytes: impl Into<Vec<u8>>) -> Result<Self, SuppressionError> {
        let bytes = bytes.into();
        if bytes.len() < MIN_KEY_LEN {
            return Err(SuppressionError::ShortKey);
        }
        Ok(Self(bytes))
    }

    /// The key's bytes, for what derives keys of its own from it ([`super::sealed`]).
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Debug for SuppressionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SuppressionKey(..)")
    }
}

/// The keyed hash of one (channel, address): what suppressions are stored and found under.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct AddressHash(String);

impl AddressHash {
    pub fn of(key: &SuppressionKey, recipient: &Recipient) -> Self {
        let channel = recipient.channel();
        let address = match channel {
            Channel::Email => recipient.expose().to_ascii_lowercase(),
            Channel::Sms | Channel::Push => recipient.expose().to_owned(),
        };
        let mut message = Vec::with_capacity(channel.as_str().len() + 1 + address.len());
        message.extend_from_slice(channel.as_str().as_bytes());
        message.push(0);
        message.extend_from_slice(address.as_bytes());
        let digest = hmac_sha256(&key.0, &message);
        let hex: String = digest[..HASH_BYTES]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        Self(format!("{PREFIX}{hex}"))
    }

    /// A stored or operator-given hash, checked for its form.
    pub fn parse(s: &str) -> Result<Self, SuppressionError> {
        let ok = s.strip_prefix(PREFIX).is_some_and(|hex| {
            hex.len() == HASH_BYTES * 2
                && hex
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        });
        ok.then(|| Self(s.to_owned()))
            .ok_or(SuppressionError::BadHash)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for AddressHash {
    type Error = SuppressionError;
    fn try_from(s: String) -> Result<Self, SuppressionError> {
        Self::parse(&s)
    }
}

impl From<AddressHash> for String {
    fn from(h: AddressHash) -> String {
        h.0
    }
}

impl fmt::Display for AddressHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&self.0)
    }
}

fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    // HMAC takes a key of any length: this cannot fail.
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key).expect("HMAC takes any key");
    mac.update(message);
    mac.finalize().into_bytes().into()
}

/// Who declared the address dead. The wire strings are an interface: never rename one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum SuppressionSource {
    /// An SES permanent (hard) bounce.
    #[serde(rename = "ses_bounce")]
    SesBounce,
    /// An SES complaint (the recipient reported the mail as spam), from SES feedback.
    #[serde(rename = "ses_complaint")]
    SesComplaint,
    /// SES refused the address itself as invalid.
    #[serde(rename = "ses_invalid_address")]
    SesInvalidAddress,
    /// SNS answered `EndpointDisabled` for the push endpoint.
    #[serde(rename = "sns_endpoint_disabled")]
    SnsEndpointDisabled,
    /// SNS refused the phone number as invalid.
    #[serde(rename = "sns_invalid_number")]
    SnsInvalidNumber,
    /// An HTTP provider answered `410 Gone` (the provider contract).
    #[serde(rename = "http_410")]
    Http410,
    /// Recorded by hand.
    #[serde(rename = "operator")]
    Operator,
}

const SOURCE_NAMES: &str = "ses_bounce, ses_complaint, ses_invalid_address, \
     sns_endpoint_disabled, sns_invalid_number, http_410, operator";

impl SuppressionSource {
    pub const ALL: [SuppressionSource; 7] = [
        SuppressionSource::SesBounce,
        SuppressionSource::SesComplaint,
        SuppressionSource::SesInvalidAddress,
        SuppressionSource::SnsEndpointDisabled,
        SuppressionSource::SnsInvalidNumber,
        SuppressionSource::Http410,
        SuppressionSource::Operator,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            SuppressionSource::SesBounce => "ses_bounce",
            SuppressionSource::SesComplaint => "ses_complaint",
            SuppressionSource::SesInvalidAddress => "ses_invalid_address",
            SuppressionSource::SnsEndpointDisabled => "sns_endpoint_disabled",
            SuppressionSource::SnsInvalidNumber => "sns_invalid_number",
            SuppressionSource::Http410 => "http_410",
            SuppressionSource::Operator => "operator",
        }
    }
}

impl fmt::Display for SuppressionSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

impl FromStr for SuppressionSource {
    type Err = SuppressionError;
    fn from_str(s: &str) -> Result<Self, SuppressionError> {
        Self::ALL
            .into_iter()
            .find(|x| x.as_str() == s)
            .ok_or(SuppressionError::UnknownSource)
    }
}

/// One suppressed (channel, address): found by its hash, shown by its masked form.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Suppression {
    pub channel: Channel,
    pub address_hash: AddressHash,
    pub masked: String,
    pub source: SuppressionSource,
    pub at: Timestamp,
}

impl Suppression {
    pub fn record(
        key: &SuppressionKey,
        recipient: &Recipient,
        source: SuppressionSource,
        at: Timestamp,
    ) -> Self {
        Self {
            channel: recipient.channel(),
            address_hash: AddressHash::of(key, recipient),
            masked: recipient.masked(),
            source,
            at,
        }
    }
}

impl fmt::Display for Suppression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} ({}) by {} at {}",
            self.channel,
            self.masked,
            self.address_hash,
            self.source,
            self.at.to_rfc3339()
        )
    }
}

#[cfg(test)]
#[path = "suppression_tests.rs"]
mod tests;
