//! `remindctl redrive`: a bounded, filtered, audited replay of a channel's DLQ, by the same
//! code as the redrive function; a dry run unless `--execute`, confirmed unless `--yes`.

use std::io::{BufRead, IsTerminal, Write};
use std::time::Duration;

use reminders::clock::Timestamp;
use reminders::domain::{Channel, DeadReason};
use reminders::redrive::{RedriveConfig, RedriveRequest, RedriveSummary, Redriver};

use super::{err, operator_default, parse_channel, parse_reason, ports};

/// Replay a bounded, filtered selection of a DLQ (dry run unless --execute).
///
/// Example: remindctl redrive --channel sms --reason attempts_exhausted --max 100 --note "provider fixed" --execute
#[derive(Debug, clap::Args)]
pub struct RedriveArgs {
    #[arg(long, value_parser = parse_channel)]
    channel: Channel,
    /// Dead reason to replay (repeat for several); there is no "all".
    #[arg(long = "reason", required = true, value_parser = parse_reason)]
    reasons: Vec<DeadReason>,
    /// Hard upper bound on messages moved.
    #[arg(long = "max")]
    max_messages: u32,
    #[arg(long, default_value_t = 10)]
    max_per_second: u32,
    /// Actually move messages (the default is a dry run).
    #[arg(long)]
    execute: bool,
    /// Do not ask for confirmation.
    #[arg(long)]
    yes: bool,
    /// Print the summary as one JSON line.
    #[arg(long)]
    json: bool,
    /// Recorded in the audit entry (default: $USER).
    #[arg(long)]
    operator: Option<String>,
    #[arg(long, default_value = "")]
    note: String,
    /// Only messages dead at or after this epoch-ms time.
    #[arg(long)]
    dead_after: Option<i64>,
    /// Only messages dead before this epoch-ms time.
    #[arg(long)]
    dead_before: Option<i64>,
    /// Give stale reminders this many more seconds of freshness.
    #[arg(long)]
    extend_freshness_secs: Option<u64>,
    /// Needed to redrive `ambiguous`: a provider that ignores idempotency keys may
    /// deliver those twice.
    #[arg(long)]
    accept_duplicates: bool,
}

pub async fn run(args: RedriveArgs) -> Result<(), String> {
    let (yes, json) = (args.yes, args.json);
    let req = request(args)?;
    req.validate().map_err(err)?;
    if !req.dry_run && !yes && !confirm(&req) {
        return Err("not confirmed; nothing moved".into());
    }
    let p = ports().await?;
    let bar = indicatif::ProgressBar::new_spinner();
    bar.set_message(if req.dry_run { "counting" } else { "redriving" });
    bar.enable_steady_tick(Duration::from_millis(120));
    let cfg = RedriveConfig::from_env().map_err(|e| e.to_string())?;
    let redriver = Redriver::new(p, cfg, seed());
    let summary = redriver.run(&req, None).await.map_err(err)?;
    bar.finish_and_clear();
    if json {
        println!("{}", serde_json::to_string(&summary).map_err(err)?);
    } else {
        print_summary(&summary);
    }
    Ok(())
}

fn request(a: RedriveArgs) -> Result<RedriveRequest, String> {
    Ok(RedriveRequest {
        channel: a.channel,
        reasons: a.reasons.into_iter().collect(),
        first_seen_after: None,
        first_seen_before: None,
        dead_after: a.dead_after.map(Timestamp::from_millis),
        dead_before: a.dead_before.map(Timestamp::from_millis),
        max_messages: a.max_messages,
        max_per_second: a.max_per_second,
        dry_run: !a.execute,
        // A dry run writes no audit entry; an executed one must name someone.
        operator: match (a.operator, a.execute) {
            (Some(o), _) => o,
            (None, true) => operator_default()?,
            (None, false) => operator_default().unwrap_or_else(|_| "dry-run".into()),
        },
        note: a.note,
        extend_freshness_secs: a.extend_freshness_secs,
        accept_duplicates: a.accept_duplicates,
    })
}

/// Asks on stderr; anything but y or yes is a no. The prompt's line is ended before anything
/// else is printed: by the operator's Enter on a terminal (echoed there), by us otherwise
/// (stdin piped, closed, or ended without a newline).
fn confirm(req: &RedriveRequest) -> bool {
    let reasons: Vec<&str> = req.reasons.iter().map(|r| r.as_str()).collect();
    eprint!(
        "redrive up to {} {} message(s) from the {} DLQ back to its queue? [y/N] ",
        req.max_messages,
        reasons.join(", "),
        req.channel
    );
    let _ = std::io::stderr().flush();
    let stdin = std::io::stdin();
    let mut answer = String::new();
    let _ = stdin.lock().read_line(&mut answer);
    if !(stdin.is_terminal() && answer.ends_with('\n')) {
        eprintln!();
    }
    matches!(answer.trim(), "y" | "yes")
}

fn print_summary(summary: &RedriveSummary) {
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
}

fn seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}
