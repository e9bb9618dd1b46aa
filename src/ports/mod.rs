//! The seams (DESIGN §3): one trait per port, each with its in-memory implementation beside it.
//!
//! In-memory ports are atomic where DynamoDB is (one mutex per port, no await while held) and
//! accept [`Faults`]: a call can be made to fail before its effect, or after it (the effect
//! happened but the caller sees an error) — the two ways a network call fails.

pub mod faults;
pub mod gate;
pub mod ledger;
pub mod provider;
pub mod queue;
pub mod reminders;

pub use faults::{FaultPoint, Faults};
pub use gate::{Gate, GatePartition, MemoryGate};
pub use ledger::{Cas, Expected, Ledger, MemoryLedger};
pub use provider::{Answer, Provider, ScriptedProvider, SendRequest};
pub use queue::{
    DeadLetterMessage, DeadLetters, DeliveryQueue, MemoryQueue, OutgoingMessage, ReceivedMessage,
    SendFailure,
};
pub use reminders::{
    DueCursor, DuePage, DueReminder, Inserted, Marked, MemoryReminderStore, ReminderStore,
};

/// What went wrong in a port call that did not answer the question asked. A failed condition is
/// never a `PortError`: it is a domain answer ([`Cas::Conflict`], [`Marked::Changed`], …).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PortError {
    #[error("{op}: throttled by the service: {message}")]
    Throttled { op: &'static str, message: String },
    #[error("{op}: service unavailable or failed: {message}")]
    Unavailable { op: &'static str, message: String },
    #[error("{op}: request refused (configuration or permissions): {message}")]
    Refused { op: &'static str, message: String },
    #[error("{op}: stored item is not readable: {message}")]
    Corrupt { op: &'static str, message: String },
    #[error("{op}: injected fault {point:?} the effect")]
    Injected { op: &'static str, point: FaultPoint },
}

impl PortError {
    /// Worth trying again later (the record is retried through its queue, not in a loop here).
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            PortError::Throttled { .. }
                | PortError::Unavailable { .. }
                | PortError::Injected { .. }
        )
    }

    pub fn op(&self) -> &'static str {
        match self {
            PortError::Throttled { op, .. }
            | PortError::Unavailable { op, .. }
            | PortError::Refused { op, .. }
            | PortError::Corrupt { op, .. }
            | PortError::Injected { op, .. } => op,
        }
    }
}
