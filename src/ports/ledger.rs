//! The `Ledger` port: the deliveries table as a compare-and-set store of [`DeliveryRecord`]s.
//!
//! The state machine ([`crate::ledger`]) computes the next record; the port stores it
//! only if the item is still what the caller saw (`Expected`), and on a conflict returns the
//! current item (DynamoDB: `ReturnValuesOnConditionCheckFailure=ALL_OLD`, no second read).

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Mutex;

use super::faults::{lock, FaultPoint, Faults};
use super::PortError;
use crate::domain::DeliveryKey;
use crate::ledger::{DeliveryRecord, Status};

pub const OP_GET: &str = "ledger.get";
pub const OP_PUT: &str = "ledger.put_if";

/// What the write expects to find.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expected {
    /// No item: the delivery is `scheduled`.
    Absent,
    /// The item at this transition number, in this state.
    Version { seq: u64, status: Status },
}

impl Expected {
    pub fn of(current: Option<&DeliveryRecord>) -> Self {
        current.map_or(Expected::Absent, |r| Expected::Version {
            seq: r.seq(),
            status: r.status(),
        })
    }

    pub fn holds_for(self, current: Option<&DeliveryRecord>) -> bool {
        match (self, current) {
            (Expected::Absent, None) => true,
            (Expected::Version { seq, status }, Some(r)) => r.seq() == seq && r.status() == status,
            _ => false,
        }
    }
}

/// The answer to a conditional write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cas {
    Applied,
    /// The item changed since the caller saw it; here is what it is now.
    Conflict(Option<Box<DeliveryRecord>>),
}

pub trait Ledger: Send + Sync {
    /// A strongly consistent read.
    fn get(
        &self,
        key: &DeliveryKey,
    ) -> impl Future<Output = Result<Option<DeliveryRecord>, PortError>> + Send;

    /// Store `record` if the current item matches `expected`, in one conditional write.
    fn put_if(
        &self,
        record: &DeliveryRecord,
        expected: Expected,
    ) -> impl Future<Output = Result<Cas, PortError>> + Send;
}

impl<T: Ledger> Ledger for std::sync::Arc<T> {
    fn get(
        &self,
        key: &DeliveryKey,
    ) -> impl Future<Output = Result<Option<DeliveryRecord>, PortError>> + Send {
        (**self).get(key)
    }
    fn put_if(
        &self,
        record: &DeliveryRecord,
        expected: Expected,
    ) -> impl Future<Output = Result<Cas, PortError>> + Send {
        (**self).put_if(record, expected)
    }
}

#[derive(Debug, Default)]
pub struct MemoryLedger {
    items: Mutex<BTreeMap<DeliveryKey, DeliveryRecord>>,
    faults: Faults,
}

impl MemoryLedger {
    pub fn with_faults(faults: Faults) -> Self {
        Self {
            items: Mutex::default(),
            faults,
        }
    }

    /// Every record, in key order (for reports and tests).
    pub fn snapshot(&self) -> Vec<DeliveryRecord> {
        lock(&self.items).values().cloned().collect()
    }
}

impl Ledger for MemoryLedger {
    async fn get(&self, key: &DeliveryKey) -> Result<Option<DeliveryRecord>, PortError> {
        self.faults.check(OP_GET, FaultPoint::Before)?;
        let found = lock(&self.items).get(key).cloned();
        self.faults.check(OP_GET, FaultPoint::After)?;
        Ok(found)
    }

    async fn put_if(&self, record: &DeliveryRecord, expected: Expected) -> Result<Cas, PortError> {
        self.faults.check(OP_PUT, FaultPoint::Before)?;
        let answer = {
            let mut items = lock(&self.items);
            let current = items.get(record.key());
            if expected.holds_for(current) {
                items.insert(record.key().clone(), record.clone());
                Cas::Applied
            } else {
                Cas::Conflict(current.cloned().map(Box::new))
            }
        };
        self.faults.check(OP_PUT, FaultPoint::After)?;
        Ok(answer)
    }
}
