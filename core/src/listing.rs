//! A subscriber's lists as one caller sees them, a page at a time: the series and the
//! reminders of a subscriber, each page holding only what the caller reaches, each `next_cursor`
//! sealed for that list and that caller (`domain::sealed`). The API's list routes answer these
//! pages; the system checker lists through the same functions as an application that owns none
//! of a subscriber's items, and holds every cursor it is handed to the promise that it reveals
//! nothing and opens nowhere else.

use crate::domain::series::Series;
use crate::domain::{Access, CursorSeal, ReminderId, SubscriberId};
use crate::ports::series::{SeriesCursor, SeriesStore};
use crate::ports::{visible_page, Listed, PortError, SubscriberCursor, SubscriberIndex};

/// How a list's cursor is sealed and opened: [`CursorSeal`] in the product. A trait so that the
/// system checker can put a cursor that is not sealed in its place and see its verdict fire.
pub trait CursorSealing: Send + Sync {
    /// `plain` sealed for `context`.
    fn seal(&self, context: &str, plain: &str) -> String;
    /// What [`CursorSealing::seal`] sealed for `context`, or `None` for any other token.
    fn open(&self, context: &str, token: &str) -> Option<String>;
}

impl CursorSealing for CursorSeal {
    fn seal(&self, context: &str, plain: &str) -> String {
        CursorSeal::seal(self, context, plain)
    }

    fn open(&self, context: &str, token: &str) -> Option<String> {
        CursorSeal::open(self, context, token)
    }
}

/// The two lists of a subscriber.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum List {
    Reminders,
    Series,
}

impl List {
    pub const fn as_str(self) -> &'static str {
        match self {
            List::Reminders => "reminders",
            List::Series => "series",
        }
    }
}

/// What a list's cursor is sealed for: which list, whose, listed by whom. A cursor opens only
/// there, so it cannot be replayed on another list or by another caller to learn where it points.
pub fn cursor_context(list: List, subscriber: &SubscriberId, access: &Access) -> String {
    let caller = access.owner().map_or("", |o| o.as_str());
    format!("{}\0{}\0{caller}", list.as_str(), subscriber.as_str())
}

/// One page as the caller sees it, and the sealed cursor of the next (`None` on the last).
#[derive(Debug, Clone)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub next_cursor: Option<String>,
}

/// Why a page could not be answered.
#[derive(Debug, thiserror::Error)]
pub enum ListError {
    /// A cursor this list did not hand out to this caller (altered, made up, handed out for
    /// another list or caller, or sealed before a key rotation).
    #[error("cursor: must be a next_cursor this API answered (list again from the start)")]
    BadCursor,
    #[error(transparent)]
    Port(#[from] PortError),
}

/// The position `cursor` names, opened for `context`: `None` for the first page, refused when the
/// seal does not open it or what it holds is not a position of that list.
fn opened<C, K: CursorSealing + ?Sized>(
    seal: &K,
    context: &str,
    cursor: Option<&str>,
    decode: impl FnOnce(&str) -> Option<C>,
) -> Result<Option<C>, ListError> {
    cursor
        .map(|raw| {
            seal.open(context, raw)
                .and_then(|plain| decode(&plain))
                .ok_or(ListError::BadCursor)
        })
        .transpose()
}

/// A page of `subscriber`'s series that `access` reaches, after `cursor`. The store's cursor
/// names where the page ended (a series' start and id), which may be another owner's series left
/// out of the page: sealed, it reveals nothing of it.
pub async fn series_page<S, K>(
    store: &S,
    seal: &K,
    access: &Access,
    subscriber: &SubscriberId,
    cursor: Option<&str>,
    limit: u32,
) -> Result<Page<Series>, ListError>
where
    S: SeriesStore,
    K: CursorSealing + ?Sized,
{
    let context = cursor_context(List::Series, subscriber, access);
    let after = opened(seal, &context, cursor, SeriesCursor::decode)?;
    let page = store
        .series_after(subscriber, after.as_ref(), limit)
        .await?;
    Ok(Page {
        items: page
            .items
            .into_iter()
            .filter(|s| access.reaches(s.owner.as_ref(), &s.subscriber_id))
            .collect(),
        next_cursor: page.next.map(|c| seal.seal(&context, &c.encode())),
    })
}

/// A page of `subscriber`'s reminders that `access` reaches, after `cursor` ([`visible_page`]).
pub async fn reminders_page<I, K>(
    index: &I,
    seal: &K,
    access: &Access,
    subscriber: &SubscriberId,
    cursor: Option<&str>,
    limit: u32,
) -> Result<Page<Listed>, ListError>
where
    I: SubscriberIndex,
    K: CursorSealing + ?Sized,
{
    let context = cursor_context(List::Reminders, subscriber, access);
    let after = opened(seal, &context, cursor, |plain| {
        SubscriberCursor::decode(plain)
            .filter(|c| ReminderId::parse(c.reminder_id.as_str()).is_ok())
    })?;
    let page = visible_page(index, access, subscriber, after.as_ref(), limit).await?;
    Ok(Page {
        items: page.items,
        next_cursor: page.next.map(|c| seal.seal(&context, &c.encode())),
    })
}
