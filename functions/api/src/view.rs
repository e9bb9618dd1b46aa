//! What the API answers: a reminder with each channel's delivery state from the ledger
//! (recipients masked), a cancel's outcome per channel, a page of a subscriber's reminders.

use reminders::clock::Timestamp;
use reminders::delivery::standby;
use reminders::delivery::Cancelled;
use reminders::domain::{Channel, Content, DeliveryKey, Reminder};
use reminders::ledger::Status;
use reminders::ports::{Ledger, Listed, PortError, ReminderStore};
use serde_json::{json, Map, Value};

pub(crate) fn time(t: Timestamp) -> Value {
    Value::String(t.to_rfc3339())
}

/// The reminder's state: its fields, and per channel the ledger's view of the delivery. A
/// channel with no delivery yet that the subscriber's fallback order holds behind another
/// listed one is `standby` while that one has not settled, and `not_needed` once it settled
/// without handing on (docs/design.md, "Fallback chain").
pub async fn reminder<L: Ledger, S: ReminderStore>(
    r: &Reminder,
    ledger: &L,
    store: &S,
) -> Result<Value, PortError> {
    let prefs = match r.recipients.len() {
        0 | 1 => None,
        _ => store.preferences(&r.subscriber_id).await?,
    };
    let listed = |c: Channel| r.recipients.contains_key(&c);
    let mut channels = Map::new();
    for channel in r.listed_channels() {
        let mut d = delivery(r, channel, ledger).await?;
        let scheduled = d["status"] == Status::Scheduled.as_str();
        if let (Some(p), true) = (prefs.as_ref(), scheduled) {
            // Its turn, as the consumer reads it: from the chain on the ledger. A waiting
            // turn's time is not shown, so any clock will do.
            let now = Timestamp::from_millis(0);
            let (rid, sid) = (&r.reminder_id, &r.subscriber_id);
            if let Some(t) = standby::turn(ledger, p, rid, sid, listed, channel, now).await? {
                d["status"] = match t {
                    standby::Turn::Wait { .. } => "standby".into(),
                    standby::Turn::NotNeeded { .. } => "not_needed".into(),
                    standby::Turn::TakeOver { .. } => Status::Scheduled.as_str().into(),
                };
                d["standby_behind"] = p.standby_behind(channel, listed).map(|c| c.as_str()).into();
            }
        }
        channels.insert(channel.as_str().to_owned(), d);
    }
    let outcome = outcome(r.status, &channels);
    Ok(json!({
        "reminder_id": r.reminder_id.as_str(),
        "subscriber_id": r.subscriber_id.as_str(),
        "status": r.status.as_str(),
        "outcome": outcome,
        "payload_version": r.payload_version,
        "due_at": time(r.due_at),
        "fresh_until": time(r.fresh_until),
        "content": content(&r.content),
        "channels": channels,
    }))
}

/// What became of the reminder, in one word, from its channels' deliveries (`status` only says
/// whether the scheduler handed it on): `pending` while any channel may still be sent; then
/// `delivered` when one was and every other was not needed, cancelled or handed on to another
/// (a fallback order); `partly_delivered` when one was and another ended dead or expired
/// without handing on; `cancelled` when the reminder was cancelled and none was sent;
/// `expired` when none was and what ended them was staleness (a channel's, or the reminder's
/// before its delivery began); else `failed` (each channel says why: dead, or the reminder
/// quarantined). A redrive of a dead delivery may still change it.
fn outcome(
    status: reminders::domain::ReminderStatus,
    channels: &Map<String, Value>,
) -> &'static str {
    let settled = |s: &str| {
        matches!(
            s,
            "delivered" | "dead" | "expired" | "cancelled" | "not_needed"
        )
    };
    let states: Vec<&str> = channels
        .values()
        .map(|d| d["status"].as_str().unwrap_or(""))
        .collect();
    // Quarantined or expired, the reminder is never sent: a channel with no delivery yet
    // (scheduled, standby) will not have one.
    let ended = matches!(
        status,
        reminders::domain::ReminderStatus::Invalid | reminders::domain::ReminderStatus::Expired
    );
    let unsent = |s: &str| ended && matches!(s, "scheduled" | "standby");
    if states.iter().any(|s| !settled(s) && !unsent(s)) {
        return "pending";
    }
    // Ended without reaching the person, and without handing the reminder on.
    let unmet = channels
        .values()
        .filter(|d| matches!(d["status"].as_str(), Some("dead" | "expired")))
        .filter(|d| d.get("fallback_to").is_none())
        .count();
    let dead = states.contains(&"dead");
    if states.contains(&"delivered") {
        match unmet {
            0 => "delivered",
            _ => "partly_delivered",
        }
    } else if status == reminders::domain::ReminderStatus::Cancelled {
        "cancelled"
    } else if !dead && status != reminders::domain::ReminderStatus::Invalid {
        // Every channel expired, was not needed, or never began because the reminder expired.
        "expired"
    } else {
        "failed"
    }
}

async fn delivery<L: Ledger>(
    r: &Reminder,
    channel: Channel,
    ledger: &L,
) -> Result<Value, PortError> {
    let key = DeliveryKey::derive(&r.reminder_id, &r.subscriber_id, channel);
    let record = ledger.get(&key).await?;
    let mut out = json!({
        "recipient": r.recipients.get(&channel).map(|x| x.masked()),
        "delivery_key": key.as_str(),
        "status": Status::Scheduled.as_str(),
        "attempts": 0,
        "last_outcome": null,
        "delivered_at": null,
        "dead_at": null,
        "dead_reason": null,
    });
    if let Some(why) = r.unsendable.get(&channel) {
        out["problem"] = why.as_str().into();
    }
    if let Some(rec) = record {
        out["status"] = rec.status().as_str().into();
        out["attempts"] = rec.attempt_count().into();
        out["last_outcome"] = serde_json::to_value(rec.last_outcome_class()).unwrap_or_default();
        if rec.status() == Status::Delivered {
            // The write that delivered it (later writes, such as a TTL moved by an edit,
            // change `updated_at`); the history keeps the last 16 transitions.
            let at = rec
                .history()
                .into_iter()
                .rev()
                .find(|(_, h)| h.to == Status::Delivered && h.from != Status::Delivered)
                .map_or(rec.updated_at(), |(_, h)| h.at);
            out["delivered_at"] = time(at);
        }
        if let Some(at) = rec.dead_at() {
            out["dead_at"] = time(at);
        }
        out["dead_reason"] = rec.dead_reason().map(|d| d.as_str()).into();
        // The fallback chain (docs/design.md, "Fallback chain"), on both ends.
        if let Some(to) = rec.fallback_to() {
            out["fallback_to"] = to.as_str().into();
        }
        if let Some(from) = rec.fallback_from() {
            out["fallback_from"] = from.as_str().into();
        }
        // A deferred delivery: when it may be tried again, and why it waits (a retry, a
        // throttle, a held breaker, or the subscriber's quiet hours).
        if rec.status() == Status::Deferred {
            out["next_attempt_at"] = rec.next_eligible_at().map(time).into();
            out["waiting_because"] = rec.last_error().into();
        }
    }
    Ok(out)
}

pub(crate) fn content(c: &Content) -> Value {
    match c {
        Content::Text { subject, body } => json!({"subject": subject, "body": body}),
        Content::Template {
            template_id,
            template_data,
        } => json!({
            "template_id": template_id,
            "data": serde_json::from_str::<Value>(template_data).unwrap_or(Value::Null),
        }),
    }
}

/// A cancel's answer per channel, in the words of the delivery's state.
pub fn cancelled(c: &Cancelled) -> &'static str {
    match c {
        Cancelled::Cancelled => "cancelled",
        Cancelled::AlreadyInFlight => "in_flight",
        Cancelled::AlreadyDelivered => "delivered",
        Cancelled::AlreadyFinal(status) => status.as_str(),
    }
}

/// A page of a subscriber's reminders, its cursor sealed.
pub fn page(p: &reminders::listing::Page<Listed>) -> Value {
    let reminders: Vec<Value> = p
        .items
        .iter()
        .map(|item| match item {
            Listed::Summary(s) => json!({
                "reminder_id": s.reminder_id.as_str(),
                "status": s.status.as_str(),
                "due_at": time(s.due_at),
                "fresh_until": time(s.fresh_until),
                "payload_version": s.payload_version,
                "channels": s.channels.iter().map(|c| c.as_str()).collect::<Vec<_>>(),
            }),
            Listed::Unreadable {
                reminder_id,
                reason,
                ..
            } => json!({
                "reminder_id": reminder_id,
                "status": "unreadable",
                "problem": reason,
            }),
        })
        .collect();
    json!({
        "reminders": reminders,
        "next_cursor": p.next_cursor,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use reminders::domain::ReminderStatus;

    /// Channels in these states; `dead>sms` is a death that handed on to SMS.
    fn channels(states: &[&str]) -> Map<String, Value> {
        states
            .iter()
            .enumerate()
            .map(|(n, s)| {
                let v = match s.split_once('>') {
                    Some((st, to)) => json!({ "status": st, "fallback_to": to }),
                    None => json!({ "status": s }),
                };
                (format!("c{n}"), v)
            })
            .collect()
    }

    #[test]
    fn a_reminders_outcome_is_pending_until_every_channel_settled() {
        let e = ReminderStatus::Enqueued;
        let cases = [
            (e, vec!["delivered", "sending"], "pending"),
            (e, vec!["standby", "dead"], "pending"),
            (e, vec!["delivered", "dead"], "partly_delivered"),
            (e, vec!["delivered", "expired"], "partly_delivered"),
            // A fallback order: the head died and handed on, the next reached the person.
            (e, vec!["dead>sms", "delivered"], "delivered"),
            (e, vec!["not_needed", "delivered"], "delivered"),
            (e, vec!["dead", "expired"], "failed"),
            (e, vec!["dead>sms", "dead"], "failed"),
            (e, vec!["expired", "not_needed"], "expired"),
            (
                ReminderStatus::Cancelled,
                vec!["cancelled", "cancelled"],
                "cancelled",
            ),
            (
                ReminderStatus::Cancelled,
                vec!["delivered", "cancelled"],
                "delivered",
            ),
            (ReminderStatus::Expired, vec!["expired"], "expired"),
            // Expired or quarantined before its channels' items were written.
            (
                ReminderStatus::Expired,
                vec!["scheduled", "expired"],
                "expired",
            ),
            (ReminderStatus::Invalid, vec!["scheduled"], "failed"),
            (ReminderStatus::Scheduled, vec!["scheduled"], "pending"),
            // A status a newer version wrote that this one does not know: not yet settled.
            (e, vec!["delivered", "parked_v9"], "pending"),
        ];
        for (status, states, want) in cases {
            assert_eq!(outcome(status, &channels(&states)), want, "{states:?}");
        }
    }
}
