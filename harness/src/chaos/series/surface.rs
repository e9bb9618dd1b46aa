//! The application's side of the series: it edits them (moving their minutes), skips an
//! occurrence and cancels some mid-flight.

use super::*;

/// The application, while the faults last: now and then it edits a series (moving its
/// minutes), skips its next occurrence, or cancels it.
pub(in crate::chaos) async fn surface(world: Arc<World>) {
    let mut rng = world.seed.rng(crate::chaos::seed::Stream::SeriesEdits);
    // Occurrences moved through their own ids draw from their own dice, so the choices
    // above stay as they were.
    let mut moves = world.seed.rng(crate::chaos::seed::Stream::SeriesMoves);
    while !world.dice.is_calm() {
        tokio::time::sleep(Duration::from_secs(rng.random_range(120..420))).await;
        // The series started in the past has its own story (edited once, then erased), and so
        // has the one whose occurrences are put before they are made.
        let ids: Vec<SeriesId> = lock(&world.series.0)
            .keys()
            .filter(|id| ![PAST_SERIES, DETACHED_SERIES].contains(&id.as_str()))
            .cloned()
            .collect();
        let Some(id) = ids.get(rng.random_range(0..ids.len().max(1))).cloned() else {
            continue;
        };
        let Some(current) = last_acknowledged(&world, &id) else {
            continue;
        };
        ask_cancel_of_all(&world, &current);
        if moves.random_bool(0.4) {
            move_one(&world, &current, &mut moves).await;
        }
        match rng.random_range(0..10) {
            0..5 => {
                let n: usize = id
                    .as_str()
                    .trim_start_matches("series-")
                    .parse()
                    .unwrap_or(0);
                let first = rng.random_range(1..8i64);
                let gap = rng.random_range(2..6i64);
                let minutes: Vec<i64> = (0..rng.random_range(2..5i64))
                    .map(|i| first + i * gap)
                    .collect();
                let mut edited = draw(&world, n, &current.zone, &minutes, "edited");
                edited.starts_at = current.starts_at;
                edited.until = current.until;
                if put(&world, edited).await {
                    world.counts.tally(|t| t.series_edits += 1);
                }
            }
            5..8 => skip_next(&world, &current).await,
            8 => cancel(&world, &id).await,
            _ => {}
        }
    }
}

/// An occurrence `s` made (in the reminders table), due in the next ten minutes, moved 30 to
/// 50 minutes later through its own id (detached, as the API does); three times in four the
/// series is then cancelled 11 to 18 minutes after the occurrence's own time. By then that
/// time is more than the ten minutes of freshness before the cancel that the rule's instants
/// cover, so only the
/// occurrences the series remembers making find it (the window `forget-made` re-opens; before
/// these moves, only the edits of a stale occurrence in the scheduler's page, or a maker's pass
/// racing an edit, made it, in about one world of 60).
async fn move_one(world: &Arc<World>, s: &Series, rng: &mut StdRng) {
    use reminders_core::ports::ReminderStore;
    let now = world.clock.now();
    let (from, to) = (now, now.plus(Duration::from_secs(600)));
    let mut candidates = Vec::new();
    // Made ones are in the reminders table (what the series remembers is not read here).
    for at in s.instants_between(Some(from), Some(to), 20) {
        let id = occurrence_id(&s.series_id, at);
        if let Ok(Some(r)) = world.store.get(&id).await {
            if reminders_core::ports::reminders::editable(r.status) && !r.is_stale_at(now) {
                candidates.push(r);
            }
        }
    }
    if candidates.is_empty() {
        return;
    }
    let r = candidates.swap_remove(rng.random_range(0..candidates.len()));
    let later = Duration::from_secs(rng.random_range(1_800..3_000));
    let changes = reminders_core::reminder_writes::Edit {
        due_at: Some(r.due_at.plus(later)),
        fresh_until: Some(r.fresh_until.plus(later)),
        detach: true,
        ..reminders_core::reminder_writes::Edit::default()
    };
    // As the API does: recorded on the series first, so that its cancel reaches the occurrence
    // wherever it is moved, however many occurrences are made (and evicted) after it.
    let Some((_, at)) = reminders_core::domain::series::occurrence_of(&r.reminder_id) else {
        return;
    };
    let record = reminders_core::series::record_detached(&*world.ports.reminders, &s.series_id, at);
    let Some(Ok(Ok(()))) =
        crate::chaos::dice::invoke(record, crate::chaos::dice::API_TIMEOUT).await
    else {
        return;
    };
    let ports = &world.ports;
    let call = reminders_core::reminder_writes::edit(
        &ports.reminders,
        &ports.ledger,
        &r.reminder_id,
        changes,
        now,
        world.retention,
    );
    let Some(Ok(reminders_core::reminder_writes::Edited::Edited(next))) =
        crate::chaos::dice::invoke(call, crate::chaos::dice::API_TIMEOUT).await
    else {
        return;
    };
    let k = crate::chaos::acks::Kinds {
        due_later: true,
        ..crate::chaos::acks::Kinds::default()
    };
    world.acks.acknowledged(&world.journal, &next, k);
    if rng.random_bool(0.75) {
        let after = r.due_at.since(now) + Duration::from_secs(rng.random_range(660..1_080));
        let (world, id, moved) = (world.clone(), s.series_id.clone(), r.reminder_id);
        tokio::task::spawn_local(async move {
            tokio::time::sleep(after).await;
            let last = lock(&world.series.0).get(&id).and_then(|b| {
                (b.cancelled.is_none() && !b.uncertain)
                    .then(|| b.versions.last().map(|v| v.2.clone()))
            });
            if let Some(Some(current)) = last {
                ask_cancel_of_all(&world, &current);
                // Moved through its own id: no longer one of the rule's instants.
                lock(&world.cancel_requests).insert(moved);
                cancel(&world, &id).await;
            }
        });
    }
}

async fn skip_next(world: &World, s: &Series) {
    let now = world.clock.now();
    let Some(at) = s.next_after(Some(now.plus(Duration::from_secs(60)))) else {
        return;
    };
    let id = occurrence_id(&s.series_id, at);
    let store = &*world.ports.reminders;
    for _ in 0..10 {
        let call = reminders_core::reminder_writes::cancel(
            store,
            &world.ports.ledger,
            &id,
            world.clock.now(),
            world.retention,
        );
        match crate::chaos::dice::invoke(call, Duration::from_secs(30)).await {
            Some(Ok(Some(_))) => {
                world.series.write(&s.series_id, |b| b.skips.insert(at));
                world.counts.tally(|t| t.series_skips += 1);
                return;
            }
            // Not made yet: nothing to skip (the API's placeholder is its own test).
            Some(Ok(None)) => return,
            _ => tokio::time::sleep(Duration::from_secs(5)).await,
        }
    }
    world.series.write(&s.series_id, |b| b.uncertain = true);
}
