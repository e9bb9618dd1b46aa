//! The operator's cancel (`outbox::cancel`) and redrive (`redrive::make_ready`), each a
//! `delivery::Transition` driven one ledger operation a step, so a worker's steps interleave
//! with theirs: the cancel writes the ledger, then marks the reminder and answers; the redrive
//! moves `dead → ready`, then puts the message back on the queue.

use std::collections::BTreeSet;

use reminders::delivery::state::{Change, RedriveAudit, Refused, Why};
use reminders::delivery::{cancel_answer, Cancelled, Progress, Transition, Written};
use reminders::domain::DeadReason;

use crate::fixtures::ctx;
use crate::protocol::{Fault, ProtocolModel, State};
use crate::worker::ledger_step;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Operator {
    Idle,
    /// `delivery::cancel` in progress; then the reminder is marked and the cancel answers.
    Cancel(Box<Transition>),
    /// `make_ready` in progress; then the message goes back on the queue.
    Redrive(Box<Transition>),
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
    if m.fault == Some(Fault::CancelOnlyMarks) {
        s.reminder_cancelled = true;
        s.ghost.cancel_answered = true;
        return;
    }
    let progress = Transition::start(None, Change::Cancel, ctx(s.now));
    go_on(s, progress, Job::Cancel);
}

/// The operator redrives the dead delivery. A reminder already cancelled is not redriven:
/// its delivery is cancelled on the ledger instead (`redrive::one::cancelled`).
pub fn redrive(s: &mut State, reasons: Reasons) {
    s.used.redrives += 1;
    let (change, job) = if s.reminder_cancelled {
        (Change::Cancel, Job::RedriveCancels)
    } else {
        let audit = RedriveAudit {
            batch_id: "b-model".into(),
            operator: "operator".into(),
            note: "model".into(),
        };
        let reasons = reasons.set();
        (Change::Redrive { audit, reasons }, Job::Redrive)
    };
    let progress = Transition::start(None, change, ctx(s.now));
    go_on(s, progress, job);
}

#[derive(Clone, Copy)]
enum Job {
    Cancel,
    Redrive,
    /// A redrive that found the reminder cancelled: it cancels the delivery instead.
    RedriveCancels,
}

/// The operator's next ledger operation.
pub fn step(m: &ProtocolModel, s: &mut State) {
    let (t, job) = match std::mem::replace(&mut s.operator, Operator::Idle) {
        Operator::Cancel(t) => (t, Job::Cancel),
        Operator::Redrive(t) if *t.change() == Change::Cancel => (t, Job::RedriveCancels),
        Operator::Redrive(t) => (t, Job::Redrive),
        Operator::Idle => return,
    };
    let progress = ledger_step(m, s, *t);
    go_on(s, progress, job);
}

fn go_on(s: &mut State, progress: Progress, job: Job) {
    let written = match progress {
        Progress::Next(t) => {
            let t = Box::new(t);
            s.operator = match job {
                Job::Cancel => Operator::Cancel(t),
                Job::Redrive | Job::RedriveCancels => Operator::Redrive(t),
            };
            return;
        }
        Progress::Done(Ok(written)) => written,
        // The command fails (the model's ledger never fails a call).
        Progress::Done(Err(_)) => return,
    };
    match (job, written) {
        // `outbox::cancel` marks the reminder after the ledger, then answers.
        (Job::Cancel, written) => {
            s.reminder_cancelled = true;
            if cancel_answer(written) == Cancelled::Cancelled {
                s.ghost.cancel_answered = true;
            }
        }
        // Cancelled instead of redriven, or not selected, or finished: stays off the queue.
        (Job::RedriveCancels, _) => {}
        (
            Job::Redrive,
            Written::Refused {
                refused:
                    Refused {
                        why: Why::ReasonNotSelected(_),
                        ..
                    },
                ..
            },
        ) => {}
        (
            Job::Redrive,
            Written::Refused {
                current: Some(r), ..
            },
        ) if r.status().is_terminal() => {}
        // Applied; or no item, ready, sending or deferred: the ledger guards the resend.
        (Job::Redrive, _) => s.queue += 1,
    }
}
