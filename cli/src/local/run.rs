//! `remindctl local run`: the pipeline played locally with the deployed handlers' code — the
//! scheduler's schedule and each channel's event source mapping — until idle, a time limit or
//! Ctrl-C, then a summary.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use reminders::aws::{Adapters, Settings};
use reminders::clock::SystemClock;
use reminders::config::env;
use reminders::consumer::{Consumer, ConsumerConfig};
use reminders::ports::PortSet;
use reminders::scheduler::{Scheduler, SchedulerConfig};
use reminders_harness::local::{self, LocalConfig, Stop};

use super::feedback::FeedbackPlayer;
use super::require_emulator;

use super::summary::progress_line;
use super::summary::{print_summary, progress_bar, shutdown_signal, summary_json};

/// Play the scheduler's schedule and each channel's event source mapping with the same
/// handler code, concurrently, until idle (every queue empty and nothing due within
/// --idle-horizon), for --for seconds, or Ctrl-C; then print a summary.
///
/// Example: eval "$(remindctl local up)"; EMAIL_PROVIDER=http EMAIL_HTTP_ENDPOINT=… remindctl local run --for 300
/// (`local up` exports REMINDERS_ALLOW_LOOPBACK_HTTP=1, so an endpoint may be `local receive`'s
/// plain http on loopback.)
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Stop after this many seconds instead of when idle.
    #[arg(long = "for", conflicts_with = "until_idle")]
    for_secs: Option<u64>,
    /// Stop when idle (the default without --for): every queue empty and nothing due
    /// within --idle-horizon; the summary says when the next reminder is due.
    #[arg(long)]
    #[allow(dead_code)] // The default mode; the flag says so explicitly (and excludes --for).
    until_idle: bool,
    /// Seconds between scheduler runs.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    schedule_period: u64,
    /// Idle means: every queue empty and nothing due within this many seconds.
    #[arg(long, default_value_t = 120)]
    idle_horizon: u64,
    /// Print the summary as one JSON line.
    #[arg(long)]
    json: bool,
    /// Also print the consumer's EMF metric lines (what CloudWatch would ingest).
    #[arg(long)]
    emf: bool,
}

type LocalPorts = crate::ops::OpsPorts;

pub async fn run(args: RunArgs) -> Result<(), String> {
    require_emulator()?;
    let settings = Settings::from_env().map_err(|e| e.to_string())?;
    let (scheduler, consumer) = handlers(&settings, args.emf).await?;
    let cfg = LocalConfig {
        schedule_period: Duration::from_secs(args.schedule_period.max(1)),
        idle_horizon: Duration::from_secs(args.idle_horizon),
        ..LocalConfig::default()
    };
    let stop = match args.for_secs {
        Some(secs) => Stop::For(Duration::from_secs(secs)),
        None => Stop::Idle {
            at_most: Duration::from_secs(24 * 3600),
        },
    };
    let interrupt = interrupt_on_signal();
    let bar = progress_bar(args.json);
    let show = |p: &local::Progress| {
        if let Some(bar) = &bar {
            bar.set_message(progress_line(p));
        }
    };
    let on_progress: Option<&(dyn Fn(&local::Progress) + Sync)> = match bar {
        Some(_) => Some(&show),
        None => None,
    };
    let sdk = reminders::aws::sdk_config().await;
    let publisher = super::publish::Publisher::from_env(&sdk, &settings.deliveries_table).await?;
    let feedback = feedback_player(&sdk, &settings).await?;
    let done = AtomicBool::new(false);
    let pipeline = async {
        let report = local::run(
            &scheduler,
            &consumer,
            &settings.queue_urls,
            &cfg,
            stop,
            &interrupt,
            on_progress,
        )
        .await;
        done.store(true, Ordering::SeqCst);
        report
    };
    let events = async {
        match &publisher {
            Some(p) => p.play(&done).await.map(Some),
            None => Ok(None),
        }
    };
    let feedback_pass = async {
        match &feedback {
            Some(f) => f.play(&done).await.map(Some),
            None => Ok(None),
        }
    };
    let (report, events, feedback_pass) = tokio::join!(pipeline, events, feedback_pass);
    let report = report.map_err(|e| e.to_string())?;
    let events = events?;
    let feedback_pass = feedback_pass?;
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    let interrupted = interrupt.load(Ordering::SeqCst);
    if args.json {
        let mut summary = summary_json(&report, interrupted);
        if let Some(pass) = &events {
            summary["events_published"] = pass.published.into();
        }
        if let Some(f) = &feedback_pass {
            summary["feedback"] = serde_json::json!({
                "suppressed": f.suppressed,
                "ignored": f.ignored,
                "dead_lettered": f.dead_lettered,
            });
        }
        println!("{summary}");
    } else {
        print_summary(&report, interrupted);
        if let Some(pass) = &events {
            println!("{}", super::publish::summary_line(pass));
        }
        // Only when there was some: most runs see none.
        if let Some(f) = feedback_pass.filter(|f| f.suppressed + f.ignored + f.dead_lettered > 0) {
            println!("{}", super::feedback::summary_line(&f));
        }
    }
    Ok(())
}

/// The scheduler and the consumer, on the same ports, configured as the functions are.
async fn handlers(
    settings: &Settings,
    emf: bool,
) -> Result<(Scheduler<LocalPorts>, Consumer<LocalPorts>), String> {
    let mut consumer_cfg = ConsumerConfig::from_env().map_err(|e| e.to_string())?;
    consumer_cfg.emit_metrics = emf;
    let scheduler_cfg = SchedulerConfig::from_env().map_err(|e| e.to_string())?;
    let sdk = reminders::aws::sdk_config().await;
    let adapters = Adapters::new(&sdk, settings);
    let providers =
        reminders::providers::from_lookup(env, SystemClock, consumer_cfg.provider_timeout, &sdk)
            .map_err(|e| e.to_string())?;
    let ports = PortSet {
        clock: SystemClock,
        reminders: adapters.reminders,
        ledger: adapters.ledger,
        gate: adapters.gate,
        queue: adapters.queues,
        dead_letters: adapters.dead_letters,
        providers,
    };
    let key = || local_suppression_key(&sdk);
    let consumer = Consumer::new(
        ports.clone(),
        consumer_cfg,
        settings.queue_urls.clone(),
        rand_seed(),
    )
    .with_suppression_key(key()?);
    // The same key: a sole channel's message carries its address's hash (the one read).
    let scheduler = Scheduler::new(ports, scheduler_cfg).with_suppression_key(key()?);
    Ok((scheduler, consumer))
}

/// Suppressions are on locally too: SUPPRESSION_KEY (or the secret `local up` made) when set,
/// otherwise a fixed development key (the emulator's hashes are nobody's secret).
fn local_suppression_key(
    sdk: &aws_config::SdkConfig,
) -> Result<Option<reminders::providers::secret::SuppressionKeySource>, String> {
    reminders::providers::secret::suppression_key(env, sdk)
        .map_err(|e| e.to_string())
        .map(|k| {
            k.or_else(|| {
                reminders::domain::SuppressionKey::new(LOCAL_SUPPRESSION_KEY)
                    .ok()
                    .map(reminders::providers::secret::SuppressionKeySource::Fixed)
            })
        })
}

/// The SES feedback queue's player, when `local up` made the queue: the feedback function's
/// handler on the reminders table, under the key the consumer reads.
async fn feedback_player(
    sdk: &aws_config::SdkConfig,
    settings: &Settings,
) -> Result<Option<FeedbackPlayer<reminders::aws::dynamo::DynamoReminderStore>>, String> {
    if env(super::feedback::FEEDBACK_QUEUE_VAR).is_none() {
        return Ok(None);
    }
    if env(reminders::feedback::FEEDBACK_DLQ_VAR).is_none() {
        eprintln!(
            "{} is not set: SES feedback is not played (remindctl local up prints it)",
            reminders::feedback::FEEDBACK_DLQ_VAR
        );
        return Ok(None);
    }
    let Some(source) = local_suppression_key(sdk)? else {
        return Ok(None);
    };
    // Feedback is a side show of a run: without its key the deliveries still go on.
    let key = match source.get().await {
        Ok(key) => key,
        Err(e) => {
            eprintln!("reading the suppression key: {e}; SES feedback is not played this run");
            return Ok(None);
        }
    };
    let store = Adapters::new(sdk, settings).reminders;
    Ok(FeedbackPlayer::from_env(sdk, store, key))
}

/// The key local runs hash suppressed addresses with when none is configured.
pub const LOCAL_SUPPRESSION_KEY: &[u8] = b"remindctl local development suppression key";

/// Ctrl-C (or SIGTERM) ends the run at the next step; the summary is still printed.
fn interrupt_on_signal() -> Arc<AtomicBool> {
    let interrupt = Arc::new(AtomicBool::new(false));
    let flag = interrupt.clone();
    tokio::spawn(async move {
        shutdown_signal().await;
        flag.store(true, Ordering::SeqCst);
    });
    interrupt
}

fn rand_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}
