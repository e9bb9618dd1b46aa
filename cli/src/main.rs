//! `remindctl`: the operator and developer CLI. It derives delivery keys (so applications and
//! operators can find a delivery in the ledger or a DLQ), checks the configuration the
//! functions read, and creates and runs the pipeline locally against an emulator.
//!
//! One module per command group, each owning its arguments (and their help), its output and
//! its `run`: `demo`, `plan`, `chaos`, `key`, `config`, `local`, and the operator commands
//! against AWS in `ops` (`remind`, `subscriber`, `suppression`, `dlq`, `redrive`). This file only parses and
//! dispatches.

mod chaos;
#[cfg(feature = "aws")]
mod config;
mod demo;
mod key;
#[cfg(feature = "aws")]
mod local;
#[cfg(feature = "aws")]
mod ops;
mod plan;
mod plan_search;
#[cfg(feature = "aws")]
mod stack;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// The demo and the planner keep a million items and allocate and free small ones at every
/// step; with glibc's allocator most of a 1M run went to its free lists.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Debug, Parser)]
#[command(
    name = "remindctl",
    version,
    about = "Reminder delivery on AWS: operator CLI"
)]
#[cfg_attr(
    not(feature = "aws"),
    command(
        after_help = "Built without AWS (cargo demo): demo, chaos, plan and key only. \
        `cargo run -p remindctl -- help` builds every command."
    )
)]
struct Cli {
    /// The deployed stack whose outputs (CloudFormation) configure the commands that act on a
    /// stack (remind, series, subscriber, suppression, dlq, redrive, config), instead of exporting
    /// the table and queue variables; a variable already set to another value is refused. Given
    /// before the command: remindctl --stack NAME remind show --id r-1.
    #[cfg(feature = "aws")]
    #[arg(long, env = "REMINDERS_STACK", value_name = "NAME")]
    stack: Option<String>,
    #[command(subcommand)]
    command: Command,
}

/// The help of each command is its arguments' doc comment, in its module: no doc comments
/// here, they would override those.
#[derive(Debug, Subcommand)]
enum Command {
    Demo(demo::DemoArgs),
    Chaos(chaos::ChaosArgs),
    Plan(plan::PlanArgs),
    Key(key::KeyArgs),
    #[cfg(feature = "aws")]
    Config(config::ConfigArgs),
    #[cfg(feature = "aws")]
    #[command(subcommand)]
    Local(local::LocalCommand),
    #[cfg(feature = "aws")]
    #[command(subcommand)]
    Remind(ops::remind::RemindCommand),
    #[cfg(feature = "aws")]
    #[command(subcommand)]
    Series(ops::series::SeriesCommand),
    #[cfg(feature = "aws")]
    #[command(subcommand)]
    Subscriber(ops::subscriber::SubscriberCommand),
    #[cfg(feature = "aws")]
    #[command(subcommand)]
    Suppression(ops::suppression::SuppressionCommand),
    #[cfg(feature = "aws")]
    #[command(subcommand)]
    Dlq(ops::dlq::DlqCommand),
    #[cfg(feature = "aws")]
    Redrive(ops::redrive::RedriveArgs),
}

fn block_on<F: std::future::Future<Output = Result<(), String>>>(f: F) -> Result<(), String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?
        .block_on(f)
}

fn run(command: Command) -> Result<(), String> {
    match command {
        Command::Demo(args) => block_on(demo::run(args)),
        Command::Chaos(args) => chaos::run(args),
        Command::Plan(args) => block_on(plan::run(args)),
        Command::Key(args) => key::run(args),
        #[cfg(feature = "aws")]
        Command::Config(args) => config::run(args),
        #[cfg(feature = "aws")]
        Command::Local(cmd) => block_on(local::run(cmd)),
        #[cfg(feature = "aws")]
        Command::Remind(cmd) => block_on(ops::remind::run(cmd)),
        #[cfg(feature = "aws")]
        Command::Series(cmd) => block_on(ops::series::run(cmd)),
        #[cfg(feature = "aws")]
        Command::Subscriber(cmd) => block_on(ops::subscriber::run(cmd)),
        #[cfg(feature = "aws")]
        Command::Suppression(cmd) => block_on(ops::suppression::run(cmd)),
        #[cfg(feature = "aws")]
        Command::Dlq(cmd) => block_on(ops::dlq::run(cmd)),
        #[cfg(feature = "aws")]
        Command::Redrive(args) => block_on(ops::redrive::run(args)),
    }
}

/// clap's error as one line: its first line, plus the next when the first only introduces it,
/// and its tip (a similar argument or command) and where to read more, when it has them.
fn one_line(e: &clap::Error) -> String {
    let text = e.to_string();
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let mut msg = lines.next().unwrap_or("invalid arguments").to_owned();
    if msg.ends_with(':') {
        if let Some(next) = lines.next() {
            msg = format!("{msg} {next}");
        }
    }
    let mut msg = msg.trim_start_matches("error: ").to_owned();
    let tip = text.lines().map(str::trim).find(|l| l.starts_with("tip: "));
    let more = text
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("For more information, try "));
    if let Some(tip) = tip {
        msg = format!("{msg} ({tip})");
    }
    if let Some(more) = more {
        let flag = more.trim_start_matches("For more information, try ");
        msg = format!("{msg}; see {}", flag.trim_end_matches('.'));
    }
    msg
}

fn main() -> ExitCode {
    reminders_core::telemetry::init_cli();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            // --help and --version
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        // `remindctl` or `remindctl remind` alone: the help of what was typed, in full.
        Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = e.print();
            return ExitCode::from(2);
        }
        Err(e) => {
            let mut line = one_line(&e);
            // `--stack` belongs to remindctl itself, before the command.
            #[cfg(feature = "aws")]
            if line.contains("unexpected argument '--stack'") {
                let typed: Vec<String> = std::env::args().skip(1).collect();
                let command = typed.first().map_or("remind", String::as_str);
                line = match command {
                    "demo" | "chaos" | "plan" | "key" | "local" => {
                        format!("--stack: `{command}` needs no deployed stack")
                    }
                    _ => format!(
                        "--stack goes before the command: remindctl --stack NAME {command} … \
                         (or export REMINDERS_STACK=NAME)"
                    ),
                };
            }
            #[cfg(not(feature = "aws"))]
            if let Some(hint) = without_aws(&line) {
                line = hint;
            }
            eprintln!("remindctl: {line}");
            fail_the_eval();
            return ExitCode::from(2);
        }
    };
    match configured(&cli).and_then(|()| run(cli.command)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("remindctl: {}", with_next_step(&e));
            fail_the_eval();
            ExitCode::FAILURE
        }
    }
}

/// `local up` prints shell for `eval "$(remindctl local up)"`: on failure it prints `false`, so
/// that the eval fails too instead of running nothing and succeeding.
fn fail_the_eval() {
    let mut words = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        if arg == "--stack" {
            args.next(); // its value
        } else if !arg.starts_with('-') {
            words.push(arg);
        }
    }
    if words.len() >= 2 && words[..2] == ["local", "up"] {
        println!("false");
    }
}

/// Before anything else runs: the stack's outputs become the process's environment, for the
/// commands that act on a stack (the offline ones and `local` never ask AWS for one).
#[cfg(feature = "aws")]
fn configured(cli: &Cli) -> Result<(), String> {
    let on_a_stack = matches!(
        cli.command,
        Command::Remind(_)
            | Command::Series(_)
            | Command::Subscriber(_)
            | Command::Suppression(_)
            | Command::Dlq(_)
            | Command::Redrive(_)
            | Command::Config(_)
    );
    match cli.stack.as_deref().filter(|n| !n.is_empty() && on_a_stack) {
        Some(name) => stack::configure(name),
        None => Ok(()),
    }
}

/// Built without AWS (`cargo demo`): a command or `--stack` that build lacks, said so.
#[cfg(not(feature = "aws"))]
fn without_aws(line: &str) -> Option<String> {
    const AWS_COMMANDS: [&str; 8] = [
        "local",
        "remind",
        "series",
        "subscriber",
        "suppression",
        "dlq",
        "redrive",
        "config",
    ];
    let typed: Vec<String> = std::env::args().skip(1).collect();
    let lacking = typed
        .iter()
        .find(|a| !a.starts_with('-'))
        .filter(|a| AWS_COMMANDS.contains(&a.as_str()))
        .map(String::as_str)
        .or_else(|| typed.iter().any(|a| a == "--stack").then_some("--stack"))?;
    Some(format!(
        "{line} ({lacking}: this remindctl was built without AWS, by `cargo demo`; \
         `cargo run -p remindctl -- …` builds every command)"
    ))
}

/// Built without AWS: no command acts on a stack.
#[cfg(not(feature = "aws"))]
fn configured(_: &Cli) -> Result<(), String> {
    Ok(())
}

/// An error a user can act on, said so: missing credentials (the SDK reports them as a failed
/// dispatch after trying the instance metadata service, which reads as if the emulator did not
/// answer), a table, queue or secret missing at the endpoint, and an endpoint where nothing
/// answers. Told apart by the SDK's text.
fn with_next_step(e: &str) -> String {
    if e.contains("loading credentials") || e.contains("no credentials") {
        return format!(
            "no AWS credentials found (the SDK said: {e}). Against an emulator any will do: \
             export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test (infra/emulator.sh prints \
             them); on AWS, configure a profile, SSO or the environment"
        );
    }
    let endpoint = std::env::var("AWS_ENDPOINT_URL").ok();
    if e.contains("ResourceNotFoundException") || e.contains("NonExistentQueue") {
        let place = endpoint.map_or_else(
            || "in this account and region".to_owned(),
            |url| format!("at {url}"),
        );
        return format!(
            "{e}. A table, queue or secret the command uses does not exist {place}: against \
             an emulator, create them with `eval \"$(remindctl local up)\"`; on AWS, check the \
             deployed stack's outputs (--stack NAME)"
        );
    }
    if let (Some(url), true) = (
        endpoint,
        e.contains("Connection refused") || e.contains("tcp connect error"),
    ) {
        return format!(
            "{e}. Nothing answers at the endpoint (AWS_ENDPOINT_URL={url}): start the emulator \
             with `eval \"$(infra/emulator.sh)\"`, or unset AWS_ENDPOINT_URL to use AWS"
        );
    }
    e.to_owned()
}
