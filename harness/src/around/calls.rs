//! [`Call`]: one operation of a port, with its arguments.

use reminders_core::clock::Timestamp;
use reminders_core::deadletter::DeadLetter;
use reminders_core::domain::series::Series;
use reminders_core::domain::{
    AddressHash, Channel, DeliveryKey, Preferences, Reminder, ReminderId, ReminderStatus, SeriesId,
    SubscriberId, Suppression,
};
use reminders_core::ledger::DeliveryRecord;
use reminders_core::ports::events::Settled;
use reminders_core::ports::gate::BreakerChange;
use reminders_core::ports::series::SeriesCursor;
use reminders_core::ports::{
    eraser, events, gate, ledger, queue, reminders, series, DueQuery, Expected, ExpectedSeries,
    GatePartition, OutgoingMessage, SubscriberCursor, SweepCursor,
};

/// One operation of a port, as a hook sees it: which, and with what.
#[derive(Debug)]
pub enum Call<'a> {
    // The ledger.
    LedgerGet {
        key: &'a DeliveryKey,
    },
    PutIf {
        record: &'a DeliveryRecord,
        expected: &'a Expected,
    },
    DeleteIf {
        key: &'a DeliveryKey,
        expected: &'a Expected,
    },
    // The reminders table.
    Insert {
        reminder: &'a Reminder,
    },
    Replace {
        reminder: &'a Reminder,
        expected_version: u64,
        expected_status: ReminderStatus,
    },
    Get {
        id: &'a ReminderId,
    },
    QueryDue {
        query: &'a DueQuery<'a>,
    },
    ExtendFreshness {
        id: &'a ReminderId,
        payload_version: u64,
        fresh_until: Timestamp,
        expires_at: i64,
    },
    SweepIndex {
        after: Option<&'a SweepCursor>,
        limit: u32,
    },
    Quarantine {
        key: &'a str,
        reason: &'a str,
    },
    Preferences {
        subscriber: &'a SubscriberId,
    },
    PutPreferences {
        subscriber: &'a SubscriberId,
        prefs: &'a Preferences,
    },
    Suppression {
        address: &'a AddressHash,
    },
    PutSuppression {
        suppression: &'a Suppression,
    },
    RecipientRules {
        subscriber: &'a SubscriberId,
        address: Option<&'a AddressHash>,
    },
    DeliveryRead {
        id: &'a ReminderId,
        subscriber: &'a SubscriberId,
        address: Option<&'a AddressHash>,
    },
    Mark {
        id: &'a ReminderId,
        payload_version: u64,
        to: ReminderStatus,
    },
    BySubscriber {
        subscriber: &'a SubscriberId,
        after: Option<&'a SubscriberCursor>,
        limit: u32,
    },
    // An erasure's deletes.
    DeleteReminder {
        id: &'a ReminderId,
        force: bool,
    },
    DeletePreferences {
        subscriber: &'a SubscriberId,
    },
    LiftSuppression {
        address: &'a AddressHash,
    },
    DeleteSeries {
        id: &'a SeriesId,
    },
    // The event bus.
    Publish {
        events: &'a [Settled],
    },
    // A channel's queue.
    SendBatch {
        channel: Channel,
        messages: &'a [OutgoingMessage],
    },
    ChangeVisibility {
        channel: Channel,
        receipt_handle: &'a str,
        secs: u32,
    },
    Delete {
        channel: Channel,
        receipt_handle: &'a str,
    },
    Receive {
        channel: Channel,
        max: u32,
        visibility_secs: u32,
    },
    Depth {
        channel: Channel,
    },
    // A channel's dead-letter queue.
    DeadLetter {
        channel: Channel,
        body: &'a str,
        letter: &'a DeadLetter,
    },
    ReceiveDead {
        channel: Channel,
        max: u32,
        visibility_secs: u32,
    },
    DeleteDead {
        channel: Channel,
        receipt_handle: &'a str,
    },
    ReleaseDead {
        channel: Channel,
        receipt_handle: &'a str,
    },
    // Series.
    GetSeries {
        id: &'a SeriesId,
    },
    PutSeries {
        series: &'a Series,
        expected: ExpectedSeries,
    },
    SeriesDue {
        until: Timestamp,
        limit: u32,
    },
    SeriesOf {
        subscriber: &'a SubscriberId,
        after: Option<&'a SeriesId>,
        limit: u32,
    },
    SeriesAfter {
        subscriber: &'a SubscriberId,
        after: Option<&'a SeriesCursor>,
        limit: u32,
    },
    // The provider gate.
    GateState {
        partition: &'a GatePartition,
    },
    Throttle {
        partition: &'a GatePartition,
        until: Timestamp,
    },
    Failed {
        partition: &'a GatePartition,
        now: Timestamp,
    },
    Breaker {
        partition: &'a GatePartition,
        change: BreakerChange,
    },
}

/// `name` and `NAMES` from one list of arms, so the list of names cannot miss one.
macro_rules! names {
    ($($pat:pat => $name:expr,)*) => {
        /// The operation's name as its adapter names it in errors, and as a fault plan names it:
        /// one request, one name. The recipient's rules are one `BatchGetItem` with a suppression
        /// to read and the preferences' one `GetItem` without; the dead-letter queue's receive,
        /// delete and release are a queue's; a series page after a cursor is `series.of`.
        pub fn name(&self) -> &'static str {
            match self {
                $($pat => $name,)*
            }
        }

        /// Every name [`Call::name`] answers: what a fault plan may name.
        pub const NAMES: &'static [&'static str] = &[$($name),*];
    };
}

impl Call<'_> {
    names! {
        Call::LedgerGet { .. } => ledger::OP_GET,
        Call::PutIf { .. } => ledger::OP_PUT,
        Call::DeleteIf { .. } => ledger::OP_DELETE,
        Call::Insert { .. } => reminders::OP_INSERT,
        Call::Replace { .. } => reminders::OP_REPLACE,
        Call::Get { .. } => reminders::OP_GET,
        Call::QueryDue { .. } => reminders::OP_QUERY,
        Call::ExtendFreshness { .. } => reminders::OP_EXTEND,
        Call::SweepIndex { .. } => reminders::OP_SWEEP,
        Call::Quarantine { .. } => reminders::OP_QUARANTINE,
        Call::Preferences { .. } => reminders::OP_PREFERENCES,
        Call::PutPreferences { .. } => reminders::OP_PUT_PREFERENCES,
        Call::Suppression { .. } => reminders::OP_SUPPRESSION,
        Call::PutSuppression { .. } => reminders::OP_PUT_SUPPRESSION,
        Call::RecipientRules {
                address: Some(_), ..
            } => reminders::OP_RULES,
        Call::RecipientRules { address: None, .. } => reminders::OP_PREFERENCES,
        Call::DeliveryRead { .. } => reminders::OP_DELIVERY_READ,
        Call::Mark { .. } => reminders::OP_MARK,
        Call::BySubscriber { .. } => reminders::OP_BY_SUBSCRIBER,
        Call::DeleteReminder { .. } => eraser::OP_DELETE_REMINDER,
        Call::DeletePreferences { .. } => eraser::OP_DELETE_PREFERENCES,
        Call::LiftSuppression { .. } => eraser::OP_LIFT_SUPPRESSION,
        Call::DeleteSeries { .. } => eraser::OP_DELETE_SERIES,
        Call::Publish { .. } => events::OP_PUBLISH,
        Call::SendBatch { .. } => queue::OP_SEND,
        Call::ChangeVisibility { .. } => queue::OP_VISIBILITY,
        Call::Delete { .. } => queue::OP_DELETE,
        Call::Receive { .. } => queue::OP_RECEIVE,
        Call::Depth { .. } => queue::OP_DEPTH,
        Call::DeadLetter { .. } => queue::OP_DEAD_LETTER,
        Call::ReceiveDead { .. } => queue::OP_RECEIVE,
        Call::DeleteDead { .. } => queue::OP_DELETE,
        Call::ReleaseDead { .. } => queue::OP_VISIBILITY,
        Call::GetSeries { .. } => series::OP_GET_SERIES,
        Call::PutSeries { .. } => series::OP_PUT_SERIES,
        Call::SeriesDue { .. } => series::OP_SERIES_DUE,
        Call::SeriesOf { .. } | Call::SeriesAfter { .. } => series::OP_SERIES_OF,
        Call::GateState { .. } => gate::OP_GET,
        Call::Throttle { .. } => gate::OP_THROTTLE,
        Call::Failed { .. } => gate::OP_FAILED,
        Call::Breaker { .. } => gate::OP_BREAKER,
    }
}
