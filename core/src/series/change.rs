//! A series' `PUT` (create, the same body again, or an edit) and its cancel: each writes the
//! series first, fenced on the version it read, then brings the occurrences in line
//! ([`reconcile`]); a call that stops midway is finished by the maker.

use crate::clock::Timestamp;
use crate::domain::series::{Series, SeriesStatus};
use crate::domain::{Access, Retention};
use crate::ports::series::{ExpectedSeries, SeriesStore, Written};
use crate::ports::{Ledger, ReminderStore};
use crate::reminder_writes::{CancelReport, WriteError};

use super::maker::{make_one, subscriber_zone, MakeReport};
use super::reconcile::{affected, reconcile, settle};

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
) -> Result<Result<Put, Refused>, WriteError>
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
                wanted.owed_after = Some(now);
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
        next.detached = current.detached.clone();
        next.owed_after = current.owed_after;
        next.unknown = current.unknown.clone();
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
) -> Result<Result<(Series, Vec<(Timestamp, CancelReport)>), Refused>, WriteError>
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
