//! `remindctl demo` and `remindctl plan`: the whole pipeline in one process — the real
//! scheduler and consumer code on in-memory ports with a virtual clock and a simulated
//! provider. No AWS account, no emulator.

use std::path::PathBuf;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use reminders::sim::plan::{self, PlanInput};
use reminders::sim::{chart, simulate, Profile, SimConfig};

/// The scheduler's deployment, for the demo and the planner: as the template deploys it
/// unless told otherwise.
#[derive(clap::Args, Debug, Clone, Copy, Default)]
pub struct SchedulerFlags {
    /// Scheduler schedules, each over its own share of the due index [default: as deployed]
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=16))]
    pub scheduler_parallelism: Option<u32>,
    /// Reminders one scheduler run takes at most; a run also stops at its deadline [default: as deployed]
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_per_run: Option<u32>,
}

impl SchedulerFlags {
    /// (parallelism, max per run), the deployed values where not given.
    pub fn resolve(self) -> (u32, u32) {
        let (scheduler, _, parallelism) = reminders::sim::deployed();
        (
            self.scheduler_parallelism.unwrap_or(parallelism),
            self.max_per_run.unwrap_or(scheduler.max_per_run),
        )
    }
}

pub struct DemoArgs {
    pub reminders: u32,
    pub scheduler: SchedulerFlags,
    /// `None`: the default density ([`SimConfig::default_window`]).
    pub window_secs: Option<u64>,
    pub freshness_secs: u64,
    pub seed: u64,
    pub json: bool,
    pub chart: PathBuf,
    pub profile: Option<PathBuf>,
    pub overrides: ProfileOverrides,
}

/// Flags that override the profile (file or defaults).
#[derive(Default)]
pub struct ProfileOverrides {
    pub rate_429: Option<f64>,
    pub rate_5xx: Option<f64>,
    pub rate_timeout: Option<f64>,
    pub rate_permanent: Option<f64>,
    pub per_sec: Option<f64>,
    pub outage_start_secs: Option<u64>,
    pub outage_secs: Option<u64>,
    pub no_outage: bool,
    pub non_idempotent: bool,
}

fn load_profile(path: Option<&PathBuf>, o: &ProfileOverrides) -> Result<Profile, String> {
    let mut p = match path {
        None => Profile::default(),
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            toml::from_str(&text).map_err(|e| {
                let msg = e.to_string();
                format!(
                    "{}: {}",
                    path.display(),
                    msg.lines().next().unwrap_or("invalid profile")
                )
            })?
        }
    };
    let check = |name: &str, v: f64| {
        if (0.0..=1.0).contains(&v) {
            Ok(v)
        } else {
            Err(format!("{name} must be between 0 and 1"))
        }
    };
    if let Some(v) = o.rate_429 {
        p.rate_429 = check("--rate-429", v)?;
    }
    if let Some(v) = o.rate_5xx {
        p.rate_5xx = check("--rate-5xx", v)?;
    }
    if let Some(v) = o.rate_timeout {
        p.rate_timeout = check("--rate-timeout", v)?;
    }
    if let Some(v) = o.rate_permanent {
        p.rate_permanent = check("--rate-permanent", v)?;
    }
    if let Some(v) = o.per_sec {
        if v <= 0.0 {
            return Err("--per-sec must be positive".into());
        }
        (p.push_per_sec, p.email_per_sec, p.sms_per_sec) = (v, v, v);
    }
    if let Some(s) = o.outage_start_secs {
        p.outage_start_secs = Some(s);
    }
    if let Some(s) = o.outage_secs {
        p.outage_secs = s;
    }
    if o.no_outage {
        p.outage_start_secs = None;
    }
    if o.non_idempotent {
        p.idempotent = false;
    }
    Ok(p)
}

fn progress_bar(total: u64, hidden: bool) -> ProgressBar {
    let bar = if hidden {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(total)
    };
    if let Ok(style) = ProgressStyle::with_template("{spinner} {bar:40} {pos}/{len} settled {msg}")
    {
        bar.set_style(style);
    }
    bar
}

pub async fn demo(args: DemoArgs) -> Result<(), String> {
    if args.reminders == 0 {
        return Err("--reminders must be at least 1".into());
    }
    let profile = load_profile(args.profile.as_ref(), &args.overrides)?;
    let cfg = SimConfig {
        reminders: args.reminders,
        window: args.window_secs.map_or_else(
            || SimConfig::default_window(args.reminders),
            |s| Duration::from_secs(s.max(1)),
        ),
        freshness: Duration::from_secs(args.freshness_secs.max(1)),
        seed: args.seed,
        profile,
        scheduler_parallelism: args.scheduler.resolve().0,
        max_per_run: args.scheduler.resolve().1,
        ..SimConfig::default()
    };
    let bar = progress_bar(u64::from(args.reminders), false);
    let report = simulate(&cfg, |done, total| {
        bar.set_length(total);
        bar.set_position(done);
    })
    .await;
    bar.finish_and_clear();
    // The outage as the profile has it, shaded on the chart.
    let label = match cfg.profile.outage_channel {
        Some(c) => format!("{c} provider outage"),
        None => "provider outage".to_owned(),
    };
    let outage = cfg.profile.outage_start_secs.map(|start| {
        (
            start as f64,
            (start + cfg.profile.outage_secs) as f64,
            label.as_str(),
        )
    });
    std::fs::write(&args.chart, chart::svg(&report.samples, outage))
        .map_err(|e| format!("cannot write {}: {e}", args.chart.display()))?;
    if args.json {
        println!("{}", report.to_json());
        eprintln!("chart: {}", args.chart.display());
    } else {
        print!("{report}");
        println!("chart               {}", args.chart.display());
    }
    Ok(())
}

pub async fn plan(input: PlanInput, json: bool) -> Result<(), String> {
    if input.reminders == 0 || input.throughput_per_sec <= 0.0 {
        return Err("--reminders and --throughput must be positive".into());
    }
    if !(0.0..=1.0).contains(&input.timeout_rate) {
        return Err("--timeout-rate must be between 0 and 1".into());
    }
    let p = plan::plan(&input).await;
    if json {
        println!("{}", serde_json::to_string(&p).unwrap_or_default());
        return Ok(());
    }
    let e = p.estimate;
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
    Ok(())
}
