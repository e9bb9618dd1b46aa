//! `remindctl series create | show | cancel | list`: recurring series (docs/design.md, "Recurring
//! series") through the library the HTTP API uses (`reminders::series`), with the functions'
//! configuration.

use std::time::Duration;

use reminders::clock::{Clock, Timestamp};
use reminders::delivery::Cancelled;
use reminders::domain::series::{occurrence_id, NewSeries, Series};
use reminders::domain::{Access, Channel, Content, Recipient, SeriesId, SubscriberId};
use reminders::ports::{ReminderStore, SeriesStore};
use reminders::series::{self, Put, Refused};

use super::{err, ports, retention};

/// Create, inspect, cancel or list recurring series.
#[derive(Debug, clap::Subcommand)]
pub enum SeriesCommand {
    Create(Box<CreateArgs>),
    /// The series, its next occurrences and those made, each with its status.
    Show {
        #[arg(long)]
        id: String,
        /// One JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Cancel the series and every occurrence of it not yet sent.
    Cancel {
        #[arg(long)]
        id: String,
    },
    /// A subscriber's series.
    List {
        #[arg(long)]
        subscriber: String,
        #[arg(long, default_value_t = 25)]
        limit: u32,
    },
}

/// Create a series (or edit it: the same id again with other flags).
///
/// Example: remindctl series create --id standup-u42 --subscriber u-42 --rule "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR;BYHOUR=9;BYMINUTE=15" --zone Europe/Paris --subject Standup --body "in 5 minutes" --push device-token
#[derive(Debug, clap::Args)]
pub struct CreateArgs {
    #[arg(long)]
    id: String,
    #[arg(long)]
    subscriber: String,
    /// The RRULE (RFC 5545 subset: FREQ DAILY|WEEKLY|MONTHLY|YEARLY, INTERVAL, BYDAY, BYMONTHDAY,
    /// BYMONTH, BYHOUR, BYMINUTE, BYSETPOS, COUNT, UNTIL, WKST).
    #[arg(long)]
    rule: String,
    /// An IANA time zone: the rule's wall times are in it; or "subscriber": the subscriber's
    /// own time zone (their preferences), read as each occurrence is made.
    #[arg(long)]
    zone: String,
    /// The first possible occurrence, epoch ms [default: now, to the minute].
    #[arg(long)]
    starts_at: Option<i64>,
    /// No occurrence after this, epoch ms.
    #[arg(long)]
    until: Option<i64>,
    /// Each occurrence is worth sending for this long after it is due [default:
    /// $FRESHNESS_SECS, else 3600].
    #[arg(long)]
    fresh_secs: Option<u64>,
    #[arg(long, default_value = "")]
    subject: String,
    #[arg(long)]
    body: String,
    #[arg(long)]
    email: Option<String>,
    #[arg(long)]
    sms: Option<String>,
    #[arg(long)]
    push: Option<String>,
}

pub async fn run(cmd: SeriesCommand) -> Result<(), String> {
    match cmd {
        SeriesCommand::Create(args) => create(*args).await,
        SeriesCommand::Show { id, json } => show(id, json).await,
        SeriesCommand::Cancel { id } => cancel(id).await,
        SeriesCommand::List { subscriber, limit } => list(subscriber, limit).await,
    }
}

fn refused(r: Refused) -> String {
    match r {
        Refused::NotFound => "no such series".into(),
        Refused::Final(s) => format!("the series is {}: it can no longer change", s.as_str()),
        Refused::SubscriberChanged => "--subscriber cannot change: create another series".into(),
        Refused::Contended => "the series kept changing under the write: run it again".into(),
        Refused::NoSubscriberZone => "--zone subscriber: the subscriber has no time zone: \
            set one (remindctl subscriber set --id U --time-zone ZONE) or name an IANA zone"
            .into(),
    }
}

async fn create(a: CreateArgs) -> Result<(), String> {
    let p = ports().await?;
    let now = p.clock.now();
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
    let default_fresh = reminders::reminder_writes::default_freshness().map_err(err)?;
    let new = NewSeries {
        series_id: SeriesId::parse(a.id).map_err(|e| format!("--id: {e}"))?,
        subscriber_id: SubscriberId::parse(a.subscriber)
            .map_err(|e| format!("--subscriber: {e}"))?,
        rule: a.rule,
        zone: a.zone,
        // A rule without BYSECOND takes its seconds from the start (RFC 5545), so the default
        // start is this minute, not this millisecond: `BYHOUR=9;BYMINUTE=15` means 09:15:00.
        starts_at: a.starts_at.map_or(
            Timestamp::from_millis(now.as_millis() - now.as_millis().rem_euclid(60_000)),
            Timestamp::from_millis,
        ),
        until: a.until.map(Timestamp::from_millis),
        fresh_for: a.fresh_secs.map(Duration::from_secs),
        content: Content::Text {
            subject: a.subject,
            body: a.body,
        },
        recipients,
    };
    let s = Series::new(new, default_fresh)
        .map_err(|e| format!("--{}: {}", flag(&e.field()), e.requirement()))?;
    let put = series::put(&p.reminders, &p.ledger, &Access::Any, s, now, retention()?)
        .await
        .map_err(err)?
        .map_err(refused)?;
    let (what, s) = match put {
        Put::Created(s) => ("created", s),
        Put::Same(s) => ("unchanged", s),
        Put::Edited(s) => ("edited", s),
    };
    println!(
        "{what} {} (version {}, {})",
        s.series_id,
        s.version,
        s.status.as_str()
    );
    for at in s.instants_between(Some(Timestamp::from_millis(now.as_millis() - 1)), None, 3) {
        println!("  next {}  {}", at.to_rfc3339(), s.wall_time(at));
    }
    Ok(())
}

/// The flag a body field is given by.
fn flag(field: &str) -> String {
    match field {
        "fresh_for_secs" => "fresh-secs".into(),
        "recipients" => "push/--email/--sms".into(),
        other => other.replace('_', "-"),
    }
}

async fn show(id: String, json: bool) -> Result<(), String> {
    let p = ports().await?;
    let id = SeriesId::parse(id).map_err(|e| format!("--id: {e}"))?;
    let mut s = p
        .reminders
        .get_series(&id)
        .await
        .map_err(err)?
        .ok_or("no such series")?;
    if s.follows_subscriber() {
        // The next occurrences in the zone the subscriber has now.
        let prefs = p
            .reminders
            .preferences(&s.subscriber_id)
            .await
            .map_err(err)?;
        s.localise(prefs.and_then(|p| p.time_zone).as_ref().map(|z| z.name()));
    }
    let now = p.clock.now();
    let next = s.instants_between(Some(Timestamp::from_millis(now.as_millis() - 1)), None, 5);
    let mut made = Vec::new();
    for &at in s.made.iter().rev().take(20) {
        let rid = occurrence_id(&s.series_id, at);
        let status = match p.reminders.get(&rid).await.map_err(err)? {
            Some(r) => r.status.as_str(),
            None => "removed",
        };
        made.push((at, rid, status));
    }
    if json {
        let out = serde_json::json!({
            "series_id": s.series_id.as_str(),
            "subscriber_id": s.subscriber_id.as_str(),
            "status": s.status.as_str(),
            "version": s.version,
            "rule": s.rule.as_text(),
            "zone": s.zone,
            "local_zone": s.follows_subscriber().then_some(s.local_zone.as_deref()).flatten(),
            "next_occurrences": next.iter().map(|t| serde_json::json!({
                "occurrence_at": t.to_rfc3339(), "wall_time": s.wall_time(*t),
                "reminder_id": occurrence_id(&s.series_id, *t).as_str()})).collect::<Vec<_>>(),
            "occurrences": made.iter().map(|(t, rid, status)| serde_json::json!({
                "occurrence_at": t.to_rfc3339(), "wall_time": s.wall_time(*t),
                "reminder_id": rid.as_str(), "status": status})).collect::<Vec<_>>(),
        });
        println!("{out}");
        return Ok(());
    }
    println!(
        "series   {} ({}, version {})",
        s.series_id,
        s.status.as_str(),
        s.version
    );
    println!("for      {}", s.subscriber_id);
    match (s.follows_subscriber(), s.effective_zone()) {
        (true, Some(z)) => println!(
            "rule     {} in the subscriber's zone, now {z}",
            s.rule.as_text()
        ),
        _ => println!("rule     {} in {}", s.rule.as_text(), s.zone),
    }
    for t in &next {
        println!("next     {}  {}", t.to_rfc3339(), s.wall_time(*t));
    }
    for (t, rid, status) in &made {
        println!("made     {}  {:<10} {rid}", t.to_rfc3339(), status);
    }
    Ok(())
}

async fn cancel(id: String) -> Result<(), String> {
    let p = ports().await?;
    let id = SeriesId::parse(id).map_err(|e| format!("--id: {e}"))?;
    let now = p.clock.now();
    let (s, cancels) = series::cancel(
        &p.reminders,
        &p.ledger,
        &Access::Any,
        &id,
        now,
        retention()?,
    )
    .await
    .map_err(err)?
    .map_err(refused)?;
    println!("series {} {}", s.series_id, s.status.as_str());
    for (at, report) in cancels {
        for (channel, outcome) in report.deliveries {
            let what = match outcome {
                Cancelled::Cancelled => "cancelled".to_owned(),
                Cancelled::AlreadyInFlight => "too late: being sent now".to_owned(),
                Cancelled::AlreadyDelivered => "too late: already delivered".to_owned(),
                Cancelled::AlreadyFinal(status) => format!("already {}", status.as_str()),
            };
            println!("  {} {channel:<6} {what}", at.to_rfc3339());
        }
    }
    Ok(())
}

async fn list(subscriber: String, limit: u32) -> Result<(), String> {
    let p = ports().await?;
    let sub = SubscriberId::parse(subscriber).map_err(|e| format!("--subscriber: {e}"))?;
    let page = p
        .reminders
        .series_of(&sub, None, limit.clamp(1, 1000))
        .await
        .map_err(err)?;
    if page.items.is_empty() {
        println!("no series");
    }
    for s in &page.items {
        println!(
            "{:<40} {:<9} {} in {}",
            s.series_id,
            s.status.as_str(),
            s.rule.as_text(),
            s.zone
        );
    }
    if page.next.is_some() {
        println!("(more: raise --limit)");
    }
    Ok(())
}
