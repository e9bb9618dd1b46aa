//! The in-memory port stack of one world, built once on one clock ([`MemoryStack`]).
//!
//! A test, a benchmark or the simulation takes the handles it looks at (the table, the
//! ledger, the queues) from the stack, and the [`PortSet`] its pipelines run on from
//! [`MemoryStack::ports`]. A port a test wants inside a wrapper is replaced with
//! `PortSet::map_…`: `stack.ports(provider).map_ledger(|l| Around::new(l, faults))`, with
//! `Around` and the fault plan `Faults` from this crate's `around` module. The handles stay the
//! ports themselves, outside any wrapper: what a test reads or writes through them goes behind
//! the pipelines' backs, unfaulted.
//!
//! For the consumer, `tests/consumer/harness.rs` has a world ready made on it (`Mem`: fault
//! plans around the table, the ledger and the queues, a scripted provider, the helpers to
//! enqueue and poll).

use std::sync::Arc;

use reminders_core::clock::Clock;
use reminders_core::domain::PerChannel;
use reminders_core::ports::{MemoryGate, MemoryLedger, MemoryQueue, MemoryReminderStore, PortSet};

/// The due index's shards of a stack's table unless [`MemoryStack::with_shards`] says
/// otherwise (the template's `DueShards` is larger; the tests need only a few to spread).
pub const SHARDS: u32 = 4;

/// The ports a [`MemoryStack`] gives, with providers `P`.
pub type MemoryPorts<C, P> = PortSet<
    C,
    Arc<MemoryReminderStore>,
    Arc<MemoryLedger>,
    Arc<MemoryGate>,
    Arc<MemoryQueue<C>>,
    Arc<MemoryQueue<C>>,
    P,
>;

/// Every port of a world in memory, on one clock, each kept as a handle to look at. A clone
/// is a second set of handles on the same ports, and [`MemoryStack::ports`] may be called more
/// than once: two pipelines over one world (a scheduler and a consumer) share its table,
/// ledger and queues.
#[derive(Debug, Clone)]
pub struct MemoryStack<C> {
    pub clock: C,
    pub store: Arc<MemoryReminderStore>,
    pub ledger: Arc<MemoryLedger>,
    pub gate: Arc<MemoryGate>,
    /// The delivery queues, every channel's in one.
    pub queue: Arc<MemoryQueue<C>>,
    /// The dead-letter queues, every channel's in one (the ports' `dead_letters`).
    pub dlq: Arc<MemoryQueue<C>>,
}

impl<C: Clock + Clone> MemoryStack<C> {
    /// Empty ports on `clock`, the table on [`SHARDS`] shards.
    pub fn on(clock: C) -> Self {
        Self {
            store: Arc::new(MemoryReminderStore::new(SHARDS)),
            ledger: Arc::new(MemoryLedger::default()),
            gate: Arc::new(MemoryGate::default()),
            queue: Arc::new(MemoryQueue::new(clock.clone())),
            dlq: Arc::new(MemoryQueue::new(clock.clone())),
            clock,
        }
    }

    /// The same stack with an empty table on `shards` shards.
    pub fn with_shards(self, shards: u32) -> Self {
        Self {
            store: Arc::new(MemoryReminderStore::new(shards)),
            ..self
        }
    }

    /// The same stack with the delivery queues' redrive policy into its DLQs, as on AWS: a
    /// message received `max_receive_count` times moves there. The queues start empty.
    pub fn with_redrive(self, max_receive_count: u32) -> Self {
        let queue =
            MemoryQueue::new(self.clock.clone()).with_redrive(max_receive_count, self.dlq.clone());
        Self {
            queue: Arc::new(queue),
            ..self
        }
    }

    /// The ports over these handles, with `provider` answering for every channel.
    pub fn ports<P: Clone>(&self, provider: P) -> MemoryPorts<C, P> {
        self.ports_with(PerChannel::from_fn(|_| provider.clone()))
    }

    /// The ports over these handles, with a provider of each channel's own.
    pub fn ports_with<P>(&self, providers: PerChannel<P>) -> MemoryPorts<C, P> {
        PortSet {
            clock: self.clock.clone(),
            reminders: self.store.clone(),
            ledger: self.ledger.clone(),
            gate: self.gate.clone(),
            queue: self.queue.clone(),
            dead_letters: self.dlq.clone(),
            providers,
        }
    }
}
