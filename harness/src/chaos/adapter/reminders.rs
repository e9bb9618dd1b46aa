//! The reminders table's model in a world: the dice around each call, the SDK sending a write
//! again, the table's TTL, the plants of a reminders adapter, and what it tells the checker and
//! the application. Its series calls are in [`crate::chaos::series`].

use super::*;
use crate::chaos::prompt::{prompt, Prompt};
use reminders_core::domain::{Preferences, ReminderId, ReminderStatus};
use reminders_core::ports::series::SeriesCursorPage;
use reminders_core::ports::{
    reminders, DueEntry, DuePage, Eraser, Inserted, Marked, MemoryReminderStore, ReminderStore,
    SeriesPage,
};

type Store = Arc<MemoryReminderStore>;

impl Hook for Adapter<Store> {
    async fn around<R: Value>(&self, call: &Call<'_>, next: Next<'_, R>) -> Result<R, PortError> {
        match call {
            Call::Insert { reminder } => self.insert(reminder, || typed(next())).await.map(cast),
            Call::Replace {
                reminder,
                expected_version,
                expected_status,
            } => {
                let answer = self.replace(reminder, *expected_version, *expected_status);
                answer.await.map(cast)
            }
            Call::Get { .. } => self.get(typed(next())).await.map(cast),
            Call::QueryDue { .. } => self.query_due(typed(next())).await.map(cast),
            Call::ExtendFreshness { id, .. } => {
                let answer = self.extend_freshness(id, || typed(next()));
                answer.await.map(cast)
            }
            Call::Mark {
                id,
                payload_version,
                to,
            } => self.mark(id, *payload_version, *to).await.map(cast),
            Call::Preferences { .. } => self.preferences(typed(next())).await.map(cast),
            // The application's own writes of preferences meet no faults in the worlds.
            Call::PutPreferences { .. } => next().await,
            Call::PutSeries { series, expected } => {
                self.put_series(series, *expected).await.map(cast)
            }
            Call::SeriesDue { .. } => self.series_due(typed(next())).await.map(cast),
            Call::SeriesOf { .. } => {
                let page = self.series_page::<SeriesPage>(typed(next()));
                page.await.map(cast)
            }
            Call::SeriesAfter { .. } => {
                let page = self.series_page::<SeriesCursorPage>(typed(next()));
                page.await.map(cast)
            }
            _ => self.dice.around(call.name(), next()).await,
        }
    }

    /// The trait's defaults make a delivery's read and the recipient's rules of the single
    /// reads this model plays.
    fn splits_compound_reads(&self) -> bool {
        true
    }
}

impl Adapter<Store> {
    /// Whether the item stored under `id` is gone with its TTL.
    async fn expired(&self, id: &ReminderId) -> Result<bool, PortError> {
        let Some(ttl) = &self.ttl else {
            return Ok(false);
        };
        Ok(self.store.get(id).await?.is_some_and(|r| ttl.gone(&r)))
    }

    async fn insert<F>(&self, r: &Reminder, next: impl Fn() -> F) -> Result<Inserted, PortError>
    where
        F: Future<Output = Result<Inserted, PortError>>,
    {
        let write = || async {
            let mut out = next().await;
            if matches!(out, Ok(Inserted::AlreadyExists)) && self.expired(&r.reminder_id).await? {
                // Deleted by the TTL: the create finds nothing there.
                self.store.delete_reminder(&r.reminder_id, true).await?;
                out = next().await;
            }
            if matches!(out, Ok(Inserted::Created)) {
                self.landed(r);
            }
            out
        };
        let op = reminders::OP_INSERT;
        self.dice
            .write(op, write, |i| *i == Inserted::Created)
            .await
    }

    /// A replace, as planted adapters write it (over the item they read first): made on the
    /// store itself.
    async fn replace(
        &self,
        r: &Reminder,
        version: u64,
        status: ReminderStatus,
    ) -> Result<Marked, PortError> {
        let planted = match self.plant {
            Some(p @ (Plant::DropFreshnessEdit | Plant::DropAddedChannels)) => {
                let stored = self.store.get(&r.reminder_id).await?;
                stored.map(|stored| planted_write(p, &stored, r))
            }
            _ => None,
        };
        let r = planted.as_ref().unwrap_or(r);
        let write = || async {
            if self.expired(&r.reminder_id).await? {
                // Deleted by the TTL: the condition finds no item.
                return Ok(Marked::Missing);
            }
            let out = self.store.replace(r, version, status).await;
            if matches!(out, Ok(Marked::Marked)) {
                self.landed(r);
            }
            out
        };
        let op = reminders::OP_REPLACE;
        self.dice.write(op, write, |m| *m == Marked::Marked).await
    }

    async fn get(
        &self,
        next: impl Future<Output = Result<Option<Reminder>, PortError>>,
    ) -> Result<Option<Reminder>, PortError> {
        let mut got = self.dice.around(reminders::OP_GET, next).await?;
        if got.as_ref().is_some_and(|r| self.ttl_gone(r)) {
            return Ok(None);
        }
        if let Some(r) = got.as_mut() {
            match self.plant {
                Some(Plant::LateFreshness) => {
                    r.fresh_until = r.fresh_until.plus(Duration::from_secs(86_400));
                }
                Some(Plant::EarlyFreshness) => {
                    r.fresh_until = r.fresh_until.minus(Duration::from_secs(3_600));
                }
                Some(Plant::LostCancel) if r.status == ReminderStatus::Cancelled => {
                    r.status = ReminderStatus::Enqueued;
                }
                Some(Plant::ForgetEditedAway) => {
                    let listed = r.recipients.clone();
                    r.enqueued.retain(|c| listed.contains_key(c));
                }
                _ => {}
            }
        }
        Ok(got)
    }

    async fn query_due(
        &self,
        next: impl Future<Output = Result<DuePage, PortError>>,
    ) -> Result<DuePage, PortError> {
        let page = self.dice.around(reminders::OP_QUERY, next).await?;
        if !self.dice.is_calm() && !page.items.is_empty() {
            let ids = page
                .items
                .iter()
                .filter_map(|e| match e {
                    DueEntry::Due(r) => Some(r.reminder_id.clone()),
                    DueEntry::Unschedulable { .. } => None,
                })
                .collect();
            prompt(self.prompts.as_ref(), Prompt::Scanned(ids)).await;
        }
        Ok(page)
    }

    async fn extend_freshness<F>(
        &self,
        id: &ReminderId,
        next: impl Fn() -> F,
    ) -> Result<Marked, PortError>
    where
        F: Future<Output = Result<Marked, PortError>>,
    {
        let write = || async {
            if self.expired(id).await? {
                return Ok(Marked::Missing);
            }
            next().await
        };
        let op = reminders::OP_EXTEND;
        self.dice.write(op, write, |m| *m == Marked::Marked).await
    }

    /// A mark, made on the store itself: [`Plant::ExpireOverAnEdit`] marks an expiry over
    /// whatever version is stored.
    async fn mark(
        &self,
        id: &ReminderId,
        version: u64,
        to: ReminderStatus,
    ) -> Result<Marked, PortError> {
        let version = match self.plant {
            Some(Plant::ExpireOverAnEdit) if to == ReminderStatus::Expired => {
                match self.store.get(id).await? {
                    Some(cur) => cur.payload_version,
                    None => version,
                }
            }
            _ => version,
        };
        let write = || async {
            if self.expired(id).await? {
                return Ok(Marked::Missing);
            }
            self.store.mark(id, version, to).await
        };
        let op = reminders::OP_MARK;
        let marked = self.dice.write(op, write, |m| *m == Marked::Marked).await?;
        if to == ReminderStatus::Enqueued && marked == Marked::Marked && !self.dice.is_calm() {
            prompt(self.enqueues.as_ref(), Prompt::Enqueued(id.clone())).await;
        }
        Ok(marked)
    }

    async fn preferences(
        &self,
        next: impl Future<Output = Result<Option<Preferences>, PortError>>,
    ) -> Result<Option<Preferences>, PortError> {
        let mut got = self.dice.around(reminders::OP_PREFERENCES, next).await?;
        if let Some(p) = got.as_mut() {
            match self.plant {
                Some(Plant::IgnoreOptOuts) => p.opted_out.clear(),
                Some(Plant::IgnoreQuietHours) => p.quiet_hours.clear(),
                Some(Plant::IgnoreFallbackOrder) => p.fallback.clear(),
                _ => {}
            }
        }
        Ok(got)
    }
}
