//! One source of defaults: the configuration each function builds from the template's
//! environment (every parameter at its default) is the configuration the code builds with no
//! variable set — the one the simulation and the planner run. And the scheduler's fan-out:
//! one schedule per share, the shares disjoint and covering the 64 virtual shards.

use std::collections::BTreeMap;

use reminders::consumer::ConsumerConfig;
use reminders::domain::MAX_DUE_SHARDS;
use reminders::scheduler::config::{
    DEFAULT_PARALLELISM, FUNCTION_MEMORY_MB, FUNCTION_TIMEOUT_SECS,
};
use reminders::scheduler::{SchedulerConfig, Share};
use serde_norway::Value;

use super::iam::{condition, params, resolve};
use super::{default, resource, template};

/// The function's environment as deployed with these parameters ("" is "not set").
fn environment(
    t: &Value,
    p: &BTreeMap<String, String>,
    function: &str,
) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    for vars in [
        &t["Globals"]["Function"]["Environment"]["Variables"],
        &resource(t, function)["Environment"]["Variables"],
    ] {
        let resolved = resolve(t, p, vars).unwrap();
        for (k, v) in resolved.as_mapping().unwrap() {
            let v = match v {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                other => format!("{other:?}"),
            };
            if !v.is_empty() {
                env.insert(k.as_str().unwrap().to_owned(), v);
            }
        }
    }
    env
}

#[test]
fn the_template_deploys_the_codes_defaults() {
    let t = template();
    let p = params(&t, &[]);
    let consumer = environment(&t, &p, "ConsumerFunction");
    let deployed = ConsumerConfig::from_lookup(|k| consumer.get(k).cloned()).unwrap();
    assert_eq!(deployed, ConsumerConfig::default(), "consumer");
    let scheduler = environment(&t, &p, "SchedulerFunction");
    let deployed = SchedulerConfig::from_lookup(|k| scheduler.get(k).cloned()).unwrap();
    assert_eq!(deployed, SchedulerConfig::default(), "scheduler");
    assert_eq!(
        default(&t, "SchedulerParallelism"),
        DEFAULT_PARALLELISM.to_string()
    );
    // The event source mappings and the due index, as the planner models them.
    assert_eq!(
        default(&t, "ConsumerMaxConcurrency"),
        reminders::consumer::config::MAPPING_MAX_CONCURRENCY.to_string()
    );
    assert_eq!(
        default(&t, "ConsumerBatchSize"),
        reminders::consumer::config::MAPPING_BATCH_SIZE.to_string()
    );
    assert_eq!(
        default(&t, "DueShards"),
        reminders::aws::config::DEFAULT_DUE_SHARDS.to_string()
    );
    assert_eq!(
        super::scalar(&t, &resource(&t, "SchedulerFunction")["Timeout"]),
        FUNCTION_TIMEOUT_SECS.to_string()
    );
    assert_eq!(
        super::scalar(&t, &resource(&t, "SchedulerFunction")["MemorySize"]),
        FUNCTION_MEMORY_MB.to_string(),
        "the latency model's vCPU share"
    );
    // A reminder created through the API without a freshness gets the policy's default window,
    // as one created with `remindctl remind create` does.
    assert_eq!(
        default(&t, "FreshnessSeconds"),
        reminders::policy::RetryPolicy::default()
            .freshness_default_secs
            .to_string()
    );
    let api = environment(&t, &p, "ApiFunction");
    assert_eq!(
        api.get("FRESHNESS_SECS"),
        Some(&default(&t, "FreshnessSeconds"))
    );
    assert_eq!(api.get("RETENTION_SECS"), consumer.get("RETENTION_SECS"));
    // One allow-list: what the API refuses is what the consumer would refuse.
    assert_eq!(
        api.get("SMS_ALLOWED_COUNTRY_CODES"),
        consumer.get("SMS_ALLOWED_COUNTRY_CODES")
    );
    assert_eq!(
        default(&t, "SmsAllowedCountryCodes"),
        reminders::domain::sms_countries::DEFAULT_SMS_COUNTRIES
    );
    // The simulation runs exactly these (src/sim: `deployed()`).
    let (scheduler, consumer, parallelism) = reminders_harness::sim::deployed();
    assert_eq!(scheduler, SchedulerConfig::default());
    assert_eq!(
        ConsumerConfig {
            emit_metrics: true,
            ..consumer
        },
        ConsumerConfig::default()
    );
    assert_eq!(parallelism, DEFAULT_PARALLELISM);
}

/// The schedules deployed with `SchedulerParallelism = n`: each one's share, or why the fan-out
/// is wrong.
fn fan_out(t: &Value, n: u32) -> Result<Vec<Share>, String> {
    let p = params(t, &[("SchedulerParallelism", &n.to_string())]);
    let mut shares = Vec::new();
    for (name, r) in t["Resources"].as_mapping().unwrap() {
        if r["Type"].as_str() != Some("AWS::Scheduler::Schedule") {
            continue;
        }
        if let Some(c) = r["Condition"].as_str() {
            if !condition(t, &p, c) {
                continue;
            }
        }
        let input = resolve(t, &p, &r["Properties"]["Target"]["Input"]).unwrap();
        let input: serde_json::Value = serde_json::from_str(input.as_str().unwrap())
            .map_err(|e| format!("{name:?}: input is not JSON: {e}"))?;
        shares.push(Share::from_event(&input).map_err(|e| format!("{name:?}: {e}"))?);
    }
    if shares.len() != n as usize {
        return Err(format!("{} schedules for parallelism {n}", shares.len()));
    }
    for shard in 0..MAX_DUE_SHARDS {
        let owners = shares.iter().filter(|s| s.owns(shard)).count();
        if owners != 1 {
            return Err(format!(
                "shard {shard} has {owners} schedules (parallelism {n})"
            ));
        }
    }
    let reserved = resolve(
        t,
        &p,
        &resource(t, "SchedulerFunction")["ReservedConcurrentExecutions"],
    );
    if reserved != Some(Value::String(n.to_string())) {
        return Err(format!(
            "reserved concurrency {reserved:?} for {n} schedules"
        ));
    }
    Ok(shares)
}

#[test]
fn one_schedule_per_share_and_no_two_shares_touch_a_shard() {
    let t = template();
    for n in [1, 4, 16] {
        let shares = fan_out(&t, n).unwrap();
        assert!(shares.iter().all(|s| s.of == n));
    }
    // A planted fault: schedule 3 says it is share 2, so shard 2 has two schedules and
    // shard 3 none.
    let mut planted = template();
    let input = &mut planted["Resources"]["SchedulerShare3"]["Properties"]["Target"]["Input"];
    let Value::Tagged(tagged) = input else {
        panic!("the input is a !Sub")
    };
    tagged.value = Value::String(r#"{"share": 2, "shares": ${SchedulerParallelism}}"#.into());
    let err = fan_out(&planted, 4).unwrap_err();
    assert!(err.contains("shard 2 has 2"), "{err}");
}
