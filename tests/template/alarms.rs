//! Alarms that reach a person, on metrics of their own stack: every alarm has an action and an
//! OK action (the stack's own topic when none is given), the alarms an operator in production
//! needs exist, and two stacks in one account share no metric, alarm or dashboard line.

use std::collections::{BTreeMap, BTreeSet};

use serde_norway::Value;

use super::iam::{condition, condition_expr, params, resolve};
use super::template;

/// The resources as deployed under `stack` with these parameter overrides: those whose
/// condition is false left out, intrinsic functions resolved, and a `!Ref` or `!GetAtt …` to a
/// resource resolved to its name (the one the template gives it, or the one CloudFormation
/// generates, which starts with the stack's name).
pub(super) fn rendered(stack: &str, overrides: &[(&str, &str)]) -> BTreeMap<String, Value> {
    rendered_from(&template(), stack, overrides)
}

/// [`rendered`], from the template `t` (a copy with a fault planted, say).
pub(super) fn rendered_from(
    t: &Value,
    stack: &str,
    overrides: &[(&str, &str)],
) -> BTreeMap<String, Value> {
    let mut p = params(t, overrides);
    p.insert("AWS::StackName".into(), stack.into());
    let resources = t["Resources"].as_mapping().unwrap();
    for (name, r) in resources {
        let props = &r["Properties"];
        let name = name.as_str().unwrap().to_owned();
        let given = ["FunctionName", "QueueName", "TableName"]
            .into_iter()
            .find_map(|field| match resolve(t, &p, &props[field]) {
                Some(Value::String(physical)) => Some(physical),
                _ => None,
            });
        let physical = given.unwrap_or_else(|| format!("{stack}-{name}-GENERATED"));
        p.insert(name, physical);
    }
    let deployed = |r: &Value| match r["Condition"].as_str() {
        Some(c) => condition(t, &p, c),
        None => true,
    };
    resources
        .iter()
        .filter(|(_, v)| deployed(v))
        .filter_map(|(k, v)| Some((k.as_str()?.to_owned(), resolve(t, &p, v)?)))
        .map(|(k, v)| (k, named(&p, v)))
        .collect()
}

/// `!GetAtt X.QueueName` (or `.Arn` of a named resource) as the name it resolves to.
fn named(p: &BTreeMap<String, String>, v: Value) -> Value {
    match v {
        Value::Tagged(t) if t.tag == "GetAtt" => {
            let target = t.value.as_str().unwrap_or_default().to_owned();
            let resource = target.split('.').next().unwrap_or_default();
            match p.get(resource) {
                Some(physical) => Value::String(format!("{physical}#{target}")),
                None => Value::Tagged(t),
            }
        }
        Value::Sequence(items) => Value::Sequence(items.into_iter().map(|i| named(p, i)).collect()),
        Value::Mapping(m) => Value::Mapping(m.into_iter().map(|(k, v)| (k, named(p, v))).collect()),
        other => other,
    }
}

pub(super) fn alarms(resources: &BTreeMap<String, Value>) -> Vec<(&String, &Value)> {
    let alarms: Vec<_> = resources
        .iter()
        .filter(|(_, r)| r["Type"].as_str() == Some("AWS::CloudWatch::Alarm"))
        .map(|(name, r)| (name, &r["Properties"]))
        .collect();
    assert!(alarms.len() > 20, "only {} alarms", alarms.len());
    alarms
}

/// A metric as CloudWatch names it: namespace, name and dimensions.
pub(super) type MetricId = (String, String, Vec<(String, String)>);

pub(super) fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        other => format!("{other:?}"),
    }
}

fn metric_id(m: &Value) -> MetricId {
    let mut dims: Vec<(String, String)> = m["Dimensions"]
        .as_sequence()
        .map(|ds| {
            ds.iter()
                .map(|d| (text(&d["Name"]), text(&d["Value"])))
                .collect()
        })
        .unwrap_or_default();
    dims.sort();
    (text(&m["Namespace"]), text(&m["MetricName"]), dims)
}

/// Every metric an alarm reads (directly, or in its metric math).
pub(super) fn alarm_metrics(alarm: &Value) -> Vec<MetricId> {
    if alarm["MetricName"].is_string() {
        return vec![metric_id(alarm)];
    }
    let math = alarm["Metrics"]
        .as_sequence()
        .expect("a metric or metric math");
    math.iter()
        .filter(|q| !q["MetricStat"].is_null())
        .map(|q| metric_id(&q["MetricStat"]["Metric"]))
        .collect()
}

/// Every metric the dashboard draws.
fn dashboard_metrics(resources: &BTreeMap<String, Value>) -> Vec<MetricId> {
    let body = resources
        .values()
        .find(|r| r["Type"].as_str() == Some("AWS::CloudWatch::Dashboard"))
        .map(|r| text(&r["Properties"]["DashboardBody"]))
        .expect("a dashboard");
    let body: serde_json::Value = serde_json::from_str(&body).expect("the dashboard is JSON");
    let mut out = Vec::new();
    for widget in body["widgets"].as_array().unwrap() {
        for line in widget["properties"]["metrics"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let parts: Vec<String> = line
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect();
            let mut dims: Vec<(String, String)> = parts[2..]
                .chunks(2)
                .map(|c| (c[0].clone(), c.get(1).cloned().unwrap_or_default()))
                .collect();
            dims.sort();
            out.push((parts[0].clone(), parts[1].clone(), dims));
        }
    }
    assert!(out.len() > 20, "only {} dashboard lines", out.len());
    out
}

/// The composite alarms: each pages for the alarms its rule names.
fn composites(resources: &BTreeMap<String, Value>) -> Vec<(&String, &Value)> {
    resources
        .iter()
        .filter(|(_, r)| r["Type"].as_str() == Some("AWS::CloudWatch::CompositeAlarm"))
        .map(|(name, r)| (name, &r["Properties"]))
        .collect()
}

/// Alarms that notify no one themselves, because a composite alarm pages for them: their
/// logical names, as the composites' rules name them (`ALARM(${Name})`).
fn paged_through_a_composite(resources: &BTreeMap<String, Value>) -> BTreeSet<String> {
    let t = template();
    let mut out = BTreeSet::new();
    for (name, r) in t["Resources"].as_mapping().unwrap() {
        if r["Type"].as_str() != Some("AWS::CloudWatch::CompositeAlarm") {
            continue;
        }
        assert!(resources.contains_key(name.as_str().unwrap()));
        let rule = format!("{:?}", r["Properties"]["AlarmRule"]);
        for part in rule.split("ALARM(${").skip(1) {
            out.insert(part.split('}').next().unwrap().to_owned());
        }
    }
    out
}

#[test]
fn every_alarm_notifies_someone_and_says_when_it_recovers() {
    // No topic given: the stack's own topic.
    let own = rendered("reminders", &[]);
    assert!(
        own.contains_key("AlarmTopic"),
        "no topic of the stack's own"
    );
    let quiet = paged_through_a_composite(&own);
    let mut notifying = alarms(&own);
    notifying.retain(|(name, _)| !quiet.contains(name.as_str()));
    notifying.extend(composites(&own));
    for (name, a) in alarms(&own) {
        if quiet.contains(name.as_str()) {
            assert_eq!(a["ActionsEnabled"], Value::Bool(false), "{name}");
            assert!(
                a.get("AlarmActions").is_none(),
                "{name} pages through its composite"
            );
        }
    }
    for (name, a) in notifying {
        for field in ["AlarmActions", "OKActions"] {
            let actions = a[field].as_sequence();
            let actions = actions.unwrap_or_else(|| panic!("{name} has no {field}"));
            assert_eq!(actions.len(), 1, "{name} {field}: {actions:?}");
            assert!(
                format!("{:?}", actions[0]).contains("AlarmTopic"),
                "{name} {field}: {actions:?}"
            );
        }
    }
    // A topic given: that one, and no topic of the stack's own.
    let arn = "arn:aws:sns:us-east-1:123456789012:on-call";
    let given = rendered("reminders", &[("AlarmTopicArn", arn)]);
    assert!(!given.contains_key("AlarmTopic"));
    let mut notifying = alarms(&given);
    notifying.retain(|(name, _)| !quiet.contains(name.as_str()));
    notifying.extend(composites(&given));
    for (name, a) in notifying {
        for field in ["AlarmActions", "OKActions"] {
            assert_eq!(
                a[field],
                Value::Sequence(vec![Value::String(arn.into())]),
                "{name}"
            );
        }
    }
}

#[test]
fn the_production_alarms_exist() {
    let r = rendered("reminders", &[]);
    let alarms = alarms(&r);
    let reading = |ns: &str, metric: &str| -> Vec<(&String, &Value)> {
        alarms
            .iter()
            .filter(|(_, a)| alarm_metrics(a).iter().any(|m| m.0 == ns && m.1 == metric))
            .copied()
            .collect()
    };
    let own = "Reminders/reminders";
    // The heartbeat: no run in five minutes pages, and so does no data at all.
    let heartbeat = reading(own, "scheduler_runs");
    assert_eq!(heartbeat.len(), 1, "{heartbeat:?}");
    let h = heartbeat[0].1;
    assert_eq!(text(&h["TreatMissingData"]), "breaching");
    let minutes = h["Period"].as_u64().unwrap() * h["EvaluationPeriods"].as_u64().unwrap();
    assert_eq!(minutes, 300, "five minutes without a run");
    assert_eq!(
        h["DatapointsToAlarm"], h["EvaluationPeriods"],
        "every minute short"
    );
    assert_eq!(text(&h["ComparisonOperator"]), "LessThanThreshold");
    let schedules = super::default(&template(), "SchedulerParallelism");
    assert_eq!(
        text(&h["Threshold"]),
        schedules,
        "one run a minute from every schedule"
    );
    for metric in [
        "scheduler_shards_failing",
        "scheduler_backlog_age_seconds",
        "scheduler_quarantined",
    ] {
        assert_eq!(reading(own, metric).len(), 1, "one alarm on {metric}");
    }
    assert_eq!(
        reading(own, "breaker_open_seconds").len(),
        3,
        "one a channel"
    );
    assert_eq!(reading(own, "lateness_ms").len(), 3, "one a channel");
    // The dimension values of every alarm on this metric.
    let dimensions = |ns: &str, metric: &str| -> BTreeSet<String> {
        reading(ns, metric)
            .iter()
            .flat_map(|(_, a)| alarm_metrics(a))
            .flat_map(|m| m.2.into_iter().map(|(_, v)| v))
            .collect()
    };
    let throttled = dimensions("AWS/Lambda", "Throttles");
    for f in ["scheduler", "consumer", "redrive"] {
        assert!(
            throttled.contains(&format!("reminders-{f}")),
            "{throttled:?}"
        );
    }
    let dlq_age = dimensions("AWS/SQS", "ApproximateAgeOfOldestMessage");
    for q in ["push-dlq", "email-dlq", "sms-dlq"] {
        let name = format!("reminders-{q}");
        assert!(
            dlq_age.iter().any(|v| v.starts_with(&name)),
            "{name}: {dlq_age:?}"
        );
    }
    // A consumer that is not invoked at all: messages left visible on each channel queue.
    let undrained = dimensions("AWS/SQS", "ApproximateNumberOfMessagesVisible");
    for q in ["push", "email", "sms"] {
        let name = format!("reminders-{q}#");
        assert!(
            undrained.iter().any(|v| v.starts_with(&name)),
            "{name}: {undrained:?}"
        );
    }
    // The queue's own age counts retries parked on purpose: no alarm reads it on a channel
    // queue (only on the dead-letter queues, where every message is evidence).
    for v in &dlq_age {
        let dead_letters = v.contains("dlq") || v.contains("DeadLetterQueue");
        assert!(dead_letters, "a channel queue's age is alarmed: {v}");
    }
}

#[test]
fn two_stacks_share_no_metric_alarm_or_dashboard_line() {
    let metrics = |stack: &str| -> BTreeSet<MetricId> {
        let r = rendered(stack, &[]);
        let mut all: BTreeSet<MetricId> = alarms(&r)
            .iter()
            .flat_map(|(_, a)| alarm_metrics(a))
            .collect();
        all.extend(dashboard_metrics(&r));
        for m in &all {
            assert!(
                format!("{m:?}").contains(stack),
                "{m:?} does not carry the stack's name"
            );
        }
        all
    };
    let (a, b) = (metrics("alpha"), metrics("beta"));
    let shared: Vec<_> = a.intersection(&b).collect();
    assert!(shared.is_empty(), "two stacks share {shared:?}");
}

/// The application surface: the API's server errors, and the events function's failures, its lag
/// behind the ledger's stream and its dead letters.
#[test]
fn the_application_alarms_exist() {
    let r = rendered("reminders", &[]);
    let alarms = alarms(&r);
    let on = |ns: &str, metric: &str, dimension: &str| -> Vec<&Value> {
        alarms
            .iter()
            .filter(|(_, a)| {
                alarm_metrics(a).iter().any(|m| {
                    m.0 == ns && m.1 == metric && m.2.iter().any(|(_, v)| v.starts_with(dimension))
                })
            })
            .map(|(_, a)| *a)
            .collect()
    };
    let api = on("AWS/ApiGateway", "5xx", "reminders-HttpApi");
    assert_eq!(api.len(), 1, "one alarm on the API's 5xx");
    assert_eq!(alarm_metrics(api[0])[0].2[0].0, "ApiId", "by the API's id");
    assert_eq!(on("AWS/Lambda", "Errors", "reminders-events").len(), 1);
    let lag = on("AWS/Lambda", "IteratorAge", "reminders-events");
    assert_eq!(lag.len(), 1, "one alarm on the stream's lag");
    // IteratorAge is in milliseconds, the parameter in seconds: the alarm converts.
    let math = format!("{:?}", lag[0]["Metrics"]);
    assert!(math.contains("/ 1000"), "{math}");
    assert_eq!(
        text(&lag[0]["Threshold"]),
        super::default(&template(), "EventsLagAlarmSeconds")
    );
    let dlq = "reminders-events-dlq";
    assert_eq!(
        on("AWS/SQS", "ApproximateNumberOfMessagesVisible", dlq).len(),
        1
    );
    assert_eq!(on("AWS/SQS", "ApproximateAgeOfOldestMessage", dlq).len(), 1);
}

/// One death pages once: a channel's dead-letter copy (`<Channel>DeadLetterQueueNotEmpty`) and
/// the consumer's `dead_total` (`<Channel>DeadDeliveries`) both see it; neither notifies, and one
/// composite alarm per channel pages while either is in ALARM.
#[test]
fn one_death_pages_once() {
    let r = rendered("reminders", &[]);
    let quiet = paged_through_a_composite(&r);
    for ch in ["Push", "Email", "Sms"] {
        let pair = [
            format!("{ch}DeadLetterQueueNotEmpty"),
            format!("{ch}DeadDeliveries"),
        ];
        for name in &pair {
            assert!(r.contains_key(name), "{name}");
            assert!(quiet.contains(name), "{name} pages on its own");
        }
        // The rules as written (`${Logical}`), not as rendered.
        let t = template();
        let paging: Vec<String> = composites(&r)
            .into_iter()
            .map(|(name, _)| {
                format!(
                    "{:?}",
                    t["Resources"][name.as_str()]["Properties"]["AlarmRule"]
                )
            })
            .filter(|rule| pair.iter().any(|n| rule.contains(&format!("${{{n}}}"))))
            .collect();
        assert_eq!(paging.len(), 1, "{ch}: {paging:?}");
        let rule = &paging[0];
        assert!(
            pair.iter()
                .all(|n| rule.contains(&format!("ALARM(${{{n}}})")))
                && rule.contains(" OR "),
            "{ch}: {rule}"
        );
    }
}

/// A stack whose alarms reach nobody does not deploy unless the deployer says so: the
/// template's rule, evaluated for each way of giving (or not giving) a subscriber.
#[test]
fn alarms_without_a_subscriber_do_not_deploy_unless_asked() {
    let t = template();
    let rule = &t["Rules"]["AlarmsReachSomeone"]["Assertions"][0]["Assert"];
    assert!(!rule.is_null(), "no AlarmsReachSomeone rule");
    let deploys = |overrides: &[(&str, &str)]| condition_expr(&t, &params(&t, overrides), rule);
    assert!(!deploys(&[]), "the defaults alert no one: refused");
    assert!(deploys(&[("AlarmEmail", "oncall@example.com")]));
    assert!(deploys(&[(
        "AlarmTopicArn",
        "arn:aws:sns:us-east-1:123456789012:on-call"
    )]));
    assert!(deploys(&[("AlarmsWithoutSubscriber", "true")]));
    assert!(!deploys(&[("AlarmsWithoutSubscriber", "false")]));
}
