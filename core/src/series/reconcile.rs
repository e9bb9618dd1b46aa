//! What an edit, a cancel and a maker that lost a race all do: bring the occurrences at the
//! [`affected`] instants in line with the series as it now stands ([`reconcile`]), then clear
//! the series' mark that an edit or a cancel is still under way ([`settle`]).

use std::collections::BTreeSet;

use crate::clock::Timestamp;
use crate::domain::series::{occurrence_id, Series, SeriesStatus, MAKE_AHEAD};
use crate::domain::{Access, ReminderStatus, Retention};
use crate::ports::series::{ExpectedSeries, SeriesStore};
use crate::ports::{Ledger, PortError, ReminderStore};
use crate::reminder_writes::{self, CancelReport, Edit, Edited, WriteError};

/// At most this many instants an edit or a cancel brings in line (a day of a rule every
/// minute, fresh for a day).
pub const MAX_AFFECTED: usize = 1_500;

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
) -> Result<Vec<(Timestamp, CancelReport)>, WriteError>
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
            if s.is_detached(at) {
                // Made through its own id (its item may be gone with its TTL, sent): never
                // made again. A cancel leaves a placeholder where that `PUT` may yet insert
                // it, so that it finds it cancelled, stale or not.
                if s.status == SeriesStatus::Cancelled {
                    let mut placeholder = s.occurrence(at, retention);
                    placeholder.status = ReminderStatus::Cancelled;
                    let _ = store.insert(&placeholder).await?;
                }
                continue;
            }
            // Due before the series existed (a `starts_at` in the past): never owed.
            if s.owed_after.is_some_and(|floor| at <= floor) {
                continue;
            }
            // Past its freshness by every clock within the margin: never made again (its
            // item may be gone with its TTL). One inside the margin is made, and its consumer
            // or scheduler expires it with its reason once surely stale (the one rule).
            let fresh_until = at.plus(s.fresh_for);
            if crate::domain::reminder::freshness(fresh_until, now)
                == crate::domain::reminder::Freshness::Stale
            {
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
            if let Some(report) =
                reminder_writes::cancel(store, ledger, &id, now, retention).await?
            {
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
            may_make_stale: true,
        };
        match reminder_writes::edit_as(&Access::Any, store, ledger, &id, changes, now, retention)
            .await?
        {
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
    // A cancel reaches every occurrence made through its own id, wherever it was moved.
    if next.is_none() {
        all.extend(s.detached.iter().copied());
    }
    all.extend(s.instants_between(Some(fresh_from), Some(horizon), MAX_AFFECTED));
    if let Some(next) = next {
        all.extend(next.instants_between(Some(now), Some(horizon), MAX_AFFECTED));
    }
    all.into_iter().collect()
}

/// The edit or cancel written as `s` is in line: clear its mark (unless another writer came
/// first, whose own write says what is left).
pub(super) async fn settle<S: SeriesStore>(store: &S, s: &Series) -> Result<(), PortError> {
    if !s.pending {
        return Ok(());
    }
    let mut done = s.clone();
    done.pending = false;
    store.put_series(&done, ExpectedSeries::of(s)).await?;
    Ok(())
}

pub(super) fn write_error_as_port(e: WriteError) -> PortError {
    match e {
        WriteError::Port(p) => p,
        other => PortError::Invariant {
            op: "series.reconcile",
            message: other.to_string(),
        },
    }
}
