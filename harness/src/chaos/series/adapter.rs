//! The series calls of the reminders table's model in a world
//! ([`crate::chaos::adapter::Adapter`]): faults around each call, the maker's index lagging the
//! table (its read may answer the version before the latest write), and the plants.

use super::*;
use reminders_core::ports::MemoryReminderStore;

impl Adapter<Arc<MemoryReminderStore>> {
    /// A series write, as planted adapters write it (and as a series with thousands made keeps
    /// them): made on the store itself.
    pub(in crate::chaos) async fn put_series(
        &self,
        s: &Series,
        expected: ExpectedSeries,
    ) -> Result<Written, PortError> {
        let stored = self.store.get_series(&s.series_id).await?;
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
            let out = self.store.put_series(&s, expected).await?;
            if out == Written::Written {
                if let Some(before) = stored.clone() {
                    lock(&self.lagging).insert(s.series_id.clone(), before);
                }
            }
            Ok(out)
        };
        let written = |w: &Written| *w == Written::Written;
        self.dice.write(OP_PUT_SERIES, write, written).await
    }

    pub(in crate::chaos) async fn series_due(
        &self,
        next: impl std::future::Future<Output = Result<Vec<Series>, PortError>>,
    ) -> Result<Vec<Series>, PortError> {
        let due = self.dice.around(OP_SERIES_DUE, next).await?;
        // The index lags: a third of the reads answer the version before the last write.
        Ok(due
            .into_iter()
            .map(|s| match lock(&self.lagging).get(&s.series_id) {
                Some(before) if self.dice.range(0, 3) == 0 => before.clone(),
                _ => s,
            })
            .collect())
    }

    /// A page of a subscriber's series (by id, or after a cursor: the erasure's), which the
    /// erasure's plants miss altogether.
    pub(in crate::chaos) async fn series_page<P: Default>(
        &self,
        next: impl std::future::Future<Output = Result<P, PortError>>,
    ) -> Result<P, PortError> {
        let page = self.dice.around(OP_SERIES_OF, next).await?;
        if crate::chaos::erasure::misses_series(self.plant) {
            return Ok(P::default());
        }
        Ok(page)
    }
}
