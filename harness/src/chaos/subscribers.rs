//! Subscribers who change their minds mid-run: at random moments of the first 25 minutes
//! (while the world's reminders fall due) one opts out of a channel or back in, sets, moves
//! or lifts a channel's quiet hours, or sets, reorders or clears a fallback order of two or
//! three channels. Windows are local times in a real IANA zone (a
//! 30- and a 45-minute offset among them), placed around the subscriber's local clock at the
//! write so the world's clock crosses them. Each write goes through
//! [`ReminderStore::put_preferences`] on the world's store, as the API would, and into the
//! journal with its virtual time.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::RngExt;

use super::world::World;
use reminders_core::clock::{Clock, Timestamp};
use reminders_core::domain::preferences::{LocalTime, QuietHours, Zone};
use reminders_core::domain::{Channel, Preferences, SubscriberId};
use reminders_core::ports::ReminderStore;

/// The moments of change fall within this much of the start.
const CHANGES_WITHIN: Duration = Duration::from_secs(25 * 60);

const ZONES: [&str; 6] = [
    "America/New_York",
    "Europe/Paris",
    "Asia/Kolkata",
    "Asia/Kathmandu",
    "Australia/Lord_Howe",
    "Pacific/Chatham",
];

/// The subscribers of the world's reminders (`s-0` to `s-2`) change their preferences.
pub(super) async fn change_their_minds(world: Arc<World>) {
    let mut rng = world.seed.rng(super::seed::Stream::Preferences);
    let changes = rng.random_range(1..10);
    let mut at: Vec<u64> = (0..changes)
        .map(|_| rng.random_range(0..CHANGES_WITHIN.as_secs()))
        .collect();
    at.sort_unstable();
    let mut elapsed = 0;
    let mut current: BTreeMap<SubscriberId, Preferences> = BTreeMap::new();
    for t in at {
        tokio::time::sleep(Duration::from_secs(t - elapsed)).await;
        elapsed = t;
        let Ok(subscriber) = SubscriberId::parse(format!("s-{}", rng.random_range(0..3))) else {
            continue;
        };
        let mut prefs = current.get(&subscriber).cloned().unwrap_or_default();
        let channel = Channel::ALL[rng.random_range(0..3)];
        let now = world.clock.now();
        let draw = rng.random_range(0..10);
        if draw < 4 {
            prefs.fallback = order(&prefs.fallback, &mut rng);
        } else if draw < 7 {
            if !prefs.opted_out.remove(&channel) {
                prefs.opted_out.insert(channel);
            }
        } else if prefs.quiet_hours.contains_key(&channel) && rng.random_bool(0.3) {
            prefs.quiet_hours.remove(&channel);
        } else if let Some(q) = window_around(now, &mut rng) {
            prefs.quiet_hours.insert(channel, q);
        }
        if write_preferences(&world, &subscriber, &prefs).await {
            current.insert(subscriber, prefs);
        }
    }
}

/// A subscriber's preferences written through the world's store, as the API would write them,
/// and told to the journal once they landed. Whether they landed.
pub(super) async fn write_preferences(
    world: &World,
    subscriber: &SubscriberId,
    prefs: &Preferences,
) -> bool {
    let landed = world.store.put_preferences(subscriber, prefs).await.is_ok();
    if landed {
        world.journal.preferences_written(subscriber, prefs);
    }
    landed
}

/// Before the clock starts, each subscriber orders the three channels (a seeded shuffle), so
/// that every reminder of two or more channels is a chain from its first send.
pub(super) async fn ordered_from_start(world: &World) {
    let mut rng = world.seed.rng(super::seed::Stream::Orders);
    for n in 0..3 {
        let Ok(subscriber) = SubscriberId::parse(format!("s-{n}")) else {
            continue;
        };
        let mut all = Channel::ALL.to_vec();
        for i in (1..all.len()).rev() {
            all.swap(i, rng.random_range(0..=i));
        }
        let prefs = Preferences {
            fallback: all,
            ..Preferences::default()
        };
        write_preferences(world, &subscriber, &prefs).await;
    }
}

/// The next fallback order: none made one of two or three channels; one is reordered
/// (another order of as many) or, now and then, cleared or grown to a chain of three.
fn order(current: &[Channel], rng: &mut StdRng) -> Vec<Channel> {
    let mut all = Channel::ALL.to_vec();
    for i in (1..all.len()).rev() {
        all.swap(i, rng.random_range(0..=i));
    }
    match current.len() {
        0 => all[..rng.random_range(2..4)].to_vec(),
        _ if rng.random_bool(0.25) => Vec::new(),
        n => {
            let n = if rng.random_bool(0.3) { 3 } else { n };
            let next = all[..n].to_vec();
            if next == current {
                next.into_iter().rev().collect()
            } else {
                next
            }
        }
    }
}

/// A window in a random zone, from ten minutes before to a quarter of an hour after the local
/// time `now`, ten minutes to an hour long.
fn window_around(now: Timestamp, rng: &mut StdRng) -> Option<QuietHours> {
    let name = ZONES[rng.random_range(0..ZONES.len())];
    let zone = Zone::parse(name)?;
    let tz = jiff::tz::db().get(name).ok()?;
    let local = jiff::Timestamp::from_millisecond(now.as_millis())
        .ok()?
        .to_zoned(tz)
        .time();
    let minute = i32::from(local.hour()) * 60 + i32::from(local.minute());
    let start = minute + rng.random_range(-10..15);
    let end = start + rng.random_range(10..60);
    Some(QuietHours {
        start: of_day(start)?,
        end: of_day(end)?,
        zone,
    })
}

fn of_day(minute: i32) -> Option<LocalTime> {
    let m = minute.rem_euclid(24 * 60);
    LocalTime::new(u8::try_from(m / 60).ok()?, u8::try_from(m % 60).ok()?)
}
