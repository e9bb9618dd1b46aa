//! The operators: one cancels (`reminder_writes::cancel`), another redrives (`redrive::one`), at once if
//! they like. Each runs a `delivery::Transition` one ledger operation a step, so their steps
//! interleave with each other's and the workers': the cancel writes the ledger, then marks the
//! reminder and answers (a step of its own: a cancel racing a redrive lives between the two); the
//! redrive reads the reminder (cancelled: it cancels the delivery instead), moves `dead → ready`,
//! then puts the message back on the queue.

use std::collections::BTreeSet;

use reminders::delivery::{cancel_answer, Cancelled, Progress, Transition, Written};
use reminders::domain::DeadReason;
use reminders::ledger::{Change, RedriveAudit, Refused, Status, Why};

use crate::fixtures::ctx;
use crate::protocol::{Fault, ProtocolModel, State};
use crate::worker::ledger_step;

/// The operator who cancels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Canceller {
    Idle,
    /// `delivery::cancel` in progress.
    Ledger(Box<Transition>),
    /// The ledger answered: the reminder is marked cancelled, and the command answers so.
    Mark(Cancelled),
}

/// The operator who redrives: `make_ready` in progress (or, for a cancelled reminder, the
/// delivery's cancel); then the message goes back on the queue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Redriver {
    Idle,
    Ledger(Box<Transition>),
}

/// The operator's redrive selection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reasons {
    /// `{attempts_exhausted}`: the usual redrive after an outage.
    Budget,
    /// `{ambiguous}`: the operator accepts a possible duplicate.
    Ambiguous,
}

impl Reasons {
    fn set(self) -> BTreeSet<DeadReason> {
        BTreeSet::from([match self {
            Reasons::Budget => DeadReason::AttemptsExhausted,
            Reasons::Ambiguous => DeadReason::Ambiguous,
        }])
    }
}

/// The operator asks to cancel the reminder.
pub fn cancel(m: &ProtocolModel, s: &mut State) {
    s.used.cancels += 1;
    match m.fault {
        Some(Fault::CancelOnlyMarks) => {
            s.canceller = Canceller::Mark(Cancelled::Cancelled);
            return;
        }
        // Planted: the cancel before it was ordered against a redrive, which left a dead delivery
        // dead.
        Some(Fault::CancelLeavesDead)
            if s.ledger.as_ref().map(|r| r.status()) == Some(Status::Dead) =>
        {
            s.canceller = Canceller::Mark(Cancelled::AlreadyFinal(Status::Dead));
            return;
        }
        _ => {}
    }
    let progress = Transition::start(None, Change::Cancel, ctx(s.now));
    cancel_goes_on(s, progress);
}

/// The canceller's next step: a ledger operation, or the mark and the answer.
pub fn step_cancel(m: &ProtocolModel, s: &mut State) {
    match std::mem::replace(&mut s.canceller, Canceller::Idle) {
        Canceller::Ledger(t) => {
            let progress = ledger_step(m, s, *t);
            cancel_goes_on(s, progress);
        }
        Canceller::Mark(answer) => {
            s.reminder_cancelled = true;
            // Any answer but "a worker has it" or "delivered" tells the operator it is
            // stopped: nothing may be sent after it.
            if !matches!(
                answer,
                Cancelled::AlreadyInFlight | Cancelled::AlreadyDelivered
            ) {
                s.ghost.cancel_answered = true;
            }
        }
        Canceller::Idle => {}
    }
}

fn cancel_goes_on(s: &mut State, progress: Progress) {
    s.canceller = match progress {
        Progress::Next(t) => Canceller::Ledger(Box::new(t)),
        Progress::Done(Ok(written)) => Canceller::Mark(cancel_answer(written)),
        // The command fails (the model's ledger never fails a call).
        Progress::Done(Err(_)) => Canceller::Idle,
    };
}

/// The operator redrives the dead delivery. A reminder already cancelled is not redriven:
/// its delivery is cancelled on the ledger instead (`redrive::one::cancelled`).
pub fn redrive(s: &mut State, reasons: Reasons) {
    s.used.redrives += 1;
    let change = if s.reminder_cancelled {
        Change::Cancel
    } else {
        let audit = RedriveAudit {
            batch_id: "b-model".into(),
            operator: "operator".into(),
            note: "model".into(),
        };
        let reasons = reasons.set();
        Change::Redrive { audit, reasons }
    };
    let progress = Transition::start(None, change, ctx(s.now));
    redrive_goes_on(s, progress);
}

/// The redriver's next ledger operation.
pub fn step_redrive(m: &ProtocolModel, s: &mut State) {
    if let Redriver::Ledger(t) = std::mem::replace(&mut s.redriver, Redriver::Idle) {
        let progress = ledger_step(m, s, *t);
        redrive_goes_on(s, progress);
    }
}

fn redrive_goes_on(s: &mut State, progress: Progress) {
    let written = match progress {
        Progress::Next(t) => {
            s.redriver = Redriver::Ledger(Box::new(t));
            return;
        }
        Progress::Done(Ok(written)) => written,
        // The command fails (the model's ledger never fails a call).
        Progress::Done(Err(_)) => return,
    };
    match written {
        // Not selected, or finished (cancelled instead of redriven among them): the copy
        // stays off the queue.
        Written::Refused {
            refused:
                Refused {
                    why: Why::ReasonNotSelected(_),
                    ..
                },
            ..
        } => {}
        Written::Refused {
            current: Some(r), ..
        } if r.status().is_terminal() => {}
        Written::Applied(r) if r.status() == Status::Cancelled => {}
        // Applied; or no item, ready, sending or deferred: the ledger guards the resend.
        _ => s.queue += 1,
    }
}
