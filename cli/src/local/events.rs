//! `remindctl local events`: the outcome events the bus delivered to the tap queue
//! (`EVENTS_TAP_QUEUE_URL`, from `local up`), one line each — or the EventBridge event as
//! JSON — deleted once printed unless `--keep`.

use std::time::{Duration, Instant};

use reminders::config::env;

use super::require_emulator;

/// Print the outcome events in the tap queue: delivery key, transition, outcome (with the
/// dead reason), channel and reminder, one line each. A consumer deduplicates on key and
/// transition: the same pair twice is one event delivered again.
///
/// Example: remindctl local events --wait 10
#[derive(Debug, clap::Args)]
pub struct EventsArgs {
    /// Print each EventBridge event as one JSON line instead.
    #[arg(long)]
    json: bool,
    /// Leave the events in the queue (visible again at once).
    #[arg(long)]
    keep: bool,
    /// Wait up to this many seconds for the first event.
    #[arg(long, default_value_t = 0)]
    wait: u64,
}

pub async fn run(args: EventsArgs) -> Result<(), String> {
    require_emulator()?;
    let url = env("EVENTS_TAP_QUEUE_URL").ok_or(
        "EVENTS_TAP_QUEUE_URL is not set: export what `remindctl local up` prints".to_owned(),
    )?;
    let sdk = reminders::aws::sdk_config().await;
    let sqs = aws_sdk_sqs::Client::new(&sdk);
    let until = Instant::now() + Duration::from_secs(args.wait);
    let mut printed = 0usize;
    let mut kept = Vec::new();
    loop {
        let got = sqs
            .receive_message()
            .queue_url(&url)
            .max_number_of_messages(10)
            .wait_time_seconds(1)
            .send()
            .await
            .map_err(|e| format!("receiving from {url}: {e}"))?
            .messages
            .unwrap_or_default();
        if got.is_empty() && (printed > 0 || Instant::now() >= until) {
            break;
        }
        for m in got {
            let body = m.body.unwrap_or_default();
            println!("{}", if args.json { body.clone() } else { line(&body) });
            printed += 1;
            let Some(handle) = m.receipt_handle else {
                continue;
            };
            if args.keep {
                kept.push(handle);
            } else {
                sqs.delete_message()
                    .queue_url(&url)
                    .receipt_handle(handle)
                    .send()
                    .await
                    .map_err(|e| format!("deleting from {url}: {e}"))?;
            }
        }
    }
    for handle in kept {
        let visible = sqs.change_message_visibility().queue_url(&url);
        let _ = visible
            .receipt_handle(handle)
            .visibility_timeout(0)
            .send()
            .await;
    }
    if printed == 0 {
        eprintln!("no events");
    }
    Ok(())
}

/// `d1_… #3 dead:rejected sms r-1`; `-` for what an item written before origins lacks.
pub fn line(body: &str) -> String {
    let Ok(event) = serde_json::from_str::<serde_json::Value>(body) else {
        return format!("(not an event) {body}");
    };
    let d = &event["detail"];
    let text = |k: &str| d[k].as_str().unwrap_or("-").to_owned();
    let outcome = match d["reason"].as_str() {
        Some(reason) => format!("{}:{reason}", text("outcome")),
        None => text("outcome"),
    };
    format!(
        "{} #{} {} {} {}",
        text("delivery_key"),
        d["transition"],
        outcome,
        text("channel"),
        text("reminder_id")
    )
}
