//! What `local run` says while it runs and when it stops: the progress line, why it stopped,
//! what is still held and when it comes back, the failing shards, as text or one JSON object.

use std::time::Duration;

use reminders::domain::Channel;
use reminders_harness::local;

/// A live progress line on a terminal; nothing of the kind in a pipe or with --json.
pub(super) fn progress_bar(json: bool) -> Option<indicatif::ProgressBar> {
    use std::io::IsTerminal;
    (!json && std::io::stderr().is_terminal()).then(|| {
        let bar = indicatif::ProgressBar::new_spinner();
        bar.enable_steady_tick(Duration::from_millis(200));
        bar
    })
}

/// `delivered 12 · expired 0 · dead 1 · cancelled 0 · retried errors 0 | push 3 (1 in flight, 2 delayed) · email 0 · sms ?`
pub fn progress_line(p: &local::Progress) -> String {
    let mut totals = [0u32; 4];
    for c in Channel::ALL {
        let m = p.report.metrics.get(c);
        totals[0] += m.delivered;
        totals[1] += m.expired;
        totals[2] += m.dead_total();
        totals[3] += m.cancelled;
    }
    let queues: Vec<String> = Channel::ALL
        .iter()
        .map(|c| match p.depths.get(*c) {
            None => format!("{c} ?"),
            Some(d) if d.total() == 0 => format!("{c} 0"),
            Some(d) => format!(
                "{c} {} ({} in flight, {} delayed)",
                d.total(),
                d.in_flight,
                d.delayed
            ),
        })
        .collect();
    let failing = match p.report.failing_shards.len() {
        0 => String::new(),
        n => format!(" · shards failing {n}"),
    };
    format!(
        "delivered {} · expired {} · dead {} · cancelled {} · retried errors {}{failing} | {}",
        totals[0],
        totals[1],
        totals[2],
        totals[3],
        p.report.retried_errors,
        queues.join(" · ")
    )
}

pub(super) async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

fn why_stopped(report: &local::LocalReport, interrupted: bool) -> String {
    let why: String = match (interrupted, report.idle, report.next_due) {
        (true, _, _) => "interrupted".into(),
        (_, true, Some(at)) => format!("idle; next reminder due {}", at.to_rfc3339()),
        (_, true, None) => "idle; nothing scheduled".into(),
        _ => "time limit".into(),
    };
    let held: u32 = report.held.iter().map(|h| h.messages).sum();
    match held {
        0 => why,
        1 => format!("{why}; 1 delivery still pending (below)"),
        n => format!("{why}; {n} deliveries still pending (below)"),
    }
}

/// `email: 1 delivery held until 2026-12-07T00:14:05Z (in 149 s; quiet hours or a retry's
/// backoff): its message waits in the queue; …`
pub fn held_line(h: &local::Held, now: reminders::clock::Timestamp) -> String {
    let n = h.messages;
    let what = format!(
        "{}: {n} deliver{}",
        h.channel,
        if n == 1 { "y" } else { "ies" }
    );
    match h.first_back {
        Some(at) => format!(
            "{what} held{} {} (in {} s; quiet hours or a retry's backoff): {} in the \
             queue; `local run` again then takes {}, and `remind show` says why",
            if n == 1 {
                " until"
            } else {
                ", the first until"
            },
            at.to_rfc3339(),
            at.since(now).as_secs(),
            if n == 1 {
                "its message waits"
            } else {
                "their messages wait"
            },
            if n == 1 { "it" } else { "them" },
        ),
        None => format!(
            "{what} in flight since before this run (held by an earlier run, or a worker that \
             stopped; SQS does not say until when): `remind show` says why, and `local run` \
             takes {} once visible",
            if n == 1 { "it" } else { "them" },
        ),
    }
}

pub(super) fn print_summary(report: &local::LocalReport, interrupted: bool) {
    println!(
        "stopped: {} · scheduler runs {}, reminders enqueued {}, batches {}, transient errors retried {}",
        why_stopped(report, interrupted),
        report.scheduler_runs,
        report.enqueued,
        report.batches,
        report.retried_errors,
    );
    if report.quarantined > 0 {
        println!(
            "quarantined {} (remindctl remind quarantined lists them, with the reason)",
            report.quarantined
        );
    }
    for f in &report.failing_shards {
        println!("{}", failing_shard_line(f));
    }
    let now = reminders::clock::Clock::now(&reminders::clock::SystemClock);
    for h in &report.held {
        println!("still pending: {}", held_line(h, now));
    }
    for c in Channel::ALL {
        let m = report.metrics.get(c);
        println!(
            "{c:<6} delivered {} dead {} expired {} cancelled {} deferred {} duplicates {}",
            m.delivered,
            m.dead_total(),
            m.expired,
            m.cancelled,
            m.deferred_gate + m.deferred_provider + m.retried,
            m.duplicates_suppressed
        );
    }
}

/// `shard 3: due-index query failing (4 runs in a row), its reminders wait: <error>`
pub fn failing_shard_line(f: &reminders::scheduler::FailedShard) -> String {
    format!(
        "shard {}: due-index query failing ({} run{} in a row), its reminders wait: {}",
        f.shard,
        f.runs_in_a_row,
        if f.runs_in_a_row == 1 { "" } else { "s" },
        f.error
    )
}

pub(super) fn summary_json(report: &local::LocalReport, interrupted: bool) -> serde_json::Value {
    let channels: serde_json::Map<String, serde_json::Value> = Channel::ALL
        .iter()
        .map(|c| {
            let m = report.metrics.get(*c);
            let v = serde_json::json!({
                "delivered": m.delivered,
                "dead": m.dead_total(),
                "expired": m.expired,
                "cancelled": m.cancelled,
                "deferred": m.deferred_gate + m.deferred_provider + m.retried,
                "duplicates_suppressed": m.duplicates_suppressed,
            });
            (c.as_str().to_owned(), v)
        })
        .collect();
    serde_json::json!({
        "stopped": why_stopped(report, interrupted),
        "idle": report.idle,
        "next_due": report.next_due.map(|t| t.to_rfc3339()),
        "scheduler_runs": report.scheduler_runs,
        "enqueued": report.enqueued,
        "batches": report.batches,
        "retried_errors": report.retried_errors,
        "quarantined": report.quarantined,
        "failing_shards": report.failing_shards,
        "held": report.held.iter().map(|h| serde_json::json!({
            "channel": h.channel.as_str(),
            "messages": h.messages,
            "first_back": h.first_back.map(|t| t.to_rfc3339()),
        })).collect::<Vec<_>>(),
        "channels": channels,
    })
}
