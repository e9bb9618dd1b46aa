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

use super::iam::{condition, condition_expr, params, resolve};
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
        default(&t, "ConsumerMinPollers"),
        reminders::consumer::config::MAPPING_MIN_POLLERS.to_string(),
        "standard mode as deployed"
    );
    assert_eq!(
        default(&t, "ConsumerMaxPollers"),
        reminders::consumer::config::MAPPING_MAX_POLLERS.to_string()
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

/// How one channel's event source mapping scales, as deployed.
#[derive(Debug, Clone, PartialEq)]
enum Scaling {
    /// `ScalingConfig.MaximumConcurrency`.
    Standard(String),
    /// `ProvisionedPollerConfig`'s minimum and maximum pollers.
    Provisioned(String, String),
}

/// Each consumer mapping's scaling with these parameters, or why it is wrong: exactly one of
/// `ScalingConfig` and `ProvisionedPollerConfig` (AWS refuses both), on every channel's.
fn mappings(t: &Value, overrides: &[(&str, &str)]) -> Result<Vec<Scaling>, String> {
    let p = params(t, overrides);
    let events = resolve(t, &p, &resource(t, "ConsumerFunction")["Events"]).unwrap();
    let mut out = Vec::new();
    for (name, e) in events.as_mapping().unwrap() {
        let props = &e["Properties"];
        let text = |v: &Value| match v {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            other => format!("{other:?}"),
        };
        let standard = &props["ScalingConfig"]["MaximumConcurrency"];
        let provisioned = &props["ProvisionedPollerConfig"];
        out.push(match (standard.is_null(), provisioned.is_null()) {
            (false, true) => Scaling::Standard(text(standard)),
            (true, false) => Scaling::Provisioned(
                text(&provisioned["MinimumPollers"]),
                text(&provisioned["MaximumPollers"]),
            ),
            (false, false) => {
                return Err(format!(
                    "{name:?}: ScalingConfig and ProvisionedPollerConfig both set (mutually \
                     exclusive)"
                ))
            }
            (true, true) => return Err(format!("{name:?}: no scaling configuration")),
        });
    }
    if out.len() != 3 {
        return Err(format!(
            "{} consumer mappings, one a channel expected",
            out.len()
        ));
    }
    Ok(out)
}

/// `ConsumerMinPollers` 0 (the default, the code's) deploys standard mode on every channel's
/// mapping at `ConsumerMaxConcurrency`; 2 or more, provisioned mode with both poller bounds
/// and no `ScalingConfig`. The parameters' ranges are the ones the planner models
/// (sim/limits.rs, from AWS's documentation; Lambda itself refuses 1 minimum poller for SQS,
/// and `remindctl plan` does).
#[test]
fn each_consumer_mapping_runs_standard_or_provisioned_mode() {
    use reminders_harness::sim::limits::lambda;
    let t = template();
    let max = reminders::consumer::config::MAPPING_MAX_CONCURRENCY.to_string();
    assert_eq!(mappings(&t, &[]).unwrap(), vec![Scaling::Standard(max); 3]);
    let max_pollers = reminders::consumer::config::MAPPING_MAX_POLLERS.to_string();
    assert_eq!(
        mappings(&t, &[("ConsumerMinPollers", "20")]).unwrap(),
        vec![Scaling::Provisioned("20".into(), max_pollers); 3]
    );
    assert_eq!(
        mappings(
            &t,
            &[("ConsumerMinPollers", "2"), ("ConsumerMaxPollers", "40")]
        )
        .unwrap(),
        vec![Scaling::Provisioned("2".into(), "40".into()); 3]
    );
    let range = |name: &str| {
        let p = &t["Parameters"][name];
        (
            p["MinValue"].as_u64().unwrap(),
            p["MaxValue"].as_u64().unwrap(),
        )
    };
    let wide = |(a, b): (u32, u32)| (u64::from(a), u64::from(b));
    assert_eq!(
        range("ConsumerMaxConcurrency"),
        wide(lambda::ESM_MAX_CONCURRENCY_RANGE)
    );
    assert_eq!(
        range("ConsumerMinPollers"),
        (0, u64::from(lambda::ESM_MIN_POLLERS_RANGE.1)),
        "0 is standard mode"
    );
    assert_eq!(
        range("ConsumerMaxPollers"),
        wide(lambda::ESM_MAX_POLLERS_RANGE)
    );

    // A planted fault: the push mapping keeps its ScalingConfig in provisioned mode.
    let mut planted = template();
    planted["Resources"]["ConsumerFunction"]["Properties"]["Events"]["PushQueue"]["Properties"]
        ["ScalingConfig"] = serde_norway::from_str("MaximumConcurrency: 5").unwrap();
    assert_eq!(
        mappings(&planted, &[]).unwrap()[0],
        Scaling::Standard("5".into())
    );
    let err = mappings(&planted, &[("ConsumerMinPollers", "20")]).unwrap_err();
    assert!(err.contains("PushQueue") && err.contains("both"), "{err}");
}

/// `ConsumerMinPollers=1` fits the parameter's range but Lambda refuses it for SQS, partway
/// through a deploy: the template's rule refuses it before any change, and takes 0 and 2 to 200.
#[test]
fn one_minimum_poller_is_refused_before_the_deploy_starts() {
    let t = template();
    let rule = &t["Rules"]["ConsumerMinPollersIsNotOne"]["Assertions"][0]["Assert"];
    assert!(!rule.is_null(), "no ConsumerMinPollersIsNotOne rule");
    let deploys = |v: &str| condition_expr(&t, &params(&t, &[("ConsumerMinPollers", v)]), rule);
    assert!(!deploys("1"), "one minimum poller: refused");
    for ok in ["0", "2", "20", "200"] {
        assert!(deploys(ok), "{ok}");
    }
    assert!(
        deploys(&default(&t, "ConsumerMinPollers")),
        "the default deploys"
    );
}
