//! The deployed defaults are what the planner recommends for the stated load: change a default,
//! or the model under the search, without re-deciding, and this fails.

use reminders_harness::sim::params::{stated_load as load, Params};
use reminders_harness::sim::plan::PlanInput;
use reminders_harness::sim::search::search;

fn stated(params: Params) -> PlanInput {
    PlanInput {
        due_spread_secs: load::DUE_SPREAD_SECS,
        provider_latency_ms: load::PROVIDER_LATENCY_MS,
        params,
        ..PlanInput::deployed(load::REMINDERS, load::THROUGHPUT_PER_SEC)
    }
}

/// The search for the stated load recommends exactly the template's defaults (the code's, held
/// to the template by tests/template/defaults.rs), in standard mode, on demand; and it does so
/// from other values of every parameter it sets (a stack deployed with other values gets the
/// same answer).
#[tokio::test]
async fn the_deployed_defaults_are_the_search_answer_for_the_stated_load() {
    let deployed = Params::deployed();
    let found = search(&stated(deployed), load::TARGET_P99_S, |_, _, _| {}).await;
    assert!(found.met, "{:?}", found.tried);
    assert_eq!(found.params, deployed, "tried {:?}", found.tried);
    assert_eq!(found.plan.simulated.delivered, u64::from(load::REMINDERS));
    assert!(!found.params.provisioned());
    assert!(
        found.plan.simulated.lateness_ms.p99 as f64 <= load::TARGET_P99_S * 1_000.0,
        "{}",
        found.plan.simulated.lateness_ms.p99
    );

    let elsewhere = Params {
        scheduler_parallelism: 4,
        due_shards: 2,
        max_per_run: 60_000,
        consumer_max_concurrency: 20,
        min_pollers: 20,
        max_pollers: 40,
        batch_size: 5,
        tables: reminders_harness::sim::capacity::TableMode::Provisioned {
            writes: 1_000,
            reads: 3_000,
        },
    };
    assert_ne!(elsewhere, deployed);
    let again = search(&stated(elsewhere), load::TARGET_P99_S, |_, _, _| {}).await;
    assert_eq!(again.params, deployed, "tried {:?}", again.tried);
}

/// The headroom the defaults carry, each shown by the stated load's own simulation: the
/// provider is the bottleneck; the scheduler, the due index, the reminders table and the
/// ledger are never the limit and take no throttle (the due index with one shard would);
/// the consumer is full only while the provider is (its batches wait on the provider's
/// throttled sends), never longer.
#[tokio::test]
async fn the_defaults_leave_the_provider_the_only_limit_at_the_stated_load() {
    use reminders_harness::sim::plan::plan;
    use reminders_harness::sim::stages::Stage;
    let s = plan(&stated(Params::deployed())).await.simulated;
    assert_eq!(s.stages.bottleneck, Some(Stage::Provider), "{}", s.stages);
    for stage in [
        Stage::Scheduler,
        Stage::DueIndex,
        Stage::RemindersTable,
        Stage::Ledger,
    ] {
        let r = s.stages.stage(stage).unwrap();
        assert_eq!(r.limit_secs, 0, "{stage:?}: {}", s.stages);
        assert_eq!(r.throttles, 0, "{stage:?}: {}", s.stages);
    }
    let consumer = s.stages.stage(Stage::Consumer).unwrap().limit_secs;
    let provider = s.stages.stage(Stage::Provider).unwrap().limit_secs;
    assert!(consumer < provider, "{}", s.stages);
    let one_shard = Params {
        due_shards: 1,
        ..Params::deployed()
    };
    let s = plan(&stated(one_shard)).await.simulated;
    let index = s.stages.stage(Stage::DueIndex).unwrap();
    assert!(index.throttles > 0, "{}", s.stages);
}
