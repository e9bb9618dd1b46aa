//! Erasing a subscriber: what `DELETE /v1/subscribers/{id}` and `remindctl subscriber erase` do,
//! a page of the subscriber's reminders at a time. On each page, every reminder still to be sent
//! is cancelled first, through the ledger, as a cancel is; then the suppressions recorded for the
//! page's addresses are lifted; then the page's reminder items are deleted (recipients and
//! content with them). Last, the subscriber's preferences. What stays is the ledger: each
//! delivery's status and masked history, which holds no address and no content, until its TTL.
//!
//! A reminder is left (counted in `reminders_left`, erased by a later call) while a send of it
//! is in flight (its outcome still to be written: deleting it now would turn that delivery's
//! next look into an `unknown_reminder` death), while it keeps changing under the cancel, or
//! when its item is not a reminder of this subscriber. One call handles at most
//! [`MAX_PER_CALL`] reminders; `complete` says whether it reached the end, and another call
//! goes on (deleted items leave the index, so it starts where this one stopped). Idempotent: a
//! call once nothing is left answers zeros.
//!
//! An occurrence made by a maker that read a series before the erasure cancelled it is
//! cancelled by that maker when its write of the series finds the series cancelled or deleted
//! ([`crate::series::make_one`]): never sent, though its item (recipients and content) stays
//! until a later erasure or its TTL.
//!
//! Not covered: a reminder created for the subscriber while the erasure runs survives it (erase
//! again once the application stopped writing); a suppression recorded after the lift (a late
//! bounce) or for an address no stored reminder still names stays; lifting a suppression lets
//! another subscriber's reminder to the same address go out again.

use serde::Serialize;

use crate::clock::Timestamp;
use crate::delivery::Cancelled;
use crate::domain::{AddressHash, ReminderId, Retention, SubscriberId, SuppressionKey};
use crate::ports::{Deleted, Eraser, Ledger, Listed, PortError, ReminderStore, SubscriberIndex};
use crate::reminder_writes::{self, WriteError};

/// The most reminders one call erases (the API function's timeout bounds a call).
pub const MAX_PER_CALL: usize = 300;

/// What one erasure removed (counts only: the answer names no address and no reminder).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Erased {
    pub subscriber_id: String,
    /// Reminders still to be sent, now cancelled.
    pub reminders_cancelled: usize,
    /// Reminder items deleted, with their recipients and content.
    pub reminders_deleted: usize,
    /// Whether the subscriber had preferences, now deleted.
    pub preferences_deleted: bool,
    /// Suppressions of the reminders' addresses, lifted. `None` when the stack's suppression
    /// key was not given (the hashes cannot be computed).
    pub suppressions_lifted: Option<usize>,
    /// Recurring series of the subscriber, cancelled (their occurrences not yet sent with
    /// them) and deleted.
    pub series_deleted: usize,
    /// Reminders left for a later call: a send in flight, a reminder still changing.
    pub reminders_left: usize,
    /// Whether this call reached the end of the subscriber's reminders.
    pub complete: bool,
}

/// One reminder of a page, after its cancel: delete it (forced for an unreadable item), or
/// leave it.
enum Next {
    Delete { force: bool },
    Leave,
}

/// Erase `subscriber`: see the module.
pub async fn erase<S, L>(
    store: &S,
    ledger: &L,
    key: Option<&SuppressionKey>,
    subscriber: &SubscriberId,
    now: Timestamp,
    retention: Retention,
) -> Result<Erased, WriteError>
where
    S: ReminderStore + SubscriberIndex + Eraser + crate::ports::SeriesStore,
    L: Ledger,
{
    let mut out = Erased {
        subscriber_id: subscriber.as_str().to_owned(),
        suppressions_lifted: key.map(|_| 0),
        ..Erased::default()
    };
    // Series first, so that no occurrence is made while their reminders are erased: each
    // cancelled (with its occurrences not yet sent), then deleted; the occurrences are the
    // subscriber's reminders, erased below. Paged by cursor (the last one's start and id),
    // not by a series' id: each page is deleted before the next is read.
    let mut after_series = None;
    loop {
        let page = store
            .series_after(subscriber, after_series.as_ref(), 100)
            .await?;
        for s in &page.items {
            let access = crate::domain::Access::Any;
            let id = &s.series_id;
            if let Err(refused) =
                crate::series::cancel(store, ledger, &access, id, now, retention).await?
            {
                tracing::warn!(series_id = %id, ?refused, "erasure: series not cancelled; deleted as it is");
            }
            if store.delete_series(id).await? == Deleted::Deleted {
                out.series_deleted += 1;
            }
        }
        // Page by page to the end: the index may still list what was just deleted.
        match page.next {
            Some(next) => after_series = Some(next),
            None => break,
        }
    }
    let mut after = None;
    let mut seen = 0;
    loop {
        let page = store.by_subscriber(subscriber, after.as_ref(), 100).await?;
        let mut plan: Vec<(ReminderId, Next)> = Vec::new();
        let mut hashes: std::collections::BTreeSet<AddressHash> = Default::default();
        for item in &page.items {
            let raw = match item {
                Listed::Summary(s) => s.reminder_id.as_str(),
                Listed::Unreadable { reminder_id, .. } => reminder_id.as_str(),
            };
            let Ok(id) = ReminderId::parse(raw) else {
                out.reminders_left += 1;
                continue;
            };
            let next = look(
                store, ledger, key, subscriber, &id, now, retention, &mut out,
            )
            .await?;
            if let (Some(hs), Next::Delete { .. }) = (&next.1, &next.0) {
                hashes.extend(hs.iter().cloned());
            }
            plan.push((id, next.0));
        }
        for h in &hashes {
            if store.lift_suppression(h).await? == Deleted::Deleted {
                out.suppressions_lifted = out.suppressions_lifted.map(|n| n + 1);
            }
        }
        for (id, next) in plan {
            let Next::Delete { force } = next else {
                out.reminders_left += 1;
                continue;
            };
            match store.delete_reminder(&id, force).await? {
                Deleted::Deleted => out.reminders_deleted += 1,
                Deleted::Missing => {}
                Deleted::Pending => out.reminders_left += 1,
            }
        }
        seen += page.items.len();
        match page.next {
            Some(next) if seen < MAX_PER_CALL => after = Some(next),
            Some(_) => break,
            None => {
                out.complete = true;
                break;
            }
        }
    }
    if out.complete {
        out.preferences_deleted = store.delete_preferences(subscriber).await? == Deleted::Deleted;
    }
    tracing::warn!(
        subscriber_id = %subscriber,
        cancelled = out.reminders_cancelled,
        deleted = out.reminders_deleted,
        preferences = out.preferences_deleted,
        suppressions = ?out.suppressions_lifted,
        left = out.reminders_left,
        complete = out.complete,
        "subscriber erased"
    );
    Ok(out)
}

/// One reminder: cancel it if it is still to be sent, and what to do with its item; the keyed
/// hashes of its addresses when it is to be deleted.
#[allow(clippy::too_many_arguments)]
async fn look<S, L>(
    store: &S,
    ledger: &L,
    key: Option<&SuppressionKey>,
    subscriber: &SubscriberId,
    id: &ReminderId,
    now: Timestamp,
    retention: Retention,
    out: &mut Erased,
) -> Result<(Next, Option<Vec<AddressHash>>), WriteError>
where
    S: ReminderStore + SubscriberIndex + Eraser,
    L: Ledger,
{
    let r = match store.get(id).await {
        Ok(Some(r)) => r,
        Ok(None) => return Ok((Next::Delete { force: false }, None)),
        // An item this version cannot read can never be sent: deleted as it is.
        Err(PortError::Corrupt { .. }) => return Ok((Next::Delete { force: true }, None)),
        Err(e) => return Err(e.into()),
    };
    // The index may lag a delete and a new reminder of that id for someone else.
    if &r.subscriber_id != subscriber {
        return Ok((Next::Leave, None));
    }
    if crate::ports::reminders::editable(r.status) {
        let report = match reminder_writes::cancel(store, ledger, id, now, retention).await {
            Ok(report) => report,
            Err(WriteError::Contended) => return Ok((Next::Leave, None)),
            Err(e) => return Err(e),
        };
        let in_flight = report.as_ref().is_some_and(|rep| {
            rep.deliveries
                .iter()
                .any(|(_, c)| *c == Cancelled::AlreadyInFlight)
        });
        out.reminders_cancelled += 1;
        if in_flight {
            return Ok((Next::Leave, None));
        }
    }
    // A send still in flight (claimed before the cancel, on this call or an earlier one):
    // its outcome is yet to be written, and its next look needs the reminder.
    for channel in r.listed_channels() {
        let k = crate::domain::DeliveryKey::derive(id, subscriber, channel);
        if ledger
            .get(&k)
            .await?
            .is_some_and(|rec| rec.status() == crate::ledger::Status::Sending)
        {
            return Ok((Next::Leave, None));
        }
    }
    let hashes = key.map(|k| r.recipients.values().map(|rc| rc.fingerprint(k)).collect());
    Ok((Next::Delete { force: false }, hashes))
}

#[cfg(test)]
#[path = "erasure_tests.rs"]
mod tests;
