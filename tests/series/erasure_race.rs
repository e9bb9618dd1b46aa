//! An erasure that runs while the maker makes a series' occurrences: the maker read the
//! series before the erasure cancelled and deleted it, and inserts after the erasure answered
//! complete. What the maker made must never be sent: it cancels it when its write of the
//! series finds the series gone.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use reminders::clock::Timestamp;
use reminders::domain::series::{NewSeries, Series};
use reminders::domain::{
    AddressHash, Channel, Content, Preferences, Recipient, Reminder, ReminderId, ReminderStatus,
    Retention, SeriesId, SubscriberId, Suppression,
};
use reminders::erasure;
use reminders::ports::reminders::{DeliveryRead, DuePage, DueQuery, SweepCursor, SweepPage};
use reminders::ports::series::{
    ExpectedSeries, SeriesCursor, SeriesCursorPage, SeriesPage, Written,
};
use reminders::ports::{
    Inserted, Marked, MemoryLedger, MemoryReminderStore, PortError, ReminderStore, SeriesStore,
};
use reminders::series::MakeReport;

const NOW: Timestamp = Timestamp::from_millis(1_800_000_000_000);

/// The store the maker sees: the erasure runs on the store underneath before its first insert.
struct ErasedMidway {
    inner: Arc<MemoryReminderStore>,
    ledger: Arc<MemoryLedger>,
    erased: AtomicBool,
}

impl ReminderStore for ErasedMidway {
    fn shards(&self) -> u32 {
        self.inner.shards()
    }
    async fn insert(&self, r: &Reminder) -> Result<Inserted, PortError> {
        // The erasure runs to the end between the maker's read and its first insert.
        if !self.erased.swap(true, Ordering::SeqCst) {
            let subscriber = SubscriberId::parse("u-42").unwrap();
            let erased = erasure::erase(
                &*self.inner,
                &*self.ledger,
                None,
                &subscriber,
                NOW,
                Retention::default(),
            )
            .await
            .unwrap();
            assert!(erased.complete && erased.series_deleted == 1, "{erased:?}");
        }
        self.inner.insert(r).await
    }
    fn replace(
        &self,
        r: &Reminder,
        expected_version: u64,
        expected_status: ReminderStatus,
    ) -> impl Future<Output = Result<Marked, PortError>> + Send {
        self.inner.replace(r, expected_version, expected_status)
    }
    fn get(
        &self,
        id: &ReminderId,
    ) -> impl Future<Output = Result<Option<Reminder>, PortError>> + Send {
        self.inner.get(id)
    }
    fn query_due(
        &self,
        q: &DueQuery<'_>,
    ) -> impl Future<Output = Result<DuePage, PortError>> + Send {
        self.inner.query_due(q)
    }
    fn quarantine(
        &self,
        key: &str,
        reason: &str,
    ) -> impl Future<Output = Result<Marked, PortError>> + Send {
        self.inner.quarantine(key, reason)
    }
    fn extend_freshness(
        &self,
        id: &ReminderId,
        payload_version: u64,
        fresh_until: Timestamp,
        expires_at: i64,
    ) -> impl Future<Output = Result<Marked, PortError>> + Send {
        self.inner
            .extend_freshness(id, payload_version, fresh_until, expires_at)
    }
    fn sweep_index(
        &self,
        after: Option<&SweepCursor>,
        limit: u32,
    ) -> impl Future<Output = Result<SweepPage, PortError>> + Send {
        self.inner.sweep_index(after, limit)
    }
    fn mark(
        &self,
        id: &ReminderId,
        payload_version: u64,
        to: ReminderStatus,
    ) -> impl Future<Output = Result<Marked, PortError>> + Send {
        self.inner.mark(id, payload_version, to)
    }
    fn preferences(
        &self,
        subscriber: &SubscriberId,
    ) -> impl Future<Output = Result<Option<Preferences>, PortError>> + Send {
        self.inner.preferences(subscriber)
    }
    fn put_preferences(
        &self,
        subscriber: &SubscriberId,
        prefs: &Preferences,
    ) -> impl Future<Output = Result<(), PortError>> + Send {
        self.inner.put_preferences(subscriber, prefs)
    }
    fn suppression(
        &self,
        address: &AddressHash,
    ) -> impl Future<Output = Result<Option<Suppression>, PortError>> + Send {
        self.inner.suppression(address)
    }
    fn put_suppression(
        &self,
        suppression: &Suppression,
    ) -> impl Future<Output = Result<(), PortError>> + Send {
        self.inner.put_suppression(suppression)
    }
    fn recipient_rules(
        &self,
        subscriber: &SubscriberId,
        address: Option<&AddressHash>,
    ) -> impl Future<Output = Result<(Option<Preferences>, Option<Suppression>), PortError>> + Send
    {
        self.inner.recipient_rules(subscriber, address)
    }
    fn delivery_read(
        &self,
        id: &ReminderId,
        subscriber: &SubscriberId,
        address: Option<&AddressHash>,
    ) -> impl Future<Output = Result<DeliveryRead, PortError>> + Send {
        self.inner.delivery_read(id, subscriber, address)
    }
}

impl SeriesStore for ErasedMidway {
    fn get_series(
        &self,
        id: &SeriesId,
    ) -> impl Future<Output = Result<Option<Series>, PortError>> + Send {
        self.inner.get_series(id)
    }
    fn put_series(
        &self,
        s: &Series,
        expected: ExpectedSeries,
    ) -> impl Future<Output = Result<Written, PortError>> + Send {
        self.inner.put_series(s, expected)
    }
    fn series_due(
        &self,
        until: Timestamp,
        limit: u32,
    ) -> impl Future<Output = Result<Vec<Series>, PortError>> + Send {
        self.inner.series_due(until, limit)
    }
    fn series_of(
        &self,
        subscriber: &SubscriberId,
        after: Option<&SeriesId>,
        limit: u32,
    ) -> impl Future<Output = Result<SeriesPage, PortError>> + Send {
        self.inner.series_of(subscriber, after, limit)
    }
    fn series_after(
        &self,
        subscriber: &SubscriberId,
        after: Option<&SeriesCursor>,
        limit: u32,
    ) -> impl Future<Output = Result<SeriesCursorPage, PortError>> + Send {
        self.inner.series_after(subscriber, after, limit)
    }
}

#[tokio::test]
async fn an_erasure_while_the_maker_runs_leaves_nothing_to_send() {
    let inner = Arc::new(MemoryReminderStore::new(4));
    let ledger = Arc::new(MemoryLedger::default());
    let new = NewSeries {
        series_id: SeriesId::parse("pills").unwrap(),
        subscriber_id: SubscriberId::parse("u-42").unwrap(),
        rule: "FREQ=DAILY;BYHOUR=8;BYMINUTE=5,10".into(),
        zone: "UTC".into(),
        starts_at: NOW,
        until: None,
        fresh_for: Some(Duration::from_secs(600)),
        content: Content::Text {
            subject: "Pills".into(),
            body: "with water".into(),
        },
        recipients: vec![Recipient::parse(Channel::Email, "u42@example.org").unwrap()],
    };
    let s = Series::new(new, Duration::from_secs(600)).unwrap();
    assert_eq!(
        inner.put_series(&s, ExpectedSeries::Absent).await.unwrap(),
        Written::Written
    );
    let maker_store = ErasedMidway {
        inner: inner.clone(),
        ledger: ledger.clone(),
        erased: AtomicBool::new(false),
    };
    // 08:00: the maker makes 08:05 and 08:10 (its make-ahead is 15 minutes).
    let now = Timestamp::parse_rfc3339("2027-01-15T08:00:00Z").unwrap();
    let mut report = MakeReport::default();
    reminders::series::make_one(
        &maker_store,
        &*ledger,
        s.clone(),
        now,
        Retention::default(),
        &mut report,
    )
    .await
    .unwrap();
    assert!(maker_store.erased.load(Ordering::SeqCst), "the erasure ran");
    assert!(
        report.made >= 1,
        "the maker inserted after the erasure: {report:?}"
    );
    for at in ["2027-01-15T08:05:00Z", "2027-01-15T08:10:00Z"] {
        let at = Timestamp::parse_rfc3339(at).unwrap();
        let id = reminders::domain::series::occurrence_id(&s.series_id, at);
        let left = inner.get(&id).await.unwrap();
        assert!(
            left.as_ref()
                .is_none_or(|r| r.status == ReminderStatus::Cancelled),
            "an occurrence left to be sent after the erasure answered: {left:?}"
        );
    }
}
