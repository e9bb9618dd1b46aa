//! The seams (docs/design.md, "Ports"): one trait per port, each store and queue with its
//! in-memory implementation beside it (the providers' stand-ins are the harness's).
//!
//! In-memory ports are atomic where DynamoDB is (one mutex per port, no await while held) and
//! carry no fault code: the harness puts a fault plan around any port (`reminders_harness::
//! around`), which fails a call before its effect or after it (the effect happened but the
//! caller sees an error: the two ways a network call fails, [`FaultPoint`]).

pub mod eraser;
pub mod events;
pub mod faults;
pub mod gate;
pub mod ledger;
pub mod provider;
pub mod queue;
pub mod reminders;
pub mod secret;
pub mod series;

pub use eraser::{Deleted, Eraser};
pub use events::{EventBus, LedgerStream, MemoryBus, MemoryStream, Rejected};
pub use faults::FaultPoint;
pub use gate::{Gate, GatePartition, MemoryGate};
pub use ledger::{Cas, Expected, Ledger, MemoryLedger};
pub use provider::{Provider, SendRequest};
pub use queue::{
    DeadLetterMessage, DeadLetters, DeliveryQueue, MemoryQueue, OutgoingMessage, QueueDepth,
    ReceivedMessage, SendFailure, StaleHandles,
};
pub use reminders::{
    visible_page, DueCursor, DueEntry, DuePage, DueQuery, DueReminder, Inserted, Listed, Marked,
    MemoryReminderStore, ReminderStore, ReminderSummary, SubscriberCursor, SubscriberIndex,
    SubscriberPage, SweepCursor, SweepPage, SweptItem,
};
pub use series::{ExpectedSeries, SeriesPage, SeriesStore};

/// Upper bound of one storage call (DynamoDB, SQS), retries included: every adapter honours
/// it, and the consumer's lease is checked at cold start to outlast a provider call plus one.
pub const STORAGE_OPERATION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

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
    /// The code broke one of its own invariants (a bug, not an outage): counted and alarmed
    /// apart from infrastructure errors.
    #[error("{op}: invariant violated: {message}")]
    Invariant { op: &'static str, message: String },
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

    /// A bug in this code rather than a failure of a dependency.
    pub fn is_invariant(&self) -> bool {
        matches!(self, PortError::Invariant { .. })
    }

    pub fn op(&self) -> &'static str {
        match self {
            PortError::Throttled { op, .. }
            | PortError::Unavailable { op, .. }
            | PortError::Refused { op, .. }
            | PortError::Corrupt { op, .. }
            | PortError::Injected { op, .. }
            | PortError::Invariant { op, .. } => op,
        }
    }
}

/// All the ports one process uses, as one value: the consumer, scheduler and redrive are
/// generic over this, so the same code runs on AWS adapters and on in-memory ports.
pub trait Ports: Send + Sync {
    type Clock: crate::clock::Clock;
    type Reminders: ReminderStore;
    type Ledger: Ledger;
    type Gate: Gate;
    type Queue: DeliveryQueue;
    type DeadLetters: DeadLetters;
    type Provider: Provider;

    fn clock(&self) -> &Self::Clock;
    fn reminders(&self) -> &Self::Reminders;
    fn ledger(&self) -> &Self::Ledger;
    fn gate(&self) -> &Self::Gate;
    fn queue(&self) -> &Self::Queue;
    fn dead_letters(&self) -> &Self::DeadLetters;
    fn provider(&self, channel: crate::domain::Channel) -> &Self::Provider;
}

/// The plain bundle of ports. Fields may be `Arc`s, so a test keeps a handle to inspect them.
#[derive(Debug, Clone)]
pub struct PortSet<C, R, L, G, Q, D, P> {
    pub clock: C,
    pub reminders: R,
    pub ledger: L,
    pub gate: G,
    pub queue: Q,
    pub dead_letters: D,
    pub providers: crate::domain::PerChannel<P>,
}

/// The same set with `$port` replaced by what `$make` makes of it; the `$kept` ports moved over.
macro_rules! replacing {
    ($set:expr, $port:ident by $make:expr, kept $($kept:ident),*) => {{
        let set = $set;
        PortSet {
            $port: $make(set.$port),
            $($kept: set.$kept),*
        }
    }};
}

/// One port (or the clock) replaced by what a function makes of it, most often the same port
/// inside a wrapper (the harness's `Around`, for one): `ports.map_ledger(|l| Around::new(l,
/// faults))`. The other ports keep their types.
impl<C, R, L, G, Q, D, P> PortSet<C, R, L, G, Q, D, P> {
    pub fn map_clock<X>(self, make: impl FnOnce(C) -> X) -> PortSet<X, R, L, G, Q, D, P> {
        replacing!(self, clock by make, kept reminders, ledger, gate, queue, dead_letters, providers)
    }
    pub fn map_reminders<X>(self, make: impl FnOnce(R) -> X) -> PortSet<C, X, L, G, Q, D, P> {
        replacing!(self, reminders by make, kept clock, ledger, gate, queue, dead_letters, providers)
    }
    pub fn map_ledger<X>(self, make: impl FnOnce(L) -> X) -> PortSet<C, R, X, G, Q, D, P> {
        replacing!(self, ledger by make, kept clock, reminders, gate, queue, dead_letters, providers)
    }
    pub fn map_gate<X>(self, make: impl FnOnce(G) -> X) -> PortSet<C, R, L, X, Q, D, P> {
        replacing!(self, gate by make, kept clock, reminders, ledger, queue, dead_letters, providers)
    }
    pub fn map_queue<X>(self, make: impl FnOnce(Q) -> X) -> PortSet<C, R, L, G, X, D, P> {
        replacing!(self, queue by make, kept clock, reminders, ledger, gate, dead_letters, providers)
    }
    pub fn map_dead_letters<X>(self, make: impl FnOnce(D) -> X) -> PortSet<C, R, L, G, Q, X, P> {
        replacing!(self, dead_letters by make, kept clock, reminders, ledger, gate, queue, providers)
    }
}

impl<C, R, L, G, Q, D, P> Ports for PortSet<C, R, L, G, Q, D, P>
where
    C: crate::clock::Clock,
    R: ReminderStore,
    L: Ledger,
    G: Gate,
    Q: DeliveryQueue,
    D: DeadLetters,
    P: Provider,
{
    type Clock = C;
    type Reminders = R;
    type Ledger = L;
    type Gate = G;
    type Queue = Q;
    type DeadLetters = D;
    type Provider = P;

    fn clock(&self) -> &C {
        &self.clock
    }
    fn reminders(&self) -> &R {
        &self.reminders
    }
    fn ledger(&self) -> &L {
        &self.ledger
    }
    fn gate(&self) -> &G {
        &self.gate
    }
    fn queue(&self) -> &Q {
        &self.queue
    }
    fn dead_letters(&self) -> &D {
        &self.dead_letters
    }
    fn provider(&self, channel: crate::domain::Channel) -> &P {
        self.providers.get(channel)
    }
}
