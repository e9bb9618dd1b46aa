//! Wrappers around any port, for tests and benchmarks: [`Faulty`] puts a fault plan
//! ([`Faults`]: fail the next N calls of an operation, before or after its effect) around each
//! call, the in-memory ports and the AWS adapters alike; [`Slowed`] waits a latency on a clock
//! before each call.

mod slowed;

use reminders_core::ports::{DeadLetters, FaultPoint, Faults, Ledger, PortError, ReminderStore};

pub use slowed::Slowed;

/// Any ledger, with faults injected around its calls: the same fault plan for the in-memory
/// ledger and the DynamoDB adapter (where it plays a lost response or an outage).
#[derive(Debug, Clone)]
pub struct Faulty<T> {
    pub inner: T,
    pub faults: Faults,
}

impl<T: Ledger> Ledger for Faulty<T> {
    async fn get(
        &self,
        key: &reminders_core::domain::DeliveryKey,
    ) -> Result<Option<reminders_core::ledger::DeliveryRecord>, PortError> {
        self.faults
            .check(reminders_core::ports::ledger::OP_GET, FaultPoint::Before)?;
        let out = self.inner.get(key).await?;
        self.faults
            .check(reminders_core::ports::ledger::OP_GET, FaultPoint::After)?;
        Ok(out)
    }

    async fn put_if(
        &self,
        record: &reminders_core::ledger::DeliveryRecord,
        expected: reminders_core::ports::Expected,
    ) -> Result<reminders_core::ports::Cas, PortError> {
        self.faults
            .check(reminders_core::ports::ledger::OP_PUT, FaultPoint::Before)?;
        let out = self.inner.put_if(record, expected).await?;
        self.faults
            .check(reminders_core::ports::ledger::OP_PUT, FaultPoint::After)?;
        Ok(out)
    }

    async fn delete_if(
        &self,
        key: &reminders_core::domain::DeliveryKey,
        expected: reminders_core::ports::Expected,
    ) -> Result<reminders_core::ports::Cas, PortError> {
        let op = reminders_core::ports::ledger::OP_DELETE;
        self.faults.check(op, FaultPoint::Before)?;
        let out = self.inner.delete_if(key, expected).await?;
        self.faults.check(op, FaultPoint::After)?;
        Ok(out)
    }
}

impl<T: ReminderStore> ReminderStore for Faulty<T> {
    fn shards(&self) -> u32 {
        self.inner.shards()
    }

    async fn sweep_index(
        &self,
        after: Option<&reminders_core::ports::SweepCursor>,
        limit: u32,
    ) -> Result<reminders_core::ports::SweepPage, PortError> {
        let call = self.inner.sweep_index(after, limit);
        self.around(reminders_core::ports::reminders::OP_SWEEP, call)
            .await
    }

    async fn insert(
        &self,
        r: &reminders_core::domain::Reminder,
    ) -> Result<reminders_core::ports::Inserted, PortError> {
        self.around(
            reminders_core::ports::reminders::OP_INSERT,
            self.inner.insert(r),
        )
        .await
    }

    async fn replace(
        &self,
        r: &reminders_core::domain::Reminder,
        expected_version: u64,
        expected_status: reminders_core::domain::ReminderStatus,
    ) -> Result<reminders_core::ports::Marked, PortError> {
        let op = reminders_core::ports::reminders::OP_REPLACE;
        let call = self.inner.replace(r, expected_version, expected_status);
        self.around(op, call).await
    }

    async fn get(
        &self,
        id: &reminders_core::domain::ReminderId,
    ) -> Result<Option<reminders_core::domain::Reminder>, PortError> {
        self.around(reminders_core::ports::reminders::OP_GET, self.inner.get(id))
            .await
    }

    async fn query_due(
        &self,
        q: &reminders_core::ports::DueQuery<'_>,
    ) -> Result<reminders_core::ports::DuePage, PortError> {
        self.around(
            reminders_core::ports::reminders::OP_QUERY,
            self.inner.query_due(q),
        )
        .await
    }

    async fn quarantine(
        &self,
        key: &str,
        reason: &str,
    ) -> Result<reminders_core::ports::Marked, PortError> {
        let op = reminders_core::ports::reminders::OP_QUARANTINE;
        self.around(op, self.inner.quarantine(key, reason)).await
    }

    async fn extend_freshness(
        &self,
        id: &reminders_core::domain::ReminderId,
        payload_version: u64,
        fresh_until: reminders_core::clock::Timestamp,
        expires_at: i64,
    ) -> Result<reminders_core::ports::Marked, PortError> {
        let op = reminders_core::ports::reminders::OP_EXTEND;
        let call = self
            .inner
            .extend_freshness(id, payload_version, fresh_until, expires_at);
        self.around(op, call).await
    }

    async fn mark(
        &self,
        id: &reminders_core::domain::ReminderId,
        payload_version: u64,
        to: reminders_core::domain::ReminderStatus,
    ) -> Result<reminders_core::ports::Marked, PortError> {
        let op = reminders_core::ports::reminders::OP_MARK;
        self.around(op, self.inner.mark(id, payload_version, to))
            .await
    }
    async fn preferences(
        &self,
        subscriber: &reminders_core::domain::SubscriberId,
    ) -> Result<Option<reminders_core::domain::Preferences>, PortError> {
        let op = reminders_core::ports::reminders::OP_PREFERENCES;
        self.around(op, self.inner.preferences(subscriber)).await
    }
    async fn put_preferences(
        &self,
        subscriber: &reminders_core::domain::SubscriberId,
        prefs: &reminders_core::domain::Preferences,
    ) -> Result<(), PortError> {
        let op = reminders_core::ports::reminders::OP_PUT_PREFERENCES;
        self.around(op, self.inner.put_preferences(subscriber, prefs))
            .await
    }
    async fn suppression(
        &self,
        address: &reminders_core::domain::AddressHash,
    ) -> Result<Option<reminders_core::domain::Suppression>, PortError> {
        let op = reminders_core::ports::reminders::OP_SUPPRESSION;
        self.around(op, self.inner.suppression(address)).await
    }
    async fn put_suppression(
        &self,
        s: &reminders_core::domain::Suppression,
    ) -> Result<(), PortError> {
        let op = reminders_core::ports::reminders::OP_PUT_SUPPRESSION;
        self.around(op, self.inner.put_suppression(s)).await
    }
    /// The wrapped store's own read of the rules (DynamoDB: one `BatchGetItem`), not the
    /// trait's default of two reads: one call, so one fault check, named as the adapter names
    /// it: `OP_RULES` with a suppression, `OP_PREFERENCES` (one `GetItem`) without.
    async fn recipient_rules(
        &self,
        subscriber: &reminders_core::domain::SubscriberId,
        address: Option<&reminders_core::domain::AddressHash>,
    ) -> Result<
        (
            Option<reminders_core::domain::Preferences>,
            Option<reminders_core::domain::Suppression>,
        ),
        PortError,
    > {
        let op = match address {
            Some(_) => reminders_core::ports::reminders::OP_RULES,
            None => reminders_core::ports::reminders::OP_PREFERENCES,
        };
        self.around(op, self.inner.recipient_rules(subscriber, address))
            .await
    }
    /// The wrapped store's own one read (DynamoDB: one `BatchGetItem`), one fault check
    /// (`OP_DELIVERY_READ`), as the adapter makes one request.
    async fn delivery_read(
        &self,
        id: &reminders_core::domain::ReminderId,
        subscriber: &reminders_core::domain::SubscriberId,
        address: Option<&reminders_core::domain::AddressHash>,
    ) -> Result<reminders_core::ports::reminders::DeliveryRead, PortError> {
        let op = reminders_core::ports::reminders::OP_DELIVERY_READ;
        self.around(op, self.inner.delivery_read(id, subscriber, address))
            .await
    }
}

impl<T: DeadLetters> DeadLetters for Faulty<T> {
    async fn dead_letter(
        &self,
        channel: reminders_core::domain::Channel,
        body: &str,
        letter: &reminders_core::deadletter::DeadLetter,
    ) -> Result<(), PortError> {
        let op = reminders_core::ports::queue::OP_DEAD_LETTER;
        self.around(op, self.inner.dead_letter(channel, body, letter))
            .await
    }

    async fn receive_dead(
        &self,
        channel: reminders_core::domain::Channel,
        max: u32,
        visibility_secs: u32,
    ) -> Result<Vec<reminders_core::ports::DeadLetterMessage>, PortError> {
        let op = reminders_core::ports::queue::OP_RECEIVE;
        self.around(op, self.inner.receive_dead(channel, max, visibility_secs))
            .await
    }

    async fn delete_dead(
        &self,
        channel: reminders_core::domain::Channel,
        receipt_handle: &str,
    ) -> Result<(), PortError> {
        let op = reminders_core::ports::queue::OP_DELETE;
        self.around(op, self.inner.delete_dead(channel, receipt_handle))
            .await
    }

    async fn release_dead(
        &self,
        channel: reminders_core::domain::Channel,
        receipt_handle: &str,
    ) -> Result<(), PortError> {
        let op = reminders_core::ports::queue::OP_VISIBILITY;
        self.around(op, self.inner.release_dead(channel, receipt_handle))
            .await
    }
}

impl<T> Faulty<T> {
    async fn around<R>(
        &self,
        op: &'static str,
        call: impl std::future::Future<Output = Result<R, PortError>>,
    ) -> Result<R, PortError> {
        self.faults.check(op, FaultPoint::Before)?;
        let out = call.await?;
        self.faults.check(op, FaultPoint::After)?;
        Ok(out)
    }
}

/// Series with the same fault plan around each call.
impl<T: reminders_core::ports::SeriesStore> reminders_core::ports::SeriesStore for Faulty<T> {
    async fn get_series(
        &self,
        id: &reminders_core::domain::SeriesId,
    ) -> Result<Option<reminders_core::domain::series::Series>, PortError> {
        let call = self.inner.get_series(id);
        self.around(reminders_core::ports::series::OP_GET_SERIES, call)
            .await
    }
    async fn put_series(
        &self,
        s: &reminders_core::domain::series::Series,
        expected: reminders_core::ports::ExpectedSeries,
    ) -> Result<reminders_core::ports::series::Written, PortError> {
        let call = self.inner.put_series(s, expected);
        self.around(reminders_core::ports::series::OP_PUT_SERIES, call)
            .await
    }
    async fn series_due(
        &self,
        until: reminders_core::clock::Timestamp,
        limit: u32,
    ) -> Result<Vec<reminders_core::domain::series::Series>, PortError> {
        let call = self.inner.series_due(until, limit);
        self.around(reminders_core::ports::series::OP_SERIES_DUE, call)
            .await
    }
    async fn series_of(
        &self,
        subscriber: &reminders_core::domain::SubscriberId,
        after: Option<&reminders_core::domain::SeriesId>,
        limit: u32,
    ) -> Result<reminders_core::ports::SeriesPage, PortError> {
        let call = self.inner.series_of(subscriber, after, limit);
        self.around(reminders_core::ports::series::OP_SERIES_OF, call)
            .await
    }
    async fn series_after(
        &self,
        subscriber: &reminders_core::domain::SubscriberId,
        after: Option<&reminders_core::ports::series::SeriesCursor>,
        limit: u32,
    ) -> Result<reminders_core::ports::series::SeriesCursorPage, PortError> {
        let call = self.inner.series_after(subscriber, after, limit);
        self.around(reminders_core::ports::series::OP_SERIES_OF, call)
            .await
    }
}

#[cfg(test)]
mod tests {
    use reminders_core::domain::{AddressHash, Channel, Recipient, SubscriberId, SuppressionKey};
    use reminders_core::ports::reminders::{OP_PREFERENCES, OP_RULES, OP_SUPPRESSION};
    use reminders_core::ports::{FaultPoint, Faults, MemoryReminderStore, ReminderStore};

    use super::Faulty;

    /// The consumer's read of the rules through the wrapper is the wrapped store's own, one
    /// call (one `BatchGetItem` on DynamoDB, as deployed): a fault planted on either single
    /// read leaves it alone, one planted on the batch fails it, and without an address it is
    /// the preferences' one read.
    #[tokio::test]
    async fn the_rules_read_is_passed_through_as_one_call() {
        let faults = Faults::default();
        let store = Faulty {
            inner: MemoryReminderStore::new(4),
            faults: faults.clone(),
        };
        let sub = SubscriberId::parse("sub-1").unwrap();
        let key = SuppressionKey::new(b"wrap tests' suppression key".to_vec()).unwrap();
        let to = Recipient::parse(Channel::Sms, "+14155550123").unwrap();
        let address = AddressHash::of(&key, &to);
        faults.fail(OP_PREFERENCES, FaultPoint::Before, 1);
        faults.fail(OP_SUPPRESSION, FaultPoint::Before, 1);
        let read = store.recipient_rules(&sub, Some(&address)).await;
        assert_eq!(read.unwrap(), (None, None), "no single read was made");
        faults.clear();
        faults.fail(OP_RULES, FaultPoint::After, 1);
        assert!(store.recipient_rules(&sub, Some(&address)).await.is_err());
        assert!(store.recipient_rules(&sub, Some(&address)).await.is_ok());
        faults.fail(OP_PREFERENCES, FaultPoint::Before, 1);
        assert!(store.recipient_rules(&sub, None).await.is_err());
        assert!(store.recipient_rules(&sub, None).await.is_ok());
    }
}
