//! The planner's limits on the way: DynamoDB's partitions, the consumer's mapping concurrency,
//! and the parameter search. Small loads: each runs in seconds.

use reminders_harness::sim::capacity::TableMode;
use reminders_harness::sim::plan::{plan, PlanInput};
use reminders_harness::sim::search::search;
use reminders_harness::sim::stages::Stage;

/// 10,000 due at once, one schedule marking them: with one due-index shard every mark lands
/// on one partition (1,000 writes a second), which throttles, and the report names that
/// partition; with four shards the same load spreads under the limit and nothing throttles.
#[tokio::test]
async fn one_due_shard_throttles_its_partition_and_more_shards_remove_it() {
    let spike = |shards| {
        let mut input = PlanInput::deployed(10_000, 1_000.0);
        input.params.scheduler_parallelism = 1;
        input.params.due_shards = shards;
        input.params.consumer_max_concurrency = 100;
        input
    };
    let one = plan(&spike(1)).await.simulated;
    let index = one.stages.stage(Stage::DueIndex).unwrap();
    assert!(index.throttles > 0, "{}", one.stages);
    assert!(index.limit_secs > 0, "{}", one.stages);
    assert_eq!(one.stages.hottest_due_shard, Some(0), "{}", one.stages);
    assert_eq!(
        one.stages.bottleneck,
        Some(Stage::DueIndex),
        "{}",
        one.stages
    );
    assert_eq!(
        one.delivered, 10_000,
        "throttled marks are retried, none lost"
    );
    assert_eq!(one.duplicates, 0);

    let four = plan(&spike(4)).await.simulated;
    let index = four.stages.stage(Stage::DueIndex).unwrap();
    assert_eq!(index.throttles, 0, "{}", four.stages);
    assert!(index.peak_utilisation.unwrap() <= 1.0);
    assert_eq!(four.delivered, 10_000);
    assert_ne!(
        four.stages.bottleneck,
        Some(Stage::DueIndex),
        "{}",
        four.stages
    );
}

/// A mapping of five batches at once (the default before the stated load chose four) in
/// front of a provider taking 2,000 sends a
/// second: the consumer is the bottleneck, the provider never the limit. With 50 batches at
/// once the consumer is the limit only while its mapping scales up (five batches more a
/// second), and the tail is shorter (the one schedule's marking is the rest of it).
#[tokio::test]
async fn five_batches_at_once_make_the_consumer_the_bottleneck_at_two_thousand_a_second() {
    let mut input = PlanInput::deployed(10_000, 2_000.0);
    input.params.consumer_max_concurrency = 5;
    // One schedule marks about 2,500 a second: under the due index's and the new on-demand
    // table's limits (four would throttle both; the first test shows that), so the consumer
    // is studied alone.
    input.params.scheduler_parallelism = 1;
    let s = plan(&input).await.simulated;
    assert_eq!(s.stages.bottleneck, Some(Stage::Consumer), "{}", s.stages);
    let consumer = s.stages.stage(Stage::Consumer).unwrap();
    assert_eq!(consumer.peak_utilisation, Some(1.0), "{}", s.stages);
    assert!(consumer.limit_secs > 5, "{}", s.stages);
    assert_eq!(
        s.stages.stage(Stage::Provider).unwrap().limit_secs,
        0,
        "{}",
        s.stages
    );
    // Each record's DynamoDB calls are counted on the consumer's real path.
    assert!(
        s.stages.consumer_requests_per_record >= 3.0,
        "{}",
        s.stages.consumer_requests_per_record
    );
    assert_eq!(s.delivered, 10_000);

    let mut wider = input.clone();
    wider.params.consumer_max_concurrency = 50;
    let w = plan(&wider).await.simulated;
    let limited = w.stages.stage(Stage::Consumer).unwrap().limit_secs;
    assert!(limited * 2 < consumer.limit_secs, "{}", w.stages);
    assert!(
        w.lateness_ms.p99 * 4 < s.lateness_ms.p99 * 3,
        "{} vs {}",
        w.lateness_ms.p99,
        s.lateness_ms.p99
    );
}

/// The search meets a target for a small spike with simulated figures, and names the
/// provider when its throughput cannot meet it whatever the parameters.
#[tokio::test]
async fn the_search_meets_a_small_target_and_names_a_slow_provider() {
    let input = PlanInput::deployed(3_000, 1_000.0);
    let found = search(&input, 20.0, |_, _, _| {}).await;
    assert!(found.met, "{found:?}");
    assert!(found.plan.simulated.lateness_ms.p99 <= 20_000);
    assert_eq!(found.plan.simulated.delivered, 3_000);
    assert!(found
        .command
        .starts_with("sam deploy --parameter-overrides SchedulerParallelism="));
    assert_eq!(found.params.tables, TableMode::OnDemand, "on demand first");
    assert!(!found.params.provisioned(), "standard mode first");
    let last = found.tried.last().unwrap();
    assert_eq!(
        last.p99_s * 1_000.0,
        found.plan.simulated.lateness_ms.p99 as f64
    );

    let slow = PlanInput::deployed(3_000, 20.0);
    let found = search(&slow, 20.0, |_, _, _| {}).await;
    assert!(!found.met);
    let why = found.unmovable.as_deref().unwrap_or_default();
    assert!(why.contains("provider"), "{why}");
    assert!(found.plan.simulated.lateness_ms.p99 > 20_000);
}

/// 50,000 due at once, fed fast (16 schedules, 32 shards, provisioned tables), in front of a
/// provider taking 10,000 sends a second. The standard mapping starts at five batches and adds
/// five a second: the consumer is the bottleneck, every second of it while still scaling. In
/// provisioned mode ten pollers keep 100 batches ready from the first second (they scale 1,000
/// a minute beyond): the consumer is never the limit and the tail is shorter.
#[tokio::test]
async fn provisioned_pollers_remove_the_ramp_that_holds_the_standard_mapping_back() {
    let mut input = PlanInput::deployed(50_000, 10_000.0);
    assert_eq!(input.params.min_pollers, 0, "standard mode as deployed");
    input.params.scheduler_parallelism = 16;
    input.params.due_shards = 32;
    input.params.consumer_max_concurrency = 200;
    input.params.tables = TableMode::Provisioned {
        writes: 30_000,
        reads: 40_000,
    };
    let standard = plan(&input).await.simulated;
    let consumer = standard.stages.stage(Stage::Consumer).unwrap();
    assert_eq!(
        standard.stages.bottleneck,
        Some(Stage::Consumer),
        "{}",
        standard.stages
    );
    assert!(consumer.limit_secs >= 8, "{}", standard.stages);
    assert_eq!(
        standard.stages.consumer_scaling_secs, consumer.limit_secs,
        "held back only while scaling: {}",
        standard.stages
    );

    let mut provisioned = input.clone();
    provisioned.params.min_pollers = 10;
    provisioned.params.max_pollers = 20;
    let p = plan(&provisioned).await.simulated;
    assert!(p
        .stages
        .to_string()
        .contains("provisioned mode: 10-20 pollers"));
    assert_eq!(
        p.stages.stage(Stage::Consumer).unwrap().limit_secs,
        0,
        "{}",
        p.stages
    );
    assert_eq!(p.stages.consumer_scaling_secs, 0);
    assert_ne!(p.stages.bottleneck, Some(Stage::Consumer), "{}", p.stages);
    assert_eq!(p.delivered, 50_000);
    assert_eq!(p.duplicates, 0);
    assert!(
        p.lateness_ms.p99 + 3_000 <= standard.lateness_ms.p99,
        "{} vs {}",
        p.lateness_ms.p99,
        standard.lateness_ms.p99
    );
}
