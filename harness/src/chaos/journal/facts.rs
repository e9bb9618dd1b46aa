//! What the journal knows of one delivery key (its sends, its ledger writes, the violations
//! seen), and of one write of a subscriber's preferences.

use super::*;

#[derive(Debug, Default, Clone)]
pub struct KeyFacts {
    /// Provider calls and redrives, as the attempt budget counts them.
    pub budget: Budget,
    /// Times the provider took the message in (what the recipient would see, before any
    /// deduplication on the idempotency key).
    pub acceptances: u32,
    pub delivered_at: Option<Timestamp>,
    pub cancelled_at: Option<Timestamp>,
    /// When an operator's cancel was answered "cancelled" for this delivery: any send that
    /// starts later breaks the promise, whatever the ledger says.
    pub cancel_answered_at: Option<Timestamp>,
    /// Times a message with this key was received from its queue.
    pub receives: u32,
    /// The earliest the provider asked to be called again for this key, once the system
    /// learned it (a throttled deferral landed on the ledger after the 429). A 429 whose
    /// worker stopped before recording anything is one the system never heard.
    pub retry_after: Option<Timestamp>,
    /// The Retry-After of the latest 429, until a throttled deferral records it.
    pub heard_retry_after: Option<Timestamp>,
    /// When it died, each time (as the ledger states it: what a DLQ copy must state).
    pub deaths: Vec<Timestamp>,
    /// Claims to make the DLQ copy of the current death (a second copy is benign only when a
    /// second claim was made: the first claimer stopped between copying and recording it).
    pub copy_claims: u32,
    /// Permanent answers from the provider (what justifies `dead/rejected`).
    pub permanent_answers: u32,
    /// Endings the system had no reason for (a death without its cause), as they landed.
    pub unjustified: Vec<String>,
    /// Provider calls that broke a promise as they started.
    pub broken: BrokenSends,
    /// The order number of the latest claim that landed (a claim or a takeover): the send
    /// that follows it is the claimer's.
    pub claimed: Option<u64>,
    /// The order number of its first claim: where a fallback order starts to bind it.
    pub first_claim: Option<u64>,
    /// Times the delivery was held for its channel's quiet hours.
    pub quiet_holds: u32,
    /// The provider's last answer for this key was a 5xx, while its partition's breaker was
    /// open (every worker could know the provider was down).
    pub last_failure_while_open: bool,
    /// Known once the provider answered a failure.
    pub channel: Option<reminders_core::domain::Channel>,
    /// ... and the breaker was still open when the delivery died of spent attempts.
    pub died_while_open: bool,
    /// Every provider call, in order: what the checker needs to say whether one may have
    /// reached the person before another channel's.
    pub sends: Vec<SendFact>,
    /// Writes into `expired` (from another status), with their order number.
    pub expiries: Vec<(u64, Timestamp)>,
    /// A death of this delivery handed the reminder on (`fallback_to`).
    pub fell_back: bool,
}

/// What the attempt budget counts of one delivery key: each redrive out of `dead` starts a
/// new epoch with a fresh budget.
#[derive(Debug, Default, Clone)]
pub struct Budget {
    /// Provider calls that spent an attempt (not throttled), in all.
    pub attempts: u32,
    /// Attempts since the last redrive, and the most an earlier epoch spent ([`Budget::spent`]
    /// is the most of all).
    pub epoch_attempts: u32,
    pub max_epoch_attempts: u32,
    /// Failed breaker probes (provider calls the budget does not count), in all and in this
    /// epoch.
    pub probe_calls: u32,
    pub epoch_probes: u32,
    /// `dead → ready` transitions (each grants a fresh budget), and those out of
    /// `dead/ambiguous` (each an operator accepting a possible second send).
    pub redrives: u32,
    pub ambiguous_redrives: u32,
}

impl Budget {
    /// The most attempts any epoch charged: provider calls less failed probes.
    pub fn spent(&self) -> u32 {
        let epoch = self.epoch_attempts.saturating_sub(self.epoch_probes);
        self.max_epoch_attempts.max(epoch)
    }

    /// A redrive out of `dead`: the epoch closes and the next one starts with nothing spent.
    pub fn redriven(&mut self, ambiguous: bool) {
        self.redrives += 1;
        self.ambiguous_redrives += u32::from(ambiguous);
        self.max_epoch_attempts = self.spent();
        self.epoch_attempts = 0;
        self.epoch_probes = 0;
    }
}

/// Provider calls of one delivery key that broke a promise as they started, by promise.
#[derive(Debug, Default, Clone)]
pub struct BrokenSends {
    /// After the reminder's `fresh_until`.
    pub stale: u32,
    /// Before the Retry-After the system had learned, by more than two workers' clocks can
    /// disagree.
    pub early: u32,
    /// After the ledger recorded the delivery cancelled, or an operator's cancel was answered
    /// "cancelled".
    pub after_cancel: u32,
    /// After the ledger recorded the delivery.
    pub after_delivered: u32,
    /// To a channel the subscriber had opted out of before the claim, and still had at the
    /// send (an opt-out lifted in between may have been read: allowed).
    pub while_opted_out: u32,
    /// At an instant inside the channel's quiet hours as they stood at the claim, and in
    /// every version of the preferences written since.
    pub in_quiet_hours: u32,
    /// SMS to a number outside the allowed calling codes ([`Journal::sent_abroad`]).
    pub abroad: u32,
}

impl KeyFacts {
    /// What a reader of a finding needs, in words: the receives, the provider calls and how
    /// each was answered, and the deaths, redrives and endings, leaving out what is zero.
    pub fn summary(&self) -> String {
        let sends: Vec<String> = self
            .sends
            .iter()
            .map(|s| {
                let answer = match s.reached {
                    Some(true) => "accepted or answer lost",
                    Some(false) => "refused",
                    None => "no answer",
                };
                format!("{} {answer}", s.at.to_rfc3339())
            })
            .collect();
        let mut parts = vec![
            format!("received {} time(s)", self.receives),
            format!("provider calls [{}]", sends.join(", ")),
        ];
        let times = |v: &[Timestamp]| {
            v.iter()
                .map(|t| t.to_rfc3339())
                .collect::<Vec<_>>()
                .join(", ")
        };
        if !self.deaths.is_empty() {
            parts.push(format!("died at [{}]", times(&self.deaths)));
        }
        let counts = [
            ("attempts", self.budget.attempts),
            ("acceptances", self.acceptances),
            ("redrives", self.budget.redrives),
            ("permanent answers", self.permanent_answers),
            ("stale sends", self.broken.stale),
            ("early sends", self.broken.early),
            ("sends after cancel", self.broken.after_cancel),
            ("sends after delivered", self.broken.after_delivered),
            ("quiet holds", self.quiet_holds),
        ];
        for (name, n) in counts.into_iter().filter(|(_, n)| *n > 0) {
            parts.push(format!("{name} {n}"));
        }
        let instants = [
            ("delivered at", self.delivered_at),
            ("cancelled at", self.cancelled_at),
            ("cancel answered at", self.cancel_answered_at),
            ("retry after", self.retry_after),
        ];
        for (name, at) in instants {
            if let Some(at) = at {
                parts.push(format!("{name} {}", at.to_rfc3339()));
            }
        }
        if self.fell_back {
            parts.push("handed the reminder on".into());
        }
        for u in &self.unjustified {
            parts.push(format!("unjustified: {u}"));
        }
        parts.join("; ")
    }
}

/// One provider call for a key.
#[derive(Debug, Clone, Copy)]
pub struct SendFact {
    /// Its order among claims, preference writes and acknowledgments.
    pub seq: u64,
    pub at: Timestamp,
    /// The claim it was made under (as the journal last saw one land).
    pub claim: Option<u64>,
    /// `Some(false)` when the provider answered a definite refusal (a 429, a 5xx, a
    /// permanent reject, a 410); `Some(true)` when it accepted or the answer was lost;
    /// `None` when the call never got an answer (its invocation stopped): may have been sent.
    pub reached: Option<bool>,
}

impl SendFact {
    /// Whether this call may have reached the person, as the system can know.
    pub fn may_have_reached(&self) -> bool {
        self.reached != Some(false)
    }
}

/// Every channel's provider is one gate partition (the journal reads the true gate by it).
pub const PARTITION: &str = "chaos";

/// One write of a subscriber's preferences, in landing order.
#[derive(Debug, Clone)]
pub struct PrefsWrite {
    pub seq: u64,
    pub prefs: Preferences,
}
