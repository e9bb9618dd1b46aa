//! The reminders table read by subscriber, newest due first (the `subscriber-index`): what an
//! application lists through `GET /v1/subscribers/{id}/reminders`. Summaries only: no
//! recipient and no content is projected into the index.

use std::future::Future;

use base64::Engine;

use crate::clock::Timestamp;
use crate::domain::{Channel, ReminderId, ReminderStatus, SubscriberId};
use crate::ports::PortError;

pub const OP_BY_SUBSCRIBER: &str = "reminders.by_subscriber";

/// A reminder as the index holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReminderSummary {
    pub reminder_id: ReminderId,
    pub status: ReminderStatus,
    pub due_at: Timestamp,
    pub fresh_until: Timestamp,
    pub payload_version: u64,
    pub channels: Vec<Channel>,
    /// The caller that created it: a list shows a caller only what it reaches.
    pub owner: Option<crate::domain::Owner>,
}

/// One item of a page, decoded on its own: an item another writer stored badly is shown with
/// its reason and never fails the page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listed {
    Summary(ReminderSummary),
    Unreadable {
        reminder_id: String,
        /// The index's sort key, where a page resumes after it.
        due_at: Option<Timestamp>,
        reason: String,
    },
}

/// Where a page ended (exclusive): the last item's due time and raw id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscriberCursor {
    pub due_at: Timestamp,
    pub reminder_id: String,
}

impl SubscriberCursor {
    /// An opaque token for an API answer (base64url of a JSON pair).
    pub fn encode(&self) -> String {
        let raw = serde_json::json!([self.due_at.as_millis(), self.reminder_id]).to_string();
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw)
    }

    /// The token [`SubscriberCursor::encode`] made, or `None` for anything else.
    pub fn decode(token: &str) -> Option<Self> {
        let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(token)
            .ok()?;
        let (due_at, reminder_id): (i64, String) = serde_json::from_slice(&raw).ok()?;
        Some(Self {
            due_at: Timestamp::from_millis(due_at),
            reminder_id,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SubscriberPage {
    /// Newest due first.
    pub items: Vec<Listed>,
    /// Where the next page starts; `None` when this one is the last.
    pub next: Option<SubscriberCursor>,
}

pub trait SubscriberIndex: Send + Sync {
    /// At most `limit` of a subscriber's reminders after `after`, newest due first.
    fn by_subscriber(
        &self,
        subscriber: &SubscriberId,
        after: Option<&SubscriberCursor>,
        limit: u32,
    ) -> impl Future<Output = Result<SubscriberPage, PortError>> + Send;
}

impl<T: SubscriberIndex> SubscriberIndex for std::sync::Arc<T> {
    fn by_subscriber(
        &self,
        subscriber: &SubscriberId,
        after: Option<&SubscriberCursor>,
        limit: u32,
    ) -> impl Future<Output = Result<SubscriberPage, PortError>> + Send {
        (**self).by_subscriber(subscriber, after, limit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_garbage_is_refused() {
        let c = SubscriberCursor {
            due_at: Timestamp::from_millis(1_798_131_600_000),
            reminder_id: "order-42".into(),
        };
        assert_eq!(SubscriberCursor::decode(&c.encode()), Some(c));
        assert_eq!(SubscriberCursor::decode("not a cursor"), None);
        assert_eq!(SubscriberCursor::decode("W10"), None); // "[]"
    }
}
