//! The deployed defaults are what the planner recommends for the stated load (issue 36):
//! change a default, or the model under the search, without re-deciding, and this fails.

use reminders_harness::sim::params::{stated_load as load, Params};
use reminders_harness::sim::plan::PlanInput;
use reminders_harness::sim::search::search;

fn stated(params: Params) -> PlanInput {
    PlanInput {
        due_spread_secs: load::DUE_SPREAD_SECS,
        params,
        ..PlanInput::deployed(load::REMINDERS, load::THROUGHPUT_PER_SEC)
    }
}

/// The search for the stated load recommends exactly the template's defaults (the code's, held
/// to the template by tests/template/defaults.rs), in standard mode, on demand; and it does so
/// from any starting point (the deployed values are not where it starts from: a stack
/// deployed with other values gets the same answer).
#[tokio::test]
async fn the_deployed_defaults_are_the_search_answer_for_the_stated_load() {
    let deployed = Params::deployed();
    let found = search(&stated(deployed), load::TARGET_P99_S, |_, _, _| {}).await;
    assert!(found.met, "{:?}", found.tried);
    assert_eq!(found.params, deployed, "tried {:?}", found.tried);
    assert_eq!(found.plan.simulated.delivered, u64::from(load::REMINDERS));
    assert!(!found.params.provisioned());

    let elsewhere = Params {
        scheduler_parallelism: 4,
        due_shards: 8,
        max_per_run: 60_000,
        consumer_max_concurrency: 5,
        min_pollers: 20,
        ..deployed
    };
    assert_ne!(elsewhere, deployed);
    let again = search(&stated(elsewhere), load::TARGET_P99_S, |_, _, _| {}).await;
    assert_eq!(again.params, deployed, "tried {:?}", again.tried);
}
