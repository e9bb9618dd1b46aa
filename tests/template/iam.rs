//! IAM: the roles' statements parsed from the template (through `Fn::If`), and the template's
//! conditions and intrinsics evaluated for given parameters, so a grant is checked as deployed.

use std::collections::{BTreeMap, BTreeSet};

use serde_norway::Value;

use super::{default, keys, template};

/// Every `(role, statement)` of the template's IAM roles, through any `Fn::If`.
fn statements(t: &Value) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for (name, r) in t["Resources"].as_mapping().unwrap() {
        if r["Type"].as_str() != Some("AWS::IAM::Role") {
            continue;
        }
        let name = name.as_str().unwrap().to_owned();
        for policy in r["Properties"]["Policies"]
            .as_sequence()
            .into_iter()
            .flatten()
        {
            let mut found = Vec::new();
            collect_statements(&policy["PolicyDocument"]["Statement"], &mut found);
            out.extend(found.into_iter().map(|s| (name.clone(), s)));
        }
    }
    out
}

/// Statements are mappings with an `Effect`; anything else (a list, a `!If`) is looked into.
fn collect_statements(v: &Value, out: &mut Vec<Value>) {
    match v {
        Value::Mapping(m) if m.contains_key("Effect") => out.push(v.clone()),
        Value::Mapping(m) => m.values().for_each(|v| collect_statements(v, out)),
        Value::Sequence(s) => s.iter().for_each(|v| collect_statements(v, out)),
        Value::Tagged(t) => collect_statements(&t.value, out),
        _ => {}
    }
}

/// The plain strings in a value: a scalar, a list, or inside an intrinsic function.
fn strings(v: &Value) -> Vec<String> {
    match v {
        Value::String(s) => vec![s.clone()],
        Value::Sequence(s) => s.iter().flat_map(strings).collect(),
        Value::Tagged(t) if t.tag == "If" => strings(&t.value).into_iter().skip(1).collect(),
        _ => Vec::new(),
    }
}

/// Least privilege: every function has its own role, no action is a wildcard, and the only
/// resource wildcards are SNS SMS publishing (a phone number has no ARN) and SNS
/// CreatePlatformEndpoint (the IAM reference lists no resource type for it).
#[test]
fn iam_is_scoped_per_function() {
    let t = template();
    let resources = t["Resources"].as_mapping().unwrap();
    for (name, r) in resources {
        let name = name.as_str().unwrap();
        if r["Type"].as_str() == Some("AWS::Serverless::Function") {
            let props = &r["Properties"];
            assert!(
                props.get("Policies").is_none(),
                "{name} must not use SAM policies"
            );
            assert!(props.get("Role").is_some(), "{name} has an explicit role");
        }
    }
    // Every statement of every role, parsed: actions never wildcards, and the resource
    // wildcards are the two SNS actions that cannot be scoped.
    let mut wildcard_resources = Vec::new();
    let all = statements(&t);
    assert!(all.len() >= 10, "found {} IAM statements", all.len());
    for (role, statement) in all {
        let actions = strings(&statement["Action"]);
        assert!(!actions.is_empty(), "{role}: a statement without actions");
        for action in &actions {
            assert!(!action.contains('*'), "{role}: wildcard action {action}");
            assert!(action.contains(':'), "{role}: malformed action {action}");
        }
        if strings(&statement["Resource"]).iter().any(|r| r == "*") {
            wildcard_resources.push((role.clone(), actions));
        }
    }
    // sns:Publish to a phone number is evaluated against the number itself, which only "*"
    // matches (topics are denied separately, see `sns_grants_follow_the_providers`);
    // sns:CreatePlatformEndpoint has no resource type in the Service Authorization Reference,
    // so IAM evaluates it against "*" and a statement naming the platform application never
    // matches; X-Ray's write actions (Tracing=Active only) take no resource but "*".
    let xray = || {
        vec![
            "xray:PutTraceSegments".to_owned(),
            "xray:PutTelemetryRecords".to_owned(),
        ]
    };
    assert_eq!(
        wildcard_resources,
        [
            ("FeedbackRole".to_owned(), xray()),
            ("SchedulerRole".to_owned(), xray()),
            ("ConsumerRole".to_owned(), xray()),
            ("ConsumerRole".to_owned(), vec!["sns:Publish".to_owned()]),
            (
                "ConsumerRole".to_owned(),
                vec!["sns:CreatePlatformEndpoint".to_owned()]
            ),
            ("RedriveRole".to_owned(), xray()),
            ("ApiRole".to_owned(), xray()),
            ("EventsRole".to_owned(), xray()),
        ],
        "only SNS SMS publish, CreatePlatformEndpoint and X-Ray have no resource ARN to scope to"
    );
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/template.yaml")).unwrap();
    for forbidden in [
        "DynamoDBCrudPolicy",
        "SQSPollerPolicy",
        "AWSLambdaSQSQueueExecutionRole",
    ] {
        assert!(
            !text.contains(forbidden),
            "{forbidden} is broader than needed"
        );
    }
}

/// Parameter values for evaluating the template: every default, then the overrides.
pub(super) fn params(t: &Value, overrides: &[(&str, &str)]) -> BTreeMap<String, String> {
    let mut p: BTreeMap<String, String> = keys(&t["Parameters"])
        .into_iter()
        .map(|name| {
            let v = default(t, &name);
            (name, v)
        })
        .collect();
    for (k, v) in overrides {
        assert!(p.contains_key(*k), "no parameter {k}");
        p.insert((*k).to_owned(), (*v).to_owned());
    }
    for (k, v) in [
        ("AWS::Partition", "aws"),
        ("AWS::Region", "us-east-1"),
        ("AWS::AccountId", "123456789012"),
        ("AWS::StackName", "reminders"),
    ] {
        p.insert(k.to_owned(), v.to_owned());
    }
    p
}

fn tagged<'a>(v: &'a Value, tag: &str) -> Option<&'a Value> {
    match v {
        Value::Tagged(t) if t.tag == tag => Some(&t.value),
        _ => None,
    }
}

/// A condition of the template's `Conditions`, evaluated (Equals, Not, And, Or, Condition).
pub(super) fn condition(t: &Value, p: &BTreeMap<String, String>, name: &str) -> bool {
    let def = &t["Conditions"][name];
    assert!(!def.is_null(), "no condition {name}");
    condition_expr(t, p, def)
}

pub(super) fn condition_expr(t: &Value, p: &BTreeMap<String, String>, v: &Value) -> bool {
    let args = |v: &Value| v.as_sequence().cloned().unwrap_or_default();
    if let Some(a) = tagged(v, "Equals") {
        // CloudFormation compares as strings: `!Equals [!Ref N, 0]` holds for the parameter "0".
        let text = |v: Option<Value>| match v {
            Some(Value::String(s)) => Some(s),
            Some(Value::Number(n)) => Some(n.to_string()),
            Some(Value::Bool(b)) => Some(b.to_string()),
            other => other.map(|o| format!("{o:?}")),
        };
        let a = args(a);
        text(resolve(t, p, &a[0])) == text(resolve(t, p, &a[1]))
    } else if let Some(a) = tagged(v, "Not") {
        !condition_expr(t, p, &args(a)[0])
    } else if let Some(a) = tagged(v, "And") {
        args(a).iter().all(|c| condition_expr(t, p, c))
    } else if let Some(a) = tagged(v, "Or") {
        args(a).iter().any(|c| condition_expr(t, p, c))
    } else if let Some(a) = tagged(v, "Condition") {
        condition(t, p, a.as_str().unwrap())
    } else {
        panic!("not a condition: {v:?}")
    }
}

/// `${Name}` in a `!Sub` string, from the variables or the parameters; `${Resource.Attr}` and
/// other resource references stay as written.
fn substitute(text: &str, p: &BTreeMap<String, String>, vars: &BTreeMap<String, String>) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let end = start + rest[start..].find('}').expect("unclosed ${ in !Sub");
        let name = &rest[start + 2..end];
        match vars.get(name).or_else(|| p.get(name)) {
            Some(v) => out.push_str(v),
            None => out.push_str(&rest[start..=end]),
        }
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    out
}

/// A value with the intrinsic functions this template uses evaluated for the parameters:
/// `!If` picks its branch, `!Ref AWS::NoValue` disappears (None, and from lists and maps),
/// `!Ref`, `!Sub`, `!Select` and `!Split` resolve; `!GetAtt` stays as written.
pub(super) fn resolve(t: &Value, p: &BTreeMap<String, String>, v: &Value) -> Option<Value> {
    let text = |v: Option<Value>| -> String {
        match v {
            Some(Value::String(s)) => s,
            Some(Value::Number(n)) => n.to_string(),
            other => panic!("not a string: {other:?}"),
        }
    };
    Some(match v {
        Value::Sequence(items) => {
            Value::Sequence(items.iter().filter_map(|i| resolve(t, p, i)).collect())
        }
        Value::Mapping(m) => Value::Mapping(
            m.iter()
                .filter_map(|(k, v)| resolve(t, p, v).map(|v| (k.clone(), v)))
                .collect(),
        ),
        Value::Tagged(tv) => {
            let args = tv.value.as_sequence().cloned().unwrap_or_default();
            if tv.tag == "If" {
                let branch = if condition(t, p, args[0].as_str().unwrap()) {
                    1
                } else {
                    2
                };
                return resolve(t, p, &args[branch]);
            } else if tv.tag == "Ref" {
                let name = tv.value.as_str().unwrap();
                if name == "AWS::NoValue" {
                    return None;
                }
                match p.get(name) {
                    Some(v) => Value::String(v.clone()),
                    None => Value::String(format!("${{{name}}}")),
                }
            } else if tv.tag == "Sub" {
                match &tv.value {
                    Value::String(s) => Value::String(substitute(s, p, &BTreeMap::new())),
                    _ => {
                        let vars = args[1]
                            .as_mapping()
                            .unwrap()
                            .iter()
                            .map(|(k, v)| (k.as_str().unwrap().to_owned(), text(resolve(t, p, v))))
                            .collect();
                        Value::String(substitute(args[0].as_str().unwrap(), p, &vars))
                    }
                }
            } else if tv.tag == "Split" {
                let delimiter = text(resolve(t, p, &args[0]));
                let whole = text(resolve(t, p, &args[1]));
                Value::Sequence(
                    whole
                        .split(delimiter.as_str())
                        .map(|s| Value::String(s.to_owned()))
                        .collect(),
                )
            } else if tv.tag == "Select" {
                let index: usize = text(resolve(t, p, &args[0])).parse().unwrap();
                let list = resolve(t, p, &args[1]).unwrap();
                let list = list.as_sequence().unwrap();
                assert!(
                    index < list.len(),
                    "!Select index {index} out of range: {list:?}"
                );
                list[index].clone()
            } else {
                v.clone()
            }
        }
        other => other.clone(),
    })
}

/// The role's statements as deployed with these parameters.
pub(super) fn deployed_statements(
    t: &Value,
    p: &BTreeMap<String, String>,
    role: &str,
) -> Vec<Value> {
    let r = &t["Resources"][role]["Properties"]["Policies"];
    r.as_sequence()
        .unwrap()
        .iter()
        .flat_map(|policy| {
            resolve(t, p, &policy["PolicyDocument"]["Statement"])
                .and_then(|s| s.as_sequence().cloned())
                .unwrap_or_default()
        })
        .collect()
}

/// The resources of the role's statements with this effect that name this action.
fn resources_for(statements: &[Value], effect: &str, action: &str) -> BTreeSet<String> {
    let list = |v: &Value| -> Vec<String> {
        match v {
            Value::String(s) => vec![s.clone()],
            Value::Sequence(s) => s
                .iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect(),
            other => panic!("unresolved: {other:?}"),
        }
    };
    statements
        .iter()
        .filter(|s| s["Effect"].as_str() == Some(effect))
        .filter(|s| list(&s["Action"]).iter().any(|a| a == action))
        .flat_map(|s| list(&s["Resource"]))
        .collect()
}

/// IAM's resource matching: `*` any run of characters, `?` one.
pub(super) fn iam_matches(pattern: &str, arn: &str) -> bool {
    fn go(p: &[u8], s: &[u8]) -> bool {
        match (p.first(), s.first()) {
            (None, None) => true,
            (Some(b'*'), _) => go(&p[1..], s) || (!s.is_empty() && go(p, &s[1..])),
            (Some(b'?'), Some(_)) => go(&p[1..], &s[1..]),
            (Some(a), Some(b)) if a == b => go(&p[1..], &s[1..]),
            _ => false,
        }
    }
    go(pattern.as_bytes(), arn.as_bytes())
}

/// SES v2 SendEmail is authorized on the sender identity (address and domain), on the
/// configuration set when the request names one, and on the template when the content names
/// one (the SES code sends `EmailContent::template`): with `EmailSesConfigurationSet` set, a
/// grant on identities alone is "not authorized ... on resource configuration-set/<name>".
#[test]
fn ses_grant_covers_the_sender_identity_and_the_configuration_set() {
    let t = template();
    let arn = |rest: &str| format!("arn:aws:ses:us-east-1:123456789012:{rest}");
    let sender = [
        arn("identity/noreply@mail.example.com"),
        arn("identity/mail.example.com"),
        arn("template/*"),
    ];
    let ses = |overrides: &[(&str, &str)]| {
        let p = params(&t, overrides);
        resources_for(
            &deployed_statements(&t, &p, "ConsumerRole"),
            "Allow",
            "ses:SendEmail",
        )
    };
    let with_set = ses(&[
        ("EmailProvider", "ses"),
        ("EmailSesFrom", "noreply@mail.example.com"),
        ("EmailSesConfigurationSet", "reminders-events"),
    ]);
    let mut want: BTreeSet<String> = sender.iter().cloned().collect();
    want.insert(arn("configuration-set/reminders-events"));
    assert_eq!(with_set, want);
    // Without one named, the stack's own (EmailConfigurationSet, which feedback publishes
    // from): the grant names it.
    let without_set = ses(&[
        ("EmailProvider", "ses"),
        ("EmailSesFrom", "noreply@mail.example.com"),
    ]);
    let mut want: BTreeSet<String> = sender.iter().cloned().collect();
    want.insert(arn("configuration-set/${EmailConfigurationSet}"));
    assert_eq!(without_set, want);
    assert!(
        !without_set
            .iter()
            .any(|r| r.contains('*') && !r.ends_with(":template/*")),
        "identities are the sender's, not identity/*"
    );
    // A configuration set without SES as the provider grants nothing.
    assert!(ses(&[("EmailProvider", "http"), ("EmailSesConfigurationSet", "x")]).is_empty());
    // Defaults: no SES at all.
    assert!(ses(&[]).is_empty());
    // The domain expression stays in range for an empty sender (whether or not CloudFormation
    // evaluates the branch it does not take): `!Select` panics in `resolve` otherwise.
    assert!(ses(&[("EmailProvider", "ses")]).contains(&arn("identity/")));
}

/// SNS: SMS publishing needs "*", so topics are denied whenever that deny cannot hit a push
/// endpoint; CreatePlatformEndpoint is granted on "*" only with a platform application.
#[test]
fn sns_grants_follow_the_providers() {
    let t = template();
    let sns = |overrides: &[(&str, &str)]| {
        let p = params(&t, overrides);
        let s = deployed_statements(&t, &p, "ConsumerRole");
        (
            resources_for(&s, "Allow", "sns:Publish"),
            resources_for(&s, "Deny", "sns:Publish"),
            resources_for(&s, "Allow", "sns:CreatePlatformEndpoint"),
        )
    };
    let set = |items: &[&str]| items.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    let endpoints = "arn:aws:sns:us-east-1:123456789012:endpoint/*";
    let topic = "arn:aws:sns:us-east-1:123456789012:alerts";
    let endpoint = "arn:aws:sns:us-east-1:123456789012:endpoint/GCM/app/0b1e2c3d";

    let (allow, deny, create) = sns(&[("SmsProvider", "sns")]);
    assert_eq!(allow, set(&["*"]));
    assert_eq!(create, set(&[]));
    assert_eq!(deny.len(), 1, "SMS-only SNS denies topics: {deny:?}");
    let pattern = deny.iter().next().unwrap();
    assert!(iam_matches(pattern, topic), "{pattern} leaves topics open");
    assert!(
        !iam_matches(pattern, "+15555550100"),
        "{pattern} would deny SMS: IAM evaluates a phone number publish on the number"
    );

    let app = "arn:aws:sns:us-east-1:123456789012:app/GCM/reminders";
    let (allow, deny, create) = sns(&[
        ("SmsProvider", "sns"),
        ("PushProvider", "sns"),
        ("PushSnsPlatformApplicationArn", app),
    ]);
    assert_eq!(allow, set(&["*", endpoints]));
    assert_eq!(create, set(&["*"]));
    // No ARN pattern separates a topic from an endpoint: a topic deny would break push here
    // (the documented residual).
    assert!(iam_matches("arn:aws:sns:*:*:*", endpoint));
    assert_eq!(deny, set(&[]));

    let (allow, deny, create) = sns(&[("PushProvider", "sns")]);
    assert_eq!(
        allow,
        set(&[endpoints]),
        "push without SMS needs no wildcard"
    );
    assert_eq!((deny, create), (set(&[]), set(&[])));
    assert!(iam_matches(endpoints, endpoint) && !iam_matches(endpoints, topic));

    let (allow, deny, create) = sns(&[]);
    assert!(allow.is_empty() && deny.is_empty() && create.is_empty());
}

/// HTTP bearer tokens: GetSecretValue on exactly the secrets the parameters name, nothing
/// without one; and no function is given a plain token in its environment.
#[test]
fn token_secrets_are_granted_one_by_one_and_never_in_the_environment() {
    let t = template();
    let granted = |overrides: &[(&str, &str)]| {
        let p = params(&t, overrides);
        resources_for(
            &deployed_statements(&t, &p, "ConsumerRole"),
            "Allow",
            "secretsmanager:GetSecretValue",
        )
    };
    let push = "arn:aws:secretsmanager:us-east-1:123456789012:secret:push-token-AbCdEf";
    let sms = "arn:aws:secretsmanager:us-east-1:123456789012:secret:sms-token-GhIjKl";
    // The suppression key is the stack's own secret, read in every configuration.
    let key = "${SuppressionKeySecret}".to_owned();
    assert_eq!(
        granted(&[]),
        BTreeSet::from([key.clone()]),
        "no token secret, no token grant"
    );
    assert_eq!(
        granted(&[("PushHttpTokenSecretArn", push)]),
        BTreeSet::from([key.clone(), push.to_owned()])
    );
    assert_eq!(
        granted(&[
            ("PushHttpTokenSecretArn", push),
            ("SmsHttpTokenSecretArn", sms)
        ]),
        BTreeSet::from([key, push.to_owned(), sms.to_owned()])
    );
    let p = params(&t, &[("PushHttpTokenSecretArn", push)]);
    for role in ["RedriveRole", "EventsRole"] {
        assert!(
            resources_for(
                &deployed_statements(&t, &p, role),
                "Allow",
                "secretsmanager:GetSecretValue"
            )
            .is_empty(),
            "{role} reads no secret"
        );
    }
    // The API (erasure), the feedback function and the scheduler (a sole channel's message
    // carries its address's keyed hash) read the suppression key, no token.
    for role in ["ApiRole", "FeedbackRole", "SchedulerRole"] {
        assert_eq!(
            resources_for(
                &deployed_statements(&t, &p, role),
                "Allow",
                "secretsmanager:GetSecretValue"
            ),
            BTreeSet::from(["${SuppressionKeySecret}".to_owned()]),
            "{role}"
        );
    }
    let resources = t["Resources"].as_mapping().unwrap();
    for (name, r) in resources {
        let vars = &r["Properties"]["Environment"]["Variables"];
        if let Some(vars) = vars.as_mapping() {
            for k in vars.keys() {
                let k = k.as_str().unwrap();
                assert!(
                    !reminders::providers::LOCAL_ONLY_VARS.contains(&k)
                        && k != reminders::providers::secret::SUPPRESSION_KEY_VAR,
                    "{name:?} gets a plain secret in {k}"
                );
            }
        }
    }
    assert!(t["Parameters"]
        .as_mapping()
        .unwrap()
        .keys()
        .all(|k| !k.as_str().unwrap().ends_with("HttpToken")));
}

/// The IAM action an SDK operation is authorized as (batch operations by their single form).
fn iam_action(call: &str) -> String {
    let (service, op) = call.split_once('.').unwrap();
    let op = op
        .strip_suffix("Batch")
        .filter(|_| service == "SQS")
        .unwrap_or(op);
    let prefix = match service {
        "DynamoDB" => "dynamodb",
        "SQS" => "sqs",
        "SESv2" => "ses",
        "SNS" => "sns",
        "Secrets Manager" => "secretsmanager",
        "EventBridge" => "events",
        other => panic!("no IAM prefix known for {other}"),
    };
    format!("{prefix}:{op}")
}

/// Each role allows exactly the actions of the SDK operations its function's code calls
/// (`wiring::aws_calls`; the Runtime API tests hold the code to that list) plus what the
/// platform does on the function's behalf — with every provider configured, so every
/// conditional grant is present. A call the role does not grant, or a grant no call uses,
/// fails here.
#[test]
fn each_role_grants_exactly_what_its_code_calls() {
    let t = template();
    let p = params(
        &t,
        &[
            ("EmailProvider", "ses"),
            ("EmailSesFrom", "noreply@mail.example.com"),
            ("EmailSesConfigurationSet", "events"),
            ("SmsProvider", "sns"),
            ("PushProvider", "sns"),
            (
                "PushSnsPlatformApplicationArn",
                "arn:aws:sns:us-east-1:123456789012:app/GCM/reminders",
            ),
            (
                "EmailHttpTokenSecretArn",
                "arn:aws:secretsmanager:us-east-1:123456789012:secret:t-AbCdEf",
            ),
            ("Tracing", "Active"),
        ],
    );
    // Logs and X-Ray segments (Tracing=Active) for every function; the consumer's event source
    // mappings receive, delete and read queue attributes with its role; the scheduler's failed
    // async invocations go to its DLQ (sqs:SendMessage, which its SendMessageBatch needs
    // anyway); the events function's stream mapping reads the ledger's stream with its role and
    // sends a batch that keeps failing to its DLQ.
    let platform: &[(&str, &[&str])] = &[
        (
            "scheduler",
            &[
                "logs:CreateLogStream",
                "logs:PutLogEvents",
                "xray:PutTraceSegments",
                "xray:PutTelemetryRecords",
            ],
        ),
        (
            "consumer",
            &[
                "logs:CreateLogStream",
                "logs:PutLogEvents",
                "xray:PutTraceSegments",
                "xray:PutTelemetryRecords",
                "sqs:ReceiveMessage",
                "sqs:DeleteMessage",
                "sqs:GetQueueAttributes",
            ],
        ),
        (
            "redrive",
            &[
                "logs:CreateLogStream",
                "logs:PutLogEvents",
                "xray:PutTraceSegments",
                "xray:PutTelemetryRecords",
            ],
        ),
        (
            "api",
            &[
                "logs:CreateLogStream",
                "logs:PutLogEvents",
                "xray:PutTraceSegments",
                "xray:PutTelemetryRecords",
            ],
        ),
        (
            "events",
            &[
                "logs:CreateLogStream",
                "logs:PutLogEvents",
                "xray:PutTraceSegments",
                "xray:PutTelemetryRecords",
                "dynamodb:DescribeStream",
                "dynamodb:GetRecords",
                "dynamodb:GetShardIterator",
                "dynamodb:ListStreams",
                "sqs:SendMessage",
            ],
        ),
        (
            "feedback",
            &[
                "logs:CreateLogStream",
                "logs:PutLogEvents",
                "xray:PutTraceSegments",
                "xray:PutTelemetryRecords",
                "sqs:ReceiveMessage",
                "sqs:DeleteMessage",
                "sqs:GetQueueAttributes",
            ],
        ),
    ];
    // Every function the template deploys is checked here.
    let checked: BTreeSet<&str> = platform.iter().map(|(f, _)| *f).collect();
    assert_eq!(
        checked,
        reminders::wiring::FUNCTIONS.into_iter().collect(),
        "a function without its least-privilege check"
    );
    for (function, extra) in platform {
        let role = format!("{}{}Role", function[..1].to_uppercase(), &function[1..]);
        let granted: BTreeSet<String> = deployed_statements(&t, &p, &role)
            .iter()
            .filter(|s| s["Effect"].as_str() == Some("Allow"))
            .flat_map(|s| strings(&s["Action"]))
            .collect();
        let mut needed: BTreeSet<String> = reminders::wiring::aws_calls(function)
            .iter()
            .map(|c| iam_action(c))
            .collect();
        needed.extend(extra.iter().map(|a| a.to_string()));
        let missing: Vec<_> = needed.difference(&granted).collect();
        let unused: Vec<_> = granted.difference(&needed).collect();
        assert!(
            missing.is_empty() && unused.is_empty(),
            "{role}: not granted {missing:?}; granted but never called {unused:?}"
        );
    }
}

/// Every combination of the three providers, rendered (conditions resolved, as deployed):
/// each role grants no action its code does not call, a provider's actions only when that
/// provider is chosen, and a resource `*` only where the service allows nothing narrower.
#[test]
fn every_provider_combination_grants_only_what_it_needs() {
    let t = template();
    let arn =
        |service: &str, rest: &str| format!("arn:aws:{service}:us-east-1:123456789012:{rest}");
    let mut combinations = 0;
    for push in ["none", "http", "sns"] {
        for email in ["none", "http", "ses"] {
            for sms in ["none", "http", "sns"] {
                let mut owned: Vec<(String, String)> = vec![
                    ("PushProvider".into(), push.into()),
                    ("EmailProvider".into(), email.into()),
                    ("SmsProvider".into(), sms.into()),
                ];
                for (channel, provider) in [("Push", push), ("Email", email), ("Sms", sms)] {
                    if provider == "http" {
                        let secret = arn("secretsmanager", &format!("secret:{channel}-AbCdEf"));
                        owned.push((
                            format!("{channel}HttpEndpoint"),
                            "https://x.example/send".into(),
                        ));
                        owned.push((format!("{channel}HttpTokenSecretArn"), secret));
                    }
                }
                if push == "sns" {
                    owned.push((
                        "PushSnsPlatformApplicationArn".into(),
                        arn("sns", "app/GCM/r"),
                    ));
                }
                if email == "ses" {
                    owned.push(("EmailSesFrom".into(), "noreply@mail.example.com".into()));
                }
                let overrides: Vec<(&str, &str)> = owned
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_str()))
                    .collect();
                let p = params(&t, &overrides);
                let statements = deployed_statements(&t, &p, "ConsumerRole");
                let allowed: Vec<&Value> = statements
                    .iter()
                    .filter(|s| s["Effect"].as_str() == Some("Allow"))
                    .collect();
                let granted: BTreeSet<String> =
                    allowed.iter().flat_map(|s| strings(&s["Action"])).collect();
                let calls: BTreeSet<String> = reminders::wiring::aws_calls("consumer")
                    .iter()
                    .map(|c| iam_action(c))
                    .chain(
                        [
                            "logs:CreateLogStream",
                            "logs:PutLogEvents",
                            "sqs:ReceiveMessage",
                        ]
                        .into_iter()
                        .chain(["sqs:DeleteMessage", "sqs:GetQueueAttributes"])
                        .map(str::to_owned),
                    )
                    .collect();
                let label = format!("push={push} email={email} sms={sms}");
                let extra: Vec<_> = granted.difference(&calls).collect();
                assert!(
                    extra.is_empty(),
                    "{label}: granted, never called: {extra:?}"
                );
                let has = |a: &str| granted.contains(a);
                assert_eq!(has("ses:SendEmail"), email == "ses", "{label}: SES");
                assert_eq!(
                    has("sns:Publish"),
                    push == "sns" || sms == "sns",
                    "{label}: SNS"
                );
                assert_eq!(has("sns:CreatePlatformEndpoint"), push == "sns", "{label}");
                // Token secrets are granted one by one (the test above); the suppression
                // key in every combination.
                assert!(
                    has("secretsmanager:GetSecretValue"),
                    "{label}: the suppression key"
                );
                for s in &allowed {
                    if strings(&s["Resource"]).iter().any(|r| r == "*") {
                        let actions = strings(&s["Action"]);
                        let narrowest = actions == ["sns:CreatePlatformEndpoint"]
                            || (actions == ["sns:Publish"] && sms == "sns");
                        assert!(narrowest, "{label}: {actions:?} on *");
                    }
                }
                combinations += 1;
            }
        }
    }
    assert_eq!(combinations, 27);
}

/// The new functions' grants, resource by resource: the API queries the subscriber index and
/// never the table (nor scans), and writes both tables only by key; the events function reads
/// the ledger's stream (not its table), sends to its own DLQ, and puts events on its bus only.
#[test]
fn the_api_and_events_roles_name_their_resources() {
    let t = template();
    let p = params(&t, &[("Tracing", "Active")]);
    let set = |items: &[&str]| items.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    let api = deployed_statements(&t, &p, "ApiRole");
    let on = |statements: &[Value], action: &str| resources_for(statements, "Allow", action);
    let reminders = "${RemindersTable.Arn}";
    assert_eq!(
        on(&api, "dynamodb:Query"),
        set(&["${RemindersTable.Arn}/index/subscriber-index"])
    );
    // `!GetAtt` stays as written: compare through its text.
    let getatt = |statements: &[Value], action: &str| -> BTreeSet<String> {
        statements
            .iter()
            .filter(|s| s["Effect"].as_str() == Some("Allow"))
            .filter(|s| strings(&s["Action"]).iter().any(|a| a == action))
            .flat_map(|s| match &s["Resource"] {
                Value::Sequence(items) => items.clone(),
                one => vec![one.clone()],
            })
            .map(|r| match r {
                Value::Tagged(t) if t.tag == "GetAtt" => t.value.as_str().unwrap().to_owned(),
                Value::String(s) => s,
                other => panic!("unresolved: {other:?}"),
            })
            .collect()
    };
    let tables = set(&["RemindersTable.Arn", "DeliveriesTable.Arn"]);
    assert_eq!(getatt(&api, "dynamodb:GetItem"), tables);
    assert_eq!(getatt(&api, "dynamodb:PutItem"), tables);
    assert_eq!(
        getatt(&api, "dynamodb:UpdateItem"),
        set(&["RemindersTable.Arn"])
    );
    assert_eq!(
        getatt(&api, "dynamodb:BatchGetItem"),
        set(&["RemindersTable.Arn"]),
        "a list's owners, from the reminders table only"
    );
    assert!(!format!("{api:?}").contains("dynamodb:Scan"));
    assert!(!on(&api, "dynamodb:Query").contains(reminders));
    // The API writes reminders and preferences in the reminders table, never a suppression
    // (the consumer's record of a dead address): denied by the item's leading key.
    let deny = api
        .iter()
        .find(|s| s["Sid"].as_str() == Some("ApiNeverWritesSuppressions"))
        .expect("ApiRole denies writing suppressions");
    assert_eq!(deny["Effect"].as_str(), Some("Deny"));
    let denied: BTreeSet<String> = strings(&deny["Action"]).into_iter().collect();
    assert_eq!(denied, set(&["dynamodb:PutItem", "dynamodb:UpdateItem"]));
    assert_eq!(
        strings(&deny["Condition"]["ForAnyValue:StringLike"]["dynamodb:LeadingKeys"]),
        vec!["suppress#*".to_owned()]
    );

    let events = deployed_statements(&t, &p, "EventsRole");
    for action in [
        "dynamodb:DescribeStream",
        "dynamodb:GetRecords",
        "dynamodb:GetShardIterator",
    ] {
        assert_eq!(
            getatt(&events, action),
            set(&["DeliveriesTable.StreamArn"]),
            "{action}"
        );
    }
    // ListStreams names a table's streams: granted on that table's streams only.
    assert_eq!(
        on(&events, "dynamodb:ListStreams"),
        set(&["${DeliveriesTable.Arn}/stream/*"])
    );
    assert_eq!(
        getatt(&events, "sqs:SendMessage"),
        set(&["EventsDeadLetterQueue.Arn"])
    );
    assert_eq!(getatt(&events, "events:PutEvents"), set(&["EventBus.Arn"]));
}
