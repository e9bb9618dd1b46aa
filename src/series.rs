//! Series (DESIGN §13): making occurrences ahead, editing and cancelling a series, skipping
//! one occurrence.
//!
//! Every occurrence is made by a conditional create keyed by its id ([`occurrence_id`]), so a
//! crash, a retry or two makers at once make it once. The maker's and an edit's writes of the
//! series fence each other ([`ExpectedSeries::At`]: the version and how much was made); the one
//! that loses reconciles what it made with the series as stored. An edit or a cancel also
//! writes, itself, every occurrence a maker that read the old series could still make (those
//! due within [`MAKE_AHEAD`]): the new version's, or a cancelled placeholder where the new rule
//! makes none, so a late maker's create finds it there and writes nothing.
//!
//! A series in the zone `"subscriber"` makes each occurrence in the subscriber's own
//! `time_zone` as read (strongly) when the maker makes it: a traveller's 08:00 follows them.
//! Occurrences already made keep the zone they were made in.
//!
//! A missed occurrence (a stopped scheduler, an outage) is still made, due in the past: the
//! scheduler's next scan finds it stale and expires it with its reason; the next occurrence
//! goes at its own time, never bunched.

use std::collections::BTreeSet;

use crate::clock::Timestamp;
use crate::domain::series::{occurrence_id, Series, SeriesStatus, MAKE_AHEAD};
use crate::domain::{Access, ReminderStatus, Retention};
use crate::outbox::{self, CancelReport, Edit, Edited, OutboxError};
use crate::ports::series::{ExpectedSeries, SeriesStore, Written};
use crate::ports::{Inserted, Ledger, PortError, ReminderStore};

/// At most this many occurrences of one series made in one pass (a long outage's backlog
/// is made over several runs).
pub const MAX_MADE_PER_PASS: usize = 500;
/// Series the maker takes per run.
pub const MAX_SERIES_PER_RUN: u32 = 1_000;
/// At most this many instants an edit or a cancel brings in line (a day of a rule every
/// minute, fresh for a day).
pub const MAX_AFFECTED: usize = 1_500;

/// What one run of the maker did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct MakeReport {
    pub series: u32,
    /// Occurrences created.
    pub made: u32,
    /// Occurrences already there (a retry, another maker, an edit's own).
    pub existed: u32,
    /// Series written meanwhile by an edit or another maker, reconciled and made again.
    pub raced: u32,
    pub failed: u32,
}

/// Make the occurrences due within [`MAKE_AHEAD`] of `now` of every series due for it.
pub async fn make_due<S, L>(
    store: &S,
    ledger: &L,
    now: Timestamp,
    retention: Retention,
) -> MakeReport
where
    S: SeriesStore + ReminderStore,
    L: Ledger,
{
    let mut report = MakeReport::default();
    let due = match store.series_due(now, MAX_SERIES_PER_RUN).await {
        Ok(due) => due,
        Err(e) => {
            tracing::warn!(error = %e, "series: could not read the series due; tried again next run");
            report.failed += 1;
            return report;
        }
    };
    for s in due {
        report.series += 1;
        let id = s.series_id.clone();
        if let Err(e) = make_one(store, ledger, s, now, retention, &mut report).await {
            tracing::warn!(series_id = %id, error = %e, "series: making occurrences failed; tried again next run");
            report.failed += 1;
        }
    }
    report
}

/// Make `s`'s occurrences up to `now` + [`MAKE_AHEAD`], then record it on the series.
pub async fn make_one<S, L>(
    store: &S,
    ledger: &L,
    mut s: Series,
    now: Timestamp,
    retention: Retention,
    report: &mut MakeReport,
) -> Result<(), PortError>
where
    S: SeriesStore + ReminderStore,
    L: Ledger,
{
    let horizon = now.plus(MAKE_AHEAD);
    // The index that found it may lag the table (a GSI is eventually consistent): the series
    // as stored decides. An edit that lands after this read makes, itself, every occurrence
    // this pass could (due by its own now + MAKE_AHEAD, never before this one's), so what a
    // stale pass creates is refused as already there.
    match store.get_series(&s.series_id).await? {
        Some(stored) => s = stored,
        None => return Ok(()),
    }
    // The subscriber's zone, read once for this pass: every instant it makes (and reconciles
    // after a race) is of that zone.
    let zone_now = subscriber_zone(store, &s).await?;
    if s.pending {
        // An edit or a cancel that stopped before its occurrences were in line: finished here.
        let next = (s.status == SeriesStatus::Active).then_some(&s);
        let instants = affected(&s, next, now);
        reconcile(store, ledger, &s, &instants, now, retention)
            .await
            .map_err(outbox_port)?;
        settle(store, &s).await?;
        match store.get_series(&s.series_id).await? {
            Some(stored) => s = stored,
            None => return Ok(()),
        }
    }
    for _ in 0..5 {
        if s.status != SeriesStatus::Active {
            return Ok(());
        }
        s.localise(zone_now.as_deref());
        let instants = s.instants_between(s.made_through, Some(horizon), MAX_MADE_PER_PASS);
        for &at in &instants {
            match store.insert(&s.occurrence(at, retention)).await? {
                Inserted::Created => report.made += 1,
                Inserted::AlreadyExists => report.existed += 1,
            }
        }
        let mut next = s.clone();
        for &at in &instants {
            next.remember(at);
        }
        next.made_through = if instants.len() == MAX_MADE_PER_PASS {
            instants.last().copied()
        } else {
            Some(horizon.max(s.made_through.unwrap_or(horizon)))
        };
        if next.ended_by(now) {
            next.status = SeriesStatus::Ended;
        }
        match store.put_series(&next, ExpectedSeries::of(&s)).await? {
            Written::Written => return Ok(()),
            Written::Conflict(None) => return Ok(()),
            Written::Conflict(Some(current)) => {
                // An edit or a cancel (or another maker) came first: what this pass made may be
                // of the old version, or no longer wanted.
                report.raced += 1;
                let mut current = *current;
                current.localise(zone_now.as_deref());
                reconcile(store, ledger, &current, &instants, now, retention)
                    .await
                    .map_err(outbox_port)?;
                s = current;
            }
        }
    }
    Ok(())
}

/// After a subscriber's preferences were written with `zone`: every active series of theirs
/// in the zone `"subscriber"` takes it now, so that the maker looks at each when its next
/// occurrence in the new zone comes due (its index entry was of the old zone's). Answers how
/// many were re-aimed. The maker reads the zone itself each time it makes, so a re-aim lost to
/// a crash only delays the switch to the next occurrence of the old zone.
pub async fn follow_zone<S: SeriesStore>(
    store: &S,
    subscriber: &crate::domain::SubscriberId,
    zone: Option<&str>,
) -> Result<u32, PortError> {
    let Some(zone) = zone else {
        return Ok(0);
    };
    let mut moved = 0;
    let mut after = None;
    loop {
        let page = store.series_of(subscriber, after.as_ref(), 100).await?;
        for mut s in page.items {
            for _ in 0..5 {
                let stale = s.status == SeriesStatus::Active
                    && s.follows_subscriber()
                    && s.local_zone.as_deref() != Some(zone);
                if !stale {
                    break;
                }
                let mut next = s.clone();
                next.localise(Some(zone));
                match store.put_series(&next, ExpectedSeries::of(&s)).await? {
                    Written::Written => {
                        moved += 1;
                        break;
                    }
                    Written::Conflict(None) => break,
                    Written::Conflict(Some(current)) => s = *current,
                }
            }
        }
        match page.next {
            Some(next) => after = Some(next),
            None => return Ok(moved),
        }
    }
}

/// The subscriber's `time_zone` for a series that follows it (`None` for any other series,
/// and when the subscriber set none).
async fn subscriber_zone<S: ReminderStore>(
    store: &S,
    s: &Series,
) -> Result<Option<String>, PortError> {
    if !s.follows_subscriber() {
        return Ok(None);
    }
    let prefs = store.preferences(&s.subscriber_id).await?;
    Ok(prefs.and_then(|p| p.time_zone).map(|z| z.name().to_owned()))
}

/// Bring the occurrences at `instants` in line with `s` as it now stands: an occurrence not
/// yet enqueued (and not edited on its own) takes the series' fields, or is cancelled when the
/// series is cancelled or its rule no longer makes that instant; one that is not there yet is
/// made (or, where none is wanted, a cancelled placeholder is, so that no late maker makes it).
/// Answers the cancels it made, by occurrence.
pub async fn reconcile<S, L>(
    store: &S,
    ledger: &L,
    s: &Series,
    instants: &[Timestamp],
    now: Timestamp,
    retention: Retention,
) -> Result<Vec<(Timestamp, CancelReport)>, OutboxError>
where
    S: ReminderStore,
    L: Ledger,
{
    let mut cancels = Vec::new();
    let wanted_ever = s.status == SeriesStatus::Active;
    for &at in instants.iter().collect::<BTreeSet<_>>() {
        let id = occurrence_id(&s.series_id, at);
        let wanted = wanted_ever && s.produces(at);
        let Some(current) = store.get(&id).await? else {
            // Past its freshness: never made again (its item may be gone with its TTL).
            if crate::domain::reminder::is_stale(at.plus(s.fresh_for), now) {
                continue;
            }
            let mut occurrence = s.occurrence(at, retention);
            if !wanted {
                occurrence.status = ReminderStatus::Cancelled;
            }
            // Whoever came first (a maker of the same version) made the same item.
            let _ = store.insert(&occurrence).await?;
            continue;
        };
        // Settled (cancelled, expired, invalid): nothing left to stop. One still editable is
        // brought in line even when stale: an edit through its own id could make it fresh.
        if !crate::ports::reminders::editable(current.status) {
            continue;
        }
        // Edited on its own: a series edit leaves it as it is (a cancel still cancels it).
        if current.detached && s.status != SeriesStatus::Cancelled {
            continue;
        }
        // No longer made by the rule (or the series cancelled): cancelled even if enqueued
        // already, so that a reschedule never also fires at the old time (a send in flight
        // is past stopping, and the cancel's answer says so).
        if !wanted || s.status == SeriesStatus::Cancelled {
            if let Some(report) = outbox::cancel(store, ledger, &id, now, retention).await? {
                cancels.push((at, report));
            }
            continue;
        }
        if current.status != ReminderStatus::Scheduled {
            // Enqueued (or settled) before the edit: the edit applies to occurrences not yet
            // enqueued.
            continue;
        }
        let target = s.occurrence(at, retention);
        let same = current.content == target.content
            && current.recipients == target.recipients
            && current.fresh_until == target.fresh_until;
        if same {
            continue;
        }
        let changes = Edit {
            due_at: None,
            fresh_until: Some(target.fresh_until),
            content: Some(target.content),
            recipients: Some(target.recipients.into_values().collect()),
            detach: false,
        };
        match outbox::edit_as(&Access::Any, store, ledger, &id, changes, now, retention).await? {
            Edited::Edited(_)
            | Edited::Missing
            | Edited::Final(_)
            | Edited::Readded(_)
            | Edited::NothingLeft => {}
        }
    }
    Ok(cancels)
}

/// The instants an edit (`next`, the edited series) or a cancel (`None`) of `s` (as read)
/// must bring in line: those it made and remembers, and every
/// one a maker that read it could still make (up to `now` + [`MAKE_AHEAD`]); for an edit, also
/// those of the new rule in that window.
pub fn affected(s: &Series, next: Option<&Series>, now: Timestamp) -> Vec<Timestamp> {
    let horizon = now.plus(MAKE_AHEAD).max(s.made_through.unwrap_or(now));
    // Every instant of the rule still fresh (the ids are the instants: no memory needed, so a
    // long stall or a backlog of enqueued ones is covered), and those it remembers making.
    let fresh_from = Timestamp::from_millis(now.as_millis() - s.fresh_for.as_millis() as i64);
    // A cancel takes every one it remembers (one edited on its own may have been moved later).
    let remembered = |t: &Timestamp| next.is_none() || *t > fresh_from;
    let mut all: BTreeSet<Timestamp> = s.made.iter().copied().filter(remembered).collect();
    all.extend(s.instants_between(Some(fresh_from), Some(horizon), MAX_AFFECTED));
    if let Some(next) = next {
        all.extend(next.instants_between(Some(now), Some(horizon), MAX_AFFECTED));
    }
    all.into_iter().collect()
}

/// The edit or cancel written as `s` is in line: clear its mark (unless another writer came
/// first, whose own write says what is left).
async fn settle<S: SeriesStore>(store: &S, s: &Series) -> Result<(), PortError> {
    if !s.pending {
        return Ok(());
    }
    let mut done = s.clone();
    done.pending = false;
    store.put_series(&done, ExpectedSeries::of(s)).await?;
    Ok(())
}

fn outbox_port(e: OutboxError) -> PortError {
    match e {
        OutboxError::Port(p) => p,
        other => PortError::Invariant {
            op: "series.reconcile",
            message: other.to_string(),
        },
    }
}

/// What a `PUT` of a series did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Put {
    /// Created, its first occurrences made.
    Created(Series),
    /// The same body again: nothing written.
    Same(Series),
    /// Edited: the occurrences not yet enqueued follow it.
    Edited(Series),
}

/// Why a `PUT` or a cancel of a series was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// None, or another owner's (as if none).
    NotFound,
    /// Cancelled or ended: it can no longer change.
    Final(SeriesStatus),
    /// The delivery keys of its occurrences derive from the subscriber.
    SubscriberChanged,
    /// It kept changing under the write.
    Contended,
    /// In the zone `"subscriber"`, for a subscriber whose preferences name no `time_zone`.
    NoSubscriberZone,
}

/// Create `wanted` (owned by `access`'s owner), answer it again when the body is the same,
/// or edit it: every occurrence not yet enqueued (and not edited on its own) follows the
/// edit, one the new rule no longer makes is cancelled, one it makes in the make-ahead is
/// made now.
pub async fn put<S, L>(
    store: &S,
    ledger: &L,
    access: &Access,
    mut wanted: Series,
    now: Timestamp,
    retention: Retention,
) -> Result<Result<Put, Refused>, OutboxError>
where
    S: SeriesStore + ReminderStore,
    L: Ledger,
{
    wanted.owner = access.owner().cloned();
    let zone_now = subscriber_zone(store, &wanted).await?;
    wanted.localise(zone_now.as_deref());
    for _ in 0..5 {
        let Some(current) = store.get_series(&wanted.series_id).await? else {
            if wanted.effective_zone().is_none() {
                return Ok(Err(Refused::NoSubscriberZone));
            }
            // Nothing before the series existed: a start in the past makes no occurrence due
            // before now (each would only expire, with an event for a time nobody asked).
            if wanted.starts_at < now {
                wanted.made_through = Some(now);
            }
            if store.put_series(&wanted, ExpectedSeries::Absent).await? != Written::Written {
                continue;
            }
            // The first occurrences now, not at the maker's next run: one due within a
            // minute keeps its precision.
            let mut report = MakeReport::default();
            make_one(store, ledger, wanted.clone(), now, retention, &mut report).await?;
            let stored = store.get_series(&wanted.series_id).await?.unwrap_or(wanted);
            return Ok(Ok(Put::Created(stored)));
        };
        if !access.reaches(current.owner.as_ref(), &current.subscriber_id) {
            return Ok(Err(Refused::NotFound));
        }
        if current.status != SeriesStatus::Active {
            return Ok(Err(Refused::Final(current.status)));
        }
        if current.same_body(&wanted) {
            // Again after an answer that never came (or a failure after the write landed):
            // what that edit left to bring in line is done now.
            if current.version > 1 {
                let instants = affected(&current, Some(&current), now);
                reconcile(store, ledger, &current, &instants, now, retention).await?;
            }
            return Ok(Ok(Put::Same(current)));
        }
        if current.subscriber_id != wanted.subscriber_id {
            return Ok(Err(Refused::SubscriberChanged));
        }
        let mut next = wanted.clone();
        if next.effective_zone().is_none() {
            // The subscriber's zone is gone (erased preferences): the last one read stays.
            next.local_zone = current.local_zone.clone();
            if next.effective_zone().is_none() {
                return Ok(Err(Refused::NoSubscriberZone));
            }
        }
        next.owner = current.owner.clone();
        next.version = current.version + 1;
        next.made_through = current.made_through;
        next.made = current.made.clone();
        // Every instant the edit brings in line is remembered with it, those it cancels too:
        // a retry after a failure midway (answered `Same`) finds them all again.
        let instants = affected(&current, Some(&next), now);
        for &at in &instants {
            next.remember(at);
        }
        if next.ended_by(now) {
            next.status = SeriesStatus::Ended;
        }
        next.pending = true;
        if store
            .put_series(&next, ExpectedSeries::of(&current))
            .await?
            != Written::Written
        {
            continue;
        }
        reconcile(store, ledger, &next, &instants, now, retention).await?;
        settle(store, &next).await?;
        next.pending = false;
        return Ok(Ok(Put::Edited(next)));
    }
    Ok(Err(Refused::Contended))
}

/// Cancel the series `id` and every occurrence of it not yet sent (those it made, and any a
/// maker that read it could still make): the per-channel answers of each cancel, by
/// occurrence. A cancelled series answers again with nothing more to cancel.
pub async fn cancel<S, L>(
    store: &S,
    ledger: &L,
    access: &Access,
    id: &crate::domain::SeriesId,
    now: Timestamp,
    retention: Retention,
) -> Result<Result<(Series, Vec<(Timestamp, CancelReport)>), Refused>, OutboxError>
where
    S: SeriesStore + ReminderStore,
    L: Ledger,
{
    for _ in 0..5 {
        let Some(current) = store.get_series(id).await? else {
            return Ok(Err(Refused::NotFound));
        };
        if !access.reaches(current.owner.as_ref(), &current.subscriber_id) {
            return Ok(Err(Refused::NotFound));
        }
        let mut next = current.clone();
        next.status = SeriesStatus::Cancelled;
        let instants = affected(&current, None, now);
        if current.status != SeriesStatus::Cancelled {
            next.version = current.version + 1;
            // Remembered with it, so that the maker finishes the cancel if this call stops.
            for &at in &instants {
                next.remember(at);
            }
            next.pending = true;
            if store
                .put_series(&next, ExpectedSeries::of(&current))
                .await?
                != Written::Written
            {
                continue;
            }
        }
        let cancels = reconcile(store, ledger, &next, &instants, now, retention).await?;
        settle(store, &next).await?;
        next.pending = false;
        return Ok(Ok((next, cancels)));
    }
    Ok(Err(Refused::Contended))
}
