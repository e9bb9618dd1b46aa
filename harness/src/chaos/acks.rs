//! What the checker keeps of the API's side of a world: every version of a reminder that
//! landed in the reminders table (the table adapter tells [`Acks`]), the versions the API
//! acknowledged, and [`Counts`] of what the operators and the application did that the journal
//! does not see.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use super::journal::Journal;
use reminders_core::clock::Timestamp;
use reminders_core::domain::{Channel, Reminder, ReminderId};
use reminders_core::sync::lock;

/// What one edit changed (several at once, as a PUT of the whole body does).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Kinds {
    pub due_earlier: bool,
    pub due_later: bool,
    pub past_horizon: bool,
    pub freshness: bool,
    pub content: bool,
    pub removed: bool,
    pub added: bool,
    pub readded: bool,
    pub of_stale: bool,
    /// The SMS number moved outside the allowed calling codes.
    pub abroad: bool,
}

/// One version of a reminder that landed in the table.
#[derive(Debug, Clone)]
pub struct Landed {
    pub seq: u64,
    pub payload_version: u64,
    pub fresh_until: Timestamp,
    pub channels: BTreeSet<Channel>,
}

/// One version the API acknowledged (a create, or an edit answered `Edited`).
#[derive(Debug, Clone)]
pub struct Acked {
    pub reminder: Reminder,
    pub kinds: Kinds,
}

#[derive(Default)]
pub struct Acks {
    landed: Mutex<BTreeMap<ReminderId, Vec<Landed>>>,
    acked: Mutex<BTreeMap<ReminderId, Vec<Acked>>>,
}

impl Acks {
    /// A version of `r` landed in the table (an insert or a replace that applied).
    pub fn landed(&self, journal: &Journal, r: &Reminder) {
        let l = Landed {
            seq: journal.next_seq(),
            payload_version: r.payload_version,
            fresh_until: r.fresh_until,
            channels: r.listed_channels().collect(),
        };
        lock(&self.landed)
            .entry(r.reminder_id.clone())
            .or_default()
            .push(l);
    }

    pub(super) fn acknowledged(&self, journal: &Journal, r: &Reminder, kinds: Kinds) {
        // Numbered, so that the order of acknowledgments and landings is one.
        let _ = journal.next_seq();
        let a = Acked {
            reminder: r.clone(),
            kinds,
        };
        lock(&self.acked)
            .entry(r.reminder_id.clone())
            .or_default()
            .push(a);
    }

    pub fn landed_versions(&self, id: &ReminderId) -> Vec<Landed> {
        lock(&self.landed).get(id).cloned().unwrap_or_default()
    }

    pub fn acked_versions(&self, id: &ReminderId) -> Vec<Acked> {
        lock(&self.acked).get(id).cloned().unwrap_or_default()
    }

    /// Every acknowledged edit (creations left out).
    pub fn edits(&self) -> Vec<Kinds> {
        let acked = lock(&self.acked);
        acked
            .values()
            .flat_map(|v| v.iter().skip(1).map(|a| a.kinds))
            .collect()
    }
}

/// Counts of what the world's operators did that the journal does not see.
#[derive(Default)]
pub struct Counts {
    racing: std::sync::atomic::AtomicU64,
    prompted: std::sync::atomic::AtomicU64,
    refused: std::sync::atomic::AtomicU64,
    /// Reminders whose freshness a breaker's opening cut short.
    pub(super) cut: Mutex<BTreeSet<ReminderId>>,
    /// What the worlds generated that the journal does not see (`series_created`,
    /// `readds_refused`, …).
    pub(super) series: Mutex<super::tally::Tally>,
}

impl Counts {
    /// Count what a world did that its journal does not (a series world's moves, …).
    pub(super) fn tally(&self, f: impl FnOnce(&mut super::tally::Tally)) {
        f(&mut reminders_core::sync::lock(&self.series));
    }

    pub(super) fn prompted_edits(&self) {
        self.prompted
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    /// Edits made at a window's moment ([`Prompt`]).
    pub fn prompted(&self) -> u64 {
        self.prompted.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Whether a breaker's opening cut this reminder's freshness short (an accepted edit).
    pub fn cut_short(&self, id: &ReminderId) -> bool {
        lock(&self.cut).contains(id)
    }

    /// An edit the API answered `409`: every delivery had settled.
    pub(super) fn refused_edit(&self) {
        self.refused
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    pub fn refused(&self) -> u64 {
        self.refused.load(std::sync::atomic::Ordering::SeqCst)
    }

    pub(super) fn racing_cancels(&self) {
        self.racing
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    pub fn racing(&self) -> u64 {
        self.racing.load(std::sync::atomic::Ordering::SeqCst)
    }
}
