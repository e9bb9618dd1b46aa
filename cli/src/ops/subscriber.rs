//! `remindctl subscriber set | show | erase`: a subscriber's preferences (docs/design.md,
//! "Preferences and quiet hours") — the channels it opted out of, quiet hours per channel in an
//! IANA zone, the fallback order — written and read through the same `ReminderStore` the consumer
//! reads them from. The flags build the stored and API shape (`PreferencesWire`), so they are
//! validated by the one parser, and an error names the flag and the field at fault.

use reminders::clock::{Clock, Timestamp};
use reminders::domain::preferences::{PreferencesError, PreferencesWire, QuietHoursWire};
use reminders::domain::{Preferences, SubscriberId};
use reminders::ports::ReminderStore;

use super::{err, ports};

/// Set or show a subscriber's preferences (same configuration as the functions).
#[derive(Debug, clap::Subcommand)]
pub enum SubscriberCommand {
    Set(SetArgs),
    /// The subscriber's preferences: opt-outs, each quiet window with its zone and whether it
    /// is quiet now, the fallback order.
    Show {
        #[arg(long)]
        id: String,
        /// The preferences as stored and as the API takes them (`null` when none), accepted
        /// back by `set --json`.
        #[arg(long)]
        json: bool,
    },
    /// Erase a subscriber: cancel every reminder still to be sent, lift the suppressions of
    /// their addresses (with SUPPRESSION_KEY_SECRET_ARN, which --stack sets), delete every
    /// reminder (recipients and content with it) and the preferences. The ledger keeps each
    /// delivery's masked history. Idempotent.
    ///
    /// Example: remindctl subscriber erase --id user-7
    Erase {
        #[arg(long)]
        id: String,
        /// What was removed, as the API's DELETE /v1/subscribers/{id} answers it.
        #[arg(long)]
        json: bool,
    },
}

/// Replace a subscriber's preferences as a whole: what the flags do not give is cleared
/// (no flag at all clears every preference).
///
/// Example: remindctl subscriber set --id user-7 --opt-out sms --quiet push=22:00-07:00@Europe/Paris --fallback push,email
#[derive(Debug, clap::Args)]
pub struct SetArgs {
    #[arg(long)]
    id: String,
    /// A channel the subscriber opted out of (repeatable): push, email or sms.
    #[arg(long = "opt-out", value_name = "CHANNEL")]
    opt_out: Vec<String>,
    /// Quiet hours of one channel, a local window in an IANA time zone (repeatable, once per
    /// channel), e.g. push=22:00-07:00@Europe/Paris.
    #[arg(long, value_name = "CHANNEL=HH:MM-HH:MM@ZONE")]
    quiet: Vec<String>,
    /// The fallback order, comma-separated: push,email.
    #[arg(long, value_name = "CHANNELS", value_delimiter = ',')]
    fallback: Vec<String>,
    /// The subscriber's own IANA time zone: a series in the zone "subscriber" makes each
    /// occurrence in it, e.g. America/New_York.
    #[arg(long = "time-zone", value_name = "ZONE")]
    time_zone: Option<String>,
    /// The whole preferences as the API and the store hold them, instead of the flags:
    /// {"opted_out": ["sms"], "quiet_hours": {"push": {"start": "22:00", "end": "07:00",
    /// "zone": "Europe/Paris"}}, "fallback": ["push", "email"]}.
    #[arg(long, value_name = "PREFERENCES", conflicts_with_all = ["opt_out", "quiet", "fallback", "time_zone"])]
    json: Option<String>,
}

pub async fn run(cmd: SubscriberCommand) -> Result<(), String> {
    match cmd {
        SubscriberCommand::Set(args) => set(args).await,
        SubscriberCommand::Show { id, json } => show(id, json).await,
        SubscriberCommand::Erase { id, json } => erase(id, json).await,
    }
}

fn subscriber(id: String) -> Result<SubscriberId, String> {
    SubscriberId::parse(id).map_err(|e| format!("--id: {e}"))
}

async fn set(a: SetArgs) -> Result<(), String> {
    // Everything the operator typed is checked before any AWS call.
    let sub = subscriber(a.id.clone())?;
    let prefs = preferences(&a)?;
    let p = ports().await?;
    p.reminders
        .put_preferences(&sub, &prefs)
        .await
        .map_err(err)?;
    let zone = prefs.time_zone.as_ref().map(|z| z.name());
    let moved = reminders::series::follow_zone(&p.reminders, &sub, zone)
        .await
        .map_err(err)?;
    println!("preferences set");
    if moved > 0 {
        println!("{moved} series in the zone \"subscriber\" follow the new time zone");
    }
    for line in describe(&sub, Some(&prefs), p.clock.now()) {
        println!("{line}");
    }
    Ok(())
}

async fn show(id: String, json: bool) -> Result<(), String> {
    let sub = subscriber(id)?;
    let p = ports().await?;
    let prefs = p.reminders.preferences(&sub).await.map_err(err)?;
    if json {
        println!("{}", serde_json::to_string(&prefs).map_err(err)?);
        return Ok(());
    }
    for line in describe(&sub, prefs.as_ref(), p.clock.now()) {
        println!("{line}");
    }
    Ok(())
}

async fn erase(id: String, json: bool) -> Result<(), String> {
    let sub = subscriber(id)?;
    let sdk = reminders::aws::sdk_config().await;
    let source = reminders::providers::secret::suppression_key(reminders::config::env, &sdk)
        .map_err(|e| e.to_string())?;
    let key = match &source {
        Some(s) => Some(s.get().await.map_err(err)?),
        None => None,
    };
    let p = ports().await?;
    let retention = reminders::domain::Retention::from_env().map_err(|e| e.to_string())?;
    let now = p.clock.now();
    let out =
        reminders::erasure::erase(&p.reminders, &p.ledger, key.as_ref(), &sub, now, retention)
            .await
            .map_err(err)?;
    let mut v = serde_json::to_value(&out).map_err(err)?;
    v["erased_at"] = serde_json::Value::String(now.to_rfc3339());
    // The event, as the API publishes it (EVENT_BUS_NAME, which --stack sets).
    let bus = reminders::aws::eventbridge::EventBridgeBus::optional(&sdk, reminders::config::env);
    let published = match &bus {
        Some(bus) => match bus.publish_erased(&v, now).await {
            Ok(()) => true,
            Err(e) => {
                eprintln!(
                    "remindctl: erased, but the event was not published: {}",
                    err(e)
                );
                false
            }
        },
        None => false,
    };
    v["event_published"] = serde_json::Value::Bool(published);
    if json {
        println!("{v}");
        return Ok(());
    }
    println!("erased subscriber {}", out.subscriber_id);
    println!("  series deleted        {}", out.series_deleted);
    println!("  reminders cancelled   {}", out.reminders_cancelled);
    println!("  reminders deleted     {}", out.reminders_deleted);
    println!(
        "  preferences           {}",
        if out.preferences_deleted {
            "deleted"
        } else {
            "none"
        }
    );
    match out.suppressions_lifted {
        Some(n) => println!("  suppressions lifted   {n}"),
        None => println!(
            "  suppressions          not looked up: no suppression key (SUPPRESSION_KEY_SECRET_ARN, or --stack)"
        ),
    }
    if out.reminders_left > 0 || !out.complete {
        println!(
            "  left for another call  {} (a send in flight, a reminder still changing, or more \
             than one call erases): run it again",
            out.reminders_left
        );
    }
    println!(
        "  event                 {}",
        match (&bus, published) {
            (Some(b), true) => format!("Subscriber Erased on {}", b.bus()),
            (Some(_), false) => "not published (see above)".to_owned(),
            (None, _) => "none: no EVENT_BUS_NAME (or --stack)".to_owned(),
        }
    );
    println!("  the ledger keeps each delivery's masked history until its TTL");
    Ok(())
}

/// The preferences the arguments give, validated by the domain's one parser.
fn preferences(a: &SetArgs) -> Result<Preferences, String> {
    let wire = match &a.json {
        Some(text) => from_json(text)?,
        None => from_flags(a)?,
    };
    Preferences::try_from(wire).map_err(|e| format!("{}: {e}", flag_of(&e, a.json.is_some())))
}

/// The flag an invalid field came from.
fn flag_of(e: &PreferencesError, json: bool) -> &'static str {
    let field = e.field();
    match () {
        _ if json => "--json",
        _ if field.starts_with("opted_out") => "--opt-out",
        _ if field.starts_with("quiet_hours") => "--quiet",
        _ if field == "time_zone" => "--time-zone",
        _ => "--fallback",
    }
}

const QUIET_SHAPE: &str = "expected CHANNEL=HH:MM-HH:MM@ZONE, e.g. push=22:00-07:00@Europe/Paris";

fn from_flags(a: &SetArgs) -> Result<PreferencesWire, String> {
    let mut wire = PreferencesWire {
        opted_out: a.opt_out.clone(),
        fallback: a.fallback.clone(),
        time_zone: a.time_zone.clone(),
        ..PreferencesWire::default()
    };
    for q in &a.quiet {
        let (channel, window) = quiet_flag(q).ok_or_else(|| format!("--quiet: {QUIET_SHAPE}"))?;
        if wire.quiet_hours.insert(channel.clone(), window).is_some() {
            return Err(format!(
                "--quiet: {channel} given twice (one window per channel)"
            ));
        }
    }
    Ok(wire)
}

/// `push=22:00-07:00@Europe/Paris` split into its parts; the parts are checked by the domain.
fn quiet_flag(flag: &str) -> Option<(String, QuietHoursWire)> {
    let (channel, rest) = flag.split_once('=')?;
    let (window, zone) = rest.split_once('@')?;
    let (start, end) = window.split_once('-')?;
    let wire = QuietHoursWire {
        start: start.to_owned(),
        end: end.to_owned(),
        zone: zone.to_owned(),
    };
    Some((channel.to_owned(), wire))
}

/// The stored shape, with no key beyond its four: a misspelt key would otherwise be dropped
/// and the preference silently cleared.
fn from_json(text: &str) -> Result<PreferencesWire, String> {
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("--json: not JSON ({e})"))?;
    let Some(object) = value.as_object() else {
        return Err("--json: must be an object".into());
    };
    if let Some(unknown) = object
        .keys()
        .find(|k| !["opted_out", "quiet_hours", "fallback", "time_zone"].contains(&k.as_str()))
    {
        return Err(format!(
            "--json: {unknown}: unknown field (expected opted_out, quiet_hours, fallback or time_zone)"
        ));
    }
    serde_json::from_value(value).map_err(|e| format!("--json: {e}"))
}

/// The preferences in operator lines; `now` tells whether each quiet window is on.
fn describe(sub: &SubscriberId, prefs: Option<&Preferences>, now: Timestamp) -> Vec<String> {
    let mut lines = vec![format!("subscriber   {sub}")];
    let Some(p) = prefs else {
        lines.push("no preferences: every listed channel is sent, at any hour".into());
        return lines;
    };
    let opted: Vec<&str> = p.opted_out.iter().map(|c| c.as_str()).collect();
    lines.push(format!("opted out    {}", list_or_none(&opted, ", ")));
    if p.quiet_hours.is_empty() {
        lines.push("quiet hours  none".into());
    }
    for (i, (channel, q)) in p.quiet_hours.iter().enumerate() {
        let label = if i == 0 { "quiet hours" } else { "" };
        let now_says = match q.hold_until(now) {
            Some(until) => format!("quiet now, until {}", until.to_rfc3339()),
            None => "not quiet now".to_owned(),
        };
        lines.push(format!(
            "{label:<12} {:<6} {}–{} {} · {now_says}",
            channel.as_str(),
            q.start,
            q.end,
            q.zone
        ));
    }
    let fallback: Vec<&str> = p.fallback.iter().map(|c| c.as_str()).collect();
    lines.push(match fallback.as_slice() {
        [] => "fallback     none: every listed channel is sent".to_owned(),
        order => format!("fallback     {}", order.join(" → ")),
    });
    lines.push(match &p.time_zone {
        Some(z) => format!("time zone    {z} (series in the zone \"subscriber\" follow it)"),
        None => "time zone    none".to_owned(),
    });
    lines
}

fn list_or_none(items: &[&str], sep: &str) -> String {
    match items {
        [] => "none".to_owned(),
        _ => items.join(sep),
    }
}

#[cfg(test)]
#[path = "subscriber_tests.rs"]
mod tests;
