//! `remindctl`: the operator and developer CLI. It derives delivery keys (so applications and
//! operators can find a delivery in the ledger or a DLQ), checks the configuration the
//! functions read, and creates and runs the pipeline locally against an emulator.

mod local;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use reminders::aws::Settings;
use reminders::domain::{Channel, DeliveryKey, ReminderId, SubscriberId};

#[derive(Debug, Parser)]
#[command(
    name = "remindctl",
    version,
    about = "Reminder delivery on AWS: operator CLI"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
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
        /// Due-index shards (export the same DUE_SHARDS for `run`).
        #[arg(long, default_value_t = 8)]
        shards: u32,
    },
    /// Play the scheduler's schedule and each channel's event source mapping with the same
    /// handler code, until nothing is pending (or for --for seconds).
    ///
    /// Example: eval "$(remindctl local up)"; EMAIL_PROVIDER=http EMAIL_HTTP_ENDPOINT=… remindctl local run --for 300
    Run {
        /// Stop after this many seconds instead of when idle.
        #[arg(long = "for")]
        for_secs: Option<u64>,
        /// Seconds between scheduler runs.
        #[arg(long, default_value_t = 60)]
        schedule_period: u64,
    },
}

fn run(cli: Cli) -> Result<(), String> {
    match cli.command {
        Command::Local(cmd) => {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            return rt.block_on(async {
                match cmd {
                    LocalCommand::Up { prefix, shards } => local::up(&prefix, shards).await,
                    LocalCommand::Run {
                        for_secs,
                        schedule_period,
                    } => local::run(for_secs, schedule_period).await,
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
            let s = Settings::from_env().map_err(|e| e.to_string())?;
            println!("reminders table:  {}", s.reminders_table);
            println!("deliveries table: {}", s.deliveries_table);
            println!("due shards:       {}", s.due_shards);
            for c in Channel::ALL {
                println!("{c:<6} queue: {}", s.queue_urls.get(c));
                println!("{c:<6} dlq:   {}", s.dlq_urls.get(c));
            }
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            // --help and --version
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            let text = e.to_string();
            let first = text.lines().next().unwrap_or("invalid arguments");
            eprintln!("remindctl: {}", first.trim_start_matches("error: "));
            return ExitCode::from(2);
        }
    };
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("remindctl: {e}");
            ExitCode::FAILURE
        }
    }
}
