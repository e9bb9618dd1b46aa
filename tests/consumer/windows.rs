//! Windows a review found between an operator's cancel and the system's other writers, each
//! proved by a test that failed before its fix (the window's number is in the name).

use std::sync::{Arc, Mutex};

use reminders::clock::Timestamp;
use reminders::delivery::state::Status;
use reminders::delivery::Cancelled;
use reminders::domain::{
    Channel, DeliveryKey, Recipient, Reminder, ReminderId, ReminderStatus, Retention,
};
use reminders::outbox::{self, Edit};
use reminders::ports::{
    DuePage, DueQuery, Inserted, Ledger, Marked, MemoryLedger, MemoryReminderStore, PortError,
    ReminderStore,
};

use crate::harness::{reminder, T0};

/// A reminders table on which an application's edit lands right before the first mark: the
/// interleaving of a cancel (ledger written, mark not yet) with an edit that adds a channel.
struct EditBeforeMark {
    inner: Arc<MemoryReminderStore>,
    ledger: Arc<MemoryLedger>,
    edit: Mutex<Option<Edit>>,
}

impl ReminderStore for EditBeforeMark {
    fn shards(&self) -> u32 {
        self.inner.shards()
    }
    async fn insert(&self, r: &Reminder) -> Result<Inserted, PortError> {
        self.inner.insert(r).await
    }
    async fn replace(
        &self,
        r: &Reminder,
        version: u64,
        status: ReminderStatus,
    ) -> Result<Marked, PortError> {
        self.inner.replace(r, version, status).await
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
    async fn mark(
        &self,
        id: &ReminderId,
        version: u64,
        to: ReminderStatus,
    ) -> Result<Marked, PortError> {
        let edit = self.edit.lock().unwrap().take();
        if let Some(edit) = edit {
            let retention = Retention::default();
            let store = &*self.inner;
            outbox::edit(store, &*self.ledger, id, edit, T0, retention)
                .await
                .unwrap();
        }
        self.inner.mark(id, version, to).await
    }
}

/// Window 3 (cancel against an edit that adds a channel): the cancel's mark is conditional on
/// the version it read, so the channel the edit added gets its `cancelled` ledger item before
/// the command says "cancelled".
#[tokio::test]
async fn window_3_a_cancel_covers_a_channel_added_while_it_ran() {
    let store = Arc::new(MemoryReminderStore::new(4));
    let ledger = Arc::new(MemoryLedger::default());
    let r = reminder("w3-cancel-edit", &[Channel::Sms]);
    store.insert(&r).await.unwrap();
    let added = Edit {
        recipients: Some(vec![
            Recipient::parse(Channel::Sms, "+14155550123").unwrap(),
            Recipient::parse(Channel::Email, "user@example.org").unwrap(),
        ]),
        ..Edit::default()
    };
    let racing = EditBeforeMark {
        inner: store.clone(),
        ledger: ledger.clone(),
        edit: Mutex::new(Some(added)),
    };
    let report = outbox::cancel(&racing, &*ledger, &r.reminder_id, T0, Retention::default())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(report.reminder, Marked::Marked);
    let channels: Vec<(Channel, Cancelled)> = report.deliveries.clone();
    assert!(
        channels.contains(&(Channel::Email, Cancelled::Cancelled)),
        "{channels:?}"
    );
    for c in [Channel::Sms, Channel::Email] {
        let key = DeliveryKey::derive(&r.reminder_id, &r.subscriber_id, c);
        let rec = ledger.get(&key).await.unwrap().expect("a ledger item");
        assert_eq!(rec.status(), Status::Cancelled, "{c}");
    }
    let stored = store.get(&r.reminder_id).await.unwrap().unwrap();
    assert_eq!(
        (stored.status, stored.payload_version),
        (ReminderStatus::Cancelled, 2)
    );
}
