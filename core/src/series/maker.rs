//! The maker: the scheduler's pass that makes each series' occurrences due within
//! [`MAKE_AHEAD`], one series at a time, fenced against an edit or another maker by the
//! series' own write; and a subscriber's new `time_zone` followed by their series.

use crate::clock::Timestamp;
use crate::domain::series::{Series, SeriesStatus, MAKE_AHEAD};
use crate::domain::Retention;
use crate::ports::series::{ExpectedSeries, SeriesStore, Written};
use crate::ports::{Inserted, Ledger, PortError, ReminderStore};

use super::reconcile::{affected, reconcile, settle, write_error_as_port};

/// At most this many occurrences of one series made in one pass (a long outage's backlog
/// is made over several runs).
pub const MAX_MADE_PER_PASS: usize = 500;
/// Series the maker takes per run.
pub const MAX_SERIES_PER_RUN: u32 = 1_000;
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
            .map_err(write_error_as_port)?;
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
            // Made through its own id: that item is the occurrence, even once its TTL took it.
            if s.is_detached(at) {
                report.existed += 1;
                continue;
            }
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
            Written::Conflict(None) => {
                // Deleted since it was read (an erasure cancels a series, then deletes it):
                // what this pass made is of no series now, and is cancelled as the series was,
                // so that nothing is sent after the erasure answered.
                // Only items still there: one an erasure deleted is never put back.
                report.raced += 1;
                for &at in &instants {
                    let id = crate::domain::series::occurrence_id(&s.series_id, at);
                    if store.get(&id).await?.is_some() {
                        crate::reminder_writes::cancel(store, ledger, &id, now, retention)
                            .await
                            .map_err(write_error_as_port)?;
                    }
                }
                return Ok(());
            }
            Written::Conflict(Some(current)) => {
                // An edit or a cancel (or another maker) came first: what this pass made may be
                // of the old version, or no longer wanted.
                report.raced += 1;
                let mut current = *current;
                current.localise(zone_now.as_deref());
                reconcile(store, ledger, &current, &instants, now, retention)
                    .await
                    .map_err(write_error_as_port)?;
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
pub(super) async fn subscriber_zone<S: ReminderStore>(
    store: &S,
    s: &Series,
) -> Result<Option<String>, PortError> {
    if !s.follows_subscriber() {
        return Ok(None);
    }
    let prefs = store.preferences(&s.subscriber_id).await?;
    Ok(prefs.and_then(|p| p.time_zone).map(|z| z.name().to_owned()))
}
