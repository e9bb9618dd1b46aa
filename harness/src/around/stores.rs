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

use super::{around, Around, Call, Hook};

impl<T: Ledger, H: Hook> Ledger for Around<T, H> {
    async fn get(&self, key: &DeliveryKey) -> Result<Option<DeliveryRecord>, PortError> {
        around!(self, Call::LedgerGet { key }, self.inner.get(key))
    }

    async fn put_if(&self, record: &DeliveryRecord, expected: Expected) -> Result<Cas, PortError> {
        let call = Call::PutIf {
            record,
            expected: &expected,
        };
        around!(self, call, self.inner.put_if(record, expected.clone()))
    }

    async fn delete_if(&self, key: &DeliveryKey, expected: Expected) -> Result<Cas, PortError> {
        let call = Call::DeleteIf {
            key,
            expected: &expected,
        };
        around!(self, call, self.inner.delete_if(key, expected.clone()))
    }
}

impl<T: SeriesStore, H: Hook> SeriesStore for Around<T, H> {
    async fn get_series(&self, id: &SeriesId) -> Result<Option<Series>, PortError> {
        around!(self, Call::GetSeries { id }, self.inner.get_series(id))
    }

    async fn put_series(
        &self,
        series: &Series,
        expected: ExpectedSeries,
    ) -> Result<Written, PortError> {
        around!(
            self,
            Call::PutSeries { series, expected },
            self.inner.put_series(series, expected)
        )
    }

    async fn series_due(&self, until: Timestamp, limit: u32) -> Result<Vec<Series>, PortError> {
        around!(
            self,
            Call::SeriesDue { until, limit },
            self.inner.series_due(until, limit)
        )
    }

    async fn series_of(
        &self,
        subscriber: &SubscriberId,
        after: Option<&SeriesId>,
        limit: u32,
    ) -> Result<SeriesPage, PortError> {
        let call = Call::SeriesOf {
            subscriber,
            after,
            limit,
        };
        around!(self, call, self.inner.series_of(subscriber, after, limit))
    }

    async fn series_after(
        &self,
        subscriber: &SubscriberId,
        after: Option<&SeriesCursor>,
        limit: u32,
    ) -> Result<SeriesCursorPage, PortError> {
        let call = Call::SeriesAfter {
            subscriber,
            after,
            limit,
        };
        around!(
            self,
            call,
            self.inner.series_after(subscriber, after, limit)
        )
    }
}

impl<T: Gate, H: Hook> Gate for Around<T, H> {
    async fn state(&self, partition: &GatePartition) -> Result<GateState, PortError> {
        around!(
            self,
            Call::GateState { partition },
            self.inner.state(partition)
        )
    }

    async fn throttle(&self, partition: &GatePartition, until: Timestamp) -> Result<(), PortError> {
        around!(
            self,
            Call::Throttle { partition, until },
            self.inner.throttle(partition, until)
        )
    }

    async fn failed(
        &self,
        partition: &GatePartition,
        now: Timestamp,
    ) -> Result<GateState, PortError> {
        around!(
            self,
            Call::Failed { partition, now },
            self.inner.failed(partition, now)
        )
    }

    async fn breaker(
        &self,
        partition: &GatePartition,
        change: BreakerChange,
    ) -> Result<bool, PortError> {
        around!(
            self,
            Call::Breaker { partition, change },
            self.inner.breaker(partition, change)
        )
    }
}
