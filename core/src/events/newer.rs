//! Channels a newer version wrote on a ledger item (a deploy adding a channel): this version
//! has no [`Channel`] for them, so the item is read with a stand-in in their place, and the
//! event names each as written ([`Settled::newer_values`]) — published, never skipped.

use serde_dynamo::{AttributeValue, Item};

use super::Settled;
use crate::domain::{wire, Channel};

/// Where the item keeps a channel: (attribute, field inside it).
const FIELDS: [(&str, Option<&str>, &str); 3] = [
    ("origin", Some("channel"), "channel"),
    ("origin", Some("fallback_from"), "fallback_from"),
    ("fallback_to", None, "fallback_to"),
];

/// The channels of `image` this version does not know, by the event field that names them,
/// each replaced in the image by a stand-in it reads. Empty when every channel is known.
pub(super) fn stand_in(image: &mut Item) -> Vec<(&'static str, &'static str)> {
    let mut newer = Vec::new();
    for (attr, inner, field) in FIELDS {
        let slot = match (image.get_mut(attr), inner) {
            (Some(AttributeValue::M(m)), Some(inner)) => m.get_mut(inner),
            (Some(v), None) => Some(v),
            _ => None,
        };
        if let Some(AttributeValue::S(s)) = slot {
            if s.parse::<Channel>().is_err() {
                newer.push((field, wire::intern(s)));
                *s = Channel::Push.as_str().to_owned();
            }
        }
    }
    newer
}

/// The event with each channel as the item carried it.
pub(super) fn restore(event: &mut Settled, newer: &[(&'static str, &'static str)]) {
    for &(field, raw) in newer {
        let slot = match field {
            "channel" => &mut event.channel,
            "fallback_from" => &mut event.fallback_from,
            _ => &mut event.fallback_to,
        };
        *slot = Some(raw);
        event.newer_values.push(field);
    }
}
