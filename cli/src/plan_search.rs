//! What `remindctl plan` prints: a plan's figures in words, the search's answer
//! (`--target-p99`) as a `sam deploy` line with the simulated figures, and the progress bar of
//! a long plan (stderr, on a terminal only, never with --json).

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use reminders_harness::sim::plan::{Plan, PlanInput};
use reminders_harness::sim::search::{self, Found};

/// A bar on stderr when it is a terminal and the output is not JSON; nothing otherwise.
pub struct Progress(ProgressBar);

impl Progress {
    pub fn new(json: bool) -> Self {
        if json || !std::io::stderr().is_terminal() {
            return Self(ProgressBar::hidden());
        }
        let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
        if let Ok(style) = ProgressStyle::with_template(
            "{spinner} {msg} {bar:30} {pos}/{len} settled, {elapsed} ({eta} left)",
        ) {
            bar.set_style(style);
        }
        Self(bar)
    }

    pub fn tick(&self, what: &str, done: u64, total: u64) {
        if self.0.is_hidden() {
            return;
        }
        if self.0.length() != Some(total) {
            self.0.set_length(total);
        }
        if self.0.message() != what {
            self.0.set_message(what.to_owned());
        }
        self.0.set_position(done);
    }

    pub fn finish(&self) {
        self.0.finish_and_clear();
    }
}

pub async fn run(input: &PlanInput, target: f64, json: bool) -> Result<(), String> {
    let bar = Progress::new(json);
    let found = search::search(input, target, |what, d, t| bar.tick(what, d, t)).await;
    bar.finish();
    if json {
        println!(
            "{}",
            serde_json::to_string(&found).map_err(|e| e.to_string())?
        );
    } else {
        print_found(&found);
    }
    Ok(())
}

fn print_found(f: &Found) {
    let s = &f.plan.simulated;
    let p99 = s.lateness_ms.p99 as f64 / 1_000.0;
    if f.met {
        println!(
            "target              p99 ≤ {} s: met, simulated p99 {p99:.0} s",
            f.target_p99_s
        );
        println!("parameters          {}", f.command);
    } else {
        println!(
            "target              p99 ≤ {} s: NOT met (best simulated p99 {p99:.0} s)",
            f.target_p99_s
        );
        if let Some(why) = &f.unmovable {
            println!("limit               {why}");
        }
        println!("closest tried       {}", f.command);
    }
    if f.params.provisioned() {
        println!(
            "mappings            provisioned mode: {} event pollers kept ready on each \
             channel's mapping, up to {} (billed in Event Poller Units, the minimum ones while \
             idle too; ConsumerMaxConcurrency does not apply)",
            f.params.min_pollers, f.params.max_pollers
        );
    }
    if let reminders_harness::sim::capacity::TableMode::Provisioned { .. } = f.params.tables {
        println!(
            "tables              {} (no template parameter: set it on RemindersTable and \
             DeliveriesTable, or warm their on-demand throughput to it, before the peak)",
            f.params.tables.describe()
        );
    }
    println!(
        "needed              {:.0} deliveries/s · {} candidate(s) simulated",
        f.needed_per_sec,
        f.tried.len()
    );
    for t in &f.tried {
        println!(
            "  tried             {} · {} → p99 {:.0} s, bottleneck {}",
            t.params.overrides(),
            t.params.tables.describe(),
            t.p99_s,
            t.bottleneck.map_or("none", |b| b.as_str())
        );
    }
    println!("simulated with these parameters:");
    print_human(&f.plan);
}

/// A plan in words: the estimate beside the simulation, and what became of every reminder.
pub(crate) fn print_human(p: &Plan) {
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
    print!("{}", s.stages);
}
