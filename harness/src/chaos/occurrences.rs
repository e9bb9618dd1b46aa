//! The series' own verdicts, judged from the books of what the application was told:
//! `occurrence_missing` (an occurrence an acknowledged version makes, never made or never ended),
//! `occurrence_doubled` (one claimed after a write that no longer makes it) and
//! `occurrence_unowed` (one sent for an instant before the series existed).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::books::{keys, versions_text};
use super::world::{World, CHAOS, EPOCH};
use super::SeedReport;
use reminders_core::domain::series::occurrence_id;
use reminders_core::domain::{DeliveryKey, ReminderId, ReminderStatus};
use reminders_core::ledger::Status;
use reminders_core::ports::ReminderStore;
use reminders_core::sync::lock;

/// Every occurrence made of the world's series, to be judged as any reminder is.
pub(super) async fn occurrences(world: &World) -> Vec<ReminderId> {
    let books = lock(&world.series.0).clone();
    let mut ids = BTreeSet::new();
    for book in books.values() {
        for (_, _, s) in &book.versions {
            for t in s.instants_between(None, s.until, 500) {
                ids.insert(occurrence_id(&s.series_id, t));
            }
        }
    }
    let mut made = Vec::new();
    for id in ids {
        if let Ok(Some(_)) = world.store.get(&id).await {
            made.push(id);
        }
    }
    made
}

/// `occurrence_missing`, `occurrence_doubled` and `occurrence_unowed`.
pub(super) async fn judge(world: &World, report: &mut SeedReport) {
    let ledger: BTreeMap<DeliveryKey, reminders_core::ledger::DeliveryRecord> = world
        .ledger
        .snapshot()
        .into_iter()
        .map(|r| (r.key().clone(), r))
        .collect();
    let facts = world.journal.facts();
    let books = lock(&world.series.0).clone();
    let horizon = EPOCH.plus(CHAOS).plus(Duration::from_secs(30 * 60));
    for (id, book) in books.iter() {
        // Unowed: sent for an instant before the application first asked for the series,
        // whatever its writes' answers were (none of them can owe it).
        if let Some(asked) = book.asked_from {
            for (channel_key, at) in keys(book).into_iter().filter(|(_, at)| *at < asked) {
                let sends = facts.get(&channel_key).map_or(0, |f| {
                    f.sends.iter().filter(|s| s.may_have_reached()).count()
                });
                if sends > 0 {
                    let versions = versions_text(book);
                    let what = format!("{id}: the occurrence at {} sent ({sends} call(s)), before the series was first asked for at {}; versions {versions:?}", at.to_rfc3339(), asked.to_rfc3339());
                    report.broken(|t| &mut t.occurrence_unowed, what);
                }
            }
        }
        let Some((_, acked_at, last)) = book.versions.last() else {
            continue;
        };
        // A write whose answer never came may have landed (and made what it makes): judged as
        // the reminders its occurrences are, no further.
        if book.uncertain {
            continue;
        }
        for (channel_key, at) in keys(book) {
            // Doubled: claimed after an acknowledged write that no longer makes it (unless
            // edited on its own, which a series edit leaves alone; a cancel still counts).
            let Some(f) = facts.get(&channel_key) else {
                continue;
            };
            let detached = matches!(
                world.store.get(&occurrence_id(id, at)).await,
                Ok(Some(r)) if r.detached
            );
            for send in f.sends.iter().filter(|s| s.may_have_reached()) {
                let claim = send.claim.unwrap_or(send.seq);
                // The last version acknowledged before the claim, and the next one (its write
                // may have landed, and made this occurrence, before its answer).
                let in_force = book.versions.iter().rev().find(|(seq, _, _)| *seq < claim);
                let next = book.versions.iter().find(|(seq, _, _)| *seq > claim);
                let removed = !detached
                    && in_force.is_some_and(|(_, _, v)| !v.produces(at))
                    && next.is_none_or(|(_, _, v)| !v.produces(at));
                let cancelled = book.cancelled.is_some_and(|c| c < claim);
                if removed || cancelled {
                    let versions = versions_text(book);
                    let history: Vec<String> = ledger.get(&channel_key).map_or(Vec::new(), |rec| {
                        rec.history()
                            .into_iter()
                            .map(|(n, h)| entry_text(n, h))
                            .collect()
                    });
                    let what = format!("{id}: the occurrence at {} claimed (seq {claim}, call seq {}) after an acknowledged write that no longer makes it; versions {versions:?}; cancelled {:?}; ledger {history:?}", at.to_rfc3339(), send.seq, book.cancelled);
                    report.broken(|t| &mut t.occurrence_doubled, what);
                }
            }
        }
        if book.cancelled.is_some() {
            continue;
        }
        let from = acked_at.plus(Duration::from_secs(120));
        for at in last.instants_between(Some(from), Some(horizon), 500) {
            // Skipped; or removed by an earlier edit and made again by a later one: a cancel is
            // final (its delivery keys can never send), the edit's answer shows it cancelled.
            let removed_once = book.versions.iter().any(|(_, _, v)| !v.produces(at));
            if book.skips.contains(&at) || removed_once {
                continue;
            }
            // Its subscriber's erasure cancels what is due from its asking on (and what was due
            // before but not sent yet), and deletes every item it settles: one gone or cancelled
            // once the erasure was asked cannot be told from one it erased. Any other is judged.
            let erased_from = book.erasure_asked;
            if erased_from.is_some_and(|asked| at >= asked) {
                continue;
            }
            let rid = occurrence_id(id, at);
            let stored = world.store.get(&rid).await;
            let erased = match &stored {
                Ok(None) => true,
                Ok(Some(r)) => r.status == ReminderStatus::Cancelled,
                Err(_) => false,
            };
            if erased_from.is_some() && erased {
                continue;
            }
            let what = match stored {
                Ok(Some(r)) => {
                    // Made and ended one way or another; each channel's own ending is the
                    // reminder verdicts' to judge (a standby channel may never be needed).
                    // Sent, expired or dead with its reason at some point (a redrive may have
                    // made it ready again since: `awaiting_redrive`, reported apart).
                    let ended = |rec: &reminders_core::ledger::DeliveryRecord| {
                        rec.history().into_iter().any(|(_, h)| {
                            matches!(h.to, Status::Delivered | Status::Expired | Status::Dead)
                        })
                    };
                    let settled = r.status == ReminderStatus::Expired
                        || r.channels().any(|c| {
                            let key = DeliveryKey::derive(&rid, &r.subscriber_id, c);
                            ledger.get(&key).is_some_and(ended)
                        });
                    if settled {
                        continue;
                    }
                    let history: Vec<String> = r
                        .channels()
                        .filter_map(|c| ledger.get(&DeliveryKey::derive(&rid, &r.subscriber_id, c)))
                        .flat_map(|rec| {
                            rec.history()
                                .into_iter()
                                .map(|(n, h)| entry_text(n, h))
                                .collect::<Vec<_>>()
                        })
                        .collect();
                    let versions = versions_text(book);
                    format!("{rid}: made, {} (v{}) and never sent, expired or dead; ledger {history:?}; versions {versions:?}; skips {:?}", r.status.as_str(), r.payload_version, book.skips)
                }
                _ => format!("{rid}: never made"),
            };
            report.broken(|t| &mut t.occurrence_missing, what);
        }
    }
}

/// One ledger history entry, for a finding.
fn entry_text(n: u64, h: &reminders_core::ledger::HistoryEntry) -> String {
    let detail = h.detail.as_deref().unwrap_or("");
    format!(
        "{n}:{}->{}@{} {detail}",
        h.from.as_str(),
        h.to.as_str(),
        h.at.to_rfc3339()
    )
}
