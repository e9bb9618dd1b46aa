//! The reminders adapter of a world: the dice around each call, the table's TTL, the plants of
//! a reminders adapter, and what it tells the checker and the application.

use super::*;

impl<T: ReminderStore + reminders_core::ports::Eraser> ReminderStore for Chaotic<T> {
    fn shards(&self) -> u32 {
        self.inner.shards()
    }
    async fn sweep_index(
        &self,
        after: Option<&reminders_core::ports::SweepCursor>,
        limit: u32,
    ) -> Result<reminders_core::ports::SweepPage, PortError> {
        let call = self.inner.sweep_index(after, limit);
        self.dice
            .around(reminders_core::ports::reminders::OP_SWEEP, call)
            .await
    }
    async fn insert(&self, r: &Reminder) -> Result<Inserted, PortError> {
        let write = || async {
            let mut out = self.inner.insert(r).await;
            if matches!(out, Ok(Inserted::AlreadyExists)) && self.expired(&r.reminder_id).await? {
                // Deleted by the TTL: the create finds nothing there.
                self.inner.delete_reminder(&r.reminder_id, true).await?;
                out = self.inner.insert(r).await;
            }
            if matches!(out, Ok(Inserted::Created)) {
                self.landed(r);
            }
            out
        };
        let call = self.sent_again_if(write, |i| *i == Inserted::Created);
        self.dice
            .around(reminders_core::ports::reminders::OP_INSERT, call)
            .await
    }
    async fn replace(
        &self,
        r: &Reminder,
        version: u64,
        status: ReminderStatus,
    ) -> Result<Marked, PortError> {
        let planted = match self.plant {
            Some(
                p @ (crate::chaos::Plant::DropFreshnessEdit
                | crate::chaos::Plant::DropAddedChannels),
            ) => {
                let stored = self.inner.get(&r.reminder_id).await?;
                stored.map(|stored| crate::chaos::inject::planted_write(p, &stored, r))
            }
            _ => None,
        };
        let r = planted.as_ref().unwrap_or(r);
        let write = || async {
            if self.expired(&r.reminder_id).await? {
                // Deleted by the TTL: the condition finds no item.
                return Ok(Marked::Missing);
            }
            let out = self.inner.replace(r, version, status).await;
            if matches!(out, Ok(Marked::Marked)) {
                self.landed(r);
            }
            out
        };
        let call = self.sent_again_if(write, |m| *m == Marked::Marked);
        self.dice
            .around(reminders_core::ports::reminders::OP_REPLACE, call)
            .await
    }
    async fn get(&self, id: &ReminderId) -> Result<Option<Reminder>, PortError> {
        let mut got = self
            .dice
            .around(reminders_core::ports::reminders::OP_GET, self.inner.get(id))
            .await?;
        if got.as_ref().is_some_and(|r| self.ttl_gone(r)) {
            return Ok(None);
        }
        if let Some(r) = got.as_mut() {
            match self.plant {
                Some(crate::chaos::Plant::LateFreshness) => {
                    r.fresh_until = r.fresh_until.plus(std::time::Duration::from_secs(86_400));
                }
                Some(crate::chaos::Plant::EarlyFreshness) => {
                    r.fresh_until = r.fresh_until.minus(std::time::Duration::from_secs(3_600));
                }
                Some(crate::chaos::Plant::LostCancel) if r.status == ReminderStatus::Cancelled => {
                    r.status = ReminderStatus::Enqueued;
                }
                Some(crate::chaos::Plant::ForgetEditedAway) => {
                    let listed = r.recipients.clone();
                    r.enqueued.retain(|c| listed.contains_key(c));
                }
                _ => {}
            }
        }
        Ok(got)
    }
    async fn query_due(&self, q: &DueQuery<'_>) -> Result<DuePage, PortError> {
        let page = self
            .dice
            .around(
                reminders_core::ports::reminders::OP_QUERY,
                self.inner.query_due(q),
            )
            .await?;
        if !self.dice.is_calm() && !page.items.is_empty() {
            let ids = page
                .items
                .iter()
                .filter_map(|e| match e {
                    reminders_core::ports::DueEntry::Due(r) => Some(r.reminder_id.clone()),
                    reminders_core::ports::DueEntry::Unschedulable { .. } => None,
                })
                .collect();
            crate::chaos::prompt::prompt(
                self.prompts.as_ref(),
                crate::chaos::prompt::Prompt::Scanned(ids),
            )
            .await;
        }
        Ok(page)
    }
    async fn quarantine(&self, key: &str, reason: &str) -> Result<Marked, PortError> {
        let call = self.inner.quarantine(key, reason);
        self.dice
            .around(reminders_core::ports::reminders::OP_QUARANTINE, call)
            .await
    }
    async fn extend_freshness(
        &self,
        id: &ReminderId,
        version: u64,
        fresh_until: Timestamp,
        expires_at: i64,
    ) -> Result<Marked, PortError> {
        let write = || async {
            if self.expired(id).await? {
                return Ok(Marked::Missing);
            }
            self.inner
                .extend_freshness(id, version, fresh_until, expires_at)
                .await
        };
        let call = self.sent_again_if(write, |m| *m == Marked::Marked);
        self.dice
            .around(reminders_core::ports::reminders::OP_EXTEND, call)
            .await
    }
    async fn mark(
        &self,
        id: &ReminderId,
        version: u64,
        to: ReminderStatus,
    ) -> Result<Marked, PortError> {
        // [`crate::chaos::Plant::ExpireOverAnEdit`]: an expiry marks whatever version is stored.
        let version = match self.plant {
            Some(crate::chaos::Plant::ExpireOverAnEdit) if to == ReminderStatus::Expired => {
                match self.inner.get(id).await? {
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
            self.inner.mark(id, version, to).await
        };
        let call = self.sent_again_if(write, |m| *m == Marked::Marked);
        let marked = self
            .dice
            .around(reminders_core::ports::reminders::OP_MARK, call)
            .await?;
        if to == ReminderStatus::Enqueued && marked == Marked::Marked && !self.dice.is_calm() {
            let what = crate::chaos::prompt::Prompt::Enqueued(id.clone());
            crate::chaos::prompt::prompt(self.enqueues.as_ref(), what).await;
        }
        Ok(marked)
    }
    async fn preferences(
        &self,
        subscriber: &reminders_core::domain::SubscriberId,
    ) -> Result<Option<reminders_core::domain::Preferences>, PortError> {
        let call = self.inner.preferences(subscriber);
        let mut got = self
            .dice
            .around(reminders_core::ports::reminders::OP_PREFERENCES, call)
            .await?;
        if let Some(p) = got.as_mut() {
            match self.plant {
                Some(crate::chaos::Plant::IgnoreOptOuts) => p.opted_out.clear(),
                Some(crate::chaos::Plant::IgnoreQuietHours) => p.quiet_hours.clear(),
                Some(crate::chaos::Plant::IgnoreFallbackOrder) => p.fallback.clear(),
                _ => {}
            }
        }
        Ok(got)
    }
    async fn put_preferences(
        &self,
        subscriber: &reminders_core::domain::SubscriberId,
        prefs: &reminders_core::domain::Preferences,
    ) -> Result<(), PortError> {
        self.inner.put_preferences(subscriber, prefs).await
    }
    async fn suppression(
        &self,
        address: &reminders_core::domain::AddressHash,
    ) -> Result<Option<reminders_core::domain::Suppression>, PortError> {
        let call = self.inner.suppression(address);
        self.dice
            .around(reminders_core::ports::reminders::OP_SUPPRESSION, call)
            .await
    }
    async fn put_suppression(
        &self,
        s: &reminders_core::domain::Suppression,
    ) -> Result<(), PortError> {
        let call = self.inner.put_suppression(s);
        self.dice
            .around(reminders_core::ports::reminders::OP_PUT_SUPPRESSION, call)
            .await
    }
}
