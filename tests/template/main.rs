//! `template.yaml` against the code: every environment variable a function reads is set for
//! it, nothing else is, and the local bootstrap (used with emulators and by `remindctl local
//! up`) creates the tables and queues the template declares, with the same attributes.

use std::collections::BTreeSet;

use reminders::aws::bootstrap::{
    create_channel_queues, create_deliveries_table, create_reminders_table, QueueSpec,
    DUE_INDEX_PROJECTION, DUE_RECIPIENTS_INDEX_PROJECTION, TTL_ATTR,
};
use reminders::aws::dynamo::{DUE_INDEX, DUE_RECIPIENTS_INDEX};
use reminders::wiring::reads;
use serde_norway::Value;

fn template() -> Value {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/template.yaml"))
        .expect("template.yaml at the project root");
    serde_norway::from_str(&text).expect("template.yaml parses as YAML")
}

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_mapping()
        .map(|m| {
            m.keys()
                .filter_map(|k| k.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn resource<'a>(t: &'a Value, name: &str) -> &'a Value {
    &t["Resources"][name]["Properties"]
}

/// A parameter's default, as text.
fn default(t: &Value, name: &str) -> String {
    match &t["Parameters"][name]["Default"] {
        Value::Number(n) => n.to_string(),
        Value::String(s) => s.clone(),
        other => panic!("parameter {name} has no scalar default: {other:?}"),
    }
}

/// A scalar that is either literal or `!Ref Parameter` (resolved to its default).
fn scalar(t: &Value, v: &Value) -> String {
    match v {
        Value::Number(n) => n.to_string(),
        Value::String(s) => s.clone(),
        Value::Tagged(tagged) if tagged.tag == "!Ref" => {
            default(t, tagged.value.as_str().expect("!Ref names a parameter"))
        }
        other => panic!("not a scalar: {other:?}"),
    }
}

#[test]
fn every_variable_a_function_reads_is_set_for_it_and_no_other() {
    let t = template();
    let global = keys(&t["Globals"]["Function"]["Environment"]["Variables"]);
    let known: BTreeSet<&str> = reminders::wiring::FUNCTIONS
        .into_iter()
        .flat_map(reads)
        .collect();
    let checked = [
        ("SchedulerFunction", "scheduler"),
        ("ConsumerFunction", "consumer"),
        ("RedriveFunction", "redrive"),
        ("ApiFunction", "api"),
        ("EventsFunction", "events"),
        ("FeedbackFunction", "feedback"),
    ];
    // Every function of the template is checked, and every function the code knows.
    let in_template: BTreeSet<String> = t["Resources"]
        .as_mapping()
        .unwrap()
        .iter()
        .filter(|(_, r)| r["Type"].as_str() == Some("AWS::Serverless::Function"))
        .map(|(name, _)| name.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        in_template,
        checked.iter().map(|(r, _)| r.to_string()).collect()
    );
    assert_eq!(
        reminders::wiring::FUNCTIONS
            .into_iter()
            .collect::<BTreeSet<_>>(),
        checked.iter().map(|(_, f)| *f).collect()
    );
    for (resource_name, function) in checked {
        let own = keys(&resource(&t, resource_name)["Environment"]["Variables"]);
        let set: BTreeSet<String> = global.union(&own).cloned().collect();
        for var in reads(function) {
            assert!(
                set.contains(var),
                "{function} reads {var}, which the template does not set"
            );
        }
        for var in &set {
            assert!(
                known.contains(var.as_str()),
                "{resource_name} sets {var}, which nothing reads"
            );
        }
    }
}

mod alarms;
mod application;
mod defaults;
mod guards;
mod iam;
mod newer_status;
mod parallelism;
mod quickstart;
mod trust;

#[test]
fn the_template_declares_what_the_bootstrap_creates() {
    let t = template();
    let reminders = resource(&t, "RemindersTable");
    let indexes = reminders["GlobalSecondaryIndexes"].as_sequence().unwrap();
    let named = |name: &str| {
        indexes
            .iter()
            .find(|g| g["IndexName"].as_str() == Some(name))
            .unwrap_or_else(|| panic!("the template declares {name}"))
    };
    // Both due indexes: the first (kept while the new one is created: one index per update)
    // and the one projecting the recipients.
    for (name, expected) in [
        (DUE_INDEX, DUE_INDEX_PROJECTION.to_vec()),
        (
            DUE_RECIPIENTS_INDEX,
            DUE_RECIPIENTS_INDEX_PROJECTION.to_vec(),
        ),
    ] {
        let gsi = named(name);
        let keys: Vec<&str> = (0..2)
            .filter_map(|i| gsi["KeySchema"][i]["AttributeName"].as_str())
            .collect();
        assert_eq!(keys, ["due_shard", "due_at"], "{name}");
        assert_eq!(
            gsi["Projection"]["ProjectionType"].as_str(),
            Some("INCLUDE"),
            "{name}"
        );
        let projected: BTreeSet<&str> = gsi["Projection"]["NonKeyAttributes"]
            .as_sequence()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert_eq!(projected, expected.into_iter().collect(), "{name}");
    }
    for table in ["RemindersTable", "DeliveriesTable"] {
        let ttl = &resource(&t, table)["TimeToLiveSpecification"];
        assert_eq!(ttl["AttributeName"].as_str(), Some(TTL_ATTR), "{table}");
    }
    assert_eq!(
        resource(&t, "DeliveriesTable")["KeySchema"][0]["AttributeName"].as_str(),
        Some("delivery_key")
    );
    let spec = QueueSpec::default();
    for channel in ["Push", "Email", "Sms"] {
        let q = resource(&t, &format!("{channel}Queue"));
        let dlq = resource(&t, &format!("{channel}DeadLetterQueue"));
        assert_eq!(
            scalar(&t, &q["VisibilityTimeout"]),
            spec.visibility_timeout_secs.to_string()
        );
        assert_eq!(
            scalar(&t, &q["MessageRetentionPeriod"]),
            spec.retention_secs.to_string()
        );
        assert_eq!(
            scalar(&t, &dlq["MessageRetentionPeriod"]),
            spec.dlq_retention_secs.to_string()
        );
        assert_eq!(
            scalar(&t, &q["RedrivePolicy"]["maxReceiveCount"]),
            spec.max_receive_count.to_string()
        );
        assert!(
            spec.dlq_retention_secs > spec.retention_secs,
            "DLQ outlives its source"
        );
    }
    let consumer_timeout: u32 = default(&t, "ConsumerTimeoutSeconds").parse().unwrap();
    assert!(spec.visibility_timeout_secs >= 6 * consumer_timeout);
    // The SES feedback queue `local up` makes is the template's too.
    let feedback = reminders::aws::bootstrap::FEEDBACK_QUEUE_SPEC;
    let (q, dlq) = (
        resource(&t, "FeedbackQueue"),
        resource(&t, "FeedbackDeadLetterQueue"),
    );
    assert_eq!(
        [
            scalar(&t, &q["VisibilityTimeout"]),
            scalar(&t, &q["MessageRetentionPeriod"]),
            scalar(&t, &q["RedrivePolicy"]["maxReceiveCount"]),
            scalar(&t, &dlq["MessageRetentionPeriod"]),
        ],
        [
            feedback.visibility_timeout_secs.to_string(),
            feedback.retention_secs.to_string(),
            feedback.max_receive_count.to_string(),
            feedback.dlq_retention_secs.to_string(),
        ]
    );
}

/// On the emulator: what the bootstrap creates matches the template.
#[tokio::test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn the_bootstrap_creates_the_same_resources_on_the_emulator() {
    std::env::var("AWS_ENDPOINT_URL")
        .expect("AWS_ENDPOINT_URL is not set: run the emulator tests through infra/test.sh");
    let t = template();
    let sdk = reminders::aws::sdk_config().await;
    let dynamo = aws_sdk_dynamodb::Client::new(&sdk);
    let sqs = aws_sdk_sqs::Client::new(&sdk);
    let suffix = std::process::id();
    let (rem, del) = (format!("tpl-rem-{suffix}"), format!("tpl-del-{suffix}"));
    create_reminders_table(&dynamo, &rem).await.unwrap();
    create_deliveries_table(&dynamo, &del).await.unwrap();
    let desc = dynamo
        .describe_table()
        .table_name(&rem)
        .send()
        .await
        .unwrap();
    let table = desc.table.unwrap();
    // Every index the template declares, by name: its keys and its projection.
    let declared = resource(&t, "RemindersTable")["GlobalSecondaryIndexes"]
        .as_sequence()
        .unwrap()
        .clone();
    assert_eq!(declared.len(), table.global_secondary_indexes().len());
    assert_eq!(
        declared.len(),
        4,
        "the two due indexes (the first, and the one projecting recipients), the subscriber \
         index and the series index"
    );
    for want in &declared {
        let name = want["IndexName"].as_str().unwrap();
        let gsi = table
            .global_secondary_indexes()
            .iter()
            .find(|g| g.index_name() == Some(name))
            .unwrap_or_else(|| panic!("the bootstrap creates no {name}"));
        let key_names: Vec<&str> = gsi
            .key_schema()
            .iter()
            .map(|k| k.attribute_name())
            .collect();
        let want_keys: Vec<&str> = want["KeySchema"]
            .as_sequence()
            .unwrap()
            .iter()
            .map(|k| k["AttributeName"].as_str().unwrap())
            .collect();
        assert_eq!(key_names, want_keys, "{name}");
        let projected: BTreeSet<String> = gsi
            .projection()
            .unwrap()
            .non_key_attributes()
            .iter()
            .cloned()
            .collect();
        let want_type = want["Projection"]["ProjectionType"].as_str().unwrap();
        let got_type = gsi
            .projection()
            .unwrap()
            .projection_type()
            .unwrap()
            .as_str();
        assert_eq!(got_type, want_type, "{name}");
        let want_projected: BTreeSet<String> = want["Projection"]["NonKeyAttributes"]
            .as_sequence()
            .map(|v| {
                v.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        assert_eq!(projected, want_projected, "{name}");
    }
    for name in [&rem, &del] {
        let ttl = dynamo
            .describe_time_to_live()
            .table_name(name)
            .send()
            .await
            .unwrap();
        let attr = ttl.time_to_live_description.and_then(|d| d.attribute_name);
        assert_eq!(attr.as_deref(), Some(TTL_ATTR), "{name}");
    }
    let (queues, dlqs) =
        create_channel_queues(&sqs, &format!("tpl-{suffix}"), QueueSpec::default())
            .await
            .unwrap();
    use aws_sdk_sqs::types::QueueAttributeName as A;
    let attrs = sqs
        .get_queue_attributes()
        .queue_url(&queues.sms)
        .attribute_names(A::All)
        .send()
        .await
        .unwrap()
        .attributes
        .unwrap();
    let q = resource(&t, "SmsQueue");
    assert_eq!(
        attrs[&A::VisibilityTimeout],
        scalar(&t, &q["VisibilityTimeout"])
    );
    assert_eq!(
        attrs[&A::MessageRetentionPeriod],
        scalar(&t, &q["MessageRetentionPeriod"])
    );
    let redrive: serde_json::Value = serde_json::from_str(&attrs[&A::RedrivePolicy]).unwrap();
    assert_eq!(
        redrive["maxReceiveCount"].to_string().trim_matches('"'),
        scalar(&t, &q["RedrivePolicy"]["maxReceiveCount"])
    );
    let dlq_attrs = sqs
        .get_queue_attributes()
        .queue_url(&dlqs.sms)
        .attribute_names(A::MessageRetentionPeriod)
        .send()
        .await
        .unwrap()
        .attributes
        .unwrap();
    assert_eq!(
        dlq_attrs[&A::MessageRetentionPeriod],
        scalar(
            &t,
            &resource(&t, "SmsDeadLetterQueue")["MessageRetentionPeriod"]
        )
    );
}

#[test]
fn every_alarmed_consumer_metric_is_emitted_and_retention_is_one_value() {
    let t = template();
    // Every value the consumer can emit (a batch with lateness and attempts carries those).
    let busy = reminders::consumer::Metrics {
        lateness_ms: vec![1],
        attempts: vec![1],
        ..Default::default()
    };
    let line = busy.emf(
        reminders::domain::Channel::Sms,
        reminders::clock::Timestamp::from_millis(0),
        "Reminders/reminders",
    );
    let mut emitted: serde_json::Value = serde_json::from_str(&line).unwrap();
    let scheduler = reminders::scheduler::RunReport::default().emf(
        reminders::clock::Timestamp::from_millis(0),
        "Reminders/reminders",
    );
    let scheduler: serde_json::Value = serde_json::from_str(&scheduler).unwrap();
    for (k, v) in scheduler.as_object().unwrap() {
        emitted[k] = v.clone();
    }
    let mut alarmed = BTreeSet::new();
    let own = emitted["_aws"]["CloudWatchMetrics"][0]["Namespace"].clone();
    assert_eq!(own, "Reminders/reminders");
    let p = iam::params(&t, &[]);
    for (name, r) in t["Resources"].as_mapping().unwrap() {
        if r["Type"].as_str() != Some("AWS::CloudWatch::Alarm") {
            continue;
        }
        let a = iam::resolve(&t, &p, &r["Properties"]).unwrap();
        let direct = std::iter::once(&a);
        let math = a["Metrics"].as_sequence().into_iter().flatten();
        let math = math.map(|q| &q["MetricStat"]["Metric"]);
        for m in direct.chain(math) {
            assert_ne!(
                m["Namespace"].as_str(),
                Some("Reminders"),
                "{name:?}: shared by every stack"
            );
            if m["Namespace"].as_str() != own.as_str() {
                continue;
            }
            let metric = m["MetricName"].as_str().unwrap();
            assert!(
                emitted.get(metric).is_some(),
                "{name:?} alarms on {metric}, which no function emits"
            );
            alarmed.insert(metric.to_owned());
        }
    }
    for metric in [
        "infra_errors",
        "invariant_errors",
        "newer_status",
        "dead_total",
        "scheduler_quarantined",
        "scheduler_runs",
        "scheduler_shards_failing",
        "scheduler_backlog_age_seconds",
        "lateness_ms",
    ] {
        assert!(alarmed.contains(metric), "no alarm on {metric}");
    }
    // The consumer and the redrive function write ledger TTLs: one retention for both.
    let retention = |f: &str| {
        scalar(
            &t,
            &resource(&t, f)["Environment"]["Variables"]["RETENTION_SECS"],
        )
    };
    assert_eq!(retention("ConsumerFunction"), retention("RedriveFunction"));
}

/// Two stacks in one account and region: every name the template sets itself (tables,
/// queues, functions, log groups, the schedule, the dashboard, alarms) carries the stack name,
/// so a second stack never collides with the first.
#[test]
fn every_name_the_template_sets_carries_the_stack_name() {
    let t = template();
    let mut named = 0;
    for (resource, r) in t["Resources"].as_mapping().unwrap() {
        let resource = resource.as_str().unwrap();
        let mut names = Vec::new();
        collect_names(&r["Properties"], "", &mut names);
        for (field, value) in names {
            named += 1;
            assert!(
                value.contains("${AWS::StackName}"),
                "{resource}.{field} = {value:?} does not carry the stack name"
            );
        }
    }
    assert!(named >= 14, "found only {named} names");
}

/// `(field, text)` of every `…Name` field (and a schedule's `Name`), anywhere in `v`; a `!Sub`
/// is read as its template text.
fn collect_names(v: &Value, field: &str, out: &mut Vec<(String, String)>) {
    let is_name = field == "Name" || (field.ends_with("Name") && !NOT_NAMES.contains(&field));
    match v {
        Value::Mapping(m) => {
            for (k, v) in m {
                let k = k.as_str().unwrap_or("");
                // Metric dimensions are `{Name, Value}` pairs, not resource names.
                if k != "Dimensions" {
                    collect_names(v, k, out);
                }
            }
        }
        Value::Sequence(s) if !is_name => s.iter().for_each(|v| collect_names(v, field, out)),
        Value::Tagged(t) if is_name && t.tag == "Sub" => {
            out.push((field.to_owned(), t.value.as_str().unwrap_or("").to_owned()));
        }
        // A reference to another resource (`!Ref`, `!GetAtt`) names nothing new.
        Value::Tagged(_) if is_name => {}
        Value::Tagged(t) => collect_names(&t.value, field, out),
        Value::String(s) if is_name => out.push((field.to_owned(), s.clone())),
        _ => {}
    }
}

/// Fields named `…Name` that name no resource of this stack (attributes, metrics, policies
/// inside a role, references to other resources, a stage within its API).
const NOT_NAMES: [&str; 6] = [
    "AttributeName",
    "IndexName",
    "MetricName",
    "PolicyName",
    "KeyName",
    "StageName",
];

/// `remindctl --stack NAME` configures itself from these outputs: the template gives each,
/// with the value the functions get for the variable it configures.
#[test]
fn the_outputs_remindctl_reads_exist() {
    let t = template();
    let outputs = keys(&t["Outputs"]);
    for (output, var) in reminders::aws::config::STACK_OUTPUTS {
        assert!(outputs.contains(output), "no output {output} (for {var})");
        let value = &t["Outputs"][output]["Value"];
        let set_for_a_function = [
            "SchedulerFunction",
            "ConsumerFunction",
            "RedriveFunction",
            "ApiFunction",
            "EventsFunction",
        ]
        .iter()
        .map(|f| &resource(&t, f)["Environment"]["Variables"][var])
        .chain(std::iter::once(
            &t["Globals"]["Function"]["Environment"]["Variables"][var],
        ))
        .any(|v| v == value);
        assert!(
            set_for_a_function,
            "{output} is not what {var} is set to: {value:?}"
        );
    }
}

/// The console's groups (`AWS::CloudFormation::Interface`) name every parameter exactly once,
/// and nothing that is not one; the first group, what a quick-create user reads first, stays
/// short.
#[test]
fn every_parameter_is_in_exactly_one_interface_group() {
    let t = template();
    let params = keys(&t["Parameters"]);
    let groups = t["Metadata"]["AWS::CloudFormation::Interface"]["ParameterGroups"]
        .as_sequence()
        .expect("the template's interface metadata lists parameter groups");
    let mut seen = BTreeSet::new();
    for g in groups {
        for p in g["Parameters"].as_sequence().expect("a group's parameters") {
            let p = p.as_str().expect("a parameter name").to_owned();
            assert!(params.contains(&p), "group names {p}, not a parameter");
            assert!(seen.insert(p.clone()), "{p} is in two groups");
        }
    }
    let missing: Vec<&String> = params.difference(&seen).collect();
    assert!(missing.is_empty(), "parameters in no group: {missing:?}");
    let first = groups[0]["Parameters"].as_sequence().unwrap();
    assert!(
        first.len() <= 10,
        "the first group has {} parameters",
        first.len()
    );
    for label in keys(&t["Metadata"]["AWS::CloudFormation::Interface"]["ParameterLabels"]) {
        assert!(
            params.contains(&label),
            "label for {label}, not a parameter"
        );
    }
}
