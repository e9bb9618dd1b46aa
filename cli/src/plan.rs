//! `remindctl plan`: capacity planning on the demo's engine — an estimate, and the same
//! reminders simulated, for a throughput, a timeout rate and an outage.

use reminders_harness::sim::plan::{self, Plan, PlanInput};

use crate::demo::{SchedulerFlags, SeriesFlags};

/// Capacity planning on the same engine: what fraction arrives fresh, and when the queue
/// drains, for a throughput, a timeout rate and an outage.
///
/// Example: remindctl plan --reminders 10000 --throughput 40 --timeout-rate 0.2
/// Example: remindctl plan --series 20000 --rule "FREQ=DAILY;BYHOUR=9;BYMINUTE=0" --zone Europe/Paris --throughput 100
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
        scheduler_parallelism,
        max_per_run,
    };
    if (input.reminders == 0 && input.series.is_none()) || input.throughput_per_sec <= 0.0 {
        return Err("--reminders (or --series) and --throughput must be positive".into());
    }
    if !(0.0..=1.0).contains(&input.timeout_rate) {
        return Err("--timeout-rate must be between 0 and 1".into());
    }
    let p = plan::plan(&input).await;
    if args.json {
        println!("{}", serde_json::to_string(&p).unwrap_or_default());
    } else {
        print_human(&p);
    }
    Ok(())
}

fn print_human(p: &Plan) {
    let e = &p.estimate;
    println!(
        "estimate            first wave {:.0} s + retries {:.0} s → drained after ~{:.0} s",
        e.first_wave_secs, e.retry_secs, e.drain_secs
    );
    let s = &p.simulated;
    match s.drain_time_s {
        Some(t) => println!("simulated           drained after {t} s"),
        None => println!("simulated           not drained within 24 h"),
    }
    println!(
        "fresh on arrival    {:.1}% ({} of {}; {} expired)",
        s.fresh_fraction * 100.0,
        s.delivered,
        s.reminders,
        s.expired
    );
    // Every reminder not delivered is accounted for, by what became of it: a loss never
    // hides inside a percentage.
    let dead: u64 = s.dead.values().sum();
    let by_reason: Vec<String> = s.dead.iter().map(|(r, n)| format!("{r} {n}")).collect();
    let reasons = if by_reason.is_empty() {
        String::new()
    } else {
        format!(" ({})", by_reason.join(", "))
    };
    println!(
        "not delivered       {} expired · {dead} dead{reasons} · {} cancelled · {} pending",
        s.expired, s.cancelled, s.pending
    );
    println!(
        "lateness            p50 {:.0} s · p95 {:.0} s · p99 {:.0} s",
        s.lateness_ms.p50 as f64 / 1000.0,
        s.lateness_ms.p95 as f64 / 1000.0,
        s.lateness_ms.p99 as f64 / 1000.0
    );
}
