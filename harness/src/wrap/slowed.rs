//! [`Slowed`]: any port, each call after a latency on a clock.

use reminders_core::clock::Clock;
use reminders_core::ports::{DeliveryQueue, Ledger, PortError, ReminderStore};

/// A port whose every call first waits `latency` on `clock` (virtual time with the manual
/// clock): a slow dependency, for tests of progress under load.
#[derive(Debug, Clone)]
pub struct Slowed<T, C> {
    pub inner: T,
    pub clock: C,
    pub latency: std::time::Duration,
}

impl<T, C: Clock> Slowed<T, C> {
    async fn wait(&self) {
        self.clock.sleep(self.latency).await;
    }
}

impl<T: ReminderStore, C: Clock> ReminderStore for Slowed<T, C> {
    fn shards(&self) -> u32 {
        self.inner.shards()
    }
    async fn sweep_index(
        &self,
        after: Option<&reminders_core::ports::SweepCursor>,
        limit: u32,
    ) -> Result<reminders_core::ports::SweepPage, PortError> {
        self.wait().await;
        self.inner.sweep_index(after, limit).await
    }
    async fn insert(
        &self,
        r: &reminders_core::domain::Reminder,
    ) -> Result<reminders_core::ports::Inserted, PortError> {
        self.wait().await;
        self.inner.insert(r).await
    }
    async fn replace(
        &self,
        r: &reminders_core::domain::Reminder,
        expected_version: u64,
        expected_status: reminders_core::domain::ReminderStatus,
    ) -> Result<reminders_core::ports::Marked, PortError> {
        self.wait().await;
        self.inner
            .replace(r, expected_version, expected_status)
            .await
    }
    async fn get(
        &self,
        id: &reminders_core::domain::ReminderId,
    ) -> Result<Option<reminders_core::domain::Reminder>, PortError> {
        self.wait().await;
        self.inner.get(id).await
    }
    async fn query_due(
        &self,
        q: &reminders_core::ports::DueQuery<'_>,
    ) -> Result<reminders_core::ports::DuePage, PortError> {
        self.wait().await;
        self.inner.query_due(q).await
    }
    async fn quarantine(
        &self,
        key: &str,
        reason: &str,
    ) -> Result<reminders_core::ports::Marked, PortError> {
        self.wait().await;
        self.inner.quarantine(key, reason).await
    }
    async fn extend_freshness(
        &self,
        id: &reminders_core::domain::ReminderId,
        payload_version: u64,
        fresh_until: reminders_core::clock::Timestamp,
        expires_at: i64,
    ) -> Result<reminders_core::ports::Marked, PortError> {
        self.wait().await;
        let call = self
            .inner
            .extend_freshness(id, payload_version, fresh_until, expires_at);
        call.await
    }
    async fn mark(
        &self,
        id: &reminders_core::domain::ReminderId,
        payload_version: u64,
        to: reminders_core::domain::ReminderStatus,
    ) -> Result<reminders_core::ports::Marked, PortError> {
        self.wait().await;
        self.inner.mark(id, payload_version, to).await
    }
    async fn preferences(
        &self,
        subscriber: &reminders_core::domain::SubscriberId,
    ) -> Result<Option<reminders_core::domain::Preferences>, PortError> {
        self.wait().await;
        self.inner.preferences(subscriber).await
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
        self.wait().await;
        self.inner.suppression(address).await
    }
    async fn put_suppression(
        &self,
        s: &reminders_core::domain::Suppression,
    ) -> Result<(), PortError> {
        self.inner.put_suppression(s).await
    }
    /// The wrapped store's own read of the rules (one batch on DynamoDB): one call, one wait.
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
        self.wait().await;
        self.inner.recipient_rules(subscriber, address).await
    }
    /// The wrapped store's own one read: one call, one wait.
    async fn delivery_read(
        &self,
        id: &reminders_core::domain::ReminderId,
        subscriber: &reminders_core::domain::SubscriberId,
        address: Option<&reminders_core::domain::AddressHash>,
    ) -> Result<reminders_core::ports::reminders::DeliveryRead, PortError> {
        self.wait().await;
        self.inner.delivery_read(id, subscriber, address).await
    }
}

impl<T: DeliveryQueue, C: Clock> DeliveryQueue for Slowed<T, C> {
    async fn send_batch(
        &self,
        channel: reminders_core::domain::Channel,
        messages: &[reminders_core::ports::OutgoingMessage],
    ) -> Result<Vec<reminders_core::ports::SendFailure>, PortError> {
        self.wait().await;
        self.inner.send_batch(channel, messages).await
    }
    async fn change_visibility(
        &self,
        channel: reminders_core::domain::Channel,
        receipt_handle: &str,
        secs: u32,
    ) -> Result<(), PortError> {
        self.wait().await;
        self.inner
            .change_visibility(channel, receipt_handle, secs)
            .await
    }
    async fn delete(
        &self,
        channel: reminders_core::domain::Channel,
        receipt_handle: &str,
    ) -> Result<(), PortError> {
        self.wait().await;
        self.inner.delete(channel, receipt_handle).await
    }
    async fn receive(
        &self,
        channel: reminders_core::domain::Channel,
        max: u32,
        visibility_secs: u32,
    ) -> Result<Vec<reminders_core::ports::ReceivedMessage>, PortError> {
        self.wait().await;
        self.inner.receive(channel, max, visibility_secs).await
    }
    async fn depth(
        &self,
        channel: reminders_core::domain::Channel,
    ) -> Result<reminders_core::ports::QueueDepth, PortError> {
        self.wait().await;
        self.inner.depth(channel).await
    }
}

impl<T: Ledger, C: Clock> Ledger for Slowed<T, C> {
    async fn get(
        &self,
        key: &reminders_core::domain::DeliveryKey,
    ) -> Result<Option<reminders_core::ledger::DeliveryRecord>, PortError> {
        self.wait().await;
        self.inner.get(key).await
    }

    async fn put_if(
        &self,
        record: &reminders_core::ledger::DeliveryRecord,
        expected: reminders_core::ports::Expected,
    ) -> Result<reminders_core::ports::Cas, PortError> {
        self.wait().await;
        self.inner.put_if(record, expected).await
    }

    async fn delete_if(
        &self,
        key: &reminders_core::domain::DeliveryKey,
        expected: reminders_core::ports::Expected,
    ) -> Result<reminders_core::ports::Cas, PortError> {
        self.wait().await;
        self.inner.delete_if(key, expected).await
    }
}
