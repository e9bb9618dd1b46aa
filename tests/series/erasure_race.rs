//! An erasure that runs while the maker makes a series' occurrences: the maker read the
//! series before the erasure cancelled and deleted it, and inserts after the erasure answered
//! complete. What the maker made must never be sent: it cancels it when its write of the
//! series finds the series gone.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use reminders::clock::Timestamp;
use reminders::domain::series::{NewSeries, Series};
use reminders::domain::{
    Channel, Content, Recipient, ReminderStatus, Retention, SeriesId, SubscriberId,
};
use reminders::erasure;
use reminders::ports::series::{ExpectedSeries, Written};
use reminders::ports::{MemoryLedger, MemoryReminderStore, PortError, ReminderStore, SeriesStore};
use reminders::series::MakeReport;
use reminders_harness::around::{Around, Call, Hook};

const NOW: Timestamp = Timestamp::from_millis(1_800_000_000_000);

/// Around the store the maker sees: the erasure runs on the store underneath before the
/// maker's first insert (between its read of the series and its first write).
struct ErasedMidway {
    store: Arc<MemoryReminderStore>,
    ledger: Arc<MemoryLedger>,
    erased: AtomicBool,
}

impl Hook for ErasedMidway {
    async fn before(&self, call: &Call<'_>) -> Result<(), PortError> {
        if !matches!(call, Call::Insert { .. }) || self.erased.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        let subscriber = SubscriberId::parse("u-42").unwrap();
        let erased = erasure::erase(
            &*self.store,
            &*self.ledger,
            None,
            &subscriber,
            NOW,
            Retention::default(),
        )
        .await
        .unwrap();
        assert!(erased.complete && erased.series_deleted == 1, "{erased:?}");
        Ok(())
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
    let maker_store = Around::new(
        inner.clone(),
        ErasedMidway {
            store: inner.clone(),
            ledger: ledger.clone(),
            erased: AtomicBool::new(false),
        },
    );
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
    assert!(
        maker_store.hook.erased.load(Ordering::SeqCst),
        "the erasure ran"
    );
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
