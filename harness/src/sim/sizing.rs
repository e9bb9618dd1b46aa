//! The per-stage arithmetic the planner's search starts from: what one schedule, one record
//! and one batch take at modelled latency, and the sizes (due shards, a mapping's batches at
//! once, provisioned modes) a rate needs of them.

use super::capacity::TableMode;
use super::limits::{dynamo as ddb, lambda};
use super::params::Params;
use super::plan::PlanInput;

/// Modelled milliseconds of one record in the consumer: its DynamoDB calls (a reminder
/// read, the recipient's rules, the claim and the outcome write) and the provider's send.
pub(super) fn record_ms(input: &PlanInput) -> f64 {
    let latency = super::latency::LatencyModel::default();
    4.0 * latency.dynamo_p50_ms + input.provider_latency_ms
}

/// Reminders one schedule enqueues and marks a second: its CPU per reminder and its marks'
/// latency over the marks in flight, at modelled latency.
pub(super) fn schedule_per_second() -> f64 {
    let latency = super::latency::LatencyModel::default();
    let (scheduler, _, _) = super::deployed();
    let per_reminder_us = latency.cpu_us_per_reminder / latency.vcpu
        + latency.dynamo_p50_ms * 1_000.0 / (scheduler.send_concurrency as f64 * 10.0);
    1e6 / per_reminder_us
}

/// The due index's shards for `parallelism` schedules and `rate` deliveries a second. Shards
/// cost nothing (the scheduler queries all 64 virtual shards), so they are set for headroom,
/// not searched down: the schedules' marks, at their full speed whatever the rate, take at
/// most half of each partition's writes, the other half left to the API's and the series
/// maker's writes landing meanwhile; and the rate the target needs at most four fifths. A
/// power of two, which divides the 64 virtual shards evenly.
pub(super) fn due_shards(parallelism: u32, rate: f64) -> u32 {
    let marks = f64::from(parallelism) * schedule_per_second();
    let for_marks = marks / (0.5 * ddb::PARTITION_WRITES_PER_SEC);
    let for_rate = rate / (0.8 * ddb::PARTITION_WRITES_PER_SEC);
    (for_marks.max(for_rate).ceil() as u32)
        .max(parallelism)
        .next_power_of_two()
        .clamp(1, 64)
}

/// Batches at once a channel's mapping needs for `rate` deliveries a second, a fifth spare:
/// a batch's records run at once (up to the consumer's own bound of ten).
pub(super) fn consumer_slots(input: &PlanInput, batch_size: u32, rate: f64) -> u32 {
    let batch_secs = record_ms(input) / 1_000.0 * (f64::from(batch_size) / 10.0).ceil()
        + lambda::INVOKE_OVERHEAD_MS / 1_000.0;
    let per_slot = f64::from(batch_size) / batch_secs;
    (1.2 * rate / per_slot).ceil() as u32
}

/// The account's executions the consumer may have: its quota less the reservations (one a
/// schedule, one for redrive).
pub(super) fn pool(input: &PlanInput, p: &Params) -> u32 {
    input
        .account_concurrency
        .saturating_sub(p.scheduler_parallelism + 1)
}

/// The limit no template parameter moves: the account's concurrency quota.
pub(super) fn account_concurrency(input: &PlanInput, what: &str, pool: u32) -> String {
    format!(
        "Lambda concurrency: {what}, {pool} available (the \
         account's quota of {} less reservations); no template parameter moves it: ask AWS \
         for more (Service Quotas, \"Concurrent executions\"), then plan with \
         --account-concurrency",
        input.account_concurrency
    )
}

/// Provisioned mode with `slots` batches at once ready from the start: that many minimum
/// pollers (ten batches each), and no more maximum than minimum (the cheapest: pollers run
/// are billed; a raise adds more when the consumer still holds the work back).
pub(super) fn to_provisioned(p: &mut Params, slots: u32, pool: u32) {
    let (lo, hi) = lambda::ESM_MIN_POLLERS_RANGE;
    let per = lambda::ESM_POLLER_CONCURRENCY;
    p.min_pollers = slots.min(pool).div_ceil(per).clamp(lo, hi);
    p.max_pollers = p.min_pollers.clamp(
        lambda::ESM_MAX_POLLERS_RANGE.0,
        lambda::ESM_MAX_POLLERS_RANGE.1,
    );
}

pub(super) fn provisioned(writes: f64) -> TableMode {
    let writes = ((writes / 1_000.0).ceil() * 1_000.0).min(ddb::TABLE_QUOTA_UNITS_PER_SEC) as u32;
    TableMode::Provisioned {
        writes,
        reads: (3 * writes).min(ddb::TABLE_QUOTA_UNITS_PER_SEC as u32),
    }
}
