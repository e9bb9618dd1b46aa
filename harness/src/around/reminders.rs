//! The reminders table, its index by subscriber and an erasure's deletes, around.

use reminders_core::clock::Timestamp;
use reminders_core::domain::SeriesId;
use reminders_core::domain::{
    AddressHash, Preferences, Reminder, ReminderId, ReminderStatus, SubscriberId, Suppression,
};
use reminders_core::ports::reminders::{delivery_read_apart, rules_read_apart, DeliveryRead};
use reminders_core::ports::{
    Deleted, DuePage, DueQuery, Eraser, Inserted, Marked, PortError, ReminderStore,
    SubscriberCursor, SubscriberIndex, SubscriberPage, SweepCursor, SweepPage,
};

use super::{around, compound, forward, Around, Call, Hook};

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

    // The wrapped store's own one read (DynamoDB: one `BatchGetItem`), named as the adapter
    // names it; or, for a hook that models single reads, the trait's default.
    compound! {
        fn recipient_rules(subscriber: &SubscriberId, address: Option<&AddressHash>)
            -> (Option<Preferences>, Option<Suppression>)
            as Call::RecipientRules { subscriber, address }, apart rules_read_apart;
        fn delivery_read(id: &ReminderId, subscriber: &SubscriberId, address: Option<&AddressHash>)
            -> DeliveryRead as Call::DeliveryRead { id, subscriber, address },
            apart delivery_read_apart;
    }
}

impl<T: SubscriberIndex, H: Hook> SubscriberIndex for Around<T, H> {
    forward! {
        fn by_subscriber(subscriber: &SubscriberId, after: Option<&SubscriberCursor>, limit: u32)
            -> SubscriberPage as Call::BySubscriber { subscriber, after, limit };
    }
}

impl<T: Eraser, H: Hook> Eraser for Around<T, H> {
    forward! {
        fn delete_reminder(id: &ReminderId, force: bool) -> Deleted
            as Call::DeleteReminder { id, force };
        fn delete_preferences(subscriber: &SubscriberId) -> Deleted
            as Call::DeletePreferences { subscriber };
        fn lift_suppression(address: &AddressHash) -> Deleted
            as Call::LiftSuppression { address };
        fn delete_series(id: &SeriesId) -> Deleted as Call::DeleteSeries { id };
    }
}
