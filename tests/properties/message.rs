//! `DeliveryMessage::decode` / `encode` (docs/design.md, "Queue messages"): decoding never panics,
//! what `encode` writes decodes to the same message, and a decoded body re-encodes to itself.

use proptest::prelude::*;
use reminders::clock::Timestamp;
use reminders::domain::{
    Channel, DecodeError, DeliveryKey, DeliveryMessage, RedriveMarker, ReminderId, SubscriberId,
};
use serde_json::{json, Value};

pub const ID: &str = "[A-Za-z0-9._:-]{1,128}";

fn channel() -> impl Strategy<Value = Channel> {
    prop::sample::select(Channel::ALL.to_vec())
}

fn timestamp() -> impl Strategy<Value = Timestamp> {
    any::<i64>().prop_map(Timestamp::from_millis)
}

fn marker() -> impl Strategy<Value = RedriveMarker> {
    (any::<String>(), any::<String>(), timestamp()).prop_map(|(batch_id, operator, at)| {
        RedriveMarker {
            batch_id,
            operator,
            at,
        }
    })
}

/// Any message the pipeline could write.
pub fn message() -> impl Strategy<Value = DeliveryMessage> {
    let ids = (ID, ID, channel(), any::<u64>());
    let times = (timestamp(), timestamp(), prop::option::of(timestamp()));
    (ids, times, prop::option::of(marker())).prop_map(|((r, s, c, v), (due, fresh, nb), m)| {
        let (r, s) = (
            ReminderId::parse(r).unwrap(),
            SubscriberId::parse(s).unwrap(),
        );
        let mut msg = DeliveryMessage::new(r, s, c, v, due, fresh);
        msg.not_before = nb;
        msg.redrive = m;
        msg
    })
}

/// JSON-shaped input: the message's own fields (and `v`) with values of any JSON type.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        "[a-z0-9_]{0,12}".prop_map(Value::from),
        Just(Value::from("email")),
        Just(Value::from(1)),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map("[a-z_]{1,8}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn near_message() -> impl Strategy<Value = String> {
    let fields = [
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
    ];
    let entry = (prop::sample::select(fields.to_vec()), json_value());
    prop::collection::vec(entry, 0..12).prop_map(|entries| {
        let map: serde_json::Map<String, Value> = entries
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect();
        Value::Object(map).to_string()
    })
}

/// A valid body with one character replaced, removed, or the text cut short.
fn mangled() -> impl Strategy<Value = String> {
    (
        message(),
        any::<prop::sample::Index>(),
        any::<char>(),
        0u8..3,
    )
        .prop_map(|(m, at, c, how)| {
            let mut chars: Vec<char> = m.encode().chars().collect();
            let i = at.index(chars.len());
            match how {
                0 => chars[i] = c,
                1 => {
                    chars.remove(i);
                }
                _ => chars.truncate(i),
            }
            chars.into_iter().collect()
        })
}

/// Decoding `body` either fails cleanly or gives a message that re-encodes to an equal one.
fn decodes_consistently(body: &str) -> Result<(), TestCaseError> {
    if let Ok(msg) = DeliveryMessage::decode(body) {
        let expected = DeliveryKey::derive(&msg.reminder_id, &msg.subscriber_id, msg.channel);
        prop_assert_eq!(&msg.delivery_key, &expected);
        prop_assert_eq!(DeliveryMessage::decode(&msg.encode()), Ok(msg));
    }
    Ok(())
}

proptest! {
    #![proptest_config(crate::cheap())]

    #[test]
    fn decode_never_panics_on_any_text(body in any::<String>()) {
        decodes_consistently(&body)?;
    }

    #[test]
    fn decode_never_panics_on_message_shaped_json(body in near_message()) {
        decodes_consistently(&body)?;
    }

    #[test]
    fn decode_never_panics_on_mangled_messages(body in mangled()) {
        decodes_consistently(&body)?;
    }

    /// What `encode` writes is version 1 and decodes to the same message.
    #[test]
    fn encode_then_decode_is_the_identity(msg in message()) {
        let body = msg.encode();
        prop_assert!(body.starts_with(r#"{"v":1,"#), "{}", body);
        prop_assert_eq!(DeliveryMessage::decode(&body), Ok(msg));
    }

    /// A version other than 1 is refused as such; a key for another tuple as a mismatch.
    #[test]
    fn versions_and_keys_are_checked(msg in message(), v in 2u64.., other in channel()) {
        let mut body: Value = serde_json::from_str(&msg.encode()).unwrap();
        body["v"] = json!(v);
        prop_assert_eq!(DeliveryMessage::decode(&body.to_string()), Err(DecodeError::UnknownVersion(v)));
        body["v"] = json!(1);
        body["channel"] = json!(other);
        let decoded = DeliveryMessage::decode(&body.to_string());
        if other == msg.channel {
            prop_assert_eq!(decoded, Ok(msg));
        } else {
            prop_assert_eq!(decoded, Err(DecodeError::KeyMismatch));
        }
    }
}
