//! `remindctl remind create | cancel | show | quarantined`: one reminder at a time, through
//! the same reminder writes the HTTP API uses (`show` has a module of its own).

use std::time::Duration;

use reminders::clock::{Clock, Timestamp};
use reminders::delivery::Cancelled;
use reminders::domain::{
    Channel, Content, DeliveryKey, NewReminder, Recipient, ReminderId, ReminderStatus, SubscriberId,
};
use reminders::ports::{Marked, ReminderStore};
use reminders::reminder_writes;

use super::{err, ports, retention, show, OpsPorts};

/// Create, cancel or inspect a reminder (same configuration as the functions).
#[derive(Debug, clap::Subcommand)]
pub enum RemindCommand {
    Create(CreateArgs),
    /// Cancel a reminder: ledger first (ordered against sends), then its status.
    Cancel {
        #[arg(long)]
        id: String,
    },
    /// The reminder, each channel's ledger state and its transition history.
    Show {
        #[arg(long)]
        id: String,
        /// One JSON object (times also as epoch milliseconds).
        #[arg(long)]
        json: bool,
    },
    /// Reminders the scheduler quarantined (status invalid), each with the attribute at
    /// fault. Reads the whole table (a scan), up to --limit items.
    Quarantined {
        #[arg(long, default_value_t = 100)]
        limit: u32,
    },
}

/// Create a reminder.
///
/// Example: remindctl remind create --id order-42 --subscriber user-7 --due-in 300 --subject Pickup --body "at 5pm" --sms +14155550123
#[derive(Debug, clap::Args)]
pub struct CreateArgs {
    #[arg(long)]
    id: String,
    #[arg(long)]
    subscriber: String,
    /// Due in this many seconds (negative: that long ago). Without --due-in or --due-at,
    /// it is due now.
    #[arg(long, allow_negative_numbers = true)]
    due_in: Option<i64>,
    /// Due at this epoch-ms time.
    #[arg(long, allow_negative_numbers = true)]
    due_at: Option<i64>,
    /// Worth sending for this long after it is due [default: $FRESHNESS_SECS, else 3600].
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

pub async fn run(cmd: RemindCommand) -> Result<(), String> {
    match cmd {
        RemindCommand::Create(args) => create(args).await,
        RemindCommand::Cancel { id } => cancel(id).await,
        RemindCommand::Show { id, json } => show::run(id, json).await,
        RemindCommand::Quarantined { limit } => quarantined(limit).await,
    }
}

async fn create(a: CreateArgs) -> Result<(), String> {
    let fresh_secs = match a.fresh_secs {
        Some(secs) => secs,
        None => reminder_writes::default_freshness()
            .map_err(|e| e.to_string())?
            .as_secs(),
    };
    let p = ports().await?;
    let now = p.clock.now();
    let new = new_reminder(a, now, fresh_secs)?;
    let created = reminder_writes::create(
        &p.reminders,
        new,
        Duration::from_secs(fresh_secs),
        retention()?,
        now,
    )
    .await
    .map_err(err)?;
    let r = created.ok_or("a reminder with this id already exists")?;
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

/// The flags as a reminder: the due time resolved against `now`, each recipient parsed.
fn new_reminder(a: CreateArgs, now: Timestamp, fresh_secs: u64) -> Result<NewReminder, String> {
    let due_at = match (a.due_at, a.due_in) {
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
    if recipients.is_empty() {
        return Err("no recipient: give --email, --sms or --push (one or more)".into());
    }
    Ok(NewReminder {
        reminder_id: ReminderId::parse(a.id).map_err(err)?,
        subscriber_id: SubscriberId::parse(a.subscriber).map_err(err)?,
        due_at,
        fresh_until: Some(due_at.plus(Duration::from_secs(fresh_secs))),
        content: Content::Text {
            subject: a.subject,
            body: a.body,
        },
        recipients,
    })
}

async fn cancel(id: String) -> Result<(), String> {
    let p = ports().await?;
    let id = ReminderId::parse(id).map_err(err)?;
    let report = reminder_writes::cancel(&p.reminders, &p.ledger, &id, p.clock.now(), retention()?)
        .await
        .map_err(err)?
        .ok_or("no such reminder")?;
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
    println!("{}", reminder_cancelled(&p, &id, report.reminder).await?);
    Ok(())
}

/// What became of the reminder's own status; when another writer changed it first, what it
/// is now.
async fn reminder_cancelled(p: &OpsPorts, id: &ReminderId, m: Marked) -> Result<String, String> {
    Ok(match m {
        Marked::Marked => "reminder cancelled".to_owned(),
        Marked::Changed => match p.reminders.get(id).await.map_err(err)? {
            Some(r) if r.status == ReminderStatus::Cancelled => {
                "reminder already cancelled".to_owned()
            }
            Some(r) if !reminders::ports::reminders::editable(r.status) => {
                format!("reminder already {}", r.status.as_str())
            }
            _ => "reminder changed meanwhile: run cancel again".to_owned(),
        },
        Marked::Missing => "reminder is gone".to_owned(),
    })
}

async fn quarantined(limit: u32) -> Result<(), String> {
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
