//! `remindctl dlq summary | show`: a channel's dead-letter queue, looked into without moving
//! anything (messages are received with a visibility timeout and left to come back).

use std::collections::{BTreeMap, BTreeSet};

use reminders::clock::{Clock, Timestamp};
use reminders::domain::{Channel, DeadReason, DeliveryMessage};
use reminders::ports::DeadLetterMessage;
use reminders::redrive::peek;
use serde_json::{json, Map, Value};

use super::{err, parse_channel, parse_reason, ports};

/// Look into a channel's dead-letter queue without moving anything.
#[derive(Debug, clap::Subcommand)]
pub enum DlqCommand {
    /// Counts and ages by reason, per channel.
    Summary {
        #[arg(long, value_parser = parse_channel)]
        channel: Option<Channel>,
        /// One JSON object by channel and reason.
        #[arg(long)]
        json: bool,
    },
    /// The dead deliveries of one reason, with their evidence.
    Show {
        #[arg(long, value_parser = parse_channel)]
        channel: Channel,
        #[arg(long, value_parser = parse_reason)]
        reason: DeadReason,
        #[arg(long, default_value_t = 20)]
        limit: u32,
        /// One JSON line per dead delivery.
        #[arg(long)]
        json: bool,
    },
}

pub async fn run(cmd: DlqCommand) -> Result<(), String> {
    match cmd {
        DlqCommand::Summary { channel, json } => summary(channel, json).await,
        DlqCommand::Show {
            channel,
            reason,
            limit,
            json,
        } => show(channel, reason, limit, json).await,
    }
}

/// One channel's deaths: each counted once, by reason, with the oldest death's time.
struct Deaths {
    dead: usize,
    messages: usize,
    by_reason: BTreeMap<DeadReason, (u32, Option<Timestamp>)>,
}

fn count(msgs: &[DeadLetterMessage]) -> Deaths {
    // One death copied twice (a worker stopped between the copy and recording it) is one
    // death: same delivery key, same `dead_at`.
    let mut deaths = BTreeSet::new();
    let mut by_reason: BTreeMap<DeadReason, (u32, Option<Timestamp>)> = BTreeMap::new();
    for m in msgs {
        let key = DeliveryMessage::decode(&m.message.body)
            .map(|d| d.delivery_key.to_string())
            .unwrap_or_else(|_| m.message.message_id.clone());
        let dead_at = m.letter.evidence.as_ref().map(|e| e.dead_at);
        if !deaths.insert((key, dead_at, m.letter.reason)) {
            continue;
        }
        let e = by_reason.entry(m.letter.reason).or_insert((0, None));
        e.0 += 1;
        if let Some(ev) = &m.letter.evidence {
            e.1 = Some(e.1.map_or(ev.dead_at, |t: Timestamp| t.min(ev.dead_at)));
        }
    }
    Deaths {
        dead: deaths.len(),
        messages: msgs.len(),
        by_reason,
    }
}

async fn summary(channel: Option<Channel>, json: bool) -> Result<(), String> {
    let p = ports().await?;
    let now = p.clock.now();
    let mut out = Map::new();
    let channels = channel.map_or_else(|| Channel::ALL.to_vec(), |c| vec![c]);
    for c in channels {
        let msgs = peek(&p.dead_letters, c, 10_000, 120).await.map_err(err)?;
        let d = count(&msgs);
        if json {
            out.insert(c.as_str().to_owned(), summary_json(&d, now));
        } else {
            print_summary(c, &d, now);
        }
    }
    if json {
        println!("{}", Value::Object(out));
    }
    Ok(())
}

fn summary_json(d: &Deaths, now: Timestamp) -> Value {
    let reasons: Map<String, Value> = d
        .by_reason
        .iter()
        .map(|(reason, (n, oldest))| {
            (
                reason.as_str().to_owned(),
                json!({
                    "dead": n,
                    "oldest_dead_at": oldest.map(|t| t.to_rfc3339()),
                    "oldest_dead_at_ms": oldest.map(|t| t.as_millis()),
                    "oldest_age_secs": oldest.map(|t| now.since(t).as_secs()),
                }),
            )
        })
        .collect();
    json!({
        "dead": d.dead,
        "messages": d.messages,
        "by_reason": reasons,
    })
}

fn print_summary(c: Channel, d: &Deaths, now: Timestamp) {
    let repeats = d.messages - d.dead;
    let note = if repeats > 0 {
        format!(
            " ({} messages: {repeats} repeated copies of one death)",
            d.messages
        )
    } else {
        String::new()
    };
    println!("{c}: {} dead{note}", d.dead);
    for (reason, (n, oldest)) in &d.by_reason {
        let age = oldest.map_or("age unknown".to_owned(), |t| {
            format!("oldest {} s", now.since(t).as_secs())
        });
        println!("  {:<24}{n:>6}   {age}", reason.as_str());
    }
}

async fn show(channel: Channel, reason: DeadReason, limit: u32, json: bool) -> Result<(), String> {
    let p = ports().await?;
    let msgs = peek(&p.dead_letters, channel, 10_000, 120)
        .await
        .map_err(err)?;
    for m in msgs
        .iter()
        .filter(|m| m.letter.reason == reason)
        .take(limit as usize)
    {
        if json {
            println!("{}", dead_json(channel, reason, m));
        } else {
            print_dead(m);
        }
    }
    Ok(())
}

/// One JSON line per dead delivery; never the recipient.
fn dead_json(channel: Channel, reason: DeadReason, m: &DeadLetterMessage) -> Value {
    let decoded = DeliveryMessage::decode(&m.message.body);
    let ev = m.letter.evidence.as_ref();
    json!({
        "channel": channel.as_str(),
        "reason": reason.as_str(),
        "delivery_key": decoded.as_ref().ok().map(|d| d.delivery_key.to_string()),
        "reminder_id": decoded.as_ref().ok().map(|d| d.reminder_id.to_string()),
        "undecodable": decoded.as_ref().err().map(|e| e.to_string()),
        "attempts": ev.map(|e| e.attempts),
        "last_error": ev.and_then(|e| e.last_error.clone()),
        "dead_at": ev.map(|e| e.dead_at.to_rfc3339()),
        "dead_at_ms": ev.map(|e| e.dead_at.as_millis()),
        "first_seen_at": ev.and_then(|e| e.first_seen_at).map(|t| t.to_rfc3339()),
        "policy_version": ev.and_then(|e| e.policy_version.clone()),
    })
}

fn print_dead(m: &DeadLetterMessage) {
    let what = match DeliveryMessage::decode(&m.message.body) {
        Ok(d) => format!("{} reminder {}", d.delivery_key, d.reminder_id),
        Err(e) => format!("undecodable body: {e}"),
    };
    println!("{what}");
    if let Some(ev) = &m.letter.evidence {
        println!(
            "  attempts {} · last error {} · dead at {} · first seen {} · policy {}",
            ev.attempts,
            ev.last_error.as_deref().unwrap_or("-"),
            ev.dead_at.to_rfc3339(),
            ev.first_seen_at.map_or("-".into(), |t| t.to_rfc3339()),
            ev.policy_version.as_deref().unwrap_or("-"),
        );
    }
}
