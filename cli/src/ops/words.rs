//! Operator words for what the ledger records in its own terms: a delivery's state, a
//! history entry, a redrive's audit, a reminder's status next to its deliveries'. Pure, so
//! the wording is tested here and the commands only print it.

use reminders::delivery::state::{DeliveryRecord, HistoryEntry, RedriveAudit, Status};
use reminders::domain::ReminderStatus;

/// What a delivery with no ledger item means, by the reminder's status.
pub fn never_claimed(status: ReminderStatus) -> &'static str {
    use ReminderStatus as S;
    match status {
        S::Scheduled => "not enqueued yet",
        S::Enqueued => "enqueued, not yet claimed by a worker",
        S::Expired => "expired before it was sent",
        S::Cancelled => "cancelled before it was sent",
        S::Invalid => "never sent: the reminder is invalid",
    }
}

/// One delivery's state in a few words: its ledger status (with the reason when dead), or,
/// with no ledger item, how far the reminder got.
fn delivery_state(status: ReminderStatus, rec: Option<&DeliveryRecord>) -> String {
    match rec {
        None if status == ReminderStatus::Scheduled => "waiting for the scheduler".to_owned(),
        None if status == ReminderStatus::Enqueued => "waiting for a worker".to_owned(),
        None => "unclaimed".to_owned(),
        Some(rec) => match rec.dead_reason().filter(|_| rec.status() == Status::Dead) {
            Some(reason) => format!("dead ({reason})"),
            None => rec.status().as_str().to_owned(),
        },
    }
}

/// What the deliveries say, beside the reminder's own status: `enqueued` only means the
/// scheduler handed it on, so `1 delivery: dead (rejected)` is the rest of the story.
pub fn deliveries_say(status: ReminderStatus, ledgers: &[Option<&DeliveryRecord>]) -> String {
    let mut groups: Vec<(String, usize)> = Vec::new();
    for rec in ledgers {
        let state = delivery_state(status, *rec);
        match groups.iter_mut().find(|(s, _)| *s == state) {
            Some((_, n)) => *n += 1,
            None => groups.push((state, 1)),
        }
    }
    let counted = match groups.as_slice() {
        [] => return "no deliveries".to_owned(),
        [(state, 1)] => return format!("1 delivery: {state}"),
        [(state, _)] => format!("all {state}"),
        _ => groups
            .iter()
            .map(|(state, n)| format!("{n} {state}"))
            .collect::<Vec<_>>()
            .join(", "),
    };
    format!("{} deliveries: {counted}", ledgers.len())
}

/// The reminder's status with what its deliveries say: `enqueued — 1 delivery: dead (rejected)`.
pub fn status_detail(status: ReminderStatus, ledgers: &[Option<&DeliveryRecord>]) -> String {
    format!("{} — {}", status.as_str(), deliveries_say(status, ledgers))
}

/// A history entry's detail in operator words; the ledger's own codes stay in `--json`.
/// Details already in words (dead reasons, which are also `--reason` values) pass through.
pub fn detail(detail: &str) -> &str {
    match detail {
        "dlq_copy_claimed" => "dead-letter copy being made",
        "dlq_copy" => "dead-letter copy made",
        "held_by_breaker" => "held back by the provider's circuit breaker",
        other => other,
    }
}

/// `[redrive rd-… by ana: provider fixed]`, or without a note `[redrive rd-… by ana]`.
pub fn audit(a: &RedriveAudit) -> String {
    match a.note.trim() {
        "" => format!("[redrive {} by {}]", a.batch_id, a.operator),
        note => format!("[redrive {} by {}: {note}]", a.batch_id, a.operator),
    }
}

/// One history line after its number and time: `ready → sending`, `dead → ready [redrive …]`,
/// and for an entry that changes no status, `still dead: dead-letter copy made`.
pub fn history(h: &HistoryEntry) -> String {
    let detail = h.detail.as_deref().map(detail);
    let mut line = match detail {
        Some(d) if h.from == h.to => format!("still {}: {d}", h.to.as_str()),
        None if h.from == h.to => format!("still {}", h.to.as_str()),
        Some(d) => format!("{} → {} ({d})", h.from.as_str(), h.to.as_str()),
        None => format!("{} → {}", h.from.as_str(), h.to.as_str()),
    };
    if let Some(a) = &h.redrive {
        line = format!("{line} {}", audit(a));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(from: Status, to: Status, detail: Option<&str>) -> HistoryEntry {
        HistoryEntry {
            at: reminders::clock::Timestamp::from_millis(0),
            from,
            to,
            detail: detail.map(str::to_owned),
            redrive: None,
        }
    }

    #[test]
    fn history_speaks_the_operators_words() {
        let claimed = entry(Status::Dead, Status::Dead, Some("dlq_copy_claimed"));
        assert_eq!(history(&claimed), "still dead: dead-letter copy being made");
        let copied = entry(Status::Dead, Status::Dead, Some("dlq_copy"));
        assert_eq!(history(&copied), "still dead: dead-letter copy made");
        let died = entry(Status::Sending, Status::Dead, Some("rejected"));
        assert_eq!(history(&died), "sending → dead (rejected)");
    }

    #[test]
    fn an_audit_without_a_note_has_no_colon() {
        let a = |note: &str| RedriveAudit {
            batch_id: "rd-1".into(),
            operator: "ana".into(),
            note: note.into(),
        };
        assert_eq!(audit(&a("")), "[redrive rd-1 by ana]");
        assert_eq!(audit(&a("  ")), "[redrive rd-1 by ana]");
        assert_eq!(audit(&a("fixed")), "[redrive rd-1 by ana: fixed]");
    }

    #[test]
    fn deliveries_without_ledger_items_say_how_far_the_reminder_got() {
        let s = ReminderStatus::Scheduled;
        let one = deliveries_say(s, &[None]);
        assert_eq!(one, "1 delivery: waiting for the scheduler");
        let e = ReminderStatus::Enqueued;
        let two = deliveries_say(e, &[None, None]);
        assert_eq!(two, "2 deliveries: all waiting for a worker");
        assert_eq!(deliveries_say(e, &[]), "no deliveries");
    }
}
