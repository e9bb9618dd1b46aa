//! Series in the worlds: half the worlds create two or three series at the start, in zones far
//! apart, with occurrences minutes apart inside the faults; the application edits them (moving
//! their minutes), skips an occurrence and cancels some mid-flight; the schedule's maker (after
//! each scan) makes their occurrences through a series adapter whose index lags the table (a GSI
//! is eventually consistent: the maker may read the version before an edit). What the application
//! was told goes in its [`super::books`]; every occurrence is then judged as any reminder is, and
//! by three verdicts of its own ([`super::occurrences`]). One more series starts in the past, is
//! edited, and has its subscriber erased ([`create_past`], judged by [`super::erasure`] too).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::RngExt;

use super::adapter::Adapter;
use super::world::World;
use super::Plant;
use reminders_core::clock::{Clock, Timestamp};
use reminders_core::domain::series::{occurrence_id, NewSeries, Series, SeriesStatus};
use reminders_core::domain::{Access, Channel, Content, SeriesId, SubscriberId};
use reminders_core::ports::series::{
    ExpectedSeries, SeriesStore, Written, OP_PUT_SERIES, OP_SERIES_DUE, OP_SERIES_OF,
};
use reminders_core::ports::PortError;
use reminders_core::sync::lock;

mod adapter;
mod surface;

pub(super) use surface::surface;

pub(super) const ZONES: [&str; 5] = [
    "Asia/Kathmandu",
    "Pacific/Kiritimati",
    "America/St_Johns",
    "Europe/Paris",
    "Australia/Lord_Howe",
];

/// The last version of a series the application was told of, unless it was cancelled, a write
/// of it is uncertain, or it is no longer active.
pub(super) fn last_acknowledged(world: &World, id: &SeriesId) -> Option<Series> {
    let books = lock(&world.series.0);
    let b = books.get(id)?;
    if b.cancelled.is_some() || b.uncertain {
        return None;
    }
    let last = b.versions.last().map(|v| v.2.clone())?;
    (last.status == SeriesStatus::Active).then_some(last)
}

/// A series for subscriber `n`, starting now, its occurrences at `minutes` from now (wall
/// times in `zone`; before now when negative), for two hours.
pub(super) fn draw(world: &World, n: usize, zone: &str, minutes: &[i64], body: &str) -> Series {
    let now = world.clock.now();
    let local = |m: i64| {
        let at = Timestamp::from_millis(now.as_millis() + m * 60_000);
        let t = jiff::Timestamp::from_millisecond(at.as_millis())
            .unwrap()
            .to_zoned(jiff::tz::db().get(zone).unwrap());
        (t.hour(), t.minute())
    };
    let mut hours: BTreeSet<i8> = BTreeSet::new();
    let mut mins: BTreeSet<i8> = BTreeSet::new();
    for &m in minutes {
        let (h, mm) = local(m);
        hours.insert(h);
        mins.insert(mm);
    }
    let list = |v: &BTreeSet<i8>| {
        v.iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    let new = NewSeries {
        series_id: SeriesId::parse(format!("series-{n}")).unwrap(),
        subscriber_id: SubscriberId::parse(format!("s-{n}")).unwrap(),
        rule: format!(
            "FREQ=DAILY;BYHOUR={};BYMINUTE={}",
            list(&hours),
            list(&mins)
        ),
        zone: zone.into(),
        starts_at: Timestamp::from_millis(now.as_millis().div_euclid(60_000) * 60_000),
        until: Some(now.plus(Duration::from_secs(2 * 3600))),
        fresh_for: Some(Duration::from_secs(600)),
        content: Content::Text {
            subject: "Standup".into(),
            body: body.into(),
        },
        recipients: vec![super::world::recipient(Channel::ALL[n % 3], n as u32)],
    };
    Series::new(new, Duration::from_secs(600)).expect("a drawn series is valid")
}

/// The application's write of a series, retried through faults until it answers; every
/// occurrence it may touch is one whose cancel was asked.
pub(super) async fn put(world: &World, s: Series) -> bool {
    let store = &*world.ports.reminders;
    // The series exists from its first write's first try, not before.
    let asked = world.clock.now();
    world.series.write(&s.series_id, |b| {
        b.asked_from.get_or_insert(asked);
    });
    for _ in 0..10 {
        let now = world.clock.now();
        let answer = reminders_core::series::put(
            store,
            &world.ports.ledger,
            &Access::Any,
            s.clone(),
            now,
            world.retention,
        );
        let Some(Ok(Ok(put))) = super::dice::invoke(answer, Duration::from_secs(30)).await else {
            tokio::time::sleep(Duration::from_secs(5)).await;
            continue;
        };
        let stored = match put {
            reminders_core::series::Put::Created(s)
            | reminders_core::series::Put::Same(s)
            | reminders_core::series::Put::Edited(s) => s,
        };
        let seq = world.journal.next_seq();
        let mut books = lock(&world.series.0);
        books
            .entry(stored.series_id.clone())
            .or_default()
            .versions
            .push((seq, world.clock.now(), stored));
        return true;
    }
    world.series.write(&s.series_id, |b| b.uncertain = true);
    false
}

/// Create the world's series (half the worlds: two or three).
pub(super) async fn create(world: &World) {
    let mut rng = world.seed.rng(super::seed::Stream::SeriesCreated);
    for n in 0..rng.random_range(2..=3usize) {
        let zone = ZONES[rng.random_range(0..ZONES.len())];
        let first = rng.random_range(3..12i64);
        let gap = rng.random_range(2..6i64);
        let minutes: Vec<i64> = (0..rng.random_range(3..6i64))
            .map(|i| first + i * gap)
            .collect();
        let s = draw(world, n, zone, &minutes, "first");
        if put(world, s).await {
            world.counts.tally(|t| t.series_created += 1);
        }
    }
}

const PAST_SERIES: &str = "series-3";
/// The series whose occurrences are put on their own before they are made (`detached.rs`).
pub(super) const DETACHED_SERIES: &str = "series-4";

/// A series created with its `starts_at` half an hour in the past and one of its rule's instants
/// a few minutes before its creation (still fresh), then edited (its content alone, the rule
/// kept) while that instant is still fresh: the series owes nothing from before it existed, by
/// its creation or by any edit (`occurrence_unowed`). Then its subscriber is erased, with one
/// instant still beyond the maker's reach (made by a later pass, while the erasure runs or after
/// it: `sent_after_erasure`). Its own dice, so that the other series' choices stay as they were,
/// and no other writer of the application touches it.
pub(super) async fn create_past(world: Arc<World>) {
    const N: usize = 3;
    debug_assert_eq!(PAST_SERIES, format!("series-{N}"));
    let mut rng = world.seed.rng(super::seed::Stream::PastSeries);
    let zone = ZONES[rng.random_range(0..ZONES.len())];
    let before = rng.random_range(1..5i64);
    let first = rng.random_range(4..9i64);
    let second = first + rng.random_range(2..6i64);
    let minutes = [-before, first, second, second + rng.random_range(14..22i64)];
    let mut s = draw(&world, N, zone, &minutes, "first");
    let now = world.clock.now();
    s.starts_at =
        Timestamp::from_millis((now.as_millis() - 30 * 60_000).div_euclid(60_000) * 60_000);
    if !put(&world, s).await {
        return;
    }
    world.counts.tally(|t| t.series_started_past += 1);
    // Edited while the instant before its creation is still fresh (its freshness is ten minutes).
    tokio::time::sleep(Duration::from_secs(rng.random_range(60..240))).await;
    let id = SeriesId::parse(format!("series-{N}")).unwrap();
    let Some(mut current) = last_acknowledged(&world, &id) else {
        return;
    };
    ask_cancel_of_all(&world, &current);
    current.content = Content::Text {
        subject: "Standup".into(),
        body: "edited, same times".into(),
    };
    let id = current.series_id.clone();
    if put(&world, current).await {
        world.counts.tally(|t| t.past_series_edits += 1);
    }
    // Its subscriber erased while the maker and the consumers run, with occurrences still ahead.
    tokio::time::sleep(Duration::from_secs(rng.random_range(0..120))).await;
    let subscriber = SubscriberId::parse(format!("s-{N}")).unwrap();
    super::erasure::erase(&world, &id, &subscriber).await;
}

/// Every occurrence the series made or could make: a write of it may cancel any of them.
pub(super) fn ask_cancel_of_all(world: &World, s: &Series) {
    let mut asked = lock(&world.cancel_requests);
    for t in s.instants_between(None, s.until, 500) {
        asked.insert(occurrence_id(&s.series_id, t));
    }
}

pub(super) async fn cancel(world: &World, id: &SeriesId) {
    let store = &*world.ports.reminders;
    for _ in 0..10 {
        let call = reminders_core::series::cancel(
            store,
            &world.ports.ledger,
            &Access::Any,
            id,
            world.clock.now(),
            world.retention,
        );
        if let Some(Ok(Ok(_))) = super::dice::invoke(call, Duration::from_secs(30)).await {
            let seq = world.journal.next_seq();
            world.series.write(id, |b| b.cancelled = Some(seq));
            world.counts.tally(|t| t.series_cancelled += 1);
            return;
        }
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
    world.series.write(id, |b| b.uncertain = true);
}

/// The schedule's maker, before each scan (series worlds only).
pub(super) async fn make(world: &World) {
    let now = world.clock.now();
    let call = reminders_core::series::make_due(
        &*world.ports.reminders,
        &world.ports.ledger,
        now,
        world.retention,
    );
    let _ = super::dice::invoke(call, Duration::from_secs(30)).await;
}
