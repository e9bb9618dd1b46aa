//! `remindctl plan --target-p99`: the cheapest deployed parameters whose simulated p99
//! lateness meets a target, or the limit no parameter can move.
//!
//! Cheapest, in this order ([`Params::cost`]): standard mode before provisioned mode, fewest
//! minimum event pollers, then fewest concurrent Lambdas (`SchedulerParallelism` plus the
//! consumer's batches at once: `ConsumerMaxConcurrency`, or in provisioned mode ten a poller up
//! to `ConsumerMaxPollers`), on-demand tables before provisioned ones. Due-index shards are
//! free (the scheduler reads all 64 virtual shards whatever `DueShards` says): the search sets
//! them for headroom and raises them when the due index is the limit.
//! Provisioned mode is billed apart from the invocations, in Event Poller Units (EPUs, the
//! API reference's name for a poller's capacity:
//! <https://docs.aws.amazon.com/lambda/latest/api/API_ProvisionedPollerConfig.html>) for the
//! pollers a mapping keeps, its minimum ones even while the queue is empty (they "remain
//! ready"); the price is AWS Lambda's pricing page's and is not modelled here, only that any
//! pollers cost more than none and more minimum pollers more than fewer. So the search takes
//! provisioned mode only when standard mode cannot meet the target: when its scaling (300
//! batches more a minute) or its ceiling (1,000) is what the simulation names.
//!
//! The search starts from the smallest set the per-stage capacity arithmetic allows for the rate the target needs (a 1M simulation takes minutes, so the
//! arithmetic prunes), simulates it, and raises only the parameter of the stage the
//! simulation names as the bottleneck (or, when no parameter moves that one, of the next
//! stage that was the limit), until the target is met or no stage that held the work back can
//! be moved (the provider's throughput, the mapping's scaling, Lambda's or DynamoDB's quotas).
//! Every figure it prints is simulated.

use serde::Serialize;

use super::capacity::TableMode;
use super::limits::{dynamo as ddb, lambda};
pub use super::params::Params;
use super::plan::{plan_with_progress, Plan, PlanInput};
use super::sizing::{
    account_concurrency, consumer_slots, due_shards, pool, provisioned, schedule_per_second,
    to_provisioned,
};
use super::stages::{Stage, StageReport};

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
            let next = raise(params, &p.simulated.stages, input, needed);
            debug_assert!(
                next.as_ref().map_or(true, |n| n.cost() >= params.cost()),
                "candidates only grow in cost"
            );
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
    // One schedule, 50 s of each minute.
    let per_second = schedule_per_second();
    let per_schedule = per_second * 50.0 / 60.0;
    p.scheduler_parallelism = ((rate / per_schedule).ceil() as u32).clamp(1, 16);
    // A run's cap: what one run does in its 50 s, rounded up to ten thousand — a backstop its
    // deadline comes to first (raised when a run stops at it). From the arithmetic, not the
    // input's, as every parameter the search sets: its answer does not depend on what is
    // deployed.
    p.max_per_run = ((per_second * 50.0 / 10_000.0).ceil() as u32).max(1) * 10_000;
    p.due_shards = due_shards(p.scheduler_parallelism, rate);
    // The consumer carries the provider's whole throughput (a slower consumer leaves paid-for
    // sends unused, and a burst above the target's rate then waits on it), up to twice the
    // rate the target needs (a provider far faster than the load needs sizes nothing).
    let carried = input.throughput_per_sec.min(2.0 * rate);
    p.batch_size = lambda::ESM_BATCH_WITHOUT_WINDOW;
    let slots = consumer_slots(input, p.batch_size, carried);
    let pool = pool(input, &p);
    if slots > pool.min(lambda::ESM_PROVISIONED_MAX_CONCURRENCY) {
        return (
            p,
            Some(account_concurrency(
                input,
                &format!("{slots} consumer executions needed"),
                pool,
            )),
        );
    }
    // Standard mode first (no pollers to pay for); provisioned only past its ceiling.
    let standard_max = pool.min(lambda::ESM_MAX_CONCURRENCY_RANGE.1);
    if slots > standard_max {
        to_provisioned(&mut p, slots, pool);
    } else {
        // Standard mode: the pollers' bounds do not apply, and stay at the template's.
        p.min_pollers = 0;
        p.max_pollers = reminders_core::consumer::config::MAPPING_MAX_POLLERS;
        p.consumer_max_concurrency = slots.clamp(lambda::ESM_MAX_CONCURRENCY_RANGE.0, standard_max);
    }
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
    // On demand unless the rate needs more than a new table's start, whatever the input's.
    p.tables = TableMode::OnDemand;
    if writes > 0.8 * ddb::ON_DEMAND_START_WRITES_PER_SEC {
        p.tables = provisioned(writes * 1.25);
    }
    (p, None)
}

/// The next candidate: the bottleneck's parameter raised; if no parameter moves it, the
/// parameter of the next stage that was the limit (longest first). `Err`: the bottleneck's
/// limit, when no stage that held the work back can be moved.
fn raise(p: Params, stages: &StageReport, input: &PlanInput, rate: f64) -> Result<Params, String> {
    let mut limited: Vec<_> = stages.stages.iter().filter(|s| s.limit_secs > 0).collect();
    limited.sort_by_key(|s| std::cmp::Reverse(s.limit_secs));
    let mut first_err = None;
    for s in limited {
        match raise_stage(p, Some(s.stage), stages, input, rate) {
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
    rate: f64,
) -> Result<Params, String> {
    let pool = pool(input, &p);
    let standard_max = pool.min(lambda::ESM_MAX_CONCURRENCY_RANGE.1);
    let provisioned_max = (pool.min(lambda::ESM_PROVISIONED_MAX_CONCURRENCY)
        / lambda::ESM_POLLER_CONCURRENCY)
        .min(lambda::ESM_MAX_POLLERS_RANGE.1);
    let consumer_limit = stages.stage(Stage::Consumer).map_or(0, |s| s.limit_secs);
    match stage {
        Some(Stage::Scheduler) if stages.scheduler_capped => {
            p.max_per_run = p.max_per_run.saturating_mul(2);
        }
        Some(Stage::Scheduler) if p.scheduler_parallelism < 16 => {
            p.scheduler_parallelism = (p.scheduler_parallelism * 2).min(16);
            p.due_shards = p.due_shards.max(due_shards(p.scheduler_parallelism, rate));
        }
        Some(Stage::Scheduler) => {
            return Err("the scheduler at its 16 schedules (SchedulerParallelism's maximum)".into())
        }
        Some(Stage::DueIndex) if p.due_shards < 64 => p.due_shards = (p.due_shards * 2).min(64),
        Some(Stage::DueIndex) => {
            return Err("the due index at 64 shards of 1,000 writes/s (DueShards' maximum)".into())
        }
        // Standard mode's ramp (five batches, 300 more a minute) held it back: provisioned
        // mode keeps the pollers for the batches the rate needs ready from the first second.
        Some(Stage::Consumer)
            if 2 * stages.consumer_scaling_secs > consumer_limit && !p.provisioned() =>
        {
            let slots = consumer_slots(input, p.batch_size, rate).max(p.consumer_max_concurrency);
            to_provisioned(&mut p, slots, pool);
        }
        Some(Stage::Consumer)
            if 2 * stages.consumer_scaling_secs > consumer_limit
                && p.min_pollers < lambda::ESM_MIN_POLLERS_RANGE.1
                && p.min_pollers < provisioned_max =>
        {
            p.min_pollers = (p.min_pollers * 2)
                .min(lambda::ESM_MIN_POLLERS_RANGE.1)
                .min(provisioned_max);
            p.max_pollers = p.max_pollers.max(p.min_pollers);
        }
        Some(Stage::Consumer) if 2 * stages.consumer_scaling_secs > consumer_limit => {
            return Err(format!(
                "the event source mapping's scaling: in provisioned mode it starts at {} \
                 pollers ({} batches) and adds {} batches a minute (the consumer was the \
                 limit {} s, {} of them still scaling); ConsumerMinPollers is at its most",
                p.min_pollers,
                p.min_pollers * lambda::ESM_POLLER_CONCURRENCY,
                lambda::ESM_PROVISIONED_SCALE_PER_MIN,
                consumer_limit,
                stages.consumer_scaling_secs
            ))
        }
        Some(Stage::Consumer) if !p.provisioned() && p.consumer_max_concurrency < standard_max => {
            p.consumer_max_concurrency = (p.consumer_max_concurrency * 2).min(standard_max);
        }
        Some(Stage::Consumer) if !p.provisioned() && standard_max < pool => {
            // Standard mode's ceiling (1,000 batches), and the account has more.
            to_provisioned(&mut p, 2 * standard_max, pool);
        }
        Some(Stage::Consumer) if p.provisioned() && p.max_pollers < provisioned_max => {
            p.max_pollers = (p.max_pollers * 2).min(provisioned_max);
        }
        Some(Stage::Consumer) => {
            return Err(account_concurrency(
                input,
                &format!("the consumer at {} batches at once", p.consumer_batches()),
                pool,
            ));
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
