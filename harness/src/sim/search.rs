//! `remindctl plan --target-p99`: the cheapest deployed parameters whose simulated p99
//! lateness meets a target, or the limit no parameter can move.
//!
//! Cheapest, in this order: fewest concurrent Lambdas (`SchedulerParallelism` plus
//! `ConsumerMaxConcurrency`), then fewest due-index shards, on-demand tables before
//! provisioned ones. The search starts from the smallest set the per-stage capacity
//! arithmetic allows for the rate the target needs (a 1M simulation takes minutes, so the
//! arithmetic prunes), simulates it, and raises only the parameter of the stage the
//! simulation names as the bottleneck (or, when no parameter moves that one, of the next
//! stage that was the limit), until the target is met or no stage that held the work back can
//! be moved (the provider's throughput, the mapping's scaling, Lambda's or DynamoDB's quotas).
//! Every figure it prints is simulated.

use serde::Serialize;

use super::capacity::TableMode;
use super::limits::{dynamo as ddb, lambda};
use super::plan::{plan_with_progress, Plan, PlanInput};
use super::stages::{Stage, StageReport};

/// The deployed parameters the planner searches, named as template.yaml names them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Params {
    pub scheduler_parallelism: u32,
    pub due_shards: u32,
    pub max_per_run: u32,
    pub consumer_max_concurrency: u32,
    pub batch_size: u32,
    /// Not a template parameter: the tables are on demand (`PAY_PER_REQUEST`) as deployed.
    pub tables: TableMode,
}

impl Params {
    /// The template's defaults (one source: the code, held to the template by its test).
    pub fn deployed() -> Self {
        let (scheduler, _, parallelism) = super::deployed();
        Self {
            scheduler_parallelism: parallelism,
            due_shards: reminders::aws::config::DEFAULT_DUE_SHARDS,
            max_per_run: scheduler.max_per_run,
            consumer_max_concurrency: reminders::consumer::config::MAPPING_MAX_CONCURRENCY,
            batch_size: reminders::consumer::config::MAPPING_BATCH_SIZE,
            tables: TableMode::OnDemand,
        }
    }

    /// `Name=Value` for each template parameter, in template.yaml's names.
    pub fn overrides(&self) -> String {
        format!(
            "SchedulerParallelism={} DueShards={} SchedulerMaxPerRun={} ConsumerMaxConcurrency={} ConsumerBatchSize={}",
            self.scheduler_parallelism,
            self.due_shards,
            self.max_per_run,
            self.consumer_max_concurrency,
            self.batch_size
        )
    }
}

/// One simulated candidate.
#[derive(Debug, Clone, Serialize)]
pub struct Tried {
    pub params: Params,
    pub p99_s: f64,
    pub bottleneck: Option<Stage>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Found {
    pub target_p99_s: f64,
    pub met: bool,
    /// The parameters (the cheapest found that meet the target, else the closest tried).
    pub params: Params,
    /// `sam deploy --parameter-overrides …` with them.
    pub command: String,
    /// What no parameter can move, when the target is out of reach.
    pub unmovable: Option<String>,
    /// The rate the target needs, deliveries a second (the arithmetic's starting point).
    pub needed_per_sec: f64,
    pub tried: Vec<Tried>,
    /// The simulated answer with `params`.
    pub plan: Plan,
}

/// Candidates simulated at most.
const MAX_TRIES: usize = 8;

/// Search; `progress(what, done, total)` is told each candidate and its simulation's progress.
pub async fn search(
    input: &PlanInput,
    target_p99_s: f64,
    mut progress: impl FnMut(&str, u64, u64),
) -> Found {
    let n = super::planned(&super::plan::config(input)) as f64;
    let spread = input.due_spread_secs as f64;
    // Due evenly over `spread`, sent at R from the start: the 99th percentile waits
    // 0.99·n/R − 0.99·spread. A tenth of the target is left for the pipeline's own steps.
    let needed = (0.99 * n / (0.9 * target_p99_s + 0.99 * spread).max(1.0)).max(1.0);
    let mut tried = Vec::new();
    let mut best: Option<(Params, Plan)> = None;
    let mut last: Option<(Params, Plan)> = None;
    let (mut params, mut unmovable) = start(input, needed);
    if unmovable.is_none() {
        for i in 0..MAX_TRIES {
            let what = format!("candidate {} · {}", i + 1, params.overrides());
            let run = PlanInput {
                params,
                ..input.clone()
            };
            let p = plan_with_progress(&run, |d, t| progress(&what, d, t)).await;
            let p99 = p.simulated.lateness_ms.p99 as f64 / 1_000.0;
            let ok = p99 <= target_p99_s && p.simulated.delivered > 0 && p.simulated.pending == 0;
            let bottleneck = p.simulated.stages.bottleneck;
            tried.push(Tried {
                params,
                p99_s: p99,
                bottleneck,
            });
            if ok {
                // Candidates only grow in cost: the first that meets it is the cheapest seen.
                best = Some((params, p));
                break;
            }
            let next = raise(params, &p.simulated.stages, input);
            // Not met: the answer shown is the closest candidate, not merely the last.
            if last
                .as_ref()
                .is_none_or(|(_, l)| p.simulated.lateness_ms.p99 < l.simulated.lateness_ms.p99)
            {
                last = Some((params, p));
            }
            match next {
                Ok(next) => params = next,
                Err(why) => {
                    unmovable = Some(why);
                    break;
                }
            }
        }
    }
    let met = best.is_some();
    let (params, plan) = match (best, last) {
        (Some(b), _) | (None, Some(b)) => b,
        (None, None) => {
            // Out of reach on arithmetic alone: simulate the deployed stack to show why.
            let p =
                plan_with_progress(input, |d, t| progress("the deployed parameters", d, t)).await;
            (input.params, p)
        }
    };
    if !met && unmovable.is_none() {
        unmovable = Some(format!(
            "not met within {MAX_TRIES} candidates; the closest one's bottleneck: {}",
            plan.simulated
                .stages
                .bottleneck
                .map_or("none", Stage::as_str)
        ));
    }
    Found {
        target_p99_s,
        met,
        params,
        command: format!("sam deploy --parameter-overrides {}", params.overrides()),
        unmovable,
        needed_per_sec: (needed * 10.0).round() / 10.0,
        tried,
        plan,
    }
}

/// Modelled milliseconds of one record in the consumer: its DynamoDB calls (a reminder
/// read, the recipient's rules, the claim and the outcome write) and the provider's send.
fn record_ms(input: &PlanInput) -> f64 {
    let latency = super::latency::LatencyModel::default();
    4.0 * latency.dynamo_p50_ms + input.provider_latency_ms
}

/// The smallest parameters the per-stage arithmetic allows for `rate` deliveries a second,
/// or the limit that no parameter moves.
fn start(input: &PlanInput, rate: f64) -> (Params, Option<String>) {
    let mut p = input.params;
    if input.throughput_per_sec < rate {
        return (
            p,
            Some(format!(
                "the provider's throughput: {} sends/s, the target needs {:.0}/s",
                input.throughput_per_sec, rate
            )),
        );
    }
    let latency = super::latency::LatencyModel::default();
    let (scheduler, _, _) = super::deployed();
    // One schedule: its CPU per reminder and its marks' latency over the marks in flight,
    // 50 s of each minute.
    let per_reminder_us = latency.cpu_us_per_reminder / latency.vcpu
        + latency.dynamo_p50_ms * 1_000.0 / (scheduler.send_concurrency as f64 * 10.0);
    let per_schedule = 1e6 / per_reminder_us * 50.0 / 60.0;
    p.scheduler_parallelism = ((rate / per_schedule).ceil() as u32).clamp(1, 16);
    // A run's cap no lower than what a run can do in its 50 s.
    let per_run = (1e6 / per_reminder_us * 50.0 * 1.1).ceil() as u32;
    p.max_per_run = p.max_per_run.max(per_run);
    p.due_shards = ((rate / (0.8 * ddb::PARTITION_WRITES_PER_SEC)).ceil() as u32)
        .max(p.scheduler_parallelism)
        .clamp(1, 64);
    // A batch's records run at once (up to the consumer's own bound of ten).
    let batch_secs = record_ms(input) / 1_000.0 * (f64::from(p.batch_size) / 10.0).ceil()
        + lambda::INVOKE_OVERHEAD_MS / 1_000.0;
    let per_slot = f64::from(p.batch_size) / batch_secs;
    let pool = input
        .account_concurrency
        .saturating_sub(p.scheduler_parallelism + 1)
        .min(lambda::ESM_MAX_BATCHES);
    let slots = (1.2 * rate / per_slot).ceil() as u32;
    if slots > pool {
        return (
            p,
            Some(format!(
                "Lambda concurrency: {slots} consumer executions needed, {pool} available \
                 (the account's quota of {} less reservations; ask AWS for more)",
                input.account_concurrency
            )),
        );
    }
    p.consumer_max_concurrency = slots.clamp(lambda::ESM_MAX_CONCURRENCY_RANGE.0, pool);
    // The ledger takes two writes a delivery; the reminders table and its index one a mark.
    let writes = 2.0 * rate;
    if writes > ddb::TABLE_QUOTA_UNITS_PER_SEC {
        return (
            p,
            Some(format!(
                "DynamoDB's per-table quota: the ledger needs {writes:.0} writes/s, the \
                 default quota is {}",
                ddb::TABLE_QUOTA_UNITS_PER_SEC
            )),
        );
    }
    if writes > 0.8 * ddb::ON_DEMAND_START_WRITES_PER_SEC {
        p.tables = provisioned(writes * 1.25);
    }
    (p, None)
}

fn provisioned(writes: f64) -> TableMode {
    let writes = ((writes / 1_000.0).ceil() * 1_000.0).min(ddb::TABLE_QUOTA_UNITS_PER_SEC) as u32;
    TableMode::Provisioned {
        writes,
        reads: (3 * writes).min(ddb::TABLE_QUOTA_UNITS_PER_SEC as u32),
    }
}

/// The next candidate: the bottleneck's parameter raised; if no parameter moves it, the
/// parameter of the next stage that was the limit (longest first). `Err`: the bottleneck's
/// limit, when no stage that held the work back can be moved.
fn raise(p: Params, stages: &StageReport, input: &PlanInput) -> Result<Params, String> {
    let mut limited: Vec<_> = stages.stages.iter().filter(|s| s.limit_secs > 0).collect();
    limited.sort_by_key(|s| std::cmp::Reverse(s.limit_secs));
    let mut first_err = None;
    for s in limited {
        match raise_stage(p, Some(s.stage), stages, input) {
            Ok(next) => return Ok(next),
            Err(why) => {
                first_err.get_or_insert(why);
            }
        }
    }
    Err(first_err.unwrap_or_else(no_stage_was_the_limit))
}

fn no_stage_was_the_limit() -> String {
    "no stage was the limit: the lateness is the pipeline's own (retries, the scheduler's \
     minute, an outage)"
        .into()
}

fn raise_stage(
    mut p: Params,
    stage: Option<Stage>,
    stages: &StageReport,
    input: &PlanInput,
) -> Result<Params, String> {
    let pool = input
        .account_concurrency
        .saturating_sub(p.scheduler_parallelism + 1)
        .min(lambda::ESM_MAX_BATCHES);
    let consumer_limit = stages.stage(Stage::Consumer).map_or(0, |s| s.limit_secs);
    match stage {
        Some(Stage::Scheduler) if stages.scheduler_capped => {
            p.max_per_run = p.max_per_run.saturating_mul(2);
        }
        Some(Stage::Scheduler) if p.scheduler_parallelism < 16 => {
            p.scheduler_parallelism = (p.scheduler_parallelism * 2).min(16);
            p.due_shards = p.due_shards.max(p.scheduler_parallelism);
        }
        Some(Stage::Scheduler) => {
            return Err("the scheduler at its 16 schedules (SchedulerParallelism's maximum)".into())
        }
        Some(Stage::DueIndex) if p.due_shards < 64 => p.due_shards = (p.due_shards * 2).min(64),
        Some(Stage::DueIndex) => {
            return Err("the due index at 64 shards of 1,000 writes/s (DueShards' maximum)".into())
        }
        Some(Stage::Consumer) if 2 * stages.consumer_scaling_secs > consumer_limit => {
            return Err(format!(
                "the event source mapping's scaling: it adds {} batches a minute from {} \
                 (the consumer was the limit {} s, {} of them still scaling); no template \
                 parameter moves it",
                lambda::ESM_SCALE_PER_MIN,
                lambda::ESM_START_BATCHES,
                consumer_limit,
                stages.consumer_scaling_secs
            ))
        }
        Some(Stage::Consumer) if p.consumer_max_concurrency < pool => {
            p.consumer_max_concurrency = (p.consumer_max_concurrency * 2).min(pool);
        }
        Some(Stage::Consumer) => {
            return Err(format!(
                "Lambda concurrency: the consumer at {pool} executions (the account's quota)"
            ))
        }
        Some(Stage::Ledger | Stage::RemindersTable) => {
            let now = match p.tables {
                TableMode::OnDemand => ddb::ON_DEMAND_START_WRITES_PER_SEC,
                TableMode::Provisioned { writes, .. } => f64::from(writes),
            };
            if now >= ddb::TABLE_QUOTA_UNITS_PER_SEC {
                return Err("DynamoDB's per-table quota (40,000 units/s by default)".into());
            }
            p.tables = provisioned(now * 2.0);
        }
        Some(Stage::Provider) => {
            return Err(format!(
                "the provider's throughput ({} sends/s)",
                input.throughput_per_sec
            ))
        }
        Some(Stage::Queue) | None => return Err(no_stage_was_the_limit()),
    }
    Ok(p)
}
