//! The queue message (docs/design.md, "Queue messages"): identities, versions and times, never
//! recipients or content.
//!
//! Messages are versioned by a `v` field. Version 1 is [`DeliveryMessage`]; unknown fields are
//! ignored (a rolling deploy must not dead-letter healthy messages), an unknown or missing
//! version is a clean [`DecodeError`], and the delivery key is re-derived and checked.

use serde::{Deserialize, Serialize};

use super::ids::{Channel, ReminderId, SubscriberId};
use super::key::DeliveryKey;
use super::suppression::AddressHash;
use crate::clock::Timestamp;

pub const CURRENT_VERSION: u64 = 1;

/// Who replayed a message from a DLQ, and when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RedriveMarker {
    pub batch_id: String,
    pub operator: String,
    pub at: Timestamp,
}

/// Message version 1: one delivery of one reminder version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveryMessage {
    pub delivery_key: DeliveryKey,
    pub reminder_id: ReminderId,
    pub subscriber_id: SubscriberId,
    pub channel: Channel,
    pub payload_version: u64,
    pub due_at: Timestamp,
    pub fresh_until: Timestamp,
    /// Do not send before this time (a wait longer than SQS can hold on one message).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_before: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redrive: Option<RedriveMarker>,
    /// The channel whose death this delivery falls back from (docs/design.md, "Fallback chain"): it
    /// is sent even though the subscriber's fallback order holds its channel in standby.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_from: Option<Channel>,
    /// The scheduler's word that the reminder listed this channel alone, at its first
    /// version: no other channel's delivery can stand in its way, so the consumer may claim
    /// from the message and read everything it needs after the claim in one request
    /// (`consumer::steps::direct`). Checked against the reminder as read.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sole_channel: bool,
    /// The keyed hash of the address the scheduler read (the suppression's key): the consumer's
    /// one read names the suppression with it, and checks it against the reminder as read. A
    /// keyed hash, never the address. A malformed one reads as absent (the two-read path).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_hash"
    )]
    pub address_hash: Option<AddressHash>,
}

/// An address hash that does not parse is as if absent: the message is still delivered, by
/// the path that reads the reminder first.
fn lenient_hash<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<AddressHash>, D::Error> {
    let raw = Option::<serde_json::Value>::deserialize(d)?;
    Ok(raw
        .as_ref()
        .and_then(serde_json::Value::as_str)
        .and_then(|s| AddressHash::parse(s).ok()))
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("message is not valid JSON or misses a field: {0}")]
    Malformed(String),
    #[error("message has no numeric `v` version field")]
    MissingVersion,
    #[error("message version {0} is not known to this build")]
    UnknownVersion(u64),
    #[error("delivery_key does not match (reminder_id, subscriber_id, channel)")]
    KeyMismatch,
}

#[derive(Serialize)]
struct Wire<'a> {
    v: u64,
    #[serde(flatten)]
    body: &'a DeliveryMessage,
}

#[derive(Deserialize)]
struct VersionProbe {
    v: Option<serde_json::Value>,
}

impl DeliveryMessage {
    pub fn new(
        reminder_id: ReminderId,
        subscriber_id: SubscriberId,
        channel: Channel,
        payload_version: u64,
        due_at: Timestamp,
        fresh_until: Timestamp,
    ) -> Self {
        Self {
            delivery_key: DeliveryKey::derive(&reminder_id, &subscriber_id, channel),
            reminder_id,
            subscriber_id,
            channel,
            payload_version,
            due_at,
            fresh_until,
            not_before: None,
            redrive: None,
            fallback_from: None,
            sole_channel: false,
            address_hash: None,
        }
    }

    /// This message as the scheduler makes it for a reminder listing one channel at its first
    /// version: marked sole, with the address's hash when suppressions are kept.
    #[must_use]
    pub fn sole(mut self, address_hash: Option<AddressHash>) -> Self {
        self.sole_channel = true;
        self.address_hash = address_hash;
        self
    }

    pub fn encode(&self) -> String {
        // Serializing plain strings and integers cannot fail.
        serde_json::to_string(&Wire { v: 1, body: self }).unwrap_or_default()
    }

    pub fn decode(body: &str) -> Result<Self, DecodeError> {
        let probe: VersionProbe =
            serde_json::from_str(body).map_err(|e| DecodeError::Malformed(e.to_string()))?;
        match probe.v.as_ref().and_then(serde_json::Value::as_u64) {
            None => Err(DecodeError::MissingVersion),
            Some(CURRENT_VERSION) => {
                let msg: DeliveryMessage = serde_json::from_str(body)
                    .map_err(|e| DecodeError::Malformed(e.to_string()))?;
                let expected =
                    DeliveryKey::derive(&msg.reminder_id, &msg.subscriber_id, msg.channel);
                if expected != msg.delivery_key {
                    return Err(DecodeError::KeyMismatch);
                }
                Ok(msg)
            }
            Some(other) => Err(DecodeError::UnknownVersion(other)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> DeliveryMessage {
        DeliveryMessage::new(
            ReminderId::parse("r-1").unwrap(),
            SubscriberId::parse("s-1").unwrap(),
            Channel::Email,
            3,
            Timestamp::from_millis(1_000),
            Timestamp::from_millis(61_000),
        )
    }

    fn hash() -> AddressHash {
        let key = crate::domain::SuppressionKey::new(b"k".repeat(32)).unwrap();
        AddressHash::of(
            &key,
            &crate::domain::Recipient::parse(Channel::Email, "a@b.example").unwrap(),
        )
    }

    #[test]
    fn the_sole_marks_round_trip_and_a_bad_hash_reads_as_absent() {
        let m = sample().sole(Some(hash()));
        assert_eq!(DeliveryMessage::decode(&m.encode()), Ok(m.clone()));
        let mut v: serde_json::Value = serde_json::from_str(&m.encode()).unwrap();
        v["address_hash"] = "not-a-hash".into();
        let read = DeliveryMessage::decode(&v.to_string()).unwrap();
        assert_eq!(read.address_hash, None);
        assert!(read.sole_channel);
        v["address_hash"] = 7.into();
        assert_eq!(
            DeliveryMessage::decode(&v.to_string())
                .unwrap()
                .address_hash,
            None
        );
        // A message from before (no marks) decodes as not sole.
        let old = sample().encode();
        assert!(!old.contains("sole_channel"), "{old}");
        assert!(!DeliveryMessage::decode(&old).unwrap().sole_channel);
    }

    #[test]
    fn round_trips_with_a_version_tag() {
        let m = sample();
        let body = m.encode();
        assert!(body.starts_with(r#"{"v":1,"#), "{body}");
        assert_eq!(DeliveryMessage::decode(&body), Ok(m));
    }

    #[test]
    fn ignores_unknown_fields() {
        let mut v: serde_json::Value = serde_json::from_str(&sample().encode()).unwrap();
        v["added_in_v1_1"] = serde_json::json!({"x": 1});
        assert_eq!(DeliveryMessage::decode(&v.to_string()), Ok(sample()));
    }

    #[test]
    fn refuses_unknown_or_missing_versions_cleanly() {
        let mut v: serde_json::Value = serde_json::from_str(&sample().encode()).unwrap();
        v["v"] = 2.into();
        assert_eq!(
            DeliveryMessage::decode(&v.to_string()),
            Err(DecodeError::UnknownVersion(2))
        );
        v["v"] = "1".into();
        assert_eq!(
            DeliveryMessage::decode(&v.to_string()),
            Err(DecodeError::MissingVersion)
        );
        assert!(matches!(
            DeliveryMessage::decode("not json"),
            Err(DecodeError::Malformed(_))
        ));
        assert!(matches!(
            DeliveryMessage::decode(r#"{"v":1,"channel":"fax"}"#),
            Err(DecodeError::Malformed(_))
        ));
    }

    #[test]
    fn refuses_a_key_that_does_not_match_the_tuple() {
        let mut v: serde_json::Value = serde_json::from_str(&sample().encode()).unwrap();
        v["channel"] = "sms".into();
        assert_eq!(
            DeliveryMessage::decode(&v.to_string()),
            Err(DecodeError::KeyMismatch)
        );
    }

    #[test]
    fn carries_no_personal_data() {
        let mut with_extras = sample();
        with_extras.not_before = Some(Timestamp::from_millis(5));
        with_extras.redrive = Some(RedriveMarker {
            batch_id: "b".into(),
            operator: "op".into(),
            at: Timestamp::from_millis(6),
        });
        with_extras.fallback_from = Some(Channel::Push);
        with_extras = with_extras.sole(Some(hash()));
        let v: serde_json::Value = serde_json::from_str(&with_extras.encode()).unwrap();
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        let allowed = [
            "v",
            "delivery_key",
            "reminder_id",
            "subscriber_id",
            "channel",
            "payload_version",
            "due_at",
            "fresh_until",
            "not_before",
            "redrive",
            "fallback_from",
            "sole_channel",
            // A keyed hash (HMAC under the deployment's secret), as suppressions and logs
            // carry it: not the address.
            "address_hash",
        ];
        for k in &keys {
            assert!(allowed.contains(k), "unexpected field {k}");
        }
        assert_eq!(keys.len(), allowed.len());
    }
}
