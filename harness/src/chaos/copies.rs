//! The DLQ copies of a world's deliveries, by key, and which of them tell the delivery's own
//! deaths (the checker's `dead_without_copy` and `extra_dlq_copies`).

use std::collections::BTreeMap;

use super::world::World;
use reminders_core::clock::Timestamp;
use reminders_core::domain::{DeadReason, DeliveryKey, DeliveryMessage};

/// DLQ copies per delivery key: the death each states (`dead_at`, none for a message the
/// queue's redrive policy moved), read without receiving.
pub(super) fn dlq_copies(world: &World) -> BTreeMap<DeliveryKey, Vec<Copy>> {
    let mut copies: BTreeMap<DeliveryKey, Vec<Copy>> = BTreeMap::new();
    for channel in reminders_core::domain::Channel::ALL {
        for (body, letter) in world.dlq.peek_letters(channel) {
            if let Ok(msg) = DeliveryMessage::decode(&body) {
                copies.entry(msg.delivery_key).or_default().push(Copy {
                    reason: letter.reason,
                    dead_at: letter.evidence.map(|e| e.dead_at),
                });
            }
        }
    }
    copies
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Copy {
    pub(super) reason: DeadReason,
    pub(super) dead_at: Option<Timestamp>,
}

/// What a key's DLQ copies say, against the deaths the ledger saw.
pub(super) struct Copies {
    /// Copies stating the current death.
    pub(super) of_current: u64,
    /// Distinct deaths stated that the ledger never had.
    pub(super) unknown: u64,
    /// Copies of an earlier death, since redriven (a redrive run stopped between re-enqueue
    /// and delete; later runs remove them).
    pub(super) stale: u64,
}

pub(super) fn classify(
    copies: &[Copy],
    deaths: &[Timestamp],
    current: Option<Timestamp>,
) -> Copies {
    let made: Vec<Timestamp> = copies.iter().filter_map(|c| c.dead_at).collect();
    let distinct: std::collections::BTreeSet<Timestamp> = made.iter().copied().collect();
    Copies {
        of_current: made.iter().filter(|at| Some(**at) == current).count() as u64,
        unknown: distinct.iter().filter(|at| !deaths.contains(at)).count() as u64,
        stale: distinct
            .iter()
            .filter(|at| deaths.contains(at) && Some(**at) != current)
            .count() as u64,
    }
}
