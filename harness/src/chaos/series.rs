//! Series in the worlds (issue 35): half the worlds create two or three series at the start,
//! in zones far apart, with occurrences minutes apart inside the faults; the application
//! edits them (moving their minutes), skips an occurrence and cancels some mid-flight; the
//! schedule's maker (after each scan) makes their occurrences through a series adapter whose
//! index lags the table (a GSI is eventually consistent: the maker may read the version
//! before an edit).
//! Every occurrence is then judged as any reminder is, and by two verdicts of its own:
//! `occurrence_missing` and `occurrence_doubled`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use super::inject::Chaotic;
use super::world::{World, CHAOS, EPOCH};
use super::{Plant, SeedReport};
use reminders::clock::{Clock, Timestamp};
use reminders::domain::series::{occurrence_id, NewSeries, Series, SeriesStatus};
use reminders::domain::{
    Access, Channel, Content, DeliveryKey, ReminderId, ReminderStatus, SeriesId, SubscriberId,
};
use reminders::ledger::Status;
use reminders::ports::faults::lock;
use reminders::ports::series::{
    ExpectedSeries, SeriesPage, SeriesStore, Written, OP_GET_SERIES, OP_PUT_SERIES, OP_SERIES_DUE,
    OP_SERIES_OF,
};
use reminders::ports::{PortError, ReminderStore};

const ZONES: [&str; 5] = [
    "Asia/Kathmandu",
    "Pacific/Kiritimati",
    "America/St_Johns",
    "Europe/Paris",
    "Australia/Lord_Howe",
];

/// What the application was told of each series: every version acknowledged (with the
/// journal's order and the time), the occurrences it skipped, and its cancel.
#[derive(Debug, Clone, Default)]
pub struct Book {
    pub versions: Vec<(u64, Timestamp, Series)>,
    pub skips: BTreeSet<Timestamp>,
    pub cancelled: Option<u64>,
    /// A write whose answer never came (it may have landed): judged no further.
    pub uncertain: bool,
}

#[derive(Debug, Default)]
pub struct Books(pub Mutex<BTreeMap<SeriesId, Book>>);

/// The series adapter of a world: faults around each call; the maker's index lagging the
/// table (its read may answer the version before the latest write); and the plants.
impl<T: SeriesStore> SeriesStore for Chaotic<T> {
    async fn get_series(&self, id: &SeriesId) -> Result<Option<Series>, PortError> {
        self.dice
            .around(OP_GET_SERIES, self.inner.get_series(id))
            .await
    }

    async fn put_series(&self, s: &Series, expected: ExpectedSeries) -> Result<Written, PortError> {
        let stored = self.inner.get_series(&s.series_id).await?;
        let mut s = s.clone();
        if self.plant == Some(Plant::ForgetMade) {
            s.made.clear();
        }
        let progress = stored
            .as_ref()
            .is_some_and(|st| st.version == s.version && st.made_through < s.made_through);
        if self.plant == Some(Plant::SkipAhead) && progress {
            // Records the maker's progress an hour further than it made.
            s.made_through = s.made_through.map(|t| t.plus(Duration::from_secs(3600)));
        }
        let call = async {
            let out = self.inner.put_series(&s, expected).await?;
            if out == Written::Written {
                if let Some(before) = stored {
                    lock(&self.lagging).insert(s.series_id.clone(), before);
                }
            }
            Ok(out)
        };
        self.dice.around(OP_PUT_SERIES, call).await
    }

    async fn series_due(&self, until: Timestamp, limit: u32) -> Result<Vec<Series>, PortError> {
        let due = self
            .dice
            .around(OP_SERIES_DUE, self.inner.series_due(until, limit))
            .await?;
        // The index lags: a third of the reads answer the version before the last write.
        Ok(due
            .into_iter()
            .map(|s| match lock(&self.lagging).get(&s.series_id) {
                Some(before) if self.dice.range(0, 3) == 0 => before.clone(),
                _ => s,
            })
            .collect())
    }

    async fn series_of(
        &self,
        subscriber: &SubscriberId,
        after: Option<&SeriesId>,
        limit: u32,
    ) -> Result<SeriesPage, PortError> {
        let call = self.inner.series_of(subscriber, after, limit);
        self.dice.around(OP_SERIES_OF, call).await
    }
}

/// A series for subscriber `n`, starting now, its occurrences at `minutes` past the start
/// (wall times in `zone`), for two hours.
fn draw(world: &World, n: usize, zone: &str, minutes: &[u64], body: &str) -> Series {
    let now = world.clock.now();
    let local = |m: u64| {
        let t =
            jiff::Timestamp::from_millisecond(now.plus(Duration::from_secs(m * 60)).as_millis())
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
async fn put(world: &World, s: Series) -> bool {
    let store = &*world.ports.reminders;
    for _ in 0..10 {
        let now = world.clock.now();
        let answer = reminders::series::put(
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
            reminders::series::Put::Created(s)
            | reminders::series::Put::Same(s)
            | reminders::series::Put::Edited(s) => s,
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
    lock(&world.series.0)
        .entry(s.series_id.clone())
        .or_default()
        .uncertain = true;
    false
}

/// Create the world's series (half the worlds: two or three).
pub(super) async fn create(world: &World, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x5e41e5);
    for n in 0..rng.random_range(2..=3usize) {
        let zone = ZONES[rng.random_range(0..ZONES.len())];
        let first = rng.random_range(3..12u64);
        let gap = rng.random_range(2..6u64);
        let minutes: Vec<u64> = (0..rng.random_range(3..6u64))
            .map(|i| first + i * gap)
            .collect();
        let s = draw(world, n, zone, &minutes, "first");
        if put(world, s).await {
            world.counts.series(|t| t.series_created += 1);
        }
    }
}

/// The application, while the faults last: now and then it edits a series (moving its
/// minutes), skips its next occurrence, or cancels it.
pub(super) async fn surface(world: Arc<World>, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x5e41_5a4f);
    while !world.dice.is_calm() {
        tokio::time::sleep(Duration::from_secs(rng.random_range(120..420))).await;
        let ids: Vec<SeriesId> = lock(&world.series.0).keys().cloned().collect();
        let Some(id) = ids.get(rng.random_range(0..ids.len().max(1))).cloned() else {
            continue;
        };
        let last = lock(&world.series.0).get(&id).and_then(|b| {
            (b.cancelled.is_none() && !b.uncertain).then(|| b.versions.last().map(|v| v.2.clone()))
        });
        let Some(Some(current)) = last else { continue };
        if current.status != SeriesStatus::Active {
            continue;
        }
        ask_cancel_of_all(&world, &current);
        match rng.random_range(0..10) {
            0..5 => {
                let n: usize = id
                    .as_str()
                    .trim_start_matches("series-")
                    .parse()
                    .unwrap_or(0);
                let first = rng.random_range(1..8u64);
                let gap = rng.random_range(2..6u64);
                let minutes: Vec<u64> = (0..rng.random_range(2..5u64))
                    .map(|i| first + i * gap)
                    .collect();
                let mut edited = draw(&world, n, &current.zone, &minutes, "edited");
                edited.starts_at = current.starts_at;
                edited.until = current.until;
                if put(&world, edited).await {
                    world.counts.series(|t| t.series_edits += 1);
                }
            }
            5..8 => skip_next(&world, &current).await,
            8 => cancel(&world, &id).await,
            _ => {}
        }
    }
}

/// Every occurrence the series made or could make: a write of it may cancel any of them.
fn ask_cancel_of_all(world: &World, s: &Series) {
    let mut asked = lock(&world.cancel_requests);
    for t in s.instants_between(None, s.until, 500) {
        asked.insert(occurrence_id(&s.series_id, t));
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
        let call = reminders::outbox::cancel(
            store,
            &world.ports.ledger,
            &id,
            world.clock.now(),
            world.retention,
        );
        match super::dice::invoke(call, Duration::from_secs(30)).await {
            Some(Ok(Some(_))) => {
                lock(&world.series.0)
                    .entry(s.series_id.clone())
                    .or_default()
                    .skips
                    .insert(at);
                world.counts.series(|t| t.series_skips += 1);
                return;
            }
            // Not made yet: nothing to skip (the API's placeholder is its own test).
            Some(Ok(None)) => return,
            _ => tokio::time::sleep(Duration::from_secs(5)).await,
        }
    }
    lock(&world.series.0)
        .entry(s.series_id.clone())
        .or_default()
        .uncertain = true;
}

async fn cancel(world: &World, id: &SeriesId) {
    let store = &*world.ports.reminders;
    for _ in 0..10 {
        let call = reminders::series::cancel(
            store,
            &world.ports.ledger,
            &Access::Any,
            id,
            world.clock.now(),
            world.retention,
        );
        if let Some(Ok(Ok(_))) = super::dice::invoke(call, Duration::from_secs(30)).await {
            let seq = world.journal.next_seq();
            lock(&world.series.0)
                .entry(id.clone())
                .or_default()
                .cancelled = Some(seq);
            world.counts.series(|t| t.series_cancelled += 1);
            return;
        }
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
    lock(&world.series.0)
        .entry(id.clone())
        .or_default()
        .uncertain = true;
}

/// The schedule's maker, before each scan (series worlds only).
pub(super) async fn make(world: &World) {
    let now = world.clock.now();
    let call = reminders::series::make_due(
        &*world.ports.reminders,
        &world.ports.ledger,
        now,
        world.retention,
    );
    let _ = super::dice::invoke(call, Duration::from_secs(30)).await;
}

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

/// `occurrence_missing` and `occurrence_doubled`, and what the series worlds generated.
pub(super) async fn judge(world: &World, report: &mut SeedReport) {
    let ledger: BTreeMap<DeliveryKey, reminders::ledger::DeliveryRecord> = world
        .ledger
        .snapshot()
        .into_iter()
        .map(|r| (r.key().clone(), r))
        .collect();
    let facts = world.journal.facts();
    let books = lock(&world.series.0).clone();
    let horizon = EPOCH.plus(CHAOS).plus(Duration::from_secs(30 * 60));
    for (id, book) in books.iter() {
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
            let rid = occurrence_id(id, at);
            let what = match world.store.get(&rid).await {
                Ok(Some(r)) => {
                    // Made and ended one way or another; each channel's own ending is the
                    // reminder verdicts' to judge (a standby channel may never be needed).
                    // Sent, expired or dead with its reason at some point (a redrive may have
                    // made it ready again since: `awaiting_redrive`, reported apart).
                    let ended = |rec: &reminders::ledger::DeliveryRecord| {
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

/// Every delivery key of every instant any acknowledged version made (a removed one may
/// have been sent), with its instant.
fn keys(book: &Book) -> Vec<(DeliveryKey, Timestamp)> {
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
fn versions_text(book: &Book) -> Vec<String> {
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

/// One ledger history entry, for a finding.
fn entry_text(n: u64, h: &reminders::ledger::HistoryEntry) -> String {
    let detail = h.detail.as_deref().unwrap_or("");
    format!(
        "{n}:{}->{}@{} {detail}",
        h.from.as_str(),
        h.to.as_str(),
        h.at.to_rfc3339()
    )
}
