//! The application's answers at the moments where a fallback chain or an edit meets another
//! feature, which timing alone rarely lines up: an order added after a death that named no
//! channel, or cleared at a take-over, and a redrive; a channel taken away right after the
//! enqueue and listed again minutes later.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use super::acks::Kinds;
use super::subscribers::write_preferences;
use super::world::{recipient, subscriber_index, World};
use reminders_core::clock::Clock;
use reminders_core::domain::{Channel, ReminderId};
use reminders_core::ports::ReminderStore;
use reminders_core::reminder_writes::{Edit, Edited};

/// A PUT of `id`'s body without one of its channels, right after its enqueue, and `after` that
/// one listing it again: whether the first was acknowledged.
pub(super) async fn take_away(world: &Arc<World>, id: &ReminderId, after: Duration) -> bool {
    let Ok(Some(cur)) = world.store.get(id).await else {
        return false;
    };
    let Some(gone) = cur.recipients.keys().last().copied() else {
        return false;
    };
    if cur.recipients.len() < 2 {
        return false;
    }
    let recipients = cur.recipients.iter().filter(|(c, _)| **c != gone);
    let changes = Edit {
        recipients: Some(recipients.map(|(_, r)| r.clone()).collect()),
        detach: reminders_core::domain::series::occurrence_of(id).is_some(),
        ..Edit::default()
    };
    let now = world.clock.now();
    let Some(Ok(Edited::Edited(next))) =
        super::api_edit::edit_through_api(world, id, changes, now).await
    else {
        return false;
    };
    let k = Kinds {
        removed: true,
        ..Kinds::default()
    };
    world.acks.acknowledged(&world.journal, &next, k);
    let readd = readd_later(world.clone(), id.clone(), gone, after);
    tokio::task::spawn_local(readd);
    true
}

/// Listed again: `after` an edit took `channel` away from the enqueued reminder `id`, a PUT lists
/// it again. The API refuses it (`409`, counted in `readds_refused`); acknowledged, its
/// delivery, cancelled as edited away, must still be sent or tell why.
pub(super) async fn readd_later(
    world: Arc<World>,
    id: ReminderId,
    channel: Channel,
    after: Duration,
) {
    tokio::time::sleep(after).await;
    let Ok(Some(cur)) = world.store.get(&id).await else {
        return;
    };
    if cur.recipients.contains_key(&channel) {
        return;
    }
    let mut recipients: Vec<reminders_core::domain::Recipient> =
        cur.recipients.values().cloned().collect();
    recipients.push(recipient(channel, subscriber_index(&cur)));
    let changes = Edit {
        recipients: Some(recipients),
        detach: reminders_core::domain::series::occurrence_of(&id).is_some(),
        ..Edit::default()
    };
    let now = world.clock.now();
    match super::api_edit::edit_through_api(&world, &id, changes, now).await {
        Some(Ok(Edited::Edited(next))) => {
            let k = Kinds {
                readded: true,
                ..Kinds::default()
            };
            world.acks.acknowledged(&world.journal, &next, k);
            world.counts.prompted_edits();
        }
        Some(Ok(Edited::Readded(_))) => world.counts.tally(|t| t.readds_refused += 1),
        Some(Ok(Edited::NothingLeft)) => world.counts.refused_edit(),
        _ => {}
    }
}

/// The subscriber drops their fallback order (every listed channel goes on its own again):
/// whether it was written.
pub(super) async fn clear_order(
    world: &World,
    subscriber: &reminders_core::domain::SubscriberId,
) -> bool {
    let Ok(Some(mut prefs)) = world.store.preferences(subscriber).await else {
        return false;
    };
    if prefs.fallback.is_empty() {
        return false;
    }
    prefs.fallback.clear();
    if !write_preferences(world, subscriber, &prefs).await {
        return false;
    }
    true
}

/// A head's death out of budget at an address the provider fails. If the reminder lists
/// a channel in standby behind it, the subscriber opts out of the channel, the operator fixes
/// the address and, 4 to 7 minutes later (once the standby has looked and found it not
/// needed), redrives that DLQ, extending the freshness of a reminder gone stale.
pub(super) async fn opt_out_and_redrive(
    world: &Arc<World>,
    origin: &reminders_core::ledger::Origin,
) {
    let (subscriber, channel) = (&origin.subscriber_id, origin.channel);
    if !reminders_core::sync::lock(&world.failing).contains(&(subscriber.clone(), channel)) {
        return;
    }
    let store = &world.store;
    let (Ok(Some(cur)), Ok(Some(mut prefs))) = (
        store.get(&origin.reminder_id).await,
        store.preferences(subscriber).await,
    ) else {
        return;
    };
    let listed = |c: &Channel| cur.recipients.contains_key(c);
    let behind = prefs
        .fallback
        .iter()
        .skip_while(|c| **c != channel)
        .skip(1)
        .any(listed);
    if !behind {
        return;
    }
    reminders_core::sync::lock(&world.failing).remove(&(subscriber.clone(), channel));
    prefs.opted_out.insert(channel);
    write_preferences(world, subscriber, &prefs).await;
    let secs = 240 + world.seed.0 % 180;
    let redrive = super::operator::redrive_later(
        world.clone(),
        channel,
        Duration::from_secs(secs),
        Some(1_800),
    );
    tokio::task::spawn_local(redrive);
}

/// The subscriber changes the fallback order just as `origin`'s channel is claimed as its
/// chain's head: moves the head to the end of the order (half the chains), clears the order,
/// or sets it without the head. Whether it was written. The chain the head's claim recorded
/// stands whichever it is.
pub(super) async fn head_to_end(world: &World, origin: &reminders_core::ledger::Origin) -> bool {
    let subscriber = &origin.subscriber_id;
    let Ok(Some(mut prefs)) = world.store.preferences(subscriber).await else {
        return false;
    };
    if prefs.fallback.last() == Some(&origin.channel) || !prefs.fallback.contains(&origin.channel) {
        return false;
    }
    // Which change, from the reminder's id: the world's other dice stay as they were.
    let pick = origin
        .reminder_id
        .as_str()
        .bytes()
        .fold(0u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
    let away = pick % 4 >= 2;
    prefs.fallback.retain(|c| *c != origin.channel);
    match pick % 4 {
        0 | 1 => prefs.fallback.push(origin.channel),
        2 => prefs.fallback.clear(),
        _ => {}
    }
    if !write_preferences(world, subscriber, &prefs).await {
        return false;
    }
    if away {
        world.counts.tally(|t| t.heads_ordered_away += 1);
    }
    true
}

/// A PUT of the reminder's body with the channels of the subscriber's fallback order it does
/// not list added: whether the API acknowledged it.
pub(super) async fn add_the_order(world: &World, origin: &reminders_core::ledger::Origin) -> bool {
    let store = &world.store;
    let (Ok(Some(cur)), Ok(prefs)) = (
        store.get(&origin.reminder_id).await,
        store.preferences(&origin.subscriber_id).await,
    ) else {
        return false;
    };
    let mut prefs = prefs.unwrap_or_default();
    let lacks = |c: &Channel| !cur.recipients.contains_key(c);
    if !prefs.fallback.iter().any(lacks) {
        // No order that names a channel the reminder lacks: the subscriber sets one, the
        // dead channel first, then the missing ones, then the rest.
        let (missing, listed): (Vec<Channel>, Vec<Channel>) = Channel::ALL
            .into_iter()
            .filter(|c| *c != origin.channel)
            .partition(lacks);
        if missing.is_empty() {
            return false;
        }
        prefs.fallback = std::iter::once(origin.channel)
            .chain(missing)
            .chain(listed)
            .collect();
        if !write_preferences(world, &origin.subscriber_id, &prefs).await {
            return false;
        }
    }
    let ever: BTreeSet<Channel> = world
        .acks
        .landed_versions(&cur.reminder_id)
        .iter()
        .flat_map(|l| l.channels.iter().copied())
        .collect();
    let missing: Vec<Channel> = prefs
        .fallback
        .iter()
        .copied()
        .filter(|c| !cur.recipients.contains_key(c))
        .collect();
    if missing.is_empty() {
        return false;
    }
    let i = subscriber_index(&cur);
    let mut recipients: Vec<reminders_core::domain::Recipient> =
        cur.recipients.values().cloned().collect();
    recipients.extend(missing.iter().map(|c| recipient(*c, i)));
    let k = Kinds {
        added: missing.iter().any(|c| !ever.contains(c)),
        readded: missing.iter().any(|c| ever.contains(c)),
        ..Kinds::default()
    };
    let changes = Edit {
        recipients: Some(recipients),
        // An occurrence edited through its own id is detached, as the API does.
        detach: reminders_core::domain::series::occurrence_of(&cur.reminder_id).is_some(),
        ..Edit::default()
    };
    let now = world.clock.now();
    match super::api_edit::edit_through_api(world, &cur.reminder_id, changes, now).await {
        Some(Ok(Edited::Edited(next))) => {
            world.acks.acknowledged(&world.journal, &next, k);
            true
        }
        Some(Ok(Edited::NothingLeft)) => {
            world.counts.refused_edit();
            false
        }
        _ => false,
    }
}
