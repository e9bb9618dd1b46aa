//! What the API answers: a reminder with each channel's delivery state from the ledger
//! (recipients masked), a cancel's outcome per channel, a page of a subscriber's reminders.

use reminders::clock::Timestamp;
use reminders::delivery::outcome::{self, ChannelState};
use reminders::delivery::standby;
use reminders::delivery::Cancelled;
use reminders::domain::{Channel, Content, DeliveryKey, Reminder};
use reminders::ledger::{DeliveryRecord, Status};
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
    let prefs = outcome::fallback_prefs(store, r).await?;
    let listed = |c: Channel| r.recipients.contains_key(&c);
    let mut channels = Map::new();
    for channel in r.listed_channels() {
        let key = DeliveryKey::derive(&r.reminder_id, &r.subscriber_id, channel);
        let record = ledger.get(&key).await?;
        let mut d = delivery(r, channel, &key, record.as_ref());
        // Its turn, as the consumer reads it: from the chain on the ledger. A waiting turn's
        // time is not shown, so any clock will do.
        let now = Timestamp::from_millis(0);
        let held = outcome::held(ledger, prefs.as_ref(), r, channel, record.as_ref(), now).await?;
        if let (Some(t), Some(p)) = (held, prefs.as_ref()) {
            d["status"] = match t {
                standby::Turn::Wait { .. } => "standby".into(),
                standby::Turn::NotNeeded { .. } => "not_needed".into(),
                standby::Turn::TakeOver { .. } => Status::Scheduled.as_str().into(),
            };
            d["standby_behind"] = p.standby_behind(channel, listed).map(|c| c.as_str()).into();
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

/// What became of the reminder ([`reminders::delivery::outcome`]), from its channels as this
/// view shows them: the ledger's status of each, or `standby` and `not_needed` for a channel
/// the fallback order holds back.
fn outcome(
    status: reminders::domain::ReminderStatus,
    channels: &Map<String, Value>,
) -> &'static str {
    let states: Vec<ChannelState> = channels.values().map(channel_state).collect();
    reminders::delivery::outcome::outcome(status, &states).as_str()
}

/// One channel of the view, read back as the outcome reads it.
fn channel_state(d: &Value) -> ChannelState {
    match d["status"].as_str().unwrap_or("") {
        "standby" => ChannelState::Standby,
        "not_needed" => ChannelState::NotNeeded,
        s => match s.parse::<Status>() {
            Ok(status) => ChannelState::Ledger {
                status,
                dead_reason: d["dead_reason"].as_str().and_then(|r| r.parse().ok()),
                handed_on: d.get("fallback_to").is_some_and(|t| !t.is_null()),
            },
            Err(_) => ChannelState::Unknown,
        },
    }
}

/// One channel's delivery as the ledger holds it (`scheduled` while it has no item).
fn delivery(
    r: &Reminder,
    channel: Channel,
    key: &DeliveryKey,
    record: Option<&DeliveryRecord>,
) -> Value {
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
    out
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

    /// Channels in these states; `dead>sms` is a death that handed on to SMS, `dead:opted_out`
    /// one for that reason (`dead` alone: rejected).
    fn channels(states: &[&str]) -> Map<String, Value> {
        states
            .iter()
            .enumerate()
            .map(|(n, s)| {
                let v = if let Some((st, to)) = s.split_once('>') {
                    json!({ "status": st, "dead_reason": "rejected", "fallback_to": to })
                } else if let Some((st, why)) = s.split_once(':') {
                    json!({ "status": st, "dead_reason": why })
                } else if *s == "dead" {
                    json!({ "status": s, "dead_reason": "rejected" })
                } else {
                    json!({ "status": s })
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
            // The subscriber's choice is no failure.
            (e, vec!["delivered", "dead:opted_out"], "delivered"),
            (e, vec!["dead", "expired"], "failed"),
            (e, vec!["dead>sms", "dead"], "failed"),
            (e, vec!["dead:ambiguous"], "failed"),
            (e, vec!["expired", "not_needed"], "expired"),
            // Quiet hours outlasted its freshness: stale, not failed.
            (e, vec!["dead:expired_quiet_hours"], "expired"),
            (e, vec!["dead>sms", "expired"], "expired"),
            // Every channel cancelled, the reminder not yet marked (a cancel mid-way).
            (e, vec!["cancelled", "cancelled"], "cancelled"),
            (e, vec!["dead:opted_out"], "failed"),
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
            (
                ReminderStatus::Expired,
                vec!["delivered", "scheduled"],
                "partly_delivered",
            ),
            (
                ReminderStatus::Expired,
                vec!["dead>sms", "standby"],
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
