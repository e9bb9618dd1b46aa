//! Prompts: moments where the pipeline, mid-call, has the application act at once (the
//! moments where two features meet, which timing alone rarely lines up). The ports send
//! them; the application's side of the world ([`super::surface::prompted`]) answers.

use reminders_core::clock::Timestamp;
use reminders_core::domain::{Channel, ReminderId};

/// A moment where the pipeline, mid-call, has the application act at once and waits for its
/// answer: one where two features meet, which timing alone rarely lines up.
#[derive(Debug, Clone)]
pub enum Prompt {
    /// The scheduler holds a due page with these reminders: one that is stale is edited
    /// fresh again before the scheduler goes on.
    Scanned(Vec<ReminderId>),
    /// A provider accepted a send of this reminder's delivery (whose worker then stops):
    /// the reminder is moved past the ledger's horizon.
    Accepted(ReminderId),
    /// A delivery died for a reason that falls back, naming no channel (the order's next is
    /// not listed): the application adds the order's channels the reminder lacks, and the
    /// operator redrives that channel's DLQ a few minutes later.
    DiedAlone(reminders_core::ledger::Origin),
    /// A fallback was claimed, taking the reminder over from `fallback_from`: the subscriber
    /// may clear the fallback order, and the operator redrives the DLQ of the channel it took
    /// over from at once or soon after (only the hand-on on the death then keeps that redrive
    /// from reaching the person a second time).
    TookOver(reminders_core::ledger::Origin),
    /// A chain's head was claimed for the first time (about to send): the subscriber moves
    /// it to the end of the fallback order before the next channel looks again.
    HeadClaimed(reminders_core::ledger::Origin),
    /// A delivery died with its budget spent on answers that surely sent nothing: if it is
    /// an address the provider fails, the subscriber opts out of that channel, the operator fixes
    /// the address and, once its standby has looked, redrives it.
    DiedSpent(reminders_core::ledger::Origin),
    /// A channel's breaker opened until this time: the application shortens the freshness
    /// of a reminder waiting on that channel to end a few seconds after it.
    BreakerOpened(Channel, Timestamp),
    /// The scheduler marked this reminder enqueued: the application may take one of its
    /// channels away at once, and list it again minutes later.
    Enqueued(ReminderId),
}

/// Where prompts go, each with the answer to send when the edit is done.
pub type Prompter = tokio::sync::mpsc::UnboundedSender<(Prompt, tokio::sync::oneshot::Sender<()>)>;
pub type Prompts = tokio::sync::mpsc::UnboundedReceiver<(Prompt, tokio::sync::oneshot::Sender<()>)>;

/// Have the application act on `what`, and wait until it has (at once when nobody listens).
pub async fn prompt(to: Option<&Prompter>, what: Prompt) {
    let Some(to) = to else { return };
    let (done, answered) = tokio::sync::oneshot::channel();
    if to.send((what, done)).is_ok() {
        let _ = answered.await;
    }
}

/// Have the application act on `what`, without waiting for it.
pub fn tell(to: Option<&Prompter>, what: Prompt) {
    if let Some(to) = to {
        let (done, _) = tokio::sync::oneshot::channel();
        let _ = to.send((what, done));
    }
}
