//! Occurrences made through their own ids before the maker made them: one more series in the
//! series worlds, whose application `PUT`s two of its occurrences not made yet (as the API's
//! `PUT /v1/reminders/{series}::{instant}` does, [`reminders_core::series::put_unmade`]):
//!
//! - one hours ahead, moved earlier to a few minutes from now: delivered, its reminder and ledger
//!   items go with their TTL, and the maker reaches its instant long after. It must not make it
//!   again (a second send of one instant: `duplicated`);
//! - one half an hour ahead, moved 30 to 50 minutes later (most worlds): in a third of the worlds
//!   the series is then cancelled after its instant but before its new time, and the cancel must
//!   reach it (`occurrence_doubled`: claimed after the cancel).
//!
//! The series' write inside the `PUT` (recording the instant as made on its own) meets the
//! world's faults: an answer lost after the write, an error before it; the application sends the
//! same `PUT` again until one answers (`unmade_put_retries`).

use std::sync::Arc;
use std::time::Duration;

use rand::RngExt;

use super::dice::{invoke, API_TIMEOUT};
use super::series::DETACHED_SERIES;
use super::world::World;
use reminders_core::clock::{Clock, Timestamp};
use reminders_core::domain::series::{occurrence_id, Series, MAKE_AHEAD};
use reminders_core::domain::{Access, SeriesId};
use reminders_core::ports::ReminderStore;
use reminders_core::sync::lock;

const N: usize = 4;

/// The series, its two occurrences put before they were made, and the cancel of a third of the
/// worlds. Its own dice, and no other writer of the application touches it.
pub(super) async fn story(world: Arc<World>) {
    debug_assert_eq!(DETACHED_SERIES, format!("series-{N}"));
    let mut rng = world.seed.rng(super::seed::Stream::Detached);
    let zone = super::series::ZONES[rng.random_range(0..super::series::ZONES.len())];
    let minutes = [
        rng.random_range(3..8i64),
        rng.random_range(24..32i64),
        rng.random_range(190..230i64),
    ];
    let mut s = super::series::draw(&world, N, zone, &minutes, "first");
    s.until = Some(world.clock.now().plus(Duration::from_secs(5 * 3600)));
    if !super::series::put(&world, s).await {
        return;
    }
    world.counts.tally(|t| t.series_created += 1);
    tokio::time::sleep(Duration::from_secs(rng.random_range(60..240))).await;
    let id = current_id();
    let Some(current) = super::series::last_acknowledged(&world, &id) else {
        return;
    };
    let now = world.clock.now();
    let unmade = current.instants_between(
        Some(now.plus(MAKE_AHEAD).plus(Duration::from_secs(120))),
        current.until,
        50,
    );
    // Hours ahead, moved to a few minutes from now: its TTL passes long before the maker
    // reaches its instant.
    let far = unmade
        .iter()
        .copied()
        .find(|t| *t >= now.plus(Duration::from_secs(170 * 60)));
    if let Some(at) = far {
        let due = now.plus(Duration::from_secs(rng.random_range(180..480)));
        if put_moved(&world, &current, at, due).await {
            world.counts.tally(|t| t.unmade_puts_earlier += 1);
            let (world, wait) = (world.clone(), at.since(world.clock.now()));
            tokio::task::spawn_local(async move {
                tokio::time::sleep(wait + Duration::from_secs(60)).await;
                let id = occurrence_id(&current_id(), at);
                let stored = world.store.get(&id).await;
                if matches!(stored, Ok(Some(r)) if r.detached && world.ports.reminders.hook.ttl_gone(&r))
                {
                    world.counts.tally(|t| t.unmade_gone_by_instant += 1);
                }
            });
        }
    }
    // Half an hour ahead, moved later; then perhaps the series cancelled in between.
    let near = unmade
        .iter()
        .copied()
        .find(|t| *t < now.plus(Duration::from_secs(60 * 60)));
    let Some(at) = near.filter(|_| rng.random_bool(0.7)) else {
        return;
    };
    let due = at.plus(Duration::from_secs(rng.random_range(1_800..3_000)));
    if !put_moved(&world, &current, at, due).await {
        return;
    }
    world.counts.tally(|t| t.unmade_puts_later += 1);
    if rng.random_bool(0.35) {
        let after = at.since(world.clock.now()) + Duration::from_secs(rng.random_range(660..1_080));
        tokio::time::sleep(after).await;
        let Some(current) = super::series::last_acknowledged(&world, &id) else {
            return;
        };
        super::series::ask_cancel_of_all(&world, &current);
        lock(&world.cancel_requests).insert(occurrence_id(&id, at));
        super::series::cancel(&world, &id).await;
    }
}

fn current_id() -> SeriesId {
    SeriesId::parse(DETACHED_SERIES).unwrap()
}

/// `PUT` of the occurrence of `s` at `at`, not made yet, due at `due` instead (fresh for as
/// long): sent again through the faults until it answers. True when the occurrence stands as
/// put (made by this call, or by an earlier try whose answer was lost).
async fn put_moved(world: &World, s: &Series, at: Timestamp, due: Timestamp) -> bool {
    let mut r = s.occurrence(at, world.retention);
    let fresh_for = r.fresh_until.since(r.due_at);
    r.due_at = due;
    r.fresh_until = due.plus(fresh_for);
    r.expires_at = world.retention.expires_at(r.fresh_until);
    let kinds = super::acks::Kinds {
        due_earlier: due < at,
        due_later: due > at,
        ..super::acks::Kinds::default()
    };
    for attempt in 0..10 {
        if attempt > 0 {
            world.counts.tally(|t| t.unmade_put_retries += 1);
            tokio::time::sleep(Duration::from_secs(5)).await;
        }
        let call = reminders_core::series::put_unmade(&*world.ports.reminders, &Access::Any, &r);
        match invoke(call, API_TIMEOUT).await {
            Some(Ok(Ok(Some(made)))) => {
                world.acks.acknowledged(&world.journal, &made, kinds);
                return true;
            }
            // There already: the API edits it as any reminder, to the same body. Made by an
            // earlier try whose answer was lost, it stands as put; made by the maker first, it
            // stays the series' (the application's later edit is another story).
            Some(Ok(Ok(None))) => {
                let stored = match world.ports.reminders.get(&r.reminder_id).await {
                    Ok(stored) => stored,
                    Err(_) => continue,
                };
                return match stored {
                    Some(stored) if stored.detached && stored.due_at == due => {
                        world.acks.acknowledged(&world.journal, &stored, kinds);
                        true
                    }
                    _ => false,
                };
            }
            Some(Ok(Err(reminders_core::series::DetachRefused::Contended))) => continue,
            Some(Ok(Err(_))) => return false,
            Some(Err(_)) | None => continue,
        }
    }
    false
}
