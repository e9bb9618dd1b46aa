//! The reminders table, around.

use reminders_core::clock::Timestamp;
use reminders_core::domain::{
    AddressHash, Preferences, Reminder, ReminderId, ReminderStatus, SubscriberId, Suppression,
};
use reminders_core::ports::reminders::{delivery_read_apart, rules_read_apart, DeliveryRead};
use reminders_core::ports::{
    DuePage, DueQuery, Inserted, Marked, PortError, ReminderStore, SweepCursor, SweepPage,
};

use super::{around, forward, Around, Call, Hook};

impl<T: ReminderStore, H: Hook> ReminderStore for Around<T, H> {
    fn shards(&self) -> u32 {
        self.inner.shards()
    }

    forward! {
        fn insert(reminder: &Reminder) -> Inserted as Call::Insert { reminder };
        fn replace(reminder: &Reminder, expected_version: u64, expected_status: ReminderStatus)
            -> Marked as Call::Replace { reminder, expected_version, expected_status };
        fn get(id: &ReminderId) -> Option<Reminder> as Call::Get { id };
        fn query_due(query: &DueQuery<'_>) -> DuePage as Call::QueryDue { query };
        fn extend_freshness(
            id: &ReminderId,
            payload_version: u64,
            fresh_until: Timestamp,
            expires_at: i64
        ) -> Marked as Call::ExtendFreshness { id, payload_version, fresh_until, expires_at };
        fn sweep_index(after: Option<&SweepCursor>, limit: u32) -> SweepPage
            as Call::SweepIndex { after, limit };
        fn quarantine(key: &str, reason: &str) -> Marked as Call::Quarantine { key, reason };
        fn preferences(subscriber: &SubscriberId) -> Option<Preferences>
            as Call::Preferences { subscriber };
        fn put_preferences(subscriber: &SubscriberId, prefs: &Preferences) -> ()
            as Call::PutPreferences { subscriber, prefs };
        fn suppression(address: &AddressHash) -> Option<Suppression>
            as Call::Suppression { address };
        fn put_suppression(suppression: &Suppression) -> ()
            as Call::PutSuppression { suppression };
        fn mark(id: &ReminderId, payload_version: u64, to: ReminderStatus) -> Marked
            as Call::Mark { id, payload_version, to };
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
}
