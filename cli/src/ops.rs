//! Operator commands against AWS or an emulator, with the functions' configuration:
//! `remind create | cancel | show`, `dlq summary | show`, `redrive`.

use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::time::Duration;

use reminders::aws::{Adapters, Settings};
use reminders::clock::{Clock, SystemClock, Timestamp};
use reminders::config::env;
use reminders::domain::Retention;
use reminders::domain::{
    Channel, Content, DeadReason, DeliveryKey, DeliveryMessage, NewReminder, PerChannel, Recipient,
    ReminderId, SubscriberId,
};
use reminders::outbox;
use reminders::ports::{Ledger, PortSet, ReminderStore};
use reminders::providers::AnyProvider;
use reminders::redrive::{peek, RedriveConfig, RedriveRequest, Redriver};

/// The functions' retention (`RETENTION_SECS`), so what the CLI writes expires with the rest.
fn retention() -> Result<Retention, String> {
    Retention::from_env().map_err(|e| e.to_string())
}

type OpsPorts = PortSet<
    SystemClock,
    reminders::aws::dynamo::DynamoReminderStore,
    reminders::aws::dynamo::DynamoLedger,
    reminders::aws::dynamo::DynamoGate,
    reminders::aws::SqsQueues,
    reminders::aws::SqsDeadLetters,
    AnyProvider<SystemClock>,
>;

async fn ports() -> Result<OpsPorts, String> {
    let settings = Settings::from_env().map_err(|e| e.to_string())?;
    let sdk = reminders::aws::sdk_config().await;
    let a = Adapters::new(&sdk, &settings);
    Ok(PortSet {
        clock: SystemClock,
        reminders: a.reminders,
        ledger: a.ledger,
        gate: a.gate,
        queue: a.queues,
        dead_letters: a.dead_letters,
        providers: PerChannel::from_fn(|_| AnyProvider::Disabled),
    })
}

fn err(e: impl std::fmt::Display) -> String {
    // The first line only: SDK errors carry multi-line context.
    e.to_string().lines().next().unwrap_or_default().to_owned()
}

pub async fn quarantined(limit: u32) -> Result<(), String> {
    let p = ports().await?;
    let found = p.reminders.quarantined(limit).await.map_err(err)?;
    if found.is_empty() {
        println!("no quarantined reminders");
    }
    for (id, why) in found {
        println!(
            "{id:<40} {}",
            why.as_deref().unwrap_or("(no reason recorded)")
        );
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
        let out = serde_json::json!({
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

pub struct CreateArgs {
    pub id: String,
    pub subscriber: String,
    pub due_in_secs: Option<i64>,
    pub due_at_ms: Option<i64>,
    pub fresh_secs: Option<u64>,
    pub subject: String,
    pub body: String,
    pub email: Option<String>,
    pub sms: Option<String>,
    pub push: Option<String>,
}

pub async fn create(a: CreateArgs) -> Result<(), String> {
    let fresh_secs = match a.fresh_secs {
        Some(secs) => secs,
        None => reminders::config::Vars::env()
            .u64_or("FRESHNESS_SECS", 3600)
            .map_err(|e| e.to_string())?,
    };
    let p = ports().await?;
    let now = p.clock.now();
    let due_at = match (a.due_at_ms, a.due_in_secs) {
        (Some(ms), None) => Timestamp::from_millis(ms),
        (None, Some(secs)) if secs >= 0 => now.plus(Duration::from_secs(secs.unsigned_abs())),
        (None, Some(secs)) => now.minus(Duration::from_secs(secs.unsigned_abs())),
        (None, None) => now,
        (Some(_), Some(_)) => return Err("give --due-at or --due-in, not both".into()),
    };
    let mut recipients = Vec::new();
    for (channel, value) in [
        (Channel::Email, &a.email),
        (Channel::Sms, &a.sms),
        (Channel::Push, &a.push),
    ] {
        if let Some(v) = value {
            recipients.push(Recipient::parse(channel, v).map_err(|e| format!("--{channel}: {e}"))?);
        }
    }
    let new = NewReminder {
        reminder_id: ReminderId::parse(a.id).map_err(err)?,
        subscriber_id: SubscriberId::parse(a.subscriber).map_err(err)?,
        due_at,
        fresh_until: Some(due_at.plus(Duration::from_secs(fresh_secs))),
        content: Content::Text {
            subject: a.subject,
            body: a.body,
        },
        recipients,
    };
    match outbox::create(
        &p.reminders,
        new,
        Duration::from_secs(fresh_secs),
        retention()?,
    )
    .await
    .map_err(err)?
    {
        Some(r) => {
            println!(
                "created {} (payload v1, due {})",
                r.reminder_id,
                r.due_at.to_rfc3339()
            );
            for c in r.channels() {
                let key = DeliveryKey::derive(&r.reminder_id, &r.subscriber_id, c);
                println!("  {c:<6} {key}");
            }
            Ok(())
        }
        None => Err("a reminder with this id already exists".into()),
    }
}

pub async fn cancel(id: String) -> Result<(), String> {
    let p = ports().await?;
    let id = ReminderId::parse(id).map_err(err)?;
    let report = outbox::cancel(&p.reminders, &p.ledger, &id, p.clock.now(), retention()?)
        .await
        .map_err(err)?
        .ok_or("no such reminder")?;
    use reminders::delivery::Cancelled;
    for (channel, outcome) in report.deliveries {
        let what = match outcome {
            Cancelled::Cancelled => "cancelled: it will not be sent".to_owned(),
            Cancelled::AlreadyInFlight => {
                "too late: a worker is sending it now (it may arrive)".to_owned()
            }
            Cancelled::AlreadyDelivered => "too late: already delivered".to_owned(),
            Cancelled::AlreadyFinal(status) => format!("already {}", status.as_str()),
        };
        println!("{channel:<6} {what}");
    }
    let reminder = match report.reminder {
        reminders::ports::Marked::Marked => "reminder cancelled".to_owned(),
        reminders::ports::Marked::Changed => match p.reminders.get(&id).await.map_err(err)? {
            Some(r) if r.status == reminders::domain::ReminderStatus::Cancelled => {
                "reminder already cancelled".to_owned()
            }
            Some(r) if !reminders::ports::reminders::editable(r.status) => {
                format!("reminder already {}", r.status.as_str())
            }
            _ => "reminder changed meanwhile: run cancel again".to_owned(),
        },
        reminders::ports::Marked::Missing => "reminder is gone".to_owned(),
    };
    println!("{reminder}");
    Ok(())
}

/// What a delivery with no ledger item means, by the reminder's status.
fn never_claimed(status: reminders::domain::ReminderStatus) -> &'static str {
    use reminders::domain::ReminderStatus as S;
    match status {
        S::Scheduled => "not enqueued yet",
        S::Enqueued => "enqueued, not yet claimed by a worker",
        S::Expired => "expired before it was sent",
        S::Cancelled => "cancelled before it was sent",
        S::Invalid => "never sent: the reminder is invalid",
    }
}

pub async fn show(raw_id: String, json: bool) -> Result<(), String> {
    let p = ports().await?;
    // An item another writer got wrong (an id outside the alphabet, a missing attribute) is
    // still shown: its raw status, why it was quarantined, and what cannot be read.
    let parsed = ReminderId::parse(raw_id.clone());
    let got = match &parsed {
        Ok(id) => p.reminders.get(id).await,
        Err(e) => Err(reminders::ports::PortError::Corrupt {
            op: "reminders.get",
            message: format!("reminder_id: {e}"),
        }),
    };
    let r = match got {
        Ok(Some(r)) => r,
        Ok(None) => return Err("no such reminder".into()),
        Err(reminders::ports::PortError::Corrupt { message, .. }) => {
            return show_unreadable(&p, &raw_id, &message, json).await
        }
        Err(e) => return Err(err(e)),
    };
    let mut deliveries = Vec::new();
    for (channel, recipient) in &r.recipients {
        let key = DeliveryKey::derive(&r.reminder_id, &r.subscriber_id, *channel);
        let rec = p.ledger.get(&key).await.map_err(err)?;
        deliveries.push((*channel, recipient.fingerprint(), key, rec));
    }
    if json {
        let deliveries: Vec<serde_json::Value> = deliveries
            .iter()
            .map(|(channel, fingerprint, key, rec)| {
                let ledger = match rec {
                    None => serde_json::json!({ "item": null, "meaning": never_claimed(r.status) }),
                    Some(rec) => serde_json::json!({
                        "status": rec.status().as_str(),
                        "attempts": rec.attempt_count(),
                        "throttles": rec.throttle_count(),
                        "dead_reason": rec.dead_reason().map(|d| d.as_str()),
                        "last_error": current_error(rec),
                        "history": rec.history().into_iter().map(|(n, h)| serde_json::json!({
                            "n": n,
                            "at": h.at.to_rfc3339(),
                            "at_ms": h.at.as_millis(),
                            "from": h.from.as_str(),
                            "to": h.to.as_str(),
                            "detail": h.detail,
                            "redrive": h.redrive.as_ref().map(|a| serde_json::json!({
                                "batch_id": a.batch_id, "operator": a.operator, "note": a.note,
                            })),
                        })).collect::<Vec<_>>(),
                    }),
                };
                serde_json::json!({
                    "channel": channel.as_str(),
                    "recipient_fingerprint": fingerprint.to_string(),
                    "delivery_key": key.to_string(),
                    "ledger": ledger,
                })
            })
            .collect();
        let out = serde_json::json!({
            "reminder_id": r.reminder_id.to_string(),
            "subscriber_id": r.subscriber_id.to_string(),
            "status": r.status.as_str(),
            "payload_version": r.payload_version,
            "invalid_reason": r.invalid_reason,
            "due_at": r.due_at.to_rfc3339(),
            "due_at_ms": r.due_at.as_millis(),
            "fresh_until": r.fresh_until.to_rfc3339(),
            "fresh_until_ms": r.fresh_until.as_millis(),
            "deliveries": deliveries,
        });
        println!("{out}");
        return Ok(());
    }
    println!(
        "reminder     {} (subscriber {})",
        r.reminder_id, r.subscriber_id
    );
    println!(
        "status       {} · payload v{}",
        r.status.as_str(),
        r.payload_version
    );
    if let Some(why) = &r.invalid_reason {
        println!("invalid      {why} (quarantined by the scheduler)");
    }
    println!(
        "due          {} · fresh until {}",
        r.due_at.to_rfc3339(),
        r.fresh_until.to_rfc3339()
    );
    for (channel, fingerprint, key, rec) in &deliveries {
        // Recipients are personal data: a fingerprint only.
        println!("\n{channel} → recipient #{fingerprint} · key {key}");
        match rec {
            None => println!("  ledger     no item: {}", never_claimed(r.status)),
            Some(rec) => {
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
                for (n, h) in rec.history() {
                    let audit = h
                        .redrive
                        .as_ref()
                        .map(|a| format!(" [redrive {} by {}: {}]", a.batch_id, a.operator, a.note))
                        .unwrap_or_default();
                    println!(
                        "  #{n:<3} {} {} → {}{}{audit}",
                        h.at.to_rfc3339(),
                        h.from.as_str(),
                        h.to.as_str(),
                        h.detail
                            .as_deref()
                            .map(|d| format!(" ({d})"))
                            .unwrap_or_default()
                    );
                }
            }
        }
    }
    Ok(())
}

/// The last error while it describes the delivery's state: an error from before a delivery
/// is history, not its state.
fn current_error(rec: &reminders::delivery::state::DeliveryRecord) -> Option<&str> {
    rec.last_error()
        .filter(|_| rec.status() != reminders::delivery::state::Status::Delivered)
}

fn channels(only: Option<Channel>) -> Vec<Channel> {
    only.map_or_else(|| Channel::ALL.to_vec(), |c| vec![c])
}

pub async fn dlq_summary(channel: Option<Channel>, json: bool) -> Result<(), String> {
    let p = ports().await?;
    let now = p.clock.now();
    let mut out = serde_json::Map::new();
    for c in channels(channel) {
        let msgs = peek(&p.dead_letters, c, 10_000, 120).await.map_err(err)?;
        // One death copied twice (a worker stopped between the copy and recording it) is one
        // death: same delivery key, same `dead_at`.
        let mut deaths = std::collections::BTreeSet::new();
        let mut by: BTreeMap<DeadReason, (u32, Option<Timestamp>)> = BTreeMap::new();
        for m in &msgs {
            let key = DeliveryMessage::decode(&m.message.body)
                .map(|d| d.delivery_key.to_string())
                .unwrap_or_else(|_| m.message.message_id.clone());
            let dead_at = m.letter.evidence.as_ref().map(|e| e.dead_at);
            if !deaths.insert((key, dead_at, m.letter.reason)) {
                continue;
            }
            let e = by.entry(m.letter.reason).or_insert((0, None));
            e.0 += 1;
            if let Some(ev) = &m.letter.evidence {
                e.1 = Some(e.1.map_or(ev.dead_at, |t: Timestamp| t.min(ev.dead_at)));
            }
        }
        let repeats = msgs.len() - deaths.len();
        let note = if repeats > 0 {
            format!(
                " ({} messages: {repeats} repeated copies of one death)",
                msgs.len()
            )
        } else {
            String::new()
        };
        if json {
            let reasons: serde_json::Map<String, serde_json::Value> = by
                .iter()
                .map(|(reason, (n, oldest))| {
                    (
                        reason.as_str().to_owned(),
                        serde_json::json!({
                            "dead": n,
                            "oldest_dead_at": oldest.map(|t| t.to_rfc3339()),
                            "oldest_dead_at_ms": oldest.map(|t| t.as_millis()),
                            "oldest_age_secs": oldest.map(|t| now.since(t).as_secs()),
                        }),
                    )
                })
                .collect();
            out.insert(
                c.as_str().to_owned(),
                serde_json::json!({
                    "dead": deaths.len(),
                    "messages": msgs.len(),
                    "by_reason": reasons,
                }),
            );
            continue;
        }
        println!("{c}: {} dead{note}", deaths.len());
        for (reason, (n, oldest)) in by {
            let age = oldest.map_or("age unknown".to_owned(), |t| {
                format!("oldest {} s", now.since(t).as_secs())
            });
            println!("  {:<24}{n:>6}   {age}", reason.as_str());
        }
    }
    if json {
        println!("{}", serde_json::Value::Object(out));
    }
    Ok(())
}

pub async fn dlq_show(
    channel: Channel,
    reason: DeadReason,
    limit: u32,
    json: bool,
) -> Result<(), String> {
    let p = ports().await?;
    let msgs = peek(&p.dead_letters, channel, 10_000, 120)
        .await
        .map_err(err)?;
    for m in msgs
        .iter()
        .filter(|m| m.letter.reason == reason)
        .take(limit as usize)
    {
        let decoded = DeliveryMessage::decode(&m.message.body);
        if json {
            // One JSON line per dead delivery; never the recipient.
            let ev = m.letter.evidence.as_ref();
            let line = serde_json::json!({
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
            });
            println!("{line}");
            continue;
        }
        let what = match decoded {
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
    Ok(())
}

pub struct RedriveArgs {
    pub request: RedriveRequest,
    pub yes: bool,
    pub json: bool,
}

pub async fn redrive(args: RedriveArgs) -> Result<(), String> {
    args.request.validate().map_err(err)?;
    let req = args.request;
    if !req.dry_run && !args.yes {
        eprint!(
            "redrive up to {} {:?} message(s) from the {} DLQ back to its queue? [y/N] ",
            req.max_messages,
            req.reasons.iter().map(|r| r.as_str()).collect::<Vec<_>>(),
            req.channel
        );
        let _ = std::io::stderr().flush();
        let mut answer = String::new();
        let _ = std::io::stdin().lock().read_line(&mut answer);
        if !matches!(answer.trim(), "y" | "yes") {
            return Err("not confirmed; nothing moved".into());
        }
    }
    let p = ports().await?;
    let bar = indicatif::ProgressBar::new_spinner();
    bar.set_message(if req.dry_run { "counting" } else { "redriving" });
    bar.enable_steady_tick(Duration::from_millis(120));
    let cfg = RedriveConfig::from_env().map_err(|e| e.to_string())?;
    let redriver = Redriver::new(p, cfg, seed());
    let summary = redriver.run(&req, None).await.map_err(err)?;
    bar.finish_and_clear();
    if args.json {
        println!("{}", serde_json::to_string(&summary).map_err(err)?);
        return Ok(());
    }
    println!(
        "batch {}{}",
        summary.batch_id,
        if summary.dry_run {
            " (dry run: nothing moved)"
        } else {
            ""
        }
    );
    println!(
        "{:<24}{:>6}{:>8}{:>6}{:>8}{:>6}{:>9}{:>8}{:>7}",
        "reason", "seen", "matched", "moved", "skipped", "stale", "released", "refused", "failed"
    );
    for (reason, c) in &summary.by_reason {
        println!(
            "{:<24}{:>6}{:>8}{:>6}{:>8}{:>6}{:>9}{:>8}{:>7}",
            reason.as_str(),
            c.seen,
            c.matched,
            c.moved,
            c.skipped,
            c.stale,
            c.released,
            c.refused,
            c.failed
        );
    }
    Ok(())
}

fn seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Who runs the command, for the audit trail: `$USER` or `$LOGNAME`; none is an error (an
/// audit entry must name someone).
pub fn operator_default() -> Result<String, String> {
    env("USER")
        .or_else(|| env("LOGNAME"))
        .filter(|u| !u.trim().is_empty())
        .ok_or_else(|| "--operator: required (no $USER or $LOGNAME to default to)".into())
}
