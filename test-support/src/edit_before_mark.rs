//! [`EditBeforeMark`]: an application's edit landing between a writer's read and its
//! conditional mark, the interleaving behind a cancel against an edit that adds a channel and a
//! stale edit racing the expiry.

use std::sync::{Arc, Mutex};

use reminders::clock::Timestamp;
use reminders::domain::{
    AddressHash, Preferences, Reminder, ReminderId, ReminderStatus, SubscriberId, Suppression,
};
use reminders::ports::{
    DuePage, DueQuery, Inserted, Marked, MemoryLedger, MemoryReminderStore, PortError,
    ReminderStore, SweepCursor, SweepPage,
};
use reminders::reminder_writes::{self, Edit, Edited, Retention};

/// A reminders table on which an application's edit lands right before the first mark (a
/// scheduler's or a cancel's): the writer read one version, the edit makes the next.
pub struct EditBeforeMark {
    pub inner: Arc<MemoryReminderStore>,
    pub ledger: Arc<MemoryLedger>,
    pub edit: Mutex<Option<Edit>>,
    /// When the edit is made.
    pub now: Timestamp,
}

impl ReminderStore for EditBeforeMark {
    fn shards(&self) -> u32 {
        self.inner.shards()
    }
    async fn preferences(&self, s: &SubscriberId) -> Result<Option<Preferences>, PortError> {
        self.inner.preferences(s).await
    }
    async fn suppression(&self, a: &AddressHash) -> Result<Option<Suppression>, PortError> {
        self.inner.suppression(a).await
    }
    async fn insert(&self, r: &Reminder) -> Result<Inserted, PortError> {
        self.inner.insert(r).await
    }
    async fn replace(&self, r: &Reminder, v: u64, s: ReminderStatus) -> Result<Marked, PortError> {
        self.inner.replace(r, v, s).await
    }
    async fn get(&self, id: &ReminderId) -> Result<Option<Reminder>, PortError> {
        self.inner.get(id).await
    }
    async fn query_due(&self, q: &DueQuery<'_>) -> Result<DuePage, PortError> {
        self.inner.query_due(q).await
    }
    async fn extend_freshness(
        &self,
        id: &ReminderId,
        version: u64,
        fresh_until: Timestamp,
        expires_at: i64,
    ) -> Result<Marked, PortError> {
        self.inner
            .extend_freshness(id, version, fresh_until, expires_at)
            .await
    }
    async fn quarantine(&self, key: &str, reason: &str) -> Result<Marked, PortError> {
        self.inner.quarantine(key, reason).await
    }
    async fn sweep_index(
        &self,
        after: Option<&SweepCursor>,
        limit: u32,
    ) -> Result<SweepPage, PortError> {
        self.inner.sweep_index(after, limit).await
    }
    async fn mark(&self, id: &ReminderId, v: u64, to: ReminderStatus) -> Result<Marked, PortError> {
        let edit = self.edit.lock().unwrap().take();
        if let Some(edit) = edit {
            let got = reminder_writes::edit(
                &*self.inner,
                &*self.ledger,
                id,
                edit,
                self.now,
                Retention::default(),
            )
            .await
            .unwrap();
            assert!(matches!(got, Edited::Edited(_)), "{got:?}");
        }
        self.inner.mark(id, v, to).await
    }
}
