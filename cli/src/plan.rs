//! `remindctl plan`: capacity planning on the demo's engine — an estimate, and the same
//! reminders simulated through the stack as deployed (every stage's limit modelled), for a
//! throughput, a timeout rate and an outage; with `--target-p99`, the parameters that meet
//! it (plan_search.rs).

use reminders_harness::sim::capacity::TableMode;
use reminders_harness::sim::plan::{self, Params, PlanInput};

use crate::demo::{SchedulerFlags, SeriesFlags};

/// Capacity planning on the same engine: what fraction arrives fresh, when the queue drains,
/// and which stage held it back (scheduler, due index, reminders table, queue, consumer,
/// ledger, provider: each one's peak utilisation, seconds at the limit and throttles), for a
/// throughput, a timeout rate and an outage. The stack is the deployed one (template.yaml's
/// defaults) unless a parameter flag says otherwise.
///
/// With --target-p99 SECS it searches SchedulerParallelism, DueShards, SchedulerMaxPerRun,
/// ConsumerMaxConcurrency, ConsumerBatchSize, the mappings' provisioned mode
/// (ConsumerMinPollers, ConsumerMaxPollers) and the tables' mode for the cheapest set whose
/// simulated p99 lateness is at most SECS, and prints it as a `sam deploy
/// --parameter-overrides` line with the simulated answer, or names the limit no parameter
/// moves (the account's concurrency quota among them: --account-concurrency plans with a
/// raised one). Cheapest: standard mode before provisioned mode (pollers are billed), fewest
/// minimum pollers, fewest concurrent Lambdas (SchedulerParallelism + the consumer's batches
/// at once), then fewest shards, on-demand tables before provisioned ones.
///
/// Example: remindctl plan --reminders 10000 --throughput 40 --timeout-rate 0.2
/// Example: remindctl plan --series 20000 --rule "FREQ=DAILY;BYHOUR=9;BYMINUTE=0" --zone Europe/Paris --throughput 100
/// Example: remindctl plan --reminders 1000000 --throughput 20000 --target-p99 60
#[derive(Debug, clap::Args)]
pub struct PlanArgs {
    /// [default: 10000, or 0 beside --series]
    #[arg(long)]
    reminders: Option<u32>,
    #[command(flatten)]
    series: SeriesFlags,
    /// Seconds over which the reminders fall due (0: all at once; with --series, the
    /// series run over a day unless this is given).
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
    scheduler: SchedulerFlags,
    #[command(flatten)]
    stack: StackFlags,
    /// Search the parameters for the cheapest set whose simulated p99 lateness is at most
    /// this many seconds.
    #[arg(long)]
    target_p99: Option<f64>,
}

/// The rest of the deployed stack, as deployed unless given.
#[derive(Debug, Clone, clap::Args)]
pub struct StackFlags {
    /// Due-index shards (DueShards), 1-64 [default: as deployed]
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=64))]
    due_shards: Option<u32>,
    /// Batches each channel's mapping runs at once (ConsumerMaxConcurrency), 2-1000
    /// [default: as deployed]
    #[arg(long, value_parser = clap::value_parser!(u32).range(2..=1000))]
    consumer_max_concurrency: Option<u32>,
    /// Records a batch (ConsumerBatchSize), 1-10 [default: as deployed]
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=10))]
    batch_size: Option<u32>,
    /// Provisioned mode (ConsumerMinPollers): event pollers each channel's mapping keeps
    /// ready, ten batches at once each, 2-200; 0 is standard mode [default: as deployed]
    #[arg(long, value_parser = parse_min_pollers)]
    consumer_min_pollers: Option<u32>,
    /// The most pollers a provisioned mapping scales to (ConsumerMaxPollers), 2-2000
    /// [default: as deployed]
    #[arg(long, value_parser = clap::value_parser!(u32).range(2..=2000))]
    consumer_max_pollers: Option<u32>,
    /// The tables' mode: on-demand (as deployed) or provisioned:WCU:RCU
    #[arg(long, value_parser = parse_tables)]
    tables: Option<TableMode>,
    /// The provider's latency per send, milliseconds.
    #[arg(long, default_value_t = reminders_harness::sim::limits::DEFAULT_PROVIDER_LATENCY_MS)]
    provider_latency_ms: f64,
    /// The account's Lambda concurrency quota.
    #[arg(long, default_value_t = reminders_harness::sim::limits::lambda::ACCOUNT_CONCURRENCY)]
    account_concurrency: u32,
}

fn parse_tables(s: &str) -> Result<TableMode, String> {
    if s == "on-demand" {
        return Ok(TableMode::OnDemand);
    }
    let bad = || format!("{s:?}: expected on-demand or provisioned:WCU:RCU");
    let rest = s.strip_prefix("provisioned:").ok_or_else(bad)?;
    let (w, r) = rest.split_once(':').ok_or_else(bad)?;
    let n = |v: &str| v.parse::<u32>().ok().filter(|n| *n > 0).ok_or_else(bad);
    Ok(TableMode::Provisioned {
        writes: n(w)?,
        reads: n(r)?,
    })
}

fn parse_min_pollers(s: &str) -> Result<u32, String> {
    match s.parse::<u32>() {
        Ok(n) if n == 0 || (2..=200).contains(&n) => Ok(n),
        _ => Err(format!(
            "{s:?}: expected 0 (standard mode) or 2-200 pollers (provisioned mode)"
        )),
    }
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

pub async fn run(args: PlanArgs) -> Result<(), String> {
    let (scheduler_parallelism, max_per_run) = args.scheduler.resolve();
    let deployed = Params::deployed();
    let series = args.series.load()?;
    let reminders = args
        .reminders
        .unwrap_or(if series.is_some() { 0 } else { 10_000 });
    let input = PlanInput {
        reminders,
        series,
        due_spread_secs: args.due_spread_secs,
        throughput_per_sec: args.throughput,
        timeout_rate: args.timeout_rate,
        freshness_secs: args.freshness_secs,
        outage: args.outage,
        seed: args.seed,
        params: Params {
            scheduler_parallelism,
            max_per_run,
            due_shards: args.stack.due_shards.unwrap_or(deployed.due_shards),
            consumer_max_concurrency: args
                .stack
                .consumer_max_concurrency
                .unwrap_or(deployed.consumer_max_concurrency),
            batch_size: args.stack.batch_size.unwrap_or(deployed.batch_size),
            min_pollers: args
                .stack
                .consumer_min_pollers
                .unwrap_or(deployed.min_pollers),
            max_pollers: args
                .stack
                .consumer_max_pollers
                .unwrap_or(deployed.max_pollers),
            tables: args.stack.tables.unwrap_or(deployed.tables),
        },
        provider_latency_ms: args.stack.provider_latency_ms,
        account_concurrency: args.stack.account_concurrency,
    };
    if (input.reminders == 0 && input.series.is_none()) || input.throughput_per_sec <= 0.0 {
        return Err("--reminders (or --series) and --throughput must be positive".into());
    }
    if !(0.0..=1.0).contains(&input.timeout_rate) {
        return Err("--timeout-rate must be between 0 and 1".into());
    }
    if args.stack.provider_latency_ms.is_nan()
        || args.stack.provider_latency_ms < 0.0
        || args.stack.account_concurrency == 0
    {
        return Err(
            "--provider-latency-ms must be 0 or more, --account-concurrency positive".into(),
        );
    }
    if let Some(target) = args.target_p99 {
        if target.is_nan() || target <= 0.0 {
            return Err("--target-p99 must be a positive number of seconds".into());
        }
        return crate::plan_search::run(&input, target, args.json).await;
    }
    let bar = crate::plan_search::Progress::new(args.json);
    let p = plan::plan_with_progress(&input, |d, t| bar.tick("simulating", d, t)).await;
    bar.finish();
    if args.json {
        println!("{}", serde_json::to_string(&p).unwrap_or_default());
    } else {
        crate::plan_search::print_human(&p);
    }
    Ok(())
}
