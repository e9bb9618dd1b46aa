//! What the application was told of each series in a world: the versions its writes were
//! acknowledged with, its skips and its cancel. The series worlds write these books
//! ([`super::series`]); the occurrence verdicts read them ([`super::occurrences`]). Kept apart
//! from both so that the world, which holds the books, depends on neither.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use reminders_core::clock::Timestamp;
use reminders_core::domain::series::{occurrence_id, Series};
use reminders_core::domain::{DeliveryKey, SeriesId};

/// What the application was told of each series: every version acknowledged (with the
/// journal's order and the time), the occurrences it skipped, and its cancel.
#[derive(Debug, Clone, Default)]
pub struct Book {
    pub versions: Vec<(u64, Timestamp, Series)>,
    pub skips: BTreeSet<Timestamp>,
    pub cancelled: Option<u64>,
    /// When the application first asked to write it: it owes no occurrence before.
    pub asked_from: Option<Timestamp>,
    /// When its subscriber's erasure was first asked, and when a call of it answered complete
    /// with nothing left.
    pub erasure_asked: Option<Timestamp>,
    pub erased_at: Option<Timestamp>,
    /// A write whose answer never came (it may have landed): judged no further.
    pub uncertain: bool,
}

#[derive(Debug, Default)]
pub struct Books(pub Mutex<BTreeMap<SeriesId, Book>>);

impl Books {
    /// Write in the book of `series` (a new one if it has none yet).
    pub(super) fn write<T>(&self, series: &SeriesId, f: impl FnOnce(&mut Book) -> T) -> T {
        f(reminders_core::sync::lock(&self.0)
            .entry(series.clone())
            .or_default())
    }
}

/// Every delivery key of every instant any acknowledged version made (a removed one may
/// have been sent), with its instant.
pub(super) fn keys(book: &Book) -> Vec<(DeliveryKey, Timestamp)> {
    let mut out = BTreeMap::new();
    for (_, _, s) in &book.versions {
        for at in s.instants_between(None, s.until, 500) {
            let id = occurrence_id(&s.series_id, at);
            for c in s.recipients.keys() {
                out.insert(DeliveryKey::derive(&id, &s.subscriber_id, *c), at);
            }
        }
    }
    out.into_iter().collect()
}

/// The acknowledged versions, for a finding.
pub(super) fn versions_text(book: &Book) -> Vec<String> {
    book.versions
        .iter()
        .map(|(seq, t, v)| {
            format!(
                "seq {seq} at {} v{} {}",
                t.to_rfc3339(),
                v.version,
                v.rule.as_text()
            )
        })
        .collect()
}
