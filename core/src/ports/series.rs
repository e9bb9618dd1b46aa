//! Where series live (docs/design.md, "Recurring series"), beside the reminders: a port of its own,
//! so the pipeline's reminder stores and their wrappers carry nothing of it. DynamoDB keeps a
//! series in the reminders table under `series#{id}`, with the sparse `series-index` for the maker,
//! and a subscriber's list in the `subscriber-index` (partition `series#{subscriber}`, by start);
//! memory keeps a map.

use std::future::Future;

use crate::clock::Timestamp;
use crate::domain::series::Series;
use crate::domain::{SeriesId, SubscriberId};
use crate::ports::PortError;

pub const OP_GET_SERIES: &str = "series.get";
pub const OP_PUT_SERIES: &str = "series.put";
pub const OP_SERIES_DUE: &str = "series.due";
pub const OP_SERIES_OF: &str = "series.of";

/// How a conditional write of a series went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Written {
    Written,
    /// The stored series was not the one expected (another writer came first), or one
    /// exists where none was expected: it, as stored now (`None` when there is none).
    Conflict(Option<Box<Series>>),
}

/// What a conditional write expects to find.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExpectedSeries {
    /// No series with that id.
    Absent,
    /// The series at this version, with this much made (an edit and the maker each fence the
    /// other: neither's write lands over what it did not read).
    At {
        version: u64,
        made_through: Option<Timestamp>,
    },
}

impl ExpectedSeries {
    pub fn of(s: &Series) -> Self {
        ExpectedSeries::At {
            version: s.version,
            made_through: s.made_through,
        }
    }

    pub fn holds_for(self, stored: Option<&Series>) -> bool {
        match (self, stored) {
            (ExpectedSeries::Absent, None) => true,
            (
                ExpectedSeries::At {
                    version,
                    made_through,
                },
                Some(s),
            ) => s.version == version && s.made_through == made_through,
            _ => false,
        }
    }
}

/// One page of a subscriber's series, by start, then id.
#[derive(Debug, Clone, Default)]
pub struct SeriesPage {
    pub items: Vec<Series>,
    /// The id to pass as `after` for the next page; `None` on the last.
    pub next: Option<SeriesId>,
}

/// Where a page of a subscriber's series ended (exclusive): the start and id of the last one
/// read, which are the subscriber index's sort key and the item's key. The next page needs
/// no read of that series, so it goes on from the right place when the series is gone (an
/// erasure deletes each page before it reads the next) or its start was edited.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeriesCursor {
    pub starts_at: Timestamp,
    pub series_id: SeriesId,
}

impl SeriesCursor {
    pub fn of(s: &Series) -> Self {
        Self {
            starts_at: s.starts_at,
            series_id: s.series_id.clone(),
        }
    }

    /// An opaque token for an API answer (base64url of a JSON pair).
    pub fn encode(&self) -> String {
        use base64::Engine;
        let raw = serde_json::json!([self.starts_at.as_millis(), self.series_id]).to_string();
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw)
    }

    /// The token [`SeriesCursor::encode`] made, or `None` for anything else.
    pub fn decode(token: &str) -> Option<Self> {
        use base64::Engine;
        let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(token)
            .ok()?;
        let (starts_at, series_id): (i64, SeriesId) = serde_json::from_slice(&raw).ok()?;
        Some(Self {
            starts_at: Timestamp::from_millis(starts_at),
            series_id,
        })
    }
}

/// One page of a subscriber's series, by start, then id, with where the next page starts.
#[derive(Debug, Clone, Default)]
pub struct SeriesCursorPage {
    pub items: Vec<Series>,
    /// Where the next page starts: the last key read, even when its series was gone by the
    /// time it was read (an index lags a delete), so a page of such keys never ends the list.
    /// `None` on the last page.
    pub next: Option<SeriesCursor>,
}

pub trait SeriesStore: Send + Sync {
    fn get_series(
        &self,
        id: &SeriesId,
    ) -> impl Future<Output = Result<Option<Series>, PortError>> + Send;

    /// Write `s` if the stored series is what `expected` says. An active series is due for
    /// the maker at its next occurrence less [`crate::domain::series::MAKE_AHEAD`]; any
    /// other leaves the maker's index.
    fn put_series(
        &self,
        s: &Series,
        expected: ExpectedSeries,
    ) -> impl Future<Output = Result<Written, PortError>> + Send;

    /// Active series whose next occurrence to make is due at or before `until`, at most
    /// `limit`, earliest first.
    fn series_due(
        &self,
        until: Timestamp,
        limit: u32,
    ) -> impl Future<Output = Result<Vec<Series>, PortError>> + Send;

    /// A subscriber's series by start, then id, after the series `after`, at most `limit`.
    /// `after` is read to find where it was: once it is gone, the list starts over (see
    /// [`SeriesStore::series_after`], which has no such read).
    fn series_of(
        &self,
        subscriber: &SubscriberId,
        after: Option<&SeriesId>,
        limit: u32,
    ) -> impl Future<Output = Result<SeriesPage, PortError>> + Send;

    /// A subscriber's series by start, then id, after `after`, at most `limit`. The stores
    /// answer from the cursor alone; this default, for a store that only has
    /// [`SeriesStore::series_of`], pages by the last series' id.
    fn series_after(
        &self,
        subscriber: &SubscriberId,
        after: Option<&SeriesCursor>,
        limit: u32,
    ) -> impl Future<Output = Result<SeriesCursorPage, PortError>> + Send {
        async move {
            let page = self
                .series_of(subscriber, after.map(|c| &c.series_id), limit)
                .await?;
            let next = page.next.and_then(|id| {
                let last = page.items.iter().find(|s| s.series_id == id);
                last.map(SeriesCursor::of)
            });
            Ok(SeriesCursorPage {
                items: page.items,
                next,
            })
        }
    }
}

impl<T: SeriesStore> SeriesStore for std::sync::Arc<T> {
    fn get_series(
        &self,
        id: &SeriesId,
    ) -> impl Future<Output = Result<Option<Series>, PortError>> + Send {
        (**self).get_series(id)
    }
    fn put_series(
        &self,
        s: &Series,
        expected: ExpectedSeries,
    ) -> impl Future<Output = Result<Written, PortError>> + Send {
        (**self).put_series(s, expected)
    }
    fn series_due(
        &self,
        until: Timestamp,
        limit: u32,
    ) -> impl Future<Output = Result<Vec<Series>, PortError>> + Send {
        (**self).series_due(until, limit)
    }
    fn series_of(
        &self,
        subscriber: &SubscriberId,
        after: Option<&SeriesId>,
        limit: u32,
    ) -> impl Future<Output = Result<SeriesPage, PortError>> + Send {
        (**self).series_of(subscriber, after, limit)
    }
    fn series_after(
        &self,
        subscriber: &SubscriberId,
        after: Option<&SeriesCursor>,
        limit: u32,
    ) -> impl Future<Output = Result<SeriesCursorPage, PortError>> + Send {
        (**self).series_after(subscriber, after, limit)
    }
}

/// When the maker should next look at `s`: at once while an edit or a cancel of it is still
/// to be brought in line; else its next occurrence to make less the make-ahead, or, once none
/// is left, when its last occurrence is due (to end it then); `None` once it is cancelled or
/// ended.
pub fn make_at(s: &Series) -> Option<Timestamp> {
    if s.pending {
        // An edit or a cancel not yet brought in line: at once.
        return Some(Timestamp::from_millis(0));
    }
    if s.status != crate::domain::series::SeriesStatus::Active {
        return None;
    }
    let ahead = crate::domain::series::MAKE_AHEAD.as_millis() as i64;
    match s.next_after(s.made_through) {
        Some(next) => Some(Timestamp::from_millis(
            next.as_millis().saturating_sub(ahead),
        )),
        None => Some(s.made.last().copied().unwrap_or(s.starts_at)),
    }
}
