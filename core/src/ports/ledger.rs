//! The `Ledger` port: the deliveries table as a compare-and-set store of [`DeliveryRecord`]s.
//!
//! The state machine ([`crate::ledger`]) computes the next record; the port stores it
//! only if the item is still what the caller saw (`Expected`), and on a conflict returns the
//! current item (DynamoDB: `ReturnValuesOnConditionCheckFailure=ALL_OLD`, no second read).

use std::collections::HashMap;
use std::future::Future;
use std::sync::Mutex;

use super::PortError;
use crate::domain::DeliveryKey;
use crate::ledger::{packed_fence, DeliveryRecord, LeaseToken, Status};
use crate::sync::lock;

pub const OP_GET: &str = "ledger.get";
pub const OP_PUT: &str = "ledger.put_if";
pub const OP_DELETE: &str = "ledger.delete_if";

/// What the write expects to find.
///
/// A version names the item's lease token as well as its transition number and state: a
/// delivery whose claim was given back ([`Ledger::delete_if`]) starts again at transition 1 when
/// it is claimed anew, so a write that the SDK retried after its first answer was lost (or a
/// writer that read the item before the give-back) would otherwise find "transition 1,
/// sending" again and land on another worker's claim. The token is random per claim: the
/// write holds only for the item its writer read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expected {
    /// No item: the delivery is `scheduled`.
    Absent,
    /// The item at this transition number, in this state, under this lease (`None`: none).
    Version {
        seq: u64,
        status: Status,
        lease: Option<LeaseToken>,
    },
}

impl Expected {
    pub fn of(current: Option<&DeliveryRecord>) -> Self {
        current.map_or(Expected::Absent, |r| Expected::Version {
            seq: r.seq(),
            status: r.status(),
            lease: r.lease_token().cloned(),
        })
    }

    pub fn holds_for(&self, current: Option<&DeliveryRecord>) -> bool {
        self.holds_for_fence(
            current.map(|r| (r.status(), r.seq(), r.lease_token().map(LeaseToken::as_str))),
        )
    }

    /// [`Expected::holds_for`] on the current item's status, transition number and lease
    /// token alone.
    pub fn holds_for_fence(&self, current: Option<(Status, u64, Option<&str>)>) -> bool {
        match (self, current) {
            (Expected::Absent, None) => true,
            (Expected::Version { seq, status, lease }, Some((s, n, l))) => {
                n == *seq && s == *status && lease.as_ref().map(LeaseToken::as_str) == l
            }
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

    /// Delete the item under `key` if it is still at `expected` (a `Version`, lease token
    /// included), in one conditional write: a claim undone as if it was never made. Only the consumer's one-read
    /// path does it, to give back the item its own claim created (nothing sent, no attempt)
    /// when the reminder as read was not what the message said: a later reader finds no item,
    /// as it would have had the two-read path decided first.
    fn delete_if(
        &self,
        key: &DeliveryKey,
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
    fn delete_if(
        &self,
        key: &DeliveryKey,
        expected: Expected,
    ) -> impl Future<Output = Result<Cas, PortError>> + Send {
        (**self).delete_if(key, expected)
    }
}

/// The deliveries table in memory. Each record is kept in its compact byte form
/// ([`DeliveryRecord::pack`]): the embedded pipeline holds one per delivery, a million in the
/// 1M demo, and a typed record with its history map costs about ten times its content.
/// Writing and reading one costs about what the clones this adapter made before did.
#[derive(Debug, Default)]
pub struct MemoryLedger {
    /// By key, hashed: the embedded pipeline looks a key up several times a delivery among a
    /// million, where a tree's string comparisons (a cache miss each) were a quarter of a 1M
    /// demo's time.
    items: Mutex<HashMap<Box<str>, Box<[u8]>>>,
}

impl MemoryLedger {
    /// Every record, in key order (for reports and tests).
    pub fn snapshot(&self) -> Vec<DeliveryRecord> {
        let mut all: Vec<DeliveryRecord> = lock(&self.items)
            .iter()
            .filter_map(|(k, bytes)| {
                let key = DeliveryKey::parse(k.to_string()).ok()?;
                DeliveryRecord::unpack(key, bytes)
            })
            .collect();
        all.sort_by(|a, b| a.key().as_str().cmp(b.key().as_str()));
        all
    }
}

/// The record stored under `key`: only this adapter wrote the bytes, so one that does not read
/// back is a bug here.
fn unpacked(
    op: &'static str,
    key: &DeliveryKey,
    bytes: &[u8],
) -> Result<DeliveryRecord, PortError> {
    DeliveryRecord::unpack(key.clone(), bytes).ok_or_else(|| unreadable(op, key))
}

fn unreadable(op: &'static str, key: &DeliveryKey) -> PortError {
    PortError::Invariant {
        op,
        message: format!("the in-memory record of {key} does not read back"),
    }
}

impl Ledger for MemoryLedger {
    async fn get(&self, key: &DeliveryKey) -> Result<Option<DeliveryRecord>, PortError> {
        let found = {
            let items = lock(&self.items);
            match items.get(key.as_str()) {
                Some(bytes) => Some(unpacked(OP_GET, key, bytes)?),
                None => None,
            }
        };
        Ok(found)
    }

    async fn put_if(&self, record: &DeliveryRecord, expected: Expected) -> Result<Cas, PortError> {
        let answer = {
            let mut items = lock(&self.items);
            let key = record.key();
            let current = items.get(key.as_str());
            let version = match current {
                Some(bytes) => Some(packed_fence(bytes).ok_or_else(|| unreadable(OP_PUT, key))?),
                None => None,
            };
            if expected.holds_for_fence(version) {
                let bytes = record.pack();
                // Every test that writes through this ledger holds the byte form exact.
                debug_assert_eq!(
                    DeliveryRecord::unpack(key.clone(), &bytes).as_ref(),
                    Some(record)
                );
                items.insert(key.as_str().into(), bytes);
                Cas::Applied
            } else {
                match current {
                    Some(bytes) => Cas::Conflict(Some(Box::new(unpacked(OP_PUT, key, bytes)?))),
                    None => Cas::Conflict(None),
                }
            }
        };
        Ok(answer)
    }

    async fn delete_if(&self, key: &DeliveryKey, expected: Expected) -> Result<Cas, PortError> {
        let answer = {
            let mut items = lock(&self.items);
            let current = items.get(key.as_str());
            let version = match current {
                Some(bytes) => Some(packed_fence(bytes).ok_or_else(|| unreadable(OP_DELETE, key))?),
                None => None,
            };
            if current.is_some() && expected.holds_for_fence(version) {
                items.remove(key.as_str());
                Cas::Applied
            } else {
                match current {
                    Some(bytes) => Cas::Conflict(Some(Box::new(unpacked(OP_DELETE, key, bytes)?))),
                    None => Cas::Conflict(None),
                }
            }
        };
        Ok(answer)
    }
}
