//! The application's and the operator's side of a world: edits of every field the API takes
//! (the due time earlier, later and past the ledger's TTL horizon, the freshness either way,
//! the content, a channel removed, added or added back, edits of stale reminders), cancels,
//! invalid items, and redrives of every reason, two at once and with a cancel racing each —
//! each call an invocation a crash can stop at any port call, as the API's and redrive's
//! Lambdas can be.
//!
//! [`Acks`] keeps what the checker needs of it: every version of a reminder that landed in the
//! reminders table (the table adapter tells it), and the versions the API acknowledged.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use super::acks::Kinds;
use super::operator::redrive_later;
use super::prompt::{Prompt, Prompts};
use super::seed::Stream;
use super::world::{abroad, recipient, subscriber_index, World, CHAOS};
use reminders_core::clock::{Clock, Timestamp};
use reminders_core::domain::{Channel, Content, Reminder, ReminderId};
use reminders_core::reminder_writes::{Edit, Edited};
use reminders_core::sync::lock;

/// A reminder the world created (before its clock starts): landed and acknowledged.
pub(super) fn created(world: &World, r: &Reminder) {
    world.acks.landed(&world.journal, r);
    world.acks.acknowledged(&world.journal, r, Kinds::default());
}

/// The application: edits at random moments of the fault phase, each a whole body as a PUT
/// sends it, changing one or two things.
pub(super) async fn application(world: Arc<World>) {
    let mut rng = world.seed.rng(Stream::Edits);
    let edits = rng.random_range(0..12);
    let mut at: Vec<(u64, Option<usize>, Option<u64>)> = (0..edits)
        .map(|_| (rng.random_range(0..CHAOS.as_secs()), None, None))
        .collect();
    // Some edits land just after a reminder goes stale, while the scheduler or a consumer
    // may be expiring it: the edit that makes it fresh again races the expiry.
    for (i, fresh) in world.fresh_at_start.iter().enumerate() {
        if rng.random_bool(0.25) {
            let t = fresh.since(super::world::EPOCH).as_secs() + rng.random_range(0..90);
            at.push((t, Some(i), None));
        }
    }
    // Others make it fresh again by its freshness alone, the due time kept, 10 to 40 minutes
    // on (the edit `drop-freshness-edit` drops: before these, only a random edit that drew
    // freshness alone, of a reminder a breaker then held past its old end, made that window,
    // in about one world of 60). Their own dice, so the draws above stay as they were.
    let mut again = world.seed.rng(Stream::FreshnessEdits);
    for (i, fresh) in world.fresh_at_start.iter().enumerate() {
        if again.random_bool(0.25) {
            let end = fresh.since(super::world::EPOCH).as_secs();
            let t = end.saturating_sub(again.random_range(0..120));
            at.push((t, Some(i), Some(again.random_range(600..2_400))));
        }
    }
    at.sort_unstable();
    let mut elapsed = 0;
    for (t, which, fresh_for) in at {
        tokio::time::sleep(Duration::from_secs(t.saturating_sub(elapsed))).await;
        elapsed = elapsed.max(t);
        let i = which.unwrap_or_else(|| rng.random_range(0..world.ids.len().max(1)));
        let Some(id) = world.ids.get(i) else {
            return;
        };
        let force = match (which, fresh_for) {
            (Some(_), Some(secs)) => {
                Force::FreshAgain(world.clock.now().plus(Duration::from_secs(secs)))
            }
            (Some(_), None) => Force::Later,
            (None, _) => Force::Nothing,
        };
        let _ = edit(&world, id, &mut rng, t, force).await;
    }
}

/// What an edit must change first, beside what it draws.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Force {
    Nothing,
    /// The due time later (so a stale reminder is fresh again).
    Later,
    /// The due time later, past the ledger's TTL horizon.
    PastHorizon,
    /// Freshness alone, to end at this time (a breaker's opening cut it short).
    FreshUntil(Timestamp),
    /// Freshness alone, to end at this time (a stale reminder made fresh again).
    FreshAgain(Timestamp),
}

/// The application answering prompts, for as long as the world runs.
pub(super) async fn prompted(world: Arc<World>, mut prompts: Prompts) {
    let mut rng = world.seed.rng(Stream::Prompted);
    // Take-overs draw from their own dice, so the other choices stay as they were; so do
    // the re-adds of a channel edited away.
    let mut taken = world.seed.rng(Stream::TakeOvers);
    let mut readds = world.seed.rng(Stream::Readds);
    while let Some((what, done)) = prompts.recv().await {
        let t = world.clock.now().since(super::world::EPOCH).as_secs();
        match what {
            Prompt::Scanned(ids) => {
                let now = world.clock.now();
                let mut stale = Vec::new();
                for id in ids {
                    use reminders_core::ports::ReminderStore;
                    if let Ok(Some(r)) = world.store.get(&id).await {
                        if r.is_stale_at(now)
                            && r.status == reminders_core::domain::ReminderStatus::Scheduled
                        {
                            stale.push(id);
                        }
                    }
                }
                if let Some(id) = stale.first().filter(|_| rng.random_bool(0.5)) {
                    if edit(&world, id, &mut rng, t, Force::Later).await {
                        world.counts.prompted_edits();
                    }
                }
            }
            Prompt::Accepted(id) => {
                if edit(&world, &id, &mut rng, t, Force::PastHorizon).await {
                    world.counts.prompted_edits();
                }
            }
            Prompt::DiedAlone(origin) => {
                if super::chains::add_the_order(&world, &origin).await {
                    world.counts.prompted_edits();
                    // Minutes later (an operator acting on the alarm of the death); the
                    // redrive while the channel that took over is in flight comes at the
                    // take-over itself. One here within seconds would mostly revive the
                    // death before any take-over (or hide its copy, if it crashed).
                    let after = Duration::from_secs(rng.random_range(120..900));
                    let redrive = redrive_later(world.clone(), origin.channel, after, None);
                    tokio::task::spawn_local(redrive);
                }
            }
            Prompt::TookOver(origin) => {
                if let Some(from) = origin.fallback_from {
                    // Three times in four: with the order, the standby rule alone refuses
                    // the redriven death; without it, only the hand-on does.
                    if taken.random_bool(0.75)
                        && super::chains::clear_order(&world, &origin.subscriber_id).await
                    {
                        world.counts.prompted_edits();
                    }
                    let after = Duration::from_secs(taken.random_range(0..30));
                    let redrive = redrive_later(world.clone(), from, after, None);
                    tokio::task::spawn_local(redrive);
                }
            }
            Prompt::DiedSpent(origin) => {
                super::chains::opt_out_and_redrive(&world, &origin).await;
            }
            Prompt::HeadClaimed(origin) => {
                // Counted among the reorders, by the journal.
                let _ = super::chains::head_to_end(&world, &origin).await;
            }
            Prompt::Enqueued(id) => {
                let after = Duration::from_secs(readds.random_range(60..400));
                if readds.random_bool(0.5) && super::chains::take_away(&world, &id, after).await {
                    world.counts.prompted_edits();
                }
            }
            Prompt::BreakerOpened(channel, until) => {
                // Two at most: the first worker to poll after the cool-down probes.
                for _ in 0..2 {
                    let Some(id) = waiting_on(&world, channel, until, &mut rng).await else {
                        break;
                    };
                    // Fresh past the cool-down by more than the consumer's clock margin (so a
                    // probe may start) and by less than a slow probe write (so it may end stale).
                    let after = Duration::from_millis(rng.random_range(1_500..6_000));
                    let cut = Force::FreshUntil(until.plus(after));
                    if edit(&world, &id, &mut rng, t, cut).await {
                        world.counts.prompted_edits();
                    }
                }
            }
        }
        let _ = done.send(());
    }
}

/// A reminder, due by `until`, fresh well past it, whose delivery on `channel` has not
/// settled: one a breaker open until `until` holds.
async fn waiting_on(
    world: &World,
    channel: Channel,
    until: Timestamp,
    rng: &mut StdRng,
) -> Option<ReminderId> {
    use reminders_core::ports::{Ledger, ReminderStore};
    let mut waiting = Vec::new();
    for id in &world.ids {
        let Ok(Some(r)) = world.store.get(id).await else {
            continue;
        };
        let pending = matches!(
            r.status,
            reminders_core::domain::ReminderStatus::Scheduled
                | reminders_core::domain::ReminderStatus::Enqueued
        );
        let fits = r.due_at <= until && r.fresh_until > until.plus(Duration::from_secs(30));
        if !pending || !fits || !r.recipients.contains_key(&channel) {
            continue;
        }
        let key =
            reminders_core::domain::DeliveryKey::derive(&r.reminder_id, &r.subscriber_id, channel);
        // Not settled, and not mid-send: a worker that read the old version before this edit
        // and sends later did nothing wrong.
        let busy = match world.ledger.get(&key).await {
            Ok(Some(rec)) => {
                rec.status().is_terminal()
                    || rec.status() == reminders_core::ledger::Status::Sending
            }
            _ => false,
        };
        if !busy {
            waiting.push(r.reminder_id);
        }
    }
    (!waiting.is_empty()).then(|| waiting.swap_remove(rng.random_range(0..waiting.len())))
}

/// One PUT of `id`'s whole body, changing one or two things (`force`: first moving it later,
/// fresh again, or cutting its freshness): whether the API accepted it.
async fn edit(world: &Arc<World>, id: &ReminderId, rng: &mut StdRng, t: u64, force: Force) -> bool {
    use reminders_core::ports::ReminderStore;
    let Ok(Some(cur)) = world.store.get(id).await else {
        return false;
    };
    let now = world.clock.now();
    let mut k = Kinds {
        of_stale: cur.is_stale_at(now),
        ..Kinds::default()
    };
    let (mut due, mut fresh) = (cur.due_at, cur.fresh_until);
    let mut channels: BTreeSet<Channel> = cur.recipients.keys().copied().collect();
    let mut content = cur.content.clone();
    let mut removed = None;
    let ever: BTreeSet<Channel> = world
        .acks
        .landed_versions(id)
        .iter()
        .flat_map(|l| l.channels.iter().copied())
        .collect();
    if let Force::FreshUntil(end) | Force::FreshAgain(end) = force {
        fresh = end.max(due);
        k.freshness = true;
    }
    let draws = if matches!(force, Force::FreshUntil(_) | Force::FreshAgain(_)) {
        0
    } else {
        rng.random_range(1..3)
    };
    for n in 0..draws {
        let draw = if force != Force::Nothing && n == 0 {
            1
        } else {
            rng.random_range(0..7)
        };
        match draw {
            0 => {
                let back = Duration::from_secs(rng.random_range(60..1_800));
                due = due.minus(back).max(now.minus(Duration::from_secs(60)));
                k.due_earlier = true;
            }
            1 | 2 => {
                // Later, and sometimes past the ledger's TTL horizon (the retention of the
                // world is short, so a move of hours outruns a delivery's proof).
                let horizon = rng.random_bool(0.4) || (n == 0 && force == Force::PastHorizon);
                let secs = if horizon {
                    world.retention.0.as_secs() + rng.random_range(600..3_600)
                } else {
                    rng.random_range(300..3_600)
                };
                let later = Duration::from_secs(secs);
                fresh = fresh.plus(later);
                due = due.plus(later);
                k.past_horizon |= horizon;
                k.due_later |= !horizon;
            }
            3 => {
                fresh = due.plus(Duration::from_secs(rng.random_range(60..5_400)));
                k.freshness = true;
            }
            4 => {
                content = Content::Text {
                    subject: "Reminder".into(),
                    body: format!("edited at {t}"),
                };
                k.content = true;
            }
            5 if channels.len() > 1 => {
                let all: Vec<Channel> = channels.iter().copied().collect();
                let gone = all[rng.random_range(0..all.len())];
                channels.remove(&gone);
                removed = Some(gone);
                k.removed = true;
            }
            _ => {
                let missing: Vec<Channel> = Channel::ALL
                    .into_iter()
                    .filter(|c| !channels.contains(c))
                    .collect();
                // Back first: a channel an earlier edit took away.
                let back: Vec<Channel> = missing
                    .iter()
                    .copied()
                    .filter(|c| ever.contains(c))
                    .collect();
                let pick = if back.is_empty() { &missing } else { &back };
                if let Some(c) = pick.get(rng.random_range(0..pick.len().max(1))) {
                    channels.insert(*c);
                    k.readded |= ever.contains(c);
                    k.added |= !ever.contains(c);
                }
            }
        }
    }
    let fresh = fresh.max(due);
    let i = subscriber_index(&cur);
    // Now and then the SMS number moves abroad, outside the allowed calling codes (its own
    // dice, so the worlds' other draws stay as they were).
    let mut own = StdRng::seed_from_u64(t ^ u64::from(i) ^ 0xab_10ad);
    k.abroad = channels.contains(&Channel::Sms) && own.random_bool(0.2);
    let number = |c: &Channel| match (c, k.abroad) {
        (Channel::Sms, true) => abroad(i),
        _ => recipient(*c, i),
    };
    let changes = Edit {
        due_at: Some(due),
        fresh_until: Some(fresh),
        content: Some(content),
        recipients: Some(channels.iter().map(number).collect()),
        // An occurrence edited through its own id is detached, as the API does.
        detach: reminders_core::domain::series::occurrence_of(id).is_some(),
        may_make_stale: false,
    };
    let next = match super::api_edit::edit_through_api(world, id, changes, now).await {
        Some(Ok(Edited::Edited(next))) => next,
        Some(Ok(Edited::NothingLeft)) => {
            world.counts.refused_edit();
            return false;
        }
        _ => return false,
    };
    world.acks.acknowledged(&world.journal, &next, k);
    // A channel taken away after the enqueue is listed again minutes later.
    let enqueued = cur.status == reminders_core::domain::ReminderStatus::Enqueued;
    let gone = removed.filter(|c| !channels.contains(c));
    if let (true, true, Some(c)) = (world.shape.windows.readd_after_remove, enqueued, gone) {
        let after = Duration::from_secs(own.random_range(30..600));
        let readd = super::chains::readd_later(world.clone(), id.clone(), c, after);
        tokio::task::spawn_local(readd);
    }
    if matches!(force, Force::FreshUntil(_)) {
        lock(&world.counts.cut).insert(id.clone());
    }
    true
}
