//! [`Faults`]: a fault plan, "fail the next N calls of `op`, before or after the effect", for
//! any port through [`super::Around`]. Operation names are the `OP_*` constants of each port
//! module, as [`super::Call::name`] gives them; a queue's batch may also have single entries
//! fail (`OP_SEND_ENTRY`: SQS answers those failed and sends the others).

use std::sync::{Arc, Mutex};

use reminders_core::ports::queue::OP_SEND_ENTRY;
use reminders_core::ports::{FaultPoint, OutgoingMessage, PortError, SendFailure};

use super::{Answer, Call, Hook};

/// A rule names an operation some call carries: one on a name no call carries would never fire,
/// and a test planting it would pass without its fault (the dead-letter queue's `dlq.receive`,
/// `dlq.delete` and `dlq.release`, say: those calls carry the queue's names).
fn carried(op: &str) {
    assert!(
        Call::NAMES.contains(&op) || op == OP_SEND_ENTRY,
        "no port call is named {op:?}: a fault on it would never fire (the names are Call::NAMES)"
    );
}

#[derive(Debug)]
struct Rule {
    op: &'static str,
    point: FaultPoint,
    /// Calls that pass before the rule starts failing.
    skip: u32,
    remaining: u32,
    /// Answer `Corrupt` (an item this version cannot read) instead of `Injected`.
    corrupt: bool,
}

/// Shared between a test and the ports it wraps; cloning shares the rules.
#[derive(Debug, Clone, Default)]
pub struct Faults(Arc<Mutex<Vec<Rule>>>);

impl Faults {
    /// Make the next `times` calls of `op` fail at `point`.
    pub fn fail(&self, op: &'static str, point: FaultPoint, times: u32) {
        self.fail_after(op, point, 0, times);
    }

    /// Let `skip` calls of `op` pass, then fail the next `times`.
    pub fn fail_after(&self, op: &'static str, point: FaultPoint, skip: u32, times: u32) {
        carried(op);
        self.lock().push(Rule {
            op,
            point,
            skip,
            remaining: times,
            corrupt: false,
        });
    }

    /// Make the next `times` calls of `op` answer that the stored item is unreadable, as a
    /// malformed item another writer stored would (for stores that cannot hold one).
    pub fn corrupt(&self, op: &'static str, times: u32) {
        carried(op);
        self.lock().push(Rule {
            op,
            point: FaultPoint::Before,
            skip: 0,
            remaining: times,
            corrupt: true,
        });
    }

    pub fn clear(&self) {
        self.lock().clear();
    }

    /// Checked around every call, at both points.
    pub fn check(&self, op: &'static str, point: FaultPoint) -> Result<(), PortError> {
        let mut rules = self.lock();
        let hit = rules
            .iter_mut()
            .find(|r| r.op == op && r.point == point && r.remaining > 0);
        match hit {
            Some(rule) if rule.skip > 0 => {
                rule.skip -= 1;
                Ok(())
            }
            Some(rule) if rule.corrupt => {
                rule.remaining -= 1;
                Err(PortError::Corrupt {
                    op,
                    message: "injected: the stored item is unreadable".into(),
                })
            }
            Some(rule) => {
                rule.remaining -= 1;
                Err(PortError::Injected { op, point })
            }
            None => Ok(()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Rule>> {
        // A panic elsewhere cannot leave the rule list half-written: recover it.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The fault plan around any port, the in-memory ones and the AWS adapters alike (where it
/// plays a lost response or an outage): checked before each call, and after each that
/// answered, under the operation's name ([`Call::name`]); and before each entry of a queue's
/// batch, as `OP_SEND_ENTRY`.
impl Hook for Faults {
    async fn before(&self, call: &Call<'_>) -> Result<(), PortError> {
        self.check(call.name(), FaultPoint::Before)
    }

    fn after(&self, call: &Call<'_>, answer: Answer<'_>) -> Result<(), PortError> {
        match answer {
            Ok(_) => self.check(call.name(), FaultPoint::After),
            Err(_) => Ok(()),
        }
    }

    fn failed_entries(&self, messages: &[OutgoingMessage]) -> Vec<SendFailure> {
        messages
            .iter()
            .filter(|_| self.check(OP_SEND_ENTRY, FaultPoint::Before).is_err())
            .map(|m| SendFailure {
                entry_id: m.entry_id.clone(),
                sender_fault: false,
                code: "InternalError".into(),
            })
            .collect()
    }
}

/// A hook that only has the compound reads (a recipient's rules, a delivery's read) made of
/// their single reads, as the in-memory store makes them: beside
/// a fault plan, `(faults, SingleReads)`, a rule on `reminders.get` fails the consumer's one
/// read too, as it does around the memory store's own.
#[derive(Debug, Clone, Copy, Default)]
pub struct SingleReads;

impl Hook for SingleReads {
    fn splits_compound_reads(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reminders_core::ports::ledger::OP_GET as X;
    use reminders_core::ports::reminders::OP_GET as Y;

    #[test]
    fn can_let_calls_pass_first() {
        let f = Faults::default();
        f.fail_after(X, FaultPoint::Before, 1, 1);
        assert!(f.check(X, FaultPoint::Before).is_ok());
        assert!(f.check(X, FaultPoint::Before).is_err());
        assert!(f.check(X, FaultPoint::Before).is_ok());
    }

    #[test]
    fn fails_the_named_op_the_given_number_of_times() {
        let f = Faults::default();
        f.fail(X, FaultPoint::After, 2);
        assert!(f.check(X, FaultPoint::Before).is_ok());
        assert!(f.check(Y, FaultPoint::After).is_ok());
        assert!(f.check(X, FaultPoint::After).is_err());
        assert!(f.check(X, FaultPoint::After).is_err());
        assert!(f.check(X, FaultPoint::After).is_ok());
    }
}
