//! The model: one delivery key, a ledger holding at most one record with compare-and-set
//! writes (`MemoryLedger::put_if`), workers running the consumer's protocol, an operator who
//! cancels and redrives (one ledger operation a step, as the workers), a clock that ticks,
//! the reminder's freshness running out, and the faults — a crash, a lost write response.

use reminders::clock::Timestamp;
use reminders::domain::DeadReason;
use reminders::ledger::{Change, LeaseToken};
use stateright::{Model, Property};

use crate::fixtures::{fresh_until, token, Rec};
use crate::operator::{self, Canceller, Reasons, Redriver};
use crate::properties;
use crate::record::{self, Sent};
use crate::worker::{self, Phase};

/// How far the checker explores: every count is a budget for the whole run.
#[derive(Clone, Copy, Debug)]
pub struct Bounds {
    /// Copies of the delivery's message on the queue at first (SQS delivers at least once).
    pub messages: u8,
    /// The clock runs from tick 0 to this.
    pub ticks: u8,
    pub crashes: u8,
    pub lost_responses: u8,
    pub cancels: u8,
    pub redrives: u8,
    /// The reminder goes stale after this tick (`None`: it stays fresh throughout).
    pub fresh_through: Option<u8>,
}

/// A bug planted to show that the checker catches one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The outcome is written with `Expected` from a fresh read instead of the item the lease
    /// was taken on: a blind overwrite, no lease fence.
    UnfencedOutcome,
    /// The worker sends without checking that its lease still covers a provider call.
    SendWithoutLeaseCheck,
    /// Intake and the check before the send never look at `fresh_until`.
    IgnoreFreshness,
    /// The cancel flips the reminder's status and answers, writing nothing to the ledger.
    CancelOnlyMarks,
    /// The cancel leaves a dead delivery dead and answers "already dead" (a cancel racing a
    /// redrive, unfixed).
    CancelLeavesDead,
    /// The consumer takes a provider that ignores idempotency keys for one that honours them.
    AssumeIdempotent,
}

pub struct ProtocolModel {
    pub workers: usize,
    pub idempotent: bool,
    pub bounds: Bounds,
    /// What the provider may answer to a send.
    pub answers: &'static [Sent],
    pub fault: Option<Fault>,
}

impl ProtocolModel {
    /// What the consumer believes of the provider (`Provider::honours_idempotency_key`).
    pub fn consumer_trusts_idempotency(&self) -> bool {
        self.idempotent || self.fault == Some(Fault::AssumeIdempotent)
    }

    pub fn fresh_until(&self) -> Timestamp {
        fresh_until(self.bounds.fresh_through)
    }
}

/// What happened, for the properties (never read by the protocol).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Ghost {
    pub terminal_changed: bool,
    pub sent_after_final: bool,
    pub invariant_error: bool,
    /// A claim was refused for want of an attempt (`Claim::BudgetSpent`).
    pub budget_spent_claim: bool,
    pub took_over: bool,
    pub reconciled: bool,
    /// An operator redrove the delivery out of dead/ambiguous: a resend is its decision.
    pub redrove_ambiguous: bool,
    /// The operator's cancel answered "cancelled" for the delivery.
    pub cancel_answered: bool,
    /// A send started after that answer.
    pub sent_after_cancel_answered: bool,
    /// A send started after `fresh_until`.
    pub sent_stale: bool,
    /// The provider throttled a send.
    pub throttled: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Used {
    pub crashes: u8,
    pub lost_responses: u8,
    pub cancels: u8,
    pub redrives: u8,
}

/// Told apart by `fingerprint`'s hash.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct State {
    pub now: u8,
    pub ledger: Option<Rec>,
    pub workers: Vec<Phase>,
    pub canceller: Canceller,
    pub redriver: Redriver,
    /// Copies of the message waiting to be received (a held one comes back, an acked one
    /// does not).
    pub queue: u8,
    /// The operator cancelled the reminder: intake now cancels instead of claiming.
    pub reminder_cancelled: bool,
    /// Sends the provider accepted (an ambiguous answer included).
    pub acceptances: u8,
    pub used: Used,
    pub ghost: Ghost,
}

impl State {
    /// Store a write (its condition already checked) and note what the properties watch.
    pub fn put(&mut self, next: Rec, change: &Change) {
        if let Some(old) = &self.ledger {
            if old.status().is_terminal() && old.status() != next.status() {
                self.ghost.terminal_changed = true;
            }
            let ambiguous = old.dead_reason() == Some(DeadReason::Ambiguous);
            // (A redrive that applies moves a dead delivery whose reason was selected.)
            if matches!(change, Change::Redrive { .. }) && ambiguous {
                self.ghost.redrove_ambiguous = true;
            }
        }
        match change {
            Change::Takeover { .. } => self.ghost.took_over = true,
            Change::Reconcile { .. } => self.ghost.reconciled = true,
            _ => {}
        }
        self.ledger = Some(next);
    }

    /// The worker's record ends: its message is acked, or held (received again later).
    pub fn end(&mut self, w: usize, hold: bool) {
        self.workers[w] = Phase::Idle;
        self.queue += u8::from(hold);
    }

    /// The consumer met an answer it deems impossible: an error, the message comes back.
    pub fn invariant_error(&mut self, w: usize) {
        self.ghost.invariant_error = true;
        self.end(w, true);
    }

    /// A token no record or worker in the state mentions. Real tokens are random and never
    /// repeat; reusing a name nothing refers to any more keeps the state space finite.
    pub fn fresh_token(&self, w: usize) -> LeaseToken {
        let mentioned = crate::fingerprint::mentioned(self);
        (0..)
            .map(|n| token(&format!("w{w}.{n}")))
            .find(|t| !mentioned.contains(t))
            .expect("a free token name")
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// The worker's next step (an idle one takes a message: the first, a duplicate, or one
    /// redelivered after a crash, a hold or a redrive).
    Step(usize),
    /// The worker holding a lease sends; the provider answers so.
    Send(usize, Sent),
    /// The worker's pending write applies, and its response is lost.
    LoseResponse(usize),
    /// The worker crashes: its message comes back later.
    Crash(usize),
    Tick,
    /// `reminder_writes::cancel` starts: the ledger's cancel, then the reminder marked cancelled.
    Cancel,
    /// The canceller's next step.
    StepCancel,
    /// `redrive::make_ready` starts: dead → ready when the reason is selected, then the
    /// message back on the queue.
    Redrive(Reasons),
    /// The redriver's next ledger operation.
    StepRedrive,
}

impl ProtocolModel {
    fn worker_actions(&self, s: &State, w: usize, actions: &mut Vec<Action>) {
        match &s.workers[w] {
            Phase::Idle if s.queue == 0 => {}
            Phase::Send(lease) if record::before_send(self, s, lease).is_none() => {
                actions.extend(self.answers.iter().map(|&sent| Action::Send(w, sent)));
            }
            Phase::Write(t, _) => {
                actions.push(Action::Step(w));
                let applies = worker::would_apply(self, s, t);
                if applies && s.used.lost_responses < self.bounds.lost_responses {
                    actions.push(Action::LoseResponse(w));
                }
            }
            _ => actions.push(Action::Step(w)),
        }
        if s.workers[w] != Phase::Idle && s.used.crashes < self.bounds.crashes {
            actions.push(Action::Crash(w));
        }
    }

    fn step(&self, s: &mut State, w: usize) {
        match s.workers[w].clone() {
            Phase::Idle => worker::start(self, s, w),
            Phase::Write(t, then) => worker::write(self, s, w, *t, then),
            Phase::Send(lease) => record::instead_of_send(self, s, w, lease),
        }
    }
}

impl Model for ProtocolModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![State {
            now: 0,
            ledger: None,
            workers: vec![Phase::Idle; self.workers],
            canceller: Canceller::Idle,
            redriver: Redriver::Idle,
            queue: self.bounds.messages,
            reminder_cancelled: false,
            acceptances: 0,
            used: Used::default(),
            ghost: Ghost::default(),
        }]
    }

    fn actions(&self, s: &State, actions: &mut Vec<Action>) {
        for w in 0..self.workers {
            self.worker_actions(s, w, actions);
        }
        if s.now < self.bounds.ticks {
            actions.push(Action::Tick);
        }
        if s.canceller != Canceller::Idle {
            actions.push(Action::StepCancel);
        } else if s.used.cancels < self.bounds.cancels && !s.reminder_cancelled {
            actions.push(Action::Cancel);
        }
        let dead = s.ledger.as_ref().and_then(|r| r.dead_reason()).is_some();
        if s.redriver != Redriver::Idle {
            actions.push(Action::StepRedrive);
        } else if dead && s.used.redrives < self.bounds.redrives {
            actions.push(Action::Redrive(Reasons::Budget));
            actions.push(Action::Redrive(Reasons::Ambiguous));
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut s = last.clone();
        match action {
            Action::Step(w) => self.step(&mut s, w),
            Action::Send(w, sent) => match s.workers[w].clone() {
                Phase::Send(lease) => record::send(self, &mut s, w, lease, sent),
                _ => return None,
            },
            Action::LoseResponse(w) => match s.workers[w].clone() {
                Phase::Write(t, then) => worker::lose_response(self, &mut s, w, *t, then),
                _ => return None,
            },
            Action::Crash(w) => {
                s.used.crashes += 1;
                // Its message comes back once its visibility runs out.
                s.end(w, true);
            }
            Action::Tick => s.now += 1,
            Action::Cancel => operator::cancel(self, &mut s),
            Action::StepCancel => operator::step_cancel(self, &mut s),
            Action::Redrive(reasons) => operator::redrive(&mut s, reasons),
            Action::StepRedrive => operator::step_redrive(self, &mut s),
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        properties::all(self)
    }
}
