//! The model: one delivery key, a ledger holding at most one record with compare-and-set
//! writes (`MemoryLedger::put_if`), workers running the consumer's protocol, an operator who
//! cancels and redrives, a clock that ticks, and the faults — a crash, a lost write response.

use std::collections::BTreeSet;

use reminders::delivery::state::{apply, Change, LeaseToken, RedriveAudit};
use reminders::domain::DeadReason;
use stateright::{Model, Property};

use crate::fixtures::{ctx, token, Rec};
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
}

/// A bug planted to show that the checker catches one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The outcome is written with `Expected` from a fresh read instead of the item the lease
    /// was taken on: a blind overwrite, no lease fence.
    UnfencedOutcome,
    /// The worker sends without checking that its lease still covers a provider call.
    SendWithoutLeaseCheck,
}

pub struct ProtocolModel {
    pub workers: usize,
    pub idempotent: bool,
    pub bounds: Bounds,
    pub fault: Option<Fault>,
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
    /// `outbox::cancel`: the ledger's cancel, then the reminder marked cancelled. The cancel
    /// is an intent re-applied on every conflict, so it is one step here: it lands on the
    /// current item, or is refused by it.
    Cancel,
    /// `redrive::make_ready`: dead → ready when the reason is selected (an intent, one step
    /// as the cancel), then the message back on the queue.
    Redrive(Reasons),
}

impl ProtocolModel {
    fn worker_actions(&self, s: &State, w: usize, actions: &mut Vec<Action>) {
        match &s.workers[w] {
            Phase::Idle if s.queue == 0 => {}
            Phase::Send(lease) if !record::must_release(self, s, lease) => {
                actions.extend(Sent::ALL.map(|sent| Action::Send(w, sent)));
            }
            Phase::Write(p) => {
                actions.push(Action::Step(w));
                let applies = worker::attempt(self, s, p).is_ok_and(|(_, holds)| holds);
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
            Phase::Idle => worker::start(s, w),
            Phase::Write(p) => worker::write(self, s, w, p),
            Phase::ReadBack { pending, next } => worker::read_back(self, s, w, pending, next),
            Phase::Send(lease) => record::release(s, w, lease),
        }
    }

    fn redrive(&self, s: &mut State, reasons: Reasons) -> bool {
        let audit = RedriveAudit {
            batch_id: "b-model".into(),
            operator: "operator".into(),
            note: "model".into(),
        };
        let change = Change::Redrive {
            audit,
            reasons: reasons.set(),
        };
        s.used.redrives += 1;
        match apply(s.ledger.as_deref(), change.clone(), &ctx(s.now)) {
            Ok(next) => {
                s.put(Rec::new(next), &change);
                // The redriver puts the message back on the queue.
                s.queue += 1;
                true
            }
            Err(_) => false,
        }
    }

    fn cancel(&self, s: &mut State) {
        s.used.cancels += 1;
        if let Ok(next) = apply(s.ledger.as_deref(), Change::Cancel, &ctx(s.now)) {
            s.put(Rec::new(next), &Change::Cancel);
        }
        s.reminder_cancelled = true;
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
        if s.used.cancels < self.bounds.cancels && !s.reminder_cancelled {
            actions.push(Action::Cancel);
        }
        let dead = s.ledger.as_ref().and_then(|r| r.dead_reason()).is_some();
        if dead && s.used.redrives < self.bounds.redrives {
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
                Phase::Write(p) => worker::lose_response(self, &mut s, w, p),
                _ => return None,
            },
            Action::Crash(w) => {
                s.used.crashes += 1;
                // Its message comes back once its visibility runs out.
                s.end(w, true);
            }
            Action::Tick => s.now += 1,
            Action::Cancel => self.cancel(&mut s),
            Action::Redrive(reasons) => {
                if !self.redrive(&mut s, reasons) {
                    return None;
                }
            }
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        properties::all(self)
    }
}
