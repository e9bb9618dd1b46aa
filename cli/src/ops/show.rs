//! `remindctl remind show`: the reminder, each channel's ledger state and its history, in
//! operator words (`words`), as text or one JSON object.

use reminders::delivery::outcome::{self, ChannelState, ReminderOutcome};
use reminders::delivery::standby::Turn;
use reminders::domain::{Channel, DeliveryKey, Reminder, ReminderId};
use reminders::ledger::{DeliveryRecord, HistoryEntry, Status};
use reminders::ports::{Ledger, PortError, ReminderStore};
use serde_json::{json, Value};

use super::{err, ports, wording, OpsPorts};

/// One channel of the reminder: its recipient only masked (personal data), and its ledger
/// item if a worker ever claimed it.
struct Delivery {
    channel: Channel,
    masked: String,
    key: DeliveryKey,
    rec: Option<DeliveryRecord>,
    /// The subscriber's fallback order holds this channel in standby: its turn, by the chain
    /// on the ledger.
    standby: Option<Turn>,
}

pub async fn run(raw_id: String, json: bool) -> Result<(), String> {
    let p = ports().await?;
    // An item another writer got wrong (an id outside the alphabet, a missing attribute) is
    // still shown: its raw status, why it was quarantined, and what cannot be read.
    let got = match ReminderId::parse(raw_id.clone()) {
        Ok(id) => p.reminders.get(&id).await,
        Err(e) => Err(PortError::Corrupt {
            op: "reminders.get",
            message: format!("reminder_id: {e}"),
        }),
    };
    let r = match got {
        Ok(Some(r)) => r,
        Ok(None) => return Err("no such reminder".into()),
        Err(PortError::Corrupt { message, .. }) => {
            return show_unreadable(&p, &raw_id, &message, json).await
        }
        Err(e) => return Err(err(e)),
    };
    // The channels, the ledger and the fallback order read as the API's GET reads them, so
    // that the two say the same outcome.
    let prefs = outcome::fallback_prefs(&p.reminders, &r)
        .await
        .map_err(err)?;
    let now = reminders::clock::Clock::now(&p.clock);
    let mut deliveries = Vec::new();
    for channel in r.listed_channels() {
        let key = DeliveryKey::derive(&r.reminder_id, &r.subscriber_id, channel);
        let rec = p.ledger.get(&key).await.map_err(err)?;
        let standby = outcome::held(&p.ledger, prefs.as_ref(), &r, channel, rec.as_ref(), now)
            .await
            .map_err(err)?;
        let masked = match (r.recipients.get(&channel), r.unsendable.get(&channel)) {
            (Some(recipient), _) => recipient.masked(),
            (None, why) => format!("(none: {})", why.map_or("unsendable", String::as_str)),
        };
        deliveries.push(Delivery {
            channel,
            masked,
            key,
            rec,
            standby,
        });
    }
    if json {
        println!("{}", reminder_json(&r, &deliveries));
    } else {
        print_reminder(&r, &deliveries);
    }
    Ok(())
}

async fn show_unreadable(
    p: &OpsPorts,
    raw_id: &str,
    problem: &str,
    json: bool,
) -> Result<(), String> {
    let Some((status, why)) = p.reminders.raw_status(raw_id).await.map_err(err)? else {
        return Err("no such reminder".into());
    };
    if json {
        let out = json!({
            "reminder_id": raw_id, "status": status, "invalid_reason": why, "unreadable": problem,
        });
        println!("{out}");
        return Ok(());
    }
    println!("reminder     {raw_id}");
    println!("status       {}", status.as_deref().unwrap_or("(none)"));
    if let Some(why) = why {
        println!("invalid      {why} (quarantined by the scheduler)");
    }
    println!("unreadable   {problem}");
    Ok(())
}

/// `enqueued — 1 delivery: dead (rejected)`: the reminder's status alone says nothing of
/// what became of its deliveries.
fn status_detail(r: &Reminder, deliveries: &[Delivery]) -> String {
    let ledgers: Vec<Option<&DeliveryRecord>> = deliveries.iter().map(|d| d.rec.as_ref()).collect();
    wording::status_detail(r.status, &ledgers)
}

/// What became of the reminder, from its channels, as the API's GET says it.
fn reminder_outcome(r: &Reminder, deliveries: &[Delivery]) -> ReminderOutcome {
    let states: Vec<ChannelState> = deliveries
        .iter()
        .map(|d| ChannelState::of(d.rec.as_ref(), d.standby))
        .collect();
    outcome::outcome(r.status, &states)
}

fn reminder_json(r: &Reminder, deliveries: &[Delivery]) -> Value {
    let list: Vec<Value> = deliveries
        .iter()
        .map(|d| {
            let ledger = match &d.rec {
                None if d.standby.is_some() => {
                    json!({ "item": null, "meaning": standby_words(d.standby) })
                }
                None => json!({ "item": null, "meaning": wording::never_claimed(r.status) }),
                Some(rec) => ledger_json(rec),
            };
            json!({
                "channel": d.channel.as_str(),
                "recipient": d.masked,
                "delivery_key": d.key.to_string(),
                "standby": d.standby.map(|t| standby_words(Some(t))),
                "ledger": ledger,
            })
        })
        .collect();
    let occurrence = reminders::domain::series::occurrence_of(&r.reminder_id);
    json!({
        "reminder_id": r.reminder_id.to_string(),
        "subscriber_id": r.subscriber_id.to_string(),
        "status": r.status.as_str(),
        "status_detail": status_detail(r, deliveries),
        "outcome": reminder_outcome(r, deliveries).as_str(),
        "payload_version": r.payload_version,
        "invalid_reason": r.invalid_reason,
        "due_at": r.due_at.to_rfc3339(),
        "due_at_ms": r.due_at.as_millis(),
        "fresh_until": r.fresh_until.to_rfc3339(),
        "fresh_until_ms": r.fresh_until.as_millis(),
        "series_id": occurrence.as_ref().map(|(s, _)| s.to_string()),
        "occurrence_at": occurrence.map(|(_, at)| at.to_rfc3339()),
        "detached": r.detached,
        "deliveries": list,
    })
}

fn ledger_json(rec: &DeliveryRecord) -> Value {
    let quiet = quiet_hold_entry(rec);
    let history: Vec<Value> = rec
        .history()
        .into_iter()
        .map(|(n, h)| history_json(n, h, Some(n) == quiet))
        .collect();
    json!({
        "status": rec.status().as_str(),
        "attempts": rec.attempt_count(),
        "throttles": rec.throttle_count(),
        "dead_reason": rec.dead_reason().map(|d| d.as_str()),
        "last_error": current_error(rec),
        "held_until": wording::quiet_hours_until(rec),
        "why": wording::why(rec),
        "fallback_to": rec.fallback_to(),
        "fallback_from": rec.fallback_from(),
        "history": history,
    })
}

/// The ledger's own codes (`detail`) for scripts, and the operator's words (`meaning`).
fn history_json(n: u64, h: &HistoryEntry, quiet_hold: bool) -> Value {
    let meaning = match quiet_hold {
        true => Some(wording::QUIET_HOLD),
        false => h.detail.as_deref().map(wording::detail),
    };
    json!({
        "n": n,
        "at": h.at.to_rfc3339(),
        "at_ms": h.at.as_millis(),
        "from": h.from.as_str(),
        "to": h.to.as_str(),
        "detail": h.detail,
        "meaning": meaning,
        "redrive": h.redrive.as_ref().map(|a| json!({
            "batch_id": a.batch_id, "operator": a.operator, "note": a.note,
        })),
    })
}

fn print_reminder(r: &Reminder, deliveries: &[Delivery]) {
    println!(
        "reminder     {} (subscriber {})",
        r.reminder_id, r.subscriber_id
    );
    println!("outcome      {}", reminder_outcome(r, deliveries).as_str());
    println!(
        "status       {} · payload v{}",
        status_detail(r, deliveries),
        r.payload_version
    );
    if let Some((series, at)) = reminders::domain::series::occurrence_of(&r.reminder_id) {
        let alone = if r.detached {
            " · edited on its own"
        } else {
            ""
        };
        println!(
            "series       {series} · occurrence at {}{alone}",
            at.to_rfc3339()
        );
    }
    if let Some(why) = &r.invalid_reason {
        println!("invalid      {why} (quarantined by the scheduler)");
    }
    println!(
        "due          {} · fresh until {}",
        r.due_at.to_rfc3339(),
        r.fresh_until.to_rfc3339()
    );
    for d in deliveries {
        // Recipients are personal data: the masked form only.
        println!("\n{} → {} · key {}", d.channel, d.masked, d.key);
        match &d.rec {
            None if d.standby.is_some() => {
                println!("  ledger     no item: {}", standby_words(d.standby))
            }
            None => println!("  ledger     no item: {}", wording::never_claimed(r.status)),
            Some(rec) => print_ledger(rec),
        }
    }
}

/// A channel in standby, in words: waiting for the channel ahead, not needed, or taking over.
fn standby_words(standby: Option<Turn>) -> String {
    match standby {
        Some(Turn::Wait { behind, .. }) => format!("{} {behind}", wording::STANDBY),
        Some(Turn::NotNeeded { because }) => format!(
            "not needed: {because}, ahead of it in the fallback order, settled without handing on"
        ),
        Some(Turn::TakeOver { from }) => {
            format!("{from}, ahead of it in the fallback order, died: sent next as its fallback")
        }
        None => String::new(),
    }
}

fn print_ledger(rec: &DeliveryRecord) {
    println!(
        "  ledger     {} · attempts {} · throttles {}{}{}",
        rec.status().as_str(),
        rec.attempt_count(),
        rec.throttle_count(),
        rec.dead_reason()
            .map(|d| format!(" · reason {d}"))
            .unwrap_or_default(),
        current_error(rec)
            .map(|e| format!(" · last error {e}"))
            .unwrap_or_default(),
    );
    if let Some(why) = wording::why(rec) {
        println!("  why        {why}");
    }
    if let Some(to) = rec.fallback_to() {
        println!("  fallback   fell back to {to}: its own delivery, shown under {to}");
    }
    if let Some(from) = rec.fallback_from() {
        println!("  fallback   sent as the fallback of {from}, whose delivery died");
    }
    let quiet = quiet_hold_entry(rec);
    for (n, h) in rec.history() {
        let line = match Some(n) == quiet {
            true => wording::quiet_hold(h),
            false => wording::history(h),
        };
        println!("  #{n:<3} {} {line}", h.at.to_rfc3339());
    }
}

/// The history entry of a hold for quiet hours while the delivery is still held: its last
/// entry (a hold is the last write until the next claim). Holds are recorded as
/// `held_for_quiet_hours`; items written before that named them `held_by_breaker`.
fn quiet_hold_entry(rec: &DeliveryRecord) -> Option<u64> {
    rec.held_for_quiet_hours_until()?;
    let (n, _) = rec.history().into_iter().last()?;
    Some(n)
}

/// The last error while it describes the delivery's state: an error from before a delivery
/// is history, not its state.
fn current_error(rec: &DeliveryRecord) -> Option<&str> {
    rec.last_error()
        .filter(|_| rec.status() != Status::Delivered)
}
