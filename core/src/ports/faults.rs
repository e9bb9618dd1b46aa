//! Fault injection for the in-memory ports: "fail the next N calls of `op`, before or after
//! the effect". Operation names are the `OP_*` constants of each port module. The wrappers
//! that put the same plan (or a latency) around any port, the AWS adapters too, are the
//! harness's (`reminders_harness::around`).

use std::sync::{Arc, Mutex};

use super::PortError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultPoint {
    /// The call fails and nothing happened.
    Before,
    /// The effect happened, then the caller sees an error (a lost response).
    After,
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

    /// Called by the ports at both points of every operation.
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

/// Lock a port's state, surviving a poisoned mutex (a test that panicked mid-call).
pub fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn can_let_calls_pass_first() {
        let f = Faults::default();
        f.fail_after("x", FaultPoint::Before, 1, 1);
        assert!(f.check("x", FaultPoint::Before).is_ok());
        assert!(f.check("x", FaultPoint::Before).is_err());
        assert!(f.check("x", FaultPoint::Before).is_ok());
    }

    #[test]
    fn fails_the_named_op_the_given_number_of_times() {
        let f = Faults::default();
        f.fail("x", FaultPoint::After, 2);
        assert!(f.check("x", FaultPoint::Before).is_ok());
        assert!(f.check("y", FaultPoint::After).is_ok());
        assert!(f.check("x", FaultPoint::After).is_err());
        assert!(f.check("x", FaultPoint::After).is_err());
        assert!(f.check("x", FaultPoint::After).is_ok());
    }
}
