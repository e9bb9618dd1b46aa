//! An erasure in the worlds: the subscriber of the series that starts in the past
//! ([`super::series::create_past`]) is erased a few minutes after its edit, while the maker and
//! the consumers run, through the reminders adapter's faults, until an erasure call answers
//! complete. Then nothing of that subscriber may be sent, nor left to be sent
//! (`sent_after_erasure`). The reminders table's model plays the erasure's calls with the dice
//! around each.

use std::time::Duration;

use super::world::World;
use super::{Plant, SeedReport};
use reminders_core::clock::Clock;
use reminders_core::domain::{SeriesId, SubscriberId};
use reminders_core::ports::ReminderStore;
use reminders_core::sync::lock;

/// Erase the subscriber of `series`, calling again until a call answers complete with nothing
/// left (ten calls at most); the series' book records when it was asked, and when it was done
/// (or that it never was).
pub(super) async fn erase(world: &World, series: &SeriesId, subscriber: &SubscriberId) {
    let asked = world.clock.now();
    world.series.write(series, |b| {
        b.erasure_asked.get_or_insert(asked);
    });
    for _ in 0..10 {
        let call = reminders_core::erasure::erase(
            &*world.ports.reminders,
            &world.ports.ledger,
            None,
            subscriber,
            world.clock.now(),
            world.retention,
        );
        match super::dice::invoke(call, super::dice::API_TIMEOUT).await {
            // Complete with nothing left: a reminder left because its send was in flight is
            // erased by a later call, which this one is not yet.
            Some(Ok(erased)) if erased.complete && erased.reminders_left == 0 => {
                let at = world.clock.now();
                world.series.write(series, |b| b.erased_at = Some(at));
                world.counts.tally(|t| t.erasures += 1);
                return;
            }
            _ => tokio::time::sleep(Duration::from_secs(5)).await,
        }
    }
}

/// `sent_after_erasure`: once an erasure of a series' subscriber answered complete, a provider
/// call for any occurrence of it, or an occurrence still to be sent in the table (scheduled or
/// enqueued). An occurrence a maker made from the series as read before the erasure is
/// cancelled by that maker, its item kept until its TTL: reported, not broken.
pub(super) async fn judge(world: &World, report: &mut SeedReport) {
    let facts = world.journal.facts();
    let books = lock(&world.series.0).clone();
    for (id, book) in &books {
        let Some(erased_at) = book.erased_at else {
            continue;
        };
        let mut instants = std::collections::BTreeSet::new();
        for (key, at) in super::books::keys(book) {
            instants.insert(at);
            let late = facts.get(&key).map_or(0, |f| {
                f.sends
                    .iter()
                    .filter(|s| s.at > erased_at && s.may_have_reached())
                    .count()
            });
            if late > 0 {
                let what = format!("{id}: the occurrence at {} sent {late} time(s) after its subscriber's erasure answered complete at {}", at.to_rfc3339(), erased_at.to_rfc3339());
                report.broken(|t| &mut t.sent_after_erasure, what);
            }
        }
        for at in instants {
            let rid = reminders_core::domain::series::occurrence_id(id, at);
            let Ok(Some(r)) = world.store.get(&rid).await else {
                continue;
            };
            if reminders_core::ports::reminders::editable(r.status) {
                let what = format!(
                    "{rid}: still {} after its subscriber's erasure answered complete at {}",
                    r.status.as_str(),
                    erased_at.to_rfc3339()
                );
                report.broken(|t| &mut t.sent_after_erasure, what);
            } else {
                report.tally.erased_items_kept += 1;
            }
        }
    }
}

/// [`Plant::EraseMissesSeries`]: a subscriber's series answered as none.
pub(super) fn misses_series(plant: Option<Plant>) -> bool {
    plant == Some(Plant::EraseMissesSeries)
}
