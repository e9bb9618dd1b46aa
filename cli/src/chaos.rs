//! `remindctl chaos`: the system checker over seeded worlds (see `reminders_harness::chaos`).

use indicatif::{ProgressBar, ProgressStyle};
use reminders_harness::chaos::{self, Plant};

/// The system checker: seeded worlds with faults everywhere, every delivery judged.
///
/// Each world runs the real scheduler, consumer, redrive and events handler on in-memory ports
/// with faults at every port call, crashes, duplicate and concurrent deliveries, redrives,
/// cancels, edits, series, erasures, the recipients' rules and a newer version writing beside
/// this one, and lines up the windows where those features meet. Then every delivery is judged
/// against each promise (never sent twice, none lost, nothing stale or after a cancel, …).
/// Exits non-zero, naming the seed to replay, if any world breaks one. What each world does and
/// each verdict means: docs/testing.md, "The system checker".
///
/// Example: remindctl chaos --seeds 300 --json
#[derive(Debug, clap::Args)]
pub struct ChaosArgs {
    /// How many worlds.
    #[arg(long, default_value_t = 100)]
    seeds: u64,
    /// The first seed.
    #[arg(long, default_value_t = 0)]
    from: u64,
    /// Print the totals as one JSON line.
    #[arg(long)]
    json: bool,
    /// Break the system on purpose, to see the checker catch it. Each plant fires a
    /// counter of the JSON in 60 worlds (`--seeds 60`; stale-last-look needs 120, as few worlds
    /// line a probe up with its freshness's end): ack-before-outcome → lost,
    /// ignore-retry-after → early_sends, unfenced-ledger → duplicated, drop-dead-letters →
    /// dead_without_copy, 5xx-permanent → unjustified_endings, hide-breaker →
    /// unjustified_endings, late-freshness → stale_sends, lost-cancel →
    /// sends_after_cancel, double-dead-letters → extra_dlq_copies, forget-attempts →
    /// budget_exceeded, early-freshness → unjustified_endings, strip-dead-letter-reason →
    /// dead_without_copy, ignore-opt-outs → sent_while_opted_out, ignore-quiet-hours →
    /// sent_in_quiet_hours, drop-event → event_missing, drop-freshness-edit →
    /// expired_while_fresh, drop-added-channels → acknowledged_change_ignored,
    /// ignore-fallback-order → two_channels_sent, lose-fallback-messages → stranded,
    /// refuse-newer-values → event_missing, forget-maybe-sent → two_channels_sent,
    /// expire-over-an-edit → expired_while_fresh, keep-old-horizon → duplicated,
    /// stale-last-look → stale_sends, ignore-countries → sent_abroad, lost-hand-on →
    /// two_channels_sent, skip-ahead → occurrence_missing, forget-made → occurrence_doubled,
    /// forget-edited-away → acknowledged_change_ignored, reorder-sends-both →
    /// two_channels_sent, fallback-best-effort → stranded, forget-recorded-chain →
    /// two_channels_sent, forget-owed-after → occurrence_unowed, erase-misses-series →
    /// sent_after_erasure, forget-detached → duplicated, plain-cursor → cursor_leak,
    /// drop-unknown → newer_attribute_dropped.
    #[arg(long)]
    plant: Option<String>,
    /// Give each consumer worker a clock off the world's by up to this many milliseconds,
    /// either way (drawn from the seed). By default the clock margin the consumer allows
    /// (1,000 ms): beyond it, a worker whose clock runs ahead may expire a reminder before
    /// its fresh_until (expired_while_fresh) and one that runs behind may send after it
    /// (stale_sends), as docs/testing.md, "Clock skew", says; a provider's Retry-After is then judged
    /// with twice this allowed (two workers' clocks). 0 gives every worker the world's
    /// clock.
    #[arg(long, default_value_t = default_skew_ms())]
    skew_ms: u32,
}

pub fn run(args: ChaosArgs) -> Result<(), String> {
    let plant = match &args.plant {
        None => None,
        Some(name) => Some(Plant::parse(name).ok_or_else(|| {
            let names: Vec<&str> = Plant::ALL.iter().map(|p| p.name()).collect();
            format!(
                "--plant: unknown fault {name:?} (one of: {})",
                names.join(", ")
            )
        })?),
    };
    if args.seeds == 0 {
        return Err("--seeds: give at least 1".into());
    }
    let bar = if args.json {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(args.seeds).with_style(
            ProgressStyle::with_template("{bar:40} {pos}/{len} worlds, {elapsed} ({eta} left)")
                .map_err(|e| e.to_string())?,
        )
    };
    let worlds = chaos::Worlds {
        plant,
        worker_skew_ms: args.skew_ms,
    };
    let (total, failing) = chaos::run(args.from, args.seeds, worlds, &|_| bar.inc(1));
    bar.finish_and_clear();
    // The replay runs the same worlds: the same plant, the same skew when it is not the default.
    let mut same = plant.map_or(String::new(), |p| format!(" --plant {}", p.name()));
    if args.skew_ms != default_skew_ms() {
        same.push_str(&format!(" --skew-ms {}", args.skew_ms));
    }
    for r in &failing {
        eprintln!(
            "seed {} broke a promise; replay: remindctl chaos --seeds 1 --from {}{same}",
            r.seed, r.seed,
        );
        // Five a world, every one in a replay (a single seed).
        let shown = if args.seeds == 1 { usize::MAX } else { 5 };
        for f in r.findings.iter().take(shown) {
            eprintln!("  {f}");
        }
        if r.findings.len() > shown {
            eprintln!(
                "  … and {} more (the replay prints them all)",
                r.findings.len() - shown
            );
        }
    }
    if args.json {
        println!(
            "{}",
            serde_json::to_string(&total).map_err(|e| e.to_string())?
        );
    } else {
        print_human(&total);
    }
    if total.broken() == 0 && !args.json {
        println!("every promise kept in {}", n(total.seeds, "world"));
    }
    if total.broken() > 0 {
        return Err(format!(
            "{} of {} worlds broke a promise",
            failing.len(),
            total.seeds
        ));
    }
    Ok(())
}

fn print_human(t: &chaos::Tally) {
    println!(
        "{}, {}, {} injected",
        n(t.seeds, "world"),
        n(t.deliveries, "delivery"),
        n(t.faults_injected, "fault")
    );
    // Every promise, by the JSON's name, so that none is left out of the summary.
    let json = serde_json::to_value(t).unwrap_or_default();
    let promises: Vec<String> = chaos::Tally::BROKEN
        .iter()
        .map(|name| format!("{} {}", name.replace('_', " "), json[*name]))
        .collect();
    for line in promises.chunks(5) {
        println!("{}", line.join("  "));
    }
    println!(
        "({} flagged ambiguous, {}, {}, dead opted_out {}, expired_quiet_hours {})",
        t.flagged_ambiguous,
        n(t.preference_changes, "preference change"),
        n(t.quiet_holds, "quiet hold"),
        t.opted_out,
        t.expired_quiet_hours
    );
    println!(
        "({} applied, {} taken, {}, {}, {})",
        n(t.edits_applied, "edit"),
        n(t.fallbacks_taken, "fallback"),
        n(t.redrives_executed, "redrive"),
        n(t.reorders, "reorder"),
        n(t.settled_transitions, "settled transition")
    );
    println!(
        "({} created, {} made, {}, {} retried by the SDK)",
        n(t.series_created, "series"),
        n(t.occurrences_made, "occurrence"),
        n(t.erasures, "erasure"),
        n(t.writes_retried, "conditional write")
    );
    println!(
        "(occurrences put before they were made: {} moved earlier and {} later; {} of the earlier gone with the table's TTL when their instant came; {} deleted by the TTL by the end)",
        t.unmade_puts_earlier,
        t.unmade_puts_later,
        t.unmade_gone_by_instant,
        n(t.reminder_ttl_passed, "reminder")
    );
    println!(
        "({} judged, of a subscriber two applications share; {} a newer version wrote to beside this one)",
        n(t.cursors_judged, "list cursor"),
        n(t.newer_marks, "ledger item")
    );
}

/// `count` and its noun, plural unless one ("1 erasure", "2 erasures", "3 series").
fn n(count: u64, noun: &str) -> String {
    match (count, noun) {
        (1, _) => format!("1 {noun}"),
        (_, "series") => format!("{count} series"),
        (_, "delivery") => format!("{count} deliveries"),
        _ => format!("{count} {noun}s"),
    }
}

/// The chaos workers' default skew: the margin the consumer allows for a clock off the true
/// time (docs/design.md, "Clock margin"), so every world checks the promises hold at its edge.
fn default_skew_ms() -> u32 {
    chaos::Worlds::default().worker_skew_ms
}
