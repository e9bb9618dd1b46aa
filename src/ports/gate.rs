//! The `Gate` port (DESIGN §6): per (channel, provider partition), the time until which the
//! provider is known to be throttling. Workers defer that partition's deliveries without
//! calling the provider. Items live in the deliveries table under the `gate#` prefix, which no
//! delivery key can take.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Mutex;

use super::faults::{lock, FaultPoint, Faults};
use super::PortError;
use crate::clock::Timestamp;
use crate::domain::Channel;

pub const OP_GET: &str = "gate.get";
pub const OP_THROTTLE: &str = "gate.throttle";

/// A provider partition: the unit a provider throttles (an account, a sender id, a host).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GatePartition {
    pub channel: Channel,
    pub name: String,
}

impl GatePartition {
    pub fn new(channel: Channel, name: impl Into<String>) -> Self {
        Self {
            channel,
            name: name.into(),
        }
    }

    /// The item key: `gate#<channel>#<name>`.
    pub fn item_key(&self) -> String {
        format!("gate#{}#{}", self.channel, self.name)
    }
}

pub trait Gate: Send + Sync {
    /// When the partition opens again, if it is or was throttled.
    fn throttled_until(
        &self,
        partition: &GatePartition,
    ) -> impl Future<Output = Result<Option<Timestamp>, PortError>> + Send;

    /// Close the partition until `until`; never shortens a later closing.
    fn throttle(
        &self,
        partition: &GatePartition,
        until: Timestamp,
    ) -> impl Future<Output = Result<(), PortError>> + Send;
}

impl<T: Gate> Gate for std::sync::Arc<T> {
    fn throttled_until(
        &self,
        p: &GatePartition,
    ) -> impl Future<Output = Result<Option<Timestamp>, PortError>> + Send {
        (**self).throttled_until(p)
    }
    fn throttle(
        &self,
        p: &GatePartition,
        until: Timestamp,
    ) -> impl Future<Output = Result<(), PortError>> + Send {
        (**self).throttle(p, until)
    }
}

#[derive(Debug, Default)]
pub struct MemoryGate {
    until: Mutex<BTreeMap<GatePartition, Timestamp>>,
    faults: Faults,
}

impl MemoryGate {
    pub fn with_faults(faults: Faults) -> Self {
        Self {
            until: Mutex::default(),
            faults,
        }
    }
}

impl Gate for MemoryGate {
    async fn throttled_until(&self, p: &GatePartition) -> Result<Option<Timestamp>, PortError> {
        self.faults.check(OP_GET, FaultPoint::Before)?;
        let found = lock(&self.until).get(p).copied();
        self.faults.check(OP_GET, FaultPoint::After)?;
        Ok(found)
    }

    async fn throttle(&self, p: &GatePartition, until: Timestamp) -> Result<(), PortError> {
        self.faults.check(OP_THROTTLE, FaultPoint::Before)?;
        {
            let mut map = lock(&self.until);
            let entry = map.entry(p.clone()).or_insert(until);
            *entry = (*entry).max(until);
        }
        self.faults.check(OP_THROTTLE, FaultPoint::After)
    }
}
