//! The template's guards: SES feedback (the configuration set, its EventBridge destination,
//! the rule, the queue and its function, the reputation alarms), the SMS spend alarm, and the
//! provider endpoints' pattern.

use serde_norway::Value;

use super::alarms::rendered;
use super::template;

fn s(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        other => format!("{other:?}"),
    }
}

const FEEDBACK: [&str; 6] = [
    "EmailFeedbackDestination",
    "EmailFeedbackRule",
    "FeedbackQueuePolicy",
    "EmailBounceRateHigh",
    "EmailComplaintRateHigh",
    "EmailConfigurationSet",
];

#[test]
fn ses_feedback_reaches_the_suppressions_with_ses_and_only_then() {
    let ses = [
        ("EmailProvider", "ses"),
        ("EmailSesFrom", "noreply@mail.example.com"),
    ];
    let r = rendered("rem", &ses);
    let set = &r["EmailConfigurationSet"]["Properties"];
    assert_eq!(s(&set["Name"]), "rem-email");
    assert_eq!(
        set["ReputationOptions"]["ReputationMetricsEnabled"],
        Value::Bool(true)
    );
    let dest = &r["EmailFeedbackDestination"]["Properties"];
    let set_name = s(&dest["ConfigurationSetName"]);
    let events = &dest["EventDestination"];
    let types: Vec<String> = events["MatchingEventTypes"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(s)
        .collect();
    assert_eq!(types, ["bounce", "complaint"]);
    assert!(s(&events["EventBridgeDestination"]["EventBusArn"]).ends_with(":event-bus/default"));
    // The rule takes this configuration set's bounces and complaints to the queue, and what
    // it cannot deliver to the DLQ.
    let rule = &r["EmailFeedbackRule"]["Properties"];
    let pattern = &rule["EventPattern"];
    assert_eq!(s(&pattern["source"][0]), "aws.ses");
    let kinds: Vec<String> = pattern["detail-type"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(s)
        .collect();
    assert_eq!(kinds, ["Email Bounced", "Email Complaint Received"]);
    assert_eq!(
        s(&pattern["detail"]["mail"]["tags"]["ses:configuration-set"][0]),
        set_name,
        "the rule matches the configuration set the consumer sends through"
    );
    let consumer = &r["ConsumerFunction"]["Properties"]["Environment"]["Variables"];
    assert_eq!(s(&consumer["EMAIL_SES_CONFIGURATION_SET"]), set_name);
    let target = &rule["Targets"][0];
    assert_eq!(s(&target["Arn"]), "rem-feedback#FeedbackQueue.Arn");
    assert_eq!(
        s(&target["DeadLetterConfig"]["Arn"]),
        "rem-feedback-dlq#FeedbackDeadLetterQueue.Arn"
    );
    // Only that rule may send to the queues.
    let statement = &r["FeedbackQueuePolicy"]["Properties"]["PolicyDocument"]["Statement"][0];
    assert_eq!(
        s(&statement["Principal"]["Service"]),
        "events.amazonaws.com"
    );
    assert!(s(&statement["Condition"]["ArnEquals"]["aws:SourceArn"])
        .ends_with("#EmailFeedbackRule.Arn"));
    // The queue's redrive policy, and the function's mapping with partial batch responses.
    let queue = &r["FeedbackQueue"]["Properties"];
    assert_eq!(
        s(&queue["RedrivePolicy"]["deadLetterTargetArn"]),
        "rem-feedback-dlq#FeedbackDeadLetterQueue.Arn"
    );
    let f = &r["FeedbackFunction"]["Properties"];
    let mapping = &f["Events"]["Feedback"]["Properties"];
    assert_eq!(s(&mapping["Queue"]), "rem-feedback#FeedbackQueue.Arn");
    assert_eq!(
        s(&mapping["FunctionResponseTypes"][0]),
        "ReportBatchItemFailures"
    );
    let timeout: u64 = s(&f["Timeout"]).parse().unwrap();
    let visibility: u64 = s(&queue["VisibilityTimeout"]).parse().unwrap();
    assert!(
        visibility >= 6 * timeout,
        "visibility {visibility} s vs timeout {timeout} s"
    );
    // The account's reputation, at SES's review levels.
    for (alarm, metric, threshold) in [
        ("EmailBounceRateHigh", "Reputation.BounceRate", "0.05"),
        (
            "EmailComplaintRateHigh",
            "Reputation.ComplaintRate",
            "0.001",
        ),
    ] {
        let a = &r[alarm]["Properties"];
        assert_eq!(
            (s(&a["Namespace"]), s(&a["MetricName"])),
            ("AWS/SES".into(), metric.into())
        );
        assert_eq!(s(&a["Threshold"]), threshold, "{alarm}");
    }

    // A configuration set of the deployer's own gets the destination; none is created.
    let mut named = ses.to_vec();
    named.push(("EmailSesConfigurationSet", "mine"));
    let r = rendered("rem", &named);
    assert!(!r.contains_key("EmailConfigurationSet"));
    let dest = &r["EmailFeedbackDestination"]["Properties"];
    assert_eq!(s(&dest["ConfigurationSetName"]), "mine");
    let consumer = &r["ConsumerFunction"]["Properties"]["Environment"]["Variables"];
    assert_eq!(s(&consumer["EMAIL_SES_CONFIGURATION_SET"]), "mine");

    // Without SES: nothing of it (the function and its queues stay, idle).
    let r = rendered(
        "rem",
        &[
            ("EmailProvider", "http"),
            ("EmailHttpEndpoint", "https://x.example/send"),
        ],
    );
    for name in FEEDBACK {
        assert!(!r.contains_key(name), "{name} without SES");
    }
    assert!(r.contains_key("FeedbackFunction"));
}

#[test]
fn the_sms_spend_alarm_follows_the_provider_and_its_parameter() {
    let r = rendered("rem", &[("SmsProvider", "sns")]);
    let a = &r["SmsMonthToDateSpend"]["Properties"];
    assert_eq!(
        (s(&a["Namespace"]), s(&a["MetricName"])),
        ("AWS/SNS".into(), "SMSMonthToDateSpentUSD".into())
    );
    assert_eq!(s(&a["Threshold"]), "100");
    let r = rendered(
        "rem",
        &[("SmsProvider", "sns"), ("SmsMonthlySpendAlarmUsd", "250")],
    );
    assert_eq!(
        s(&r["SmsMonthToDateSpend"]["Properties"]["Threshold"]),
        "250"
    );
    assert!(!rendered(
        "rem",
        &[("SmsProvider", "sns"), ("SmsMonthlySpendAlarmUsd", "0")]
    )
    .contains_key("SmsMonthToDateSpend"));
    assert!(!rendered(
        "rem",
        &[
            ("SmsProvider", "http"),
            ("SmsHttpEndpoint", "https://x.example/send")
        ]
    )
    .contains_key("SmsMonthToDateSpend"));
    // One allow-list for the API and the consumer.
    let r = rendered("rem", &[("SmsAllowedCountryCodes", "1,44")]);
    for f in ["ApiFunction", "ConsumerFunction"] {
        let env = &r[f]["Properties"]["Environment"]["Variables"];
        assert_eq!(s(&env["SMS_ALLOWED_COUNTRY_CODES"]), "1,44", "{f}");
    }
}

/// CloudFormation refuses a parameter value outside its AllowedPattern: these are the values
/// a deploy accepts.
#[test]
fn the_templates_patterns_accept_https_endpoints_and_calling_codes_only() {
    let t = template();
    let pattern = |name: &str| {
        let raw = t["Parameters"][name]["AllowedPattern"]
            .as_str()
            .unwrap()
            .to_owned();
        regex::Regex::new(&raw).unwrap()
    };
    for name in ["PushHttpEndpoint", "EmailHttpEndpoint", "SmsHttpEndpoint"] {
        let p = pattern(name);
        for ok in [
            "",
            "https://push.example.com/v1/send",
            "https://10.0.0.1:8443/x",
        ] {
            assert!(p.is_match(ok), "{name} refuses {ok:?}");
        }
        for bad in [
            "http://push.example.com/send",
            "ftp://x",
            "https://",
            " https://x",
            "push.example.com",
        ] {
            assert!(!p.is_match(bad), "{name} accepts {bad:?}");
        }
    }
    let codes = pattern("SmsAllowedCountryCodes");
    for ok in ["1", "1,44,33", "*", "1809"] {
        assert!(codes.is_match(ok), "refuses {ok:?}");
    }
    for bad in ["", "+1", "0044", "1,", "12345", "uk", "*,1"] {
        assert!(!codes.is_match(bad), "accepts {bad:?}");
    }
}

/// `samconfig.toml`'s environments deploy: every parameter they override exists, and its
/// value is one the template accepts (its AllowedValues, AllowedPattern, MinValue).
#[test]
fn the_samconfig_environments_name_real_parameters_with_accepted_values() {
    let t = template();
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/samconfig.toml")).unwrap();
    let mut envs = 0;
    for line in text
        .lines()
        .filter(|l| l.starts_with("parameter_overrides"))
    {
        envs += 1;
        let value = line.split_once('=').unwrap().1.trim().trim_matches('"');
        for pair in value.split_whitespace() {
            let (name, v) = pair.split_once('=').unwrap();
            let p = &t["Parameters"][name];
            assert!(
                !p.is_null(),
                "samconfig.toml overrides {name}, which the template lacks"
            );
            if let Some(allowed) = p["AllowedValues"].as_sequence() {
                assert!(allowed.iter().any(|a| s(a) == v), "{name}={v}: not allowed");
            }
            if let Some(pattern) = p["AllowedPattern"].as_str() {
                let re = regex::Regex::new(pattern).unwrap();
                assert!(re.is_match(v), "{name}={v}: outside {pattern}");
            }
            if let Some(min) = p["MinValue"].as_f64() {
                assert!(v.parse::<f64>().unwrap() >= min, "{name}={v}: under {min}");
            }
        }
    }
    assert_eq!(envs, 2, "dev and prod");
}
