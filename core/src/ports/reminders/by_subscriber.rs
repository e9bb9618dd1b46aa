//! The reminders table read by subscriber, newest due first (the `subscriber-index`): what an
//! application lists through `GET /v1/subscribers/{id}/reminders`. Summaries only: no
//! recipient and no content is projected into the index.

use std::future::Future;

use base64::Engine;

use crate::clock::Timestamp;
use crate::domain::{Access, Channel, ReminderId, ReminderStatus, SubscriberId};
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

impl Listed {
    /// Where a page that ends with this item resumes: after it (an unreadable item with no
    /// due time has no place in the index's order, and ends the listing).
    pub fn cursor(&self) -> Option<SubscriberCursor> {
        match self {
            Listed::Summary(r) => Some(SubscriberCursor {
                due_at: r.due_at,
                reminder_id: r.reminder_id.as_str().to_owned(),
            }),
            Listed::Unreadable {
                reminder_id,
                due_at,
                ..
            } => due_at.map(|due_at| SubscriberCursor {
                due_at,
                reminder_id: reminder_id.clone(),
            }),
        }
    }

    /// Whether `access` may see this item of `subscriber`'s list: an item no one could read
    /// is an operator's to see.
    pub fn visible_to(&self, access: &Access, subscriber: &SubscriberId) -> bool {
        match self {
            Listed::Summary(s) => access.reaches(s.owner.as_ref(), subscriber),
            Listed::Unreadable { .. } => *access == Access::Any,
        }
    }
}

/// The most index items one [`visible_page`] reads before it answers with what it found.
pub const MAX_SCANNED: usize = 1_000;

/// The most index reads one [`visible_page`] makes (an index answering empty pages with a
/// cursor cannot hold it).
const MAX_ROUNDS: usize = 20;

/// At most `limit` of `subscriber`'s reminders that `access` reaches, after `after`. The
/// index holds every application's reminders of a subscriber; this reads on until the page
/// is full or the index ends, and the cursor it answers is the last *visible* item's, so a
/// page never names a reminder its caller does not reach. Only when [`MAX_SCANNED`] items
/// went by with none visible does the cursor name the last one read (its id and due time,
/// opaque to the caller; the reminder itself still answers 404).
pub async fn visible_page<I: SubscriberIndex>(
    index: &I,
    access: &Access,
    subscriber: &SubscriberId,
    after: Option<&SubscriberCursor>,
    limit: u32,
) -> Result<SubscriberPage, PortError> {
    let wanted = limit.max(1) as usize;
    let mut items: Vec<Listed> = Vec::new();
    let mut from = after.cloned();
    let (mut scanned, mut rounds) = (0, 0);
    loop {
        // The first read asks for the page; later ones, after items it may not show, for
        // a full page of the index.
        let ask = if scanned == 0 { limit.max(1) } else { 100 };
        let page = index.by_subscriber(subscriber, from.as_ref(), ask).await?;
        scanned += page.items.len();
        let mut rest = page.items.into_iter();
        for item in rest.by_ref() {
            if item.visible_to(access, subscriber) {
                items.push(item);
                if items.len() == wanted {
                    break;
                }
            }
        }
        let more_here = rest.any(|i| i.visible_to(access, subscriber));
        if items.len() == wanted {
            let next = if more_here || page.next.is_some() {
                items.last().and_then(Listed::cursor)
            } else {
                None
            };
            return Ok(SubscriberPage { items, next });
        }
        rounds += 1;
        match page.next {
            None => return Ok(SubscriberPage { items, next: None }),
            Some(next) if scanned >= MAX_SCANNED || rounds >= MAX_ROUNDS => {
                let next = items.last().and_then(Listed::cursor).or(Some(next));
                return Ok(SubscriberPage { items, next });
            }
            Some(next) => from = Some(next),
        }
    }
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
