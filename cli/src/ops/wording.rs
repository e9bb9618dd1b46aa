//! Operator words for what the ledger records in its own terms: a delivery's state, a
//! history entry, a redrive's audit, a reminder's status next to its deliveries'. Pure, so
//! the wording is tested here and the commands only print it.

use reminders::domain::{DeadReason, ReminderStatus};
use reminders::ledger::{DeliveryRecord, Detail, HistoryEntry, RedriveAudit, Status};

/// What a delivery with no ledger item means, by the reminder's status.
/// A channel the subscriber's fallback order holds behind another one the reminder lists.
pub const STANDBY: &str =
    "standby: the subscriber's fallback order sends it only if the delivery dies of";

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
            None => match quiet_hours_until(rec) {
                Some(until) => format!("held for quiet hours until {until}"),
                None => rec.status().as_str().to_owned(),
            },
        },
    }
}

/// Why a dead delivery ended, in operator words, for the reasons whose code alone does not
/// say that nothing failed: the recipient's own rules (nothing to fix or redrive).
pub fn dead_reason(reason: DeadReason) -> Option<&'static str> {
    match reason {
        DeadReason::OptedOut => Some("the subscriber opted out of this channel"),
        DeadReason::Suppressed => {
            Some("the address is suppressed: a provider declared it dead earlier")
        }
        DeadReason::ExpiredQuietHours => Some(
            "due inside the subscriber's quiet hours for this channel, and stale before they end",
        ),
        _ => None,
    }
}

/// When a deferred delivery is held for the recipient's quiet hours, the time they end
/// (RFC 3339); `None` for any other state or deferral.
pub fn quiet_hours_until(rec: &DeliveryRecord) -> Option<String> {
    rec.held_for_quiet_hours_until().map(|t| t.to_rfc3339())
}

/// Why the delivery is where it is, when its code needs words: a recipient's-choice death, or
/// a hold for quiet hours.
pub fn why(rec: &DeliveryRecord) -> Option<String> {
    if let Some(until) = quiet_hours_until(rec) {
        return Some(format!(
            "held for the subscriber's quiet hours until {until}; sent then if still fresh, \
             nothing spent"
        ));
    }
    rec.dead_reason()
        .filter(|_| rec.status() == Status::Dead)
        .and_then(dead_reason)
        .map(str::to_owned)
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
    match Detail::parse(detail) {
        Some(Detail::DlqCopyClaimed) => "dead-letter copy being made",
        Some(Detail::DlqCopy) => "dead-letter copy made",
        Some(Detail::HeldByBreaker) => "held back by the provider's circuit breaker",
        Some(Detail::HeldForQuietHours) => QUIET_HOLD,
        Some(Detail::HorizonMoved) | None => detail,
    }
}

/// A hold for the recipient's quiet hours.
pub const QUIET_HOLD: &str = "held for the subscriber's quiet hours";

/// The history line of a hold for quiet hours: `sending → deferred (held for …)`.
pub fn quiet_hold(h: &HistoryEntry) -> String {
    format!("{} → {} ({QUIET_HOLD})", h.from.as_str(), h.to.as_str())
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

    /// A ledger item as the store holds it, in `status`, with these optional attributes.
    fn record(status: &str, extra: serde_json::Value) -> DeliveryRecord {
        use reminders::domain::{Channel, DeliveryKey, ReminderId, SubscriberId};
        let key = DeliveryKey::derive(
            &ReminderId::parse("r-1").unwrap(),
            &SubscriberId::parse("u-1").unwrap(),
            Channel::Push,
        );
        let mut item = serde_json::json!({
            "delivery_key": key, "status": status, "seq": 2, "attempt_count": 0,
            "throttle_count": 0, "payload_version": 1, "first_seen_at": 0, "updated_at": 0,
            "history": {}, "expires_at": 0,
        });
        item.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        serde_json::from_value(item).unwrap()
    }

    #[test]
    fn the_recipients_rules_get_operator_words() {
        let words = [
            (
                DeadReason::OptedOut,
                "the subscriber opted out of this channel",
            ),
            (
                DeadReason::Suppressed,
                "the address is suppressed: a provider declared it dead earlier",
            ),
            (
                DeadReason::ExpiredQuietHours,
                "due inside the subscriber's quiet hours for this channel, and stale before \
                 they end",
            ),
        ];
        for (reason, said) in words {
            assert_eq!(dead_reason(reason), Some(said), "{reason}");
            let rec = record("dead", serde_json::json!({ "dead_reason": reason }));
            assert_eq!(why(&rec).as_deref(), Some(said));
            let e = ReminderStatus::Enqueued;
            assert_eq!(
                deliveries_say(e, &[Some(&rec)]),
                format!("1 delivery: dead ({reason})")
            );
        }
        // A failure's own code says what happened; its evidence is elsewhere.
        assert_eq!(dead_reason(DeadReason::Rejected), None);
        let rejected = record("dead", serde_json::json!({ "dead_reason": "rejected" }));
        assert_eq!(why(&rejected), None);
    }

    /// A deferred item whose last write is a hold with `detail`, eligible at `until`.
    fn held(detail: &str, until: reminders::clock::Timestamp, error: &str) -> DeliveryRecord {
        let hold =
            serde_json::json!({ "at": 0, "from": "sending", "to": "deferred", "detail": detail });
        record(
            "deferred",
            serde_json::json!({
                "last_error": error,
                "next_eligible_at": until.as_millis(),
                "history": { "2": hold },
            }),
        )
    }

    #[test]
    fn a_delivery_held_for_quiet_hours_says_until_when() {
        // As the consumer writes it: the hold's end in milliseconds.
        let until = "2026-06-11T05:00:00.000Z";
        let at = reminders::clock::Timestamp::parse_rfc3339(until).unwrap();
        let quiet = format!("quiet hours until {until}");
        let held_quiet = held("held_for_quiet_hours", at, &quiet);
        assert_eq!(quiet_hours_until(&held_quiet).as_deref(), Some(until));
        assert_eq!(
            deliveries_say(ReminderStatus::Enqueued, &[Some(&held_quiet)]),
            format!("1 delivery: held for quiet hours until {until}")
        );
        assert_eq!(
            why(&held_quiet).as_deref(),
            Some(
                "held for the subscriber's quiet hours until 2026-06-11T05:00:00.000Z; sent then \
                 if still fresh, nothing spent"
            )
        );
        // Written before holds were named apart: the breaker's code, told by the error.
        let legacy = held("held_by_breaker", at, &quiet);
        assert_eq!(quiet_hours_until(&legacy).as_deref(), Some(until));
        // The breaker's own hold, another deferral, or a record no longer deferred, is not a
        // quiet-hours hold.
        let breaker = held("held_by_breaker", at, "http_503");
        assert_eq!(quiet_hours_until(&breaker), None);
        let throttled = record(
            "deferred",
            serde_json::json!({ "last_error": "429 slow down" }),
        );
        assert_eq!(quiet_hours_until(&throttled), None);
        assert_eq!(why(&throttled), None);
        assert_eq!(
            deliveries_say(ReminderStatus::Enqueued, &[Some(&throttled)]),
            "1 delivery: deferred"
        );
        let sent = record("sending", serde_json::json!({ "last_error": quiet }));
        assert_eq!(quiet_hours_until(&sent), None);
        let hold = entry(Status::Sending, Status::Deferred, Some("held_by_breaker"));
        assert_eq!(
            quiet_hold(&hold),
            "sending → deferred (held for the subscriber's quiet hours)"
        );
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
