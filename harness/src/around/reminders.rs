//! The reminders table, around.

use reminders_core::clock::Timestamp;
use reminders_core::domain::{
    AddressHash, Preferences, Reminder, ReminderId, ReminderStatus, SubscriberId, Suppression,
};
use reminders_core::ports::reminders::{delivery_read_apart, rules_read_apart, DeliveryRead};
use reminders_core::ports::{
    DuePage, DueQuery, Inserted, Marked, PortError, ReminderStore, SweepCursor, SweepPage,
};

use super::{around, Around, Call, Hook};

impl<T: ReminderStore, H: Hook> ReminderStore for Around<T, H> {
    fn shards(&self) -> u32 {
        self.inner.shards()
    }

    async fn insert(&self, reminder: &Reminder) -> Result<Inserted, PortError> {
        around!(self, Call::Insert { reminder }, self.inner.insert(reminder))
    }

    async fn replace(
        &self,
        reminder: &Reminder,
        expected_version: u64,
        expected_status: ReminderStatus,
    ) -> Result<Marked, PortError> {
        let call = Call::Replace {
            reminder,
            expected_version,
            expected_status,
        };
        around!(
            self,
            call,
            self.inner
                .replace(reminder, expected_version, expected_status)
        )
    }

    async fn get(&self, id: &ReminderId) -> Result<Option<Reminder>, PortError> {
        around!(self, Call::Get { id }, self.inner.get(id))
    }

    async fn query_due(&self, query: &DueQuery<'_>) -> Result<DuePage, PortError> {
        around!(self, Call::QueryDue { query }, self.inner.query_due(query))
    }

    async fn extend_freshness(
        &self,
        id: &ReminderId,
        payload_version: u64,
        fresh_until: Timestamp,
        expires_at: i64,
    ) -> Result<Marked, PortError> {
        let call = Call::ExtendFreshness {
            id,
            payload_version,
            fresh_until,
            expires_at,
        };
        around!(
            self,
            call,
            self.inner
                .extend_freshness(id, payload_version, fresh_until, expires_at)
        )
    }

    async fn sweep_index(
        &self,
        after: Option<&SweepCursor>,
        limit: u32,
    ) -> Result<SweepPage, PortError> {
        around!(
            self,
            Call::SweepIndex { after, limit },
            self.inner.sweep_index(after, limit)
        )
    }

    async fn quarantine(&self, key: &str, reason: &str) -> Result<Marked, PortError> {
        around!(
            self,
            Call::Quarantine { key, reason },
            self.inner.quarantine(key, reason)
        )
    }

    async fn preferences(
        &self,
        subscriber: &SubscriberId,
    ) -> Result<Option<Preferences>, PortError> {
        around!(
            self,
            Call::Preferences { subscriber },
            self.inner.preferences(subscriber)
        )
    }

    async fn put_preferences(
        &self,
        subscriber: &SubscriberId,
        prefs: &Preferences,
    ) -> Result<(), PortError> {
        around!(
            self,
            Call::PutPreferences { subscriber, prefs },
            self.inner.put_preferences(subscriber, prefs)
        )
    }

    async fn suppression(&self, address: &AddressHash) -> Result<Option<Suppression>, PortError> {
        around!(
            self,
            Call::Suppression { address },
            self.inner.suppression(address)
        )
    }

    async fn put_suppression(&self, suppression: &Suppression) -> Result<(), PortError> {
        around!(
            self,
            Call::PutSuppression { suppression },
            self.inner.put_suppression(suppression)
        )
    }

    /// The wrapped store's own read of the rules (DynamoDB: one `BatchGetItem`), not the
    /// trait's default of two reads: one call, named as the adapter names it. A hook that
    /// models single reads has them made one by one instead.
    async fn recipient_rules(
        &self,
        subscriber: &SubscriberId,
        address: Option<&AddressHash>,
    ) -> Result<(Option<Preferences>, Option<Suppression>), PortError> {
        if self.hook.splits_compound_reads() {
            return rules_read_apart(self, subscriber, address).await;
        }
        around!(
            self,
            Call::RecipientRules {
                subscriber,
                address
            },
            self.inner.recipient_rules(subscriber, address)
        )
    }

    /// The wrapped store's own one read of a delivery (DynamoDB: one `BatchGetItem`), or its
    /// single reads for a hook that models them.
    async fn delivery_read(
        &self,
        id: &ReminderId,
        subscriber: &SubscriberId,
        address: Option<&AddressHash>,
    ) -> Result<DeliveryRead, PortError> {
        if self.hook.splits_compound_reads() {
            return delivery_read_apart(self, id, subscriber, address).await;
        }
        let call = Call::DeliveryRead {
            id,
            subscriber,
            address,
        };
        around!(
            self,
            call,
            self.inner.delivery_read(id, subscriber, address)
        )
    }

    async fn mark(
        &self,
        id: &ReminderId,
        payload_version: u64,
        to: ReminderStatus,
    ) -> Result<Marked, PortError> {
        let call = Call::Mark {
            id,
            payload_version,
            to,
        };
        around!(self, call, self.inner.mark(id, payload_version, to))
    }
}
