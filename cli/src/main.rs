//! `remindctl`: the operator and developer CLI. It derives delivery keys (so applications and
//! operators can find a delivery in the ledger or a DLQ), checks the configuration the
//! functions read, and creates and runs the pipeline locally against an emulator.

mod chaos;
mod demo;
mod local;
mod ops;
mod stack;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use reminders::aws::Settings;
use reminders::domain::{Channel, DeadReason, DeliveryKey, ReminderId, SubscriberId};

#[derive(Debug, Parser)]
#[command(
    name = "remindctl",
    version,
    about = "Reminder delivery on AWS: operator CLI"
)]
struct Cli {
    /// Configure every command from this deployed stack's outputs (CloudFormation), instead
    /// of exporting the table and queue variables; a variable already set wins.
    #[arg(long, global = true, env = "REMINDERS_STACK", value_name = "NAME")]
    stack: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the whole pipeline in one process — the real scheduler and consumer on in-memory
    /// ports, a virtual clock and a simulated provider — and report what happened.
    ///
    /// Example: remindctl demo --seed 7 --rate-429 0.05 --json
    Demo {
        /// Reminders, spread over the three channels.
        #[arg(long, default_value_t = 10_000)]
        reminders: u32,
        /// Due times spread over this many seconds [default: 1800 for up to 10,000 reminders,
        /// then the same density: 18,000 for 100,000].
        #[arg(long)]
        window_secs: Option<u64>,
        /// How long after its due time a reminder is still worth sending.
        #[arg(long, default_value_t = 3600)]
        freshness_secs: u64,
        /// Same seed, same run, byte for byte.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Print the report as one JSON line.
        #[arg(long)]
        json: bool,
        /// Where to write the SVG chart.
        #[arg(long, default_value = "remindctl-demo.svg")]
        chart: std::path::PathBuf,
        #[command(flatten)]
        scheduler: demo::SchedulerFlags,
        /// A TOML failure profile (fields: push_per_sec, email_per_sec, sms_per_sec, rate_429,
        /// retry_after_secs, rate_5xx, rate_timeout, rate_permanent, outage_start_secs,
        /// outage_secs, outage_channel, idempotent).
        #[arg(long)]
        profile: Option<std::path::PathBuf>,
        /// Fraction of calls answered 429.
        #[arg(long)]
        rate_429: Option<f64>,
        /// Fraction of calls answered 503.
        #[arg(long = "rate-5xx")]
        rate_5xx: Option<f64>,
        /// Fraction of calls that time out after the request was written.
        #[arg(long)]
        rate_timeout: Option<f64>,
        /// Fraction of calls rejected for good.
        #[arg(long)]
        rate_permanent: Option<f64>,
        /// Provider throughput per channel, sends per second.
        #[arg(long)]
        per_sec: Option<f64>,
        /// Outage start, seconds into the run.
        #[arg(long)]
        outage_start_secs: Option<u64>,
        /// Outage length in seconds.
        #[arg(long)]
        outage_secs: Option<u64>,
        /// No outage.
        #[arg(long)]
        no_outage: bool,
        /// A provider that ignores idempotency keys.
        #[arg(long)]
        non_idempotent: bool,
    },
    /// The system checker: seeded worlds with faults everywhere, every delivery judged.
    ///
    /// Each world runs the real scheduler, consumer and redrive on in-memory ports, with faults
    /// at every port call, crashes, duplicate deliveries, concurrent workers, redrives, cancels
    /// and edits; then every delivery is judged (never sent twice, none lost, nothing stale,
    /// early or after a cancel, budgets kept, one DLQ copy per death). Exits non-zero, naming
    /// the seed to replay, if any world breaks one.
    ///
    /// Example: remindctl chaos --seeds 300 --json
    Chaos {
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
        /// counter of the JSON in 60 worlds (`--seeds 60`): ack-before-outcome → lost,
        /// ignore-retry-after → early_sends, unfenced-ledger → duplicated, drop-dead-letters →
        /// dead_without_copy, 5xx-permanent → unjustified_endings, hide-breaker →
        /// unjustified_endings, late-freshness → stale_sends, lost-cancel →
        /// sends_after_cancel, double-dead-letters → extra_dlq_copies, forget-attempts →
        /// budget_exceeded, early-freshness → unjustified_endings, strip-dead-letter-reason →
        /// dead_without_copy.
        #[arg(long)]
        plant: Option<String>,
    },
    /// Capacity planning on the same engine: what fraction arrives fresh, and when the queue
    /// drains, for a throughput, a timeout rate and an outage.
    ///
    /// Example: remindctl plan --reminders 10000 --throughput 40 --timeout-rate 0.2
    Plan {
        #[arg(long, default_value_t = 10_000)]
        reminders: u32,
        /// Seconds over which the reminders fall due (0: all at once).
        #[arg(long, default_value_t = 0)]
        due_spread_secs: u64,
        /// Provider sends per second.
        #[arg(long)]
        throughput: f64,
        /// Fraction of first attempts that time out (and are retried with the same key).
        #[arg(long, default_value_t = 0.0)]
        timeout_rate: f64,
        #[arg(long, default_value_t = 3600)]
        freshness_secs: u64,
        /// Outage as START:LENGTH in seconds.
        #[arg(long, value_parser = parse_outage)]
        outage: Option<(u64, u64)>,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        scheduler: demo::SchedulerFlags,
    },
    /// Print the delivery key of (reminder, subscriber, channel).
    ///
    /// Example: remindctl key --reminder order-42 --subscriber user-7 --channel sms
    Key {
        #[arg(long)]
        reminder: String,
        #[arg(long)]
        subscriber: String,
        /// push, email or sms
        #[arg(long)]
        channel: String,
    },
    /// Check the environment the functions read (tables, queue URLs, shards).
    ///
    /// Example: REMINDERS_TABLE=… DELIVERIES_TABLE=… remindctl config
    Config,
    /// The pipeline on an emulator (moto, LocalStack): needs AWS_ENDPOINT_URL.
    #[command(subcommand)]
    Local(LocalCommand),
    /// Create, cancel or inspect a reminder (same configuration as the functions).
    #[command(subcommand)]
    Remind(RemindCommand),
    /// Look into a channel's dead-letter queue without moving anything.
    #[command(subcommand)]
    Dlq(DlqCommand),
    /// Replay a bounded, filtered selection of a DLQ (dry run unless --execute).
    ///
    /// Example: remindctl redrive --channel sms --reason attempts_exhausted --max 100 --note "provider fixed" --execute
    Redrive {
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
    },
}

#[derive(Debug, Subcommand)]
enum RemindCommand {
    /// Create a reminder.
    ///
    /// Example: remindctl remind create --id order-42 --subscriber user-7 --due-in 300 --subject Pickup --body "at 5pm" --sms +14155550123
    Create {
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
    },
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

#[derive(Debug, Subcommand)]
enum DlqCommand {
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

fn parse_channel(s: &str) -> Result<Channel, String> {
    s.parse()
        .map_err(|e: reminders::domain::IdError| e.to_string())
}

fn parse_reason(s: &str) -> Result<DeadReason, String> {
    s.parse()
        .map_err(|e: reminders::domain::reason::UnknownReason| e.to_string())
}

#[derive(Debug, Subcommand)]
enum LocalCommand {
    /// Create the template's tables and queues on the emulator and print the variables to
    /// export.
    ///
    /// Example: AWS_ENDPOINT_URL=http://localhost:4566 remindctl local up
    Up {
        /// Prefix of every table and queue name.
        #[arg(long, default_value = "reminders-local")]
        prefix: String,
        /// Due-index shards, 1 to 64 (export the same DUE_SHARDS for `run`).
        #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=64))]
        shards: u32,
    },
    /// Play the scheduler's schedule and each channel's event source mapping with the same
    /// handler code, concurrently, until idle (every queue empty and nothing due within
    /// --idle-horizon), for --for seconds, or Ctrl-C; then print a summary.
    ///
    /// Example: eval "$(remindctl local up)"; EMAIL_PROVIDER=http EMAIL_HTTP_ENDPOINT=… remindctl local run --for 300
    Run {
        /// Stop after this many seconds instead of when idle.
        #[arg(long = "for", conflicts_with = "until_idle")]
        for_secs: Option<u64>,
        /// Stop when idle (the default without --for): every queue empty and nothing due
        /// within --idle-horizon; the summary says when the next reminder is due.
        #[arg(long)]
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
    },
}

fn parse_outage(s: &str) -> Result<(u64, u64), String> {
    let (a, b) = s
        .split_once(':')
        .ok_or_else(|| "expected START:LENGTH in seconds".to_owned())?;
    let n = |v: &str| {
        v.trim()
            .parse::<u64>()
            .map_err(|_| format!("{v:?} is not a number of seconds"))
    };
    Ok((n(a)?, n(b)?))
}

fn block_on<F: std::future::Future<Output = Result<(), String>>>(f: F) -> Result<(), String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?
        .block_on(f)
}

fn run(cli: Cli) -> Result<(), String> {
    match cli.command {
        Command::Chaos {
            seeds,
            from,
            json,
            plant,
        } => {
            return chaos::chaos(chaos::ChaosArgs {
                seeds,
                from,
                json,
                plant,
            })
        }
        Command::Demo {
            reminders,
            window_secs,
            freshness_secs,
            seed,
            json,
            chart,
            scheduler,
            profile,
            rate_429,
            rate_5xx,
            rate_timeout,
            rate_permanent,
            per_sec,
            outage_start_secs,
            outage_secs,
            no_outage,
            non_idempotent,
        } => {
            let args = demo::DemoArgs {
                reminders,
                scheduler,
                window_secs,
                freshness_secs,
                seed,
                json,
                chart,
                profile,
                overrides: demo::ProfileOverrides {
                    rate_429,
                    rate_5xx,
                    rate_timeout,
                    rate_permanent,
                    per_sec,
                    outage_start_secs,
                    outage_secs,
                    no_outage,
                    non_idempotent,
                },
            };
            return block_on(demo::demo(args));
        }
        Command::Plan {
            reminders,
            due_spread_secs,
            throughput,
            timeout_rate,
            freshness_secs,
            outage,
            seed,
            json,
            scheduler,
        } => {
            let (scheduler_parallelism, max_per_run) = scheduler.resolve();
            let input = reminders::sim::plan::PlanInput {
                reminders,
                due_spread_secs,
                throughput_per_sec: throughput,
                timeout_rate,
                freshness_secs,
                outage,
                seed,
                scheduler_parallelism,
                max_per_run,
            };
            return block_on(demo::plan(input, json));
        }
        Command::Remind(cmd) => {
            return block_on(async {
                match cmd {
                    RemindCommand::Create {
                        id,
                        subscriber,
                        due_in,
                        due_at,
                        fresh_secs,
                        subject,
                        body,
                        email,
                        sms,
                        push,
                    } => {
                        ops::create(ops::CreateArgs {
                            id,
                            subscriber,
                            due_in_secs: due_in,
                            due_at_ms: due_at,
                            fresh_secs,
                            subject,
                            body,
                            email,
                            sms,
                            push,
                        })
                        .await
                    }
                    RemindCommand::Cancel { id } => ops::cancel(id).await,
                    RemindCommand::Show { id, json } => ops::show(id, json).await,
                    RemindCommand::Quarantined { limit } => ops::quarantined(limit).await,
                }
            });
        }
        Command::Dlq(cmd) => {
            return block_on(async {
                match cmd {
                    DlqCommand::Summary { channel, json } => ops::dlq_summary(channel, json).await,
                    DlqCommand::Show {
                        channel,
                        reason,
                        limit,
                        json,
                    } => ops::dlq_show(channel, reason, limit, json).await,
                }
            });
        }
        Command::Redrive {
            channel,
            reasons,
            max_messages,
            max_per_second,
            execute,
            yes,
            json,
            operator,
            note,
            dead_after,
            dead_before,
            extend_freshness_secs,
            accept_duplicates,
        } => {
            let request = reminders::redrive::RedriveRequest {
                channel,
                reasons: reasons.into_iter().collect(),
                first_seen_after: None,
                first_seen_before: None,
                dead_after: dead_after.map(reminders::clock::Timestamp::from_millis),
                dead_before: dead_before.map(reminders::clock::Timestamp::from_millis),
                max_messages,
                max_per_second,
                dry_run: !execute,
                // A dry run writes no audit entry; an executed one must name someone.
                operator: match (operator, execute) {
                    (Some(o), _) => o,
                    (None, true) => ops::operator_default()?,
                    (None, false) => ops::operator_default().unwrap_or_else(|_| "dry-run".into()),
                },
                note,
                extend_freshness_secs,
                accept_duplicates,
            };
            return block_on(ops::redrive(ops::RedriveArgs { request, yes, json }));
        }
        Command::Local(cmd) => {
            return block_on(async {
                match cmd {
                    LocalCommand::Up { prefix, shards } => local::up(&prefix, shards).await,
                    LocalCommand::Run {
                        for_secs,
                        // The default mode; the flag says so explicitly (and excludes --for).
                        until_idle: _,
                        schedule_period,
                        idle_horizon,
                        json,
                        emf,
                    } => {
                        let args = local::RunArgs {
                            for_secs,
                            schedule_period,
                            idle_horizon,
                            json,
                            emf,
                        };
                        local::run(args).await
                    }
                }
            });
        }
        Command::Key {
            reminder,
            subscriber,
            channel,
        } => {
            let reminder = ReminderId::parse(reminder).map_err(|e| e.to_string())?;
            let subscriber = SubscriberId::parse(subscriber).map_err(|e| e.to_string())?;
            let channel: Channel = channel.parse().map_err(|e| format!("{e}"))?;
            println!("{}", DeliveryKey::derive(&reminder, &subscriber, channel));
        }
        Command::Config => {
            // Everything each function reads at cold start, checked as it would be: the first
            // problem is one line naming the variable, and nothing is printed before it.
            let s = Settings::from_env().map_err(|e| e.to_string())?;
            let mut providers = Vec::new();
            for c in Channel::ALL {
                let var = format!("{}_PROVIDER", c.as_str().to_uppercase());
                match reminders::config::env(&var) {
                    Some(p) => providers.push((c, p)),
                    None => {
                        return Err(format!(
                            "{var} is not set (http, ses, sns or none): the consumer would refuse to start"
                        ))
                    }
                }
            }
            let consumer = reminders::consumer::ConsumerConfig::from_env()
                .map_err(|e| format!("consumer: {e}"))?;
            let scheduler = reminders::scheduler::SchedulerConfig::from_env()
                .map_err(|e| format!("scheduler: {e}"))?;
            reminders::redrive::RedriveConfig::from_env().map_err(|e| format!("redrive: {e}"))?;
            println!("reminders table:  {}", s.reminders_table);
            println!("deliveries table: {}", s.deliveries_table);
            println!("due shards:       {}", s.due_shards);
            for c in Channel::ALL {
                println!("{c:<6} queue: {}", s.queue_urls.get(c));
                println!("{c:<6} dlq:   {}", s.dlq_urls.get(c));
            }
            for (c, p) in providers {
                println!("{c:<6} provider: {p}");
            }
            println!(
                "consumer:         policy {}, {} attempts, lease {} s",
                consumer.policy.version,
                consumer.policy.max_attempts,
                consumer.lease.as_secs()
            );
            println!(
                "scheduler:        look-ahead {} s, every {} s",
                scheduler.look_ahead.as_secs(),
                scheduler.schedule_period.as_secs()
            );
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    reminders::telemetry::init_cli();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            // --help and --version
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            // One line: clap's first line, plus the next when the first only introduces it.
            let text = e.to_string();
            let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
            let mut msg = lines.next().unwrap_or("invalid arguments").to_owned();
            if msg.ends_with(':') {
                if let Some(next) = lines.next() {
                    msg = format!("{msg} {next}");
                }
            }
            eprintln!("remindctl: {}", msg.trim_start_matches("error: "));
            return ExitCode::from(2);
        }
    };
    if let Some(name) = cli.stack.as_deref().filter(|n| !n.is_empty()) {
        if let Err(e) = stack::configure(name) {
            eprintln!("remindctl: {e}");
            return ExitCode::FAILURE;
        }
    }
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("remindctl: {e}");
            ExitCode::FAILURE
        }
    }
}
