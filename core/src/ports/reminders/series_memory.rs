//! [`SeriesStore`] in memory, beside the reminders (the embedded pipeline, the simulation and
//! tests; the same contract tests as DynamoDB's).

use super::memory::Table;
use super::MemoryReminderStore;
use crate::clock::Timestamp;
use crate::domain::series::Series;
use crate::domain::{SeriesId, SubscriberId};
use crate::ports::series::{
    make_at, ExpectedSeries, SeriesCursor, SeriesCursorPage, SeriesPage, SeriesStore, Written,
};
use crate::ports::PortError;

impl Table {
    fn write_series(&mut self, s: &Series) {
        let key = s.series_id.as_str().to_owned();
        if let Some((_, Some(at))) = self.series.get(&key) {
            self.series_due.remove(&(*at, key.clone()));
        }
        let at = make_at(s);
        if let Some(at) = at {
            self.series_due.insert((at, key.clone()));
        }
        self.series.insert(key, (s.clone(), at));
    }
}

impl SeriesStore for MemoryReminderStore {
    async fn get_series(&self, id: &SeriesId) -> Result<Option<Series>, PortError> {
        self.with_table(|t| t.series.get(id.as_str()).map(|(s, _)| s.clone()))
    }

    async fn put_series(&self, s: &Series, expected: ExpectedSeries) -> Result<Written, PortError> {
        self.with_table(|t| {
            let stored = t.series.get(s.series_id.as_str()).map(|(s, _)| s.clone());
            if !expected.holds_for(stored.as_ref()) {
                return Written::Conflict(stored.map(Box::new));
            }
            t.write_series(s);
            Written::Written
        })
    }

    async fn series_due(&self, until: Timestamp, limit: u32) -> Result<Vec<Series>, PortError> {
        self.with_table(|t| {
            t.series_due
                .iter()
                .take_while(|(at, _)| *at <= until)
                .take(limit as usize)
                .filter_map(|(_, key)| t.series.get(key).map(|(s, _)| s.clone()))
                .collect()
        })
    }

    async fn series_of(
        &self,
        subscriber: &SubscriberId,
        after: Option<&SeriesId>,
        limit: u32,
    ) -> Result<SeriesPage, PortError> {
        self.with_table(|t| {
            let limit = limit.max(1) as usize;
            // By start, then id, as DynamoDB's subscriber index keeps them.
            let mut all: Vec<&Series> = t
                .series
                .values()
                .map(|(s, _)| s)
                .filter(|s| &s.subscriber_id == subscriber)
                .collect();
            all.sort_by(|a, b| (a.starts_at, &a.series_id).cmp(&(b.starts_at, &b.series_id)));
            let start = after
                .and_then(|a| all.iter().position(|s| &s.series_id == a))
                .map_or(0, |i| i + 1);
            let mut mine = all.into_iter().skip(start);
            let items: Vec<Series> = mine.by_ref().take(limit).cloned().collect();
            let next = match mine.next() {
                Some(_) => items.last().map(|s| s.series_id.clone()),
                None => None,
            };
            SeriesPage { items, next }
        })
    }

    async fn series_after(
        &self,
        subscriber: &SubscriberId,
        after: Option<&SeriesCursor>,
        limit: u32,
    ) -> Result<SeriesCursorPage, PortError> {
        self.with_table(|t| {
            let mut all: Vec<&Series> = t
                .series
                .values()
                .map(|(s, _)| s)
                .filter(|s| &s.subscriber_id == subscriber)
                .filter(|s| {
                    after.is_none_or(|c| (s.starts_at, &s.series_id) > (c.starts_at, &c.series_id))
                })
                .collect();
            all.sort_by(|a, b| (a.starts_at, &a.series_id).cmp(&(b.starts_at, &b.series_id)));
            let limit = limit.max(1) as usize;
            let more = all.len() > limit;
            let items: Vec<Series> = all.into_iter().take(limit).cloned().collect();
            let next = match more {
                true => items.last().map(SeriesCursor::of),
                false => None,
            };
            SeriesCursorPage { items, next }
        })
    }
}

impl MemoryReminderStore {
    /// Delete a series (the erasure's; [`crate::ports::Eraser::delete_series`]).
    pub(super) fn remove_series(&self, id: &SeriesId) -> Result<bool, PortError> {
        self.with_table(|t| {
            let key = id.as_str().to_owned();
            match t.series.remove(&key) {
                Some((_, at)) => {
                    if let Some(at) = at {
                        t.series_due.remove(&(at, key));
                    }
                    true
                }
                None => false,
            }
        })
    }
}
