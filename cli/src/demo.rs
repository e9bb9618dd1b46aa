//! `remindctl demo`: the whole pipeline in one process — the real scheduler and consumer code
//! on in-memory ports with a virtual clock and a simulated provider. No AWS account, no
//! emulator. The scheduler's flags are shared with `plan`.

use std::path::PathBuf;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use reminders_harness::sim::lines::hanging;
use reminders_harness::sim::{chart, simulate, Profile, SimConfig};

/// A series load, for the demo and the planner: N subscribers' series of one rule.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct SeriesFlags {
    /// Subscribers with one recurring series each (with --rule); their occurrences inside the
    /// window are the load, made ahead by the scheduler's maker as deployed.
    #[arg(long, value_name = "N", requires = "rule")]
    pub series: Option<u32>,
    /// The series' RRULE, e.g. "FREQ=DAILY;BYHOUR=9;BYMINUTE=0": N subscribers' daily 09:00
    /// is a spike every morning.
    #[arg(long, requires = "series")]
    pub rule: Option<String>,
    /// The series' IANA time zone.
    #[arg(long, default_value = "UTC", requires = "series")]
    pub zone: String,
}

impl SeriesFlags {
    /// The load, checked as a series' PUT would be (a bad rule names `--rule`).
    pub fn load(&self) -> Result<Option<reminders_harness::sim::SeriesLoad>, String> {
        let (Some(count), Some(rule)) = (self.series, self.rule.clone()) else {
            return Ok(None);
        };
        if count == 0 {
            return Err("--series must be at least 1".into());
        }
        if self.zone == reminders_core::domain::series::SUBSCRIBER_ZONE {
            return Err("--zone: name an IANA zone (the simulated subscribers set none)".into());
        }
        let load = reminders_harness::sim::SeriesLoad {
            count,
            rule,
            zone: self.zone.clone(),
        };
        let cfg = SimConfig::default();
        reminders_harness::sim::load_series(&cfg, &load, 0).map_err(|e| {
            let flag = match e.field().as_str() {
                "zone" => "--zone",
                _ => "--rule",
            };
            format!("{flag}: {}", e.requirement())
        })?;
        Ok(Some(load))
    }
}

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
        let (scheduler, _, parallelism) = reminders_harness::sim::deployed();
        (
            self.scheduler_parallelism.unwrap_or(parallelism),
            self.max_per_run.unwrap_or(scheduler.max_per_run),
        )
    }
}

/// Run the whole pipeline in one process — the real scheduler and consumer on in-memory
/// ports, a virtual clock and a simulated provider — and report what happened.
///
/// Example: remindctl demo --seed 7 --rate-429 0.05 --json
#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// Reminders, spread over the three channels.
    /// [default: 10000, or 0 beside --series]
    #[arg(long)]
    reminders: Option<u32>,
    #[command(flatten)]
    series: SeriesFlags,
    /// Due times spread over this many seconds [default: 1800 for up to 10,000 reminders,
    /// then the same density: 18,000 for 100,000; a day with --series].
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
    chart: PathBuf,
    #[command(flatten)]
    scheduler: SchedulerFlags,
    /// A TOML failure profile (fields: push_per_sec, email_per_sec, sms_per_sec, rate_429,
    /// retry_after_secs, rate_5xx, rate_timeout, rate_permanent, outage_start_secs,
    /// outage_secs, outage_channel, idempotent).
    #[arg(long)]
    profile: Option<PathBuf>,
    #[command(flatten)]
    overrides: ProfileOverrides,
    /// Subscribers with recipient rules: one in ten opted out of SMS, one in five with push
    /// quiet hours (17:25-17:40 New York, crossed by the run: held, then sent), one in five
    /// with email quiet hours (22:00-07:00 London: expired_quiet_hours).
    #[arg(long)]
    recipient_rules: bool,
}

// Flags that override the profile (file or defaults). A plain comment: a doc comment here
// would become the help of the commands that flatten it.
#[derive(Debug, Default, clap::Args)]
struct ProfileOverrides {
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

pub async fn run(args: DemoArgs) -> Result<(), String> {
    let series = args.series.load()?;
    let reminders = args
        .reminders
        .unwrap_or(if series.is_some() { 0 } else { 10_000 });
    if reminders == 0 && series.is_none() {
        return Err("--reminders must be at least 1".into());
    }
    let profile = load_profile(args.profile.as_ref(), &args.overrides)?;
    let default_window = match series {
        Some(_) => Duration::from_secs(86_400),
        None => SimConfig::default_window(reminders),
    };
    let cfg = SimConfig {
        reminders,
        series,
        window: args
            .window_secs
            .map_or(default_window, |s| Duration::from_secs(s.max(1))),
        freshness: Duration::from_secs(args.freshness_secs.max(1)),
        seed: args.seed,
        profile,
        scheduler_parallelism: args.scheduler.resolve().0,
        max_per_run: args.scheduler.resolve().1,
        recipient_rules: args.recipient_rules,
        ..SimConfig::default()
    };
    let bar = progress_bar(reminders_harness::sim::planned(&cfg), false);
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
        print!("{}", simulated(&cfg));
        print!("{report}");
        println!("chart               {}", args.chart.display());
        print!("{}", TRY_NEXT);
    }
    Ok(())
}

/// What the run simulated, before what became of it: the load, the seed, the provider the
/// profile describes (throughput, failure rates, the outage) and the recipients' rules.
fn simulated(cfg: &SimConfig) -> String {
    let p = &cfg.profile;
    let minutes = |secs: u64| match (secs % 3600, secs % 60) {
        (0, _) if secs >= 7200 => format!("{} h", secs / 3600),
        (_, 0) => format!("{} min", secs / 60),
        _ => format!("{secs} s"),
    };
    let pct = |r: f64| format!("{}%", (r * 1000.0).round() / 10.0);
    let load = match &cfg.series {
        Some(_) => format!(
            "{} reminders and {} occurrences of series due over {}",
            cfg.reminders,
            reminders_harness::sim::planned(cfg) - u64::from(cfg.reminders),
            minutes(cfg.window.as_secs())
        ),
        None => format!(
            "{} reminders due over {}, a third on each channel",
            cfg.reminders,
            minutes(cfg.window.as_secs())
        ),
    };
    let outage = match p.outage_start_secs {
        Some(start) => format!(
            "; {} down (503 to every call) from {} to {} into the run",
            p.outage_channel.map_or("every provider", |c| c.as_str()),
            minutes(start),
            minutes(start + p.outage_secs)
        ),
        None => String::new(),
    };
    let mut out = hanging(
        "simulated",
        &format!(
            "{load}, each fresh for {} after its due time; seed {} (the same seed gives the \
             same run)",
            minutes(cfg.freshness.as_secs()),
            cfg.seed
        ),
    );
    out += &hanging(
        "provider",
        &format!(
            "push {}/s · email {}/s · sms {}/s (beyond that, 429); of the calls within it, {} answer \
         429 (retry after {} s), {} 503, {} time out, {} are refused for good{outage}{}",
            p.push_per_sec,
            p.email_per_sec,
            p.sms_per_sec,
            pct(p.rate_429),
            p.retry_after_secs,
            pct(p.rate_5xx),
            pct(p.rate_timeout),
            pct(p.rate_permanent),
            if p.idempotent {
                ""
            } else {
                "; it ignores idempotency keys"
            }
        ),
    );
    if cfg.recipient_rules {
        out += &hanging(
            "recipients",
            "1 in 10 opted out of SMS, 1 in 5 with push quiet hours, 1 in 5 with email quiet \
             hours",
        );
    }
    out + "\n"
}

/// Where to go from the report.
const TRY_NEXT: &str = "
try next            remindctl demo --seed 8 (another run) · --no-outage · --rate-429 0.3 (a
                    throttling provider) · --non-idempotent (a provider that ignores the keys) ·
                    --recipient-rules · --series 5000 --rule \"FREQ=DAILY;BYHOUR=9;BYMINUTE=0\"
                    remindctl plan --help sizes a deployment for your peak; every line above is
                    explained in docs/performance.md
";
