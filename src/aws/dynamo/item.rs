//! The reminders table's items as stored, and their decoding: every item on its own, and a
//! failure names the attribute at fault (`recipients.sms: …`, `content.kind: …`), never the
//! value of a recipient. Applications in other languages write the same shape
//! (docs/data-formats.md).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use aws_sdk_dynamodb::types::AttributeValue;
use serde::{Deserialize, Serialize};

use crate::clock::Timestamp;
use crate::domain::{
    due_shard, Channel, Content, Recipient, Reminder, ReminderId, ReminderStatus, SubscriberId,
};
use crate::ports::{DueEntry, DueReminder, Listed, ReminderSummary};

/// The item as stored.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct ReminderItem {
    reminder_id: ReminderId,
    subscriber_id: SubscriberId,
    due_at: Timestamp,
    fresh_until: Timestamp,
    payload_version: u64,
    status: ReminderStatus,
    /// Projected into the index, so the scheduler needs no read of the item.
    channels: Vec<Channel>,
    /// Channel wire name → address.
    recipients: BTreeMap<String, String>,
    content: Content,
    expires_at: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    due_shard: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    invalid_reason: Option<String>,
    /// Channels enqueued before an edit added one (projected: the scheduler skips them).
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    enqueued_channels: BTreeSet<Channel>,
    /// The caller that created it (not in an index: a list reads its page's owners from the
    /// table).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    owner: Option<crate::domain::Owner>,
    /// An occurrence of a series edited on its own: the series' edits leave it alone.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    detached: bool,
    /// What a newer version wrote that this one does not know: written back as read.
    #[serde(flatten)]
    unknown: crate::domain::wire::Unknown,
}

/// The index projection: keys plus the INCLUDE attributes.
#[derive(Debug, Deserialize)]
struct DueItem {
    reminder_id: ReminderId,
    subscriber_id: SubscriberId,
    due_at: Timestamp,
    fresh_until: Timestamp,
    payload_version: u64,
    channels: Vec<Channel>,
    status: ReminderStatus,
    #[serde(default)]
    enqueued_channels: BTreeSet<Channel>,
    /// Projected by `due-recipients-index` only (absent from the first `due-index`).
    #[serde(default)]
    recipients: BTreeMap<String, String>,
}

/// Decode one item, naming the attribute that failed.
fn decode<T: for<'de> Deserialize<'de>>(
    item: HashMap<String, AttributeValue>,
) -> Result<T, String> {
    let item: serde_dynamo::Item = item.into();
    let de = serde_dynamo::Deserializer::from_attribute_value(serde_dynamo::AttributeValue::M(
        item.into(),
    ));
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let path = if path == "." { "item".to_owned() } else { path };
        let message = e.into_inner().to_string();
        // The decoder's own words (`expected internally tagged enum Content`, `Expected seq`)
        // name Rust types: an operator needs what the attribute should hold.
        match shape_of(&path).filter(|_| !message.starts_with("missing field")) {
            Some(shape) => format!("{path}: {shape}"),
            None => format!("{path}: {}", crate::domain::reminder::redact(&message)),
        }
    })
}

/// What an attribute of a stored reminder must hold, by its path's first segment
/// (docs/data-formats.md, "Reminders table").
fn shape_of(path: &str) -> Option<&'static str> {
    let field = path.split(['.', '[']).next().unwrap_or(path);
    Some(match field {
        "content" => {
            "must be a map with kind \"text\", subject and body, or kind \"template\", \
             template_id and template_data (a JSON object as text)"
        }
        "recipients" => "must be a map from channel (push, email, sms) to an address (text)",
        "channels" | "enqueued_channels" => "must be a list of channel names: push, email or sms",
        "status" => "must be one of scheduled, enqueued, cancelled, expired, invalid",
        "due_at" | "fresh_until" => "must be a whole number: epoch milliseconds",
        "payload_version" => "must be a whole number, 0 or more",
        "due_shard" => "must be a whole number from 0 to 63",
        "expires_at" => "must be a whole number: epoch seconds (the TTL)",
        "owner" => "must be text of 1 to 512 printable characters: the caller that created it",
        "detached" => "must be a boolean: an occurrence of a series edited on its own",
        "reminder_id" | "subscriber_id" | "invalid_reason" => return None,
        _ => return None,
    })
}

/// The subscriber index's projection: keys plus the INCLUDE attributes.
#[derive(Debug, Deserialize)]
struct SummaryItem {
    reminder_id: ReminderId,
    status: ReminderStatus,
    due_at: Timestamp,
    fresh_until: Timestamp,
    payload_version: u64,
    channels: Vec<Channel>,
    #[serde(default)]
    owner: Option<crate::domain::Owner>,
}

/// One subscriber-index item, decoded on its own.
pub(super) fn summary(item: HashMap<String, AttributeValue>) -> Listed {
    let reminder_id = match item.get("reminder_id") {
        Some(AttributeValue::S(id)) => id.clone(),
        _ => String::new(),
    };
    let due_at = match item.get("due_at") {
        Some(AttributeValue::N(n)) => n.parse().ok().map(Timestamp::from_millis),
        _ => None,
    };
    match decode::<SummaryItem>(item) {
        Ok(i) => Listed::Summary(ReminderSummary {
            reminder_id: i.reminder_id,
            status: i.status,
            due_at: i.due_at,
            fresh_until: i.fresh_until,
            payload_version: i.payload_version,
            channels: i.channels,
            owner: i.owner,
        }),
        Err(reason) => Listed::Unreadable {
            reminder_id,
            due_at,
            reason,
        },
    }
}

/// A whole reminder, or why it cannot be sent.
pub(super) fn reminder(item: HashMap<String, AttributeValue>) -> Result<Reminder, String> {
    decode::<ReminderItem>(item)?.into_reminder()
}

/// One due-index item, decoded on its own.
pub(super) fn due_entry(item: HashMap<String, AttributeValue>) -> DueEntry {
    let key = match item.get("reminder_id") {
        Some(AttributeValue::S(id)) => id.clone(),
        _ => String::new(),
    };
    // The index's sort key: always a number.
    let due_at = match item.get("due_at") {
        Some(AttributeValue::N(n)) => n.parse().ok(),
        _ => None,
    };
    let due_at = Timestamp::from_millis(due_at.unwrap_or(0));
    let bad = |reason| DueEntry::Unschedulable {
        key: key.clone(),
        due_at,
        reason,
    };
    let d = match decode::<DueItem>(item) {
        Ok(d) => d,
        Err(reason) => return bad(reason),
    };
    // Expired but still indexed: an expiry the scheduler has not finished (its mark keeps
    // the item in the index until the ledger says `expired`).
    let expiring = d.status == ReminderStatus::Expired;
    if d.status != ReminderStatus::Scheduled && !expiring {
        return bad(format!(
            "status: {} but still in the due index",
            d.status.as_str()
        ));
    }
    let due = DueReminder {
        reminder_id: d.reminder_id,
        subscriber_id: d.subscriber_id,
        due_at: d.due_at,
        fresh_until: d.fresh_until,
        payload_version: d.payload_version,
        channels: d
            .channels
            .into_iter()
            .filter(|c| !d.enqueued_channels.contains(c))
            .collect(),
        // An address that does not parse is left out: its delivery takes the two-read path,
        // whose intake names the field.
        addresses: d
            .recipients
            .iter()
            .filter_map(|(name, address)| {
                let channel: Channel = name.parse().ok()?;
                Recipient::parse(channel, address).ok()
            })
            .collect(),
        expiring,
    };
    match due.problem() {
        None => DueEntry::Due(due),
        Some(reason) => bad(reason),
    }
}

impl ReminderItem {
    pub(super) fn from_reminder(r: &Reminder, shards: u32) -> Self {
        Self {
            reminder_id: r.reminder_id.clone(),
            subscriber_id: r.subscriber_id.clone(),
            due_at: r.due_at,
            fresh_until: r.fresh_until,
            payload_version: r.payload_version,
            status: r.status,
            channels: r.channels().collect(),
            recipients: r
                .recipients
                .iter()
                .map(|(c, rec)| (c.as_str().to_owned(), rec.expose().to_owned()))
                .collect(),
            content: r.content.clone(),
            expires_at: r.expires_at,
            due_shard: (r.status == ReminderStatus::Scheduled)
                .then(|| due_shard(&r.reminder_id, shards)),
            invalid_reason: r.invalid_reason.clone(),
            enqueued_channels: r.enqueued.clone(),
            owner: r.owner.clone(),
            detached: r.detached,
            unknown: r.unknown.clone(),
        }
    }

    /// Each channel on its own: a listed channel whose recipient is missing or invalid is
    /// unsendable (its delivery dies naming the field); the other channels still go out.
    fn into_reminder(self) -> Result<Reminder, String> {
        let (mut recipients, mut unsendable) = (BTreeMap::new(), BTreeMap::new());
        for (name, address) in self.recipients {
            let channel: Channel = name
                .parse()
                .map_err(|e| format!("recipients.{name}: {e}"))?;
            match Recipient::parse(channel, &address) {
                Ok(r) => {
                    recipients.insert(channel, r);
                }
                Err(e) => {
                    unsendable.insert(channel, format!("recipients.{channel}: {e}"));
                }
            }
        }
        for c in &self.channels {
            if !recipients.contains_key(c) && !unsendable.contains_key(c) {
                let why = format!("recipients.{c}: missing for a listed channel");
                unsendable.insert(*c, why);
            }
        }
        if recipients.is_empty() && unsendable.is_empty() {
            return Err("recipients: empty".into());
        }
        // The same rules as a reminder created here: template data that is not a JSON object
        // never reaches a provider.
        crate::domain::reminder::check_content(&self.content).map_err(|e| e.to_string())?;
        Ok(Reminder {
            reminder_id: self.reminder_id,
            subscriber_id: self.subscriber_id,
            due_at: self.due_at,
            fresh_until: self.fresh_until,
            content: self.content,
            recipients,
            payload_version: self.payload_version,
            status: self.status,
            invalid_reason: self.invalid_reason,
            unsendable,
            expires_at: self.expires_at,
            enqueued: self.enqueued_channels,
            owner: self.owner,
            detached: self.detached,
            unknown: self.unknown,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(template_data: &str) -> HashMap<String, AttributeValue> {
        let s = |v: &str| AttributeValue::S(v.to_owned());
        let n = |v: i64| AttributeValue::N(v.to_string());
        let content = HashMap::from([
            ("kind".to_owned(), s("template")),
            ("template_id".to_owned(), s("pickup")),
            ("template_data".to_owned(), s(template_data)),
        ]);
        HashMap::from([
            ("reminder_id".to_owned(), s("r-1")),
            ("subscriber_id".to_owned(), s("s-1")),
            ("due_at".to_owned(), n(1_000)),
            ("fresh_until".to_owned(), n(2_000)),
            ("payload_version".to_owned(), n(1)),
            ("status".to_owned(), s("scheduled")),
            ("channels".to_owned(), AttributeValue::L(vec![s("email")])),
            (
                "recipients".to_owned(),
                AttributeValue::M(HashMap::from([("email".to_owned(), s("a@example.org"))])),
            ),
            ("content".to_owned(), AttributeValue::M(content)),
            ("expires_at".to_owned(), n(3)),
        ])
    }

    /// Template data an application stored that is not JSON never goes to the provider as it is;
    /// the item is refused, naming the field.
    #[test]
    fn template_data_that_is_not_json_is_refused_naming_the_field() {
        let err = reminder(item("{not json")).unwrap_err();
        assert_eq!(
            err,
            "content.template_data: must be a JSON object (as text)"
        );
        let ok = reminder(item(r#"{"order":"42"}"#)).unwrap();
        assert!(matches!(ok.content, Content::Template { .. }));
    }
}
