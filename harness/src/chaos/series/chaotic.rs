//! The series adapter of a world: faults around each call, the maker's index lagging the table,
//! and the plants.

use super::*;

/// The series adapter of a world: faults around each call; the maker's index lagging the
/// table (its read may answer the version before the latest write); and the plants.
impl<T: SeriesStore> SeriesStore for Chaotic<T> {
    async fn get_series(&self, id: &SeriesId) -> Result<Option<Series>, PortError> {
        self.dice
            .around(OP_GET_SERIES, self.inner.get_series(id))
            .await
    }

    async fn put_series(&self, s: &Series, expected: ExpectedSeries) -> Result<Written, PortError> {
        let stored = self.inner.get_series(&s.series_id).await?;
        let mut s = s.clone();
        if self.plant == Some(Plant::ForgetMade) {
            s.made.clear();
        }
        if self.plant == Some(Plant::ForgetOwedAfter) {
            s.owed_after = None;
        }
        if self.plant == Some(Plant::ForgetDetached) {
            s.detached.clear();
        }
        // A series that made thousands keeps only the latest (`MADE_KEPT`): the oldest are
        // evicted, each long past the maker's progress. Here, a fifth of the writes drop every one
        // older than that progress by more than the make-ahead and the freshness (what no edit
        // looks for, and only a moved occurrence, recorded as detached, still needs).
        if let Some(through) = s.made_through {
            let old = through
                .minus(reminders_core::domain::series::MAKE_AHEAD)
                .minus(s.fresh_for);
            if s.made.first().is_some_and(|t| *t < old) && self.dice.evicts_made() {
                s.made.retain(|t| *t >= old);
                self.dice.evicted();
            }
        }
        let progress = stored
            .as_ref()
            .is_some_and(|st| st.version == s.version && st.made_through < s.made_through);
        if self.plant == Some(Plant::SkipAhead) && progress {
            // Records the maker's progress an hour further than it made.
            s.made_through = s.made_through.map(|t| t.plus(Duration::from_secs(3600)));
        }
        let write = || async {
            let out = self.inner.put_series(&s, expected).await?;
            if out == Written::Written {
                if let Some(before) = stored.clone() {
                    lock(&self.lagging).insert(s.series_id.clone(), before);
                }
            }
            Ok(out)
        };
        let call = self.sent_again_if(write, |w| *w == Written::Written);
        self.dice.around(OP_PUT_SERIES, call).await
    }

    async fn series_due(&self, until: Timestamp, limit: u32) -> Result<Vec<Series>, PortError> {
        let due = self
            .dice
            .around(OP_SERIES_DUE, self.inner.series_due(until, limit))
            .await?;
        // The index lags: a third of the reads answer the version before the last write.
        Ok(due
            .into_iter()
            .map(|s| match lock(&self.lagging).get(&s.series_id) {
                Some(before) if self.dice.range(0, 3) == 0 => before.clone(),
                _ => s,
            })
            .collect())
    }

    async fn series_of(
        &self,
        subscriber: &SubscriberId,
        after: Option<&SeriesId>,
        limit: u32,
    ) -> Result<SeriesPage, PortError> {
        let call = self.inner.series_of(subscriber, after, limit);
        let page = self.dice.around(OP_SERIES_OF, call).await?;
        if crate::chaos::erasure::misses_series(self.plant) {
            return Ok(SeriesPage {
                items: Vec::new(),
                next: None,
            });
        }
        Ok(page)
    }
}
