//! The ledger, series and the provider gate, around.

use reminders_core::clock::Timestamp;
use reminders_core::domain::series::Series;
use reminders_core::domain::{DeliveryKey, SeriesId, SubscriberId};
use reminders_core::ledger::DeliveryRecord;
use reminders_core::ports::gate::{BreakerChange, GateState};
use reminders_core::ports::series::{SeriesCursor, SeriesCursorPage, Written};
use reminders_core::ports::{
    Cas, Expected, ExpectedSeries, Gate, GatePartition, Ledger, PortError, SeriesPage, SeriesStore,
};

use super::{around, forward, Around, Call, Hook};

impl<T: Ledger, H: Hook> Ledger for Around<T, H> {
    forward! {
        fn get(key: &DeliveryKey) -> Option<DeliveryRecord> as Call::LedgerGet { key };
        fn put_if(record: &DeliveryRecord, expected: Expected) -> Cas
            as Call::PutIf { record, expected: &expected };
        fn delete_if(key: &DeliveryKey, expected: Expected) -> Cas
            as Call::DeleteIf { key, expected: &expected };
    }
}

impl<T: SeriesStore, H: Hook> SeriesStore for Around<T, H> {
    forward! {
        fn get_series(id: &SeriesId) -> Option<Series> as Call::GetSeries { id };
        fn put_series(series: &Series, expected: ExpectedSeries) -> Written
            as Call::PutSeries { series, expected };
        fn series_due(until: Timestamp, limit: u32) -> Vec<Series>
            as Call::SeriesDue { until, limit };
        fn series_of(subscriber: &SubscriberId, after: Option<&SeriesId>, limit: u32) -> SeriesPage
            as Call::SeriesOf { subscriber, after, limit };
        fn series_after(
            subscriber: &SubscriberId,
            after: Option<&SeriesCursor>,
            limit: u32
        ) -> SeriesCursorPage as Call::SeriesAfter { subscriber, after, limit };
    }
}

impl<T: Gate, H: Hook> Gate for Around<T, H> {
    forward! {
        fn state(partition: &GatePartition) -> GateState as Call::GateState { partition };
        fn throttle(partition: &GatePartition, until: Timestamp) -> ()
            as Call::Throttle { partition, until };
        fn failed(partition: &GatePartition, now: Timestamp) -> GateState
            as Call::Failed { partition, now };
        fn breaker(partition: &GatePartition, change: BreakerChange) -> bool
            as Call::Breaker { partition, change };
    }
}
