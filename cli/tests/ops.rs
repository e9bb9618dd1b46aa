//! The operator commands against the emulator, as an operator types them: resources from
//! `local up`, a reminder created, run to its death (its channel has no provider), inspected in
//! the DLQ, redriven with confirmation, and shown with its audit trail; another cancelled.

use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Output, Stdio};

fn remindctl(args: &[&str], env: &BTreeMap<String, String>, stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_remindctl"))
        .args(args)
        .envs(env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("remindctl runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn ok(args: &[&str], env: &BTreeMap<String, String>) -> String {
    let out = remindctl(args, env, "");
    assert!(
        out.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
fn operator_commands_against_the_emulator() {
    std::env::var("AWS_ENDPOINT_URL")
        .expect("AWS_ENDPOINT_URL is not set: run the emulator tests through infra/test.sh");
    let prefix = format!("ops-{}", std::process::id());
    let mut env = BTreeMap::new();
    let up = ok(&["local", "up", "--prefix", &prefix], &env);
    for line in up.lines().filter_map(|l| l.strip_prefix("export ")) {
        let (k, v) = line.split_once('=').unwrap();
        env.insert(k.to_owned(), v.to_owned());
    }
    assert!(env.contains_key("PUSH_DLQ_URL"), "{up}");

    let created = ok(
        &[
            "remind",
            "create",
            "--id",
            "op-1",
            "--subscriber",
            "u-1",
            "--body",
            "hi",
            "--push",
            "secret-token-1",
        ],
        &env,
    );
    assert!(created.contains("created op-1"), "{created}");
    // The API's limits hold here too: one line, and nothing written.
    for (flag, value, says) in [
        ("--due-in", "400000000", "within 10 years"),
        ("--fresh-secs", "40000000", "fresh"),
    ] {
        let args = [
            "remind",
            "create",
            "--id",
            "op-far",
            "--subscriber",
            "u-1",
            "--body",
            "hi",
            "--push",
            "t",
            flag,
            value,
        ];
        let out = remindctl(&args, &env, "");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.lines().count() == 1,
            "{flag}: {err}"
        );
        assert!(err.contains(says), "{flag}: {err}");
    }
    let far = remindctl(&["remind", "show", "--id", "op-far"], &env, "");
    assert!(!far.status.success(), "a refused create wrote nothing");
    let shown = ok(&["remind", "show", "--id", "op-1"], &env);
    assert!(shown.contains("no item: not enqueued yet"), "{shown}");
    // The reminder's status comes with what its deliveries say.
    assert!(
        shown.contains("status       scheduled — 1 delivery: waiting for the scheduler"),
        "{shown}"
    );
    // What became of it, as the API's GET says: nothing yet.
    assert!(shown.contains("outcome      pending"), "{shown}");
    assert!(
        !shown.contains("secret-token-1"),
        "recipients are never shown"
    );

    // Another, on email, to die the same way and be redriven without a note.
    let created = ok(
        &[
            "remind",
            "create",
            "--id",
            "op-3",
            "--subscriber",
            "u-1",
            "--body",
            "hi",
            "--email",
            "op-3@example.com",
        ],
        &env,
    );
    assert!(created.contains("created op-3"), "{created}");

    // Run it: with no push provider configured, the delivery dies as rejected.
    let mut run_env = env.clone();
    for p in ["PUSH_PROVIDER", "EMAIL_PROVIDER", "SMS_PROVIDER"] {
        run_env.insert(p.into(), "none".into());
    }
    ok(
        &["local", "run", "--schedule-period", "1", "--for", "8"],
        &run_env,
    );

    let summary = ok(&["dlq", "summary", "--channel", "push"], &env);
    assert!(
        summary.contains("push: 1 dead") && summary.contains("rejected"),
        "{summary}"
    );
    let show = ok(
        &["dlq", "show", "--channel", "push", "--reason", "rejected"],
        &env,
    );
    assert!(show.contains("channel_disabled"), "{show}");

    // `enqueued` alone hides a dead delivery: the status says what the deliveries say, and
    // the history speaks in operator words, not the ledger's transition codes.
    let dead_shown = ok(&["remind", "show", "--id", "op-1"], &env);
    assert!(
        dead_shown.contains("status       enqueued — 1 delivery: dead (rejected) · payload v1"),
        "{dead_shown}"
    );
    assert!(dead_shown.contains("outcome      failed"), "{dead_shown}");
    assert!(
        dead_shown.contains("sending → dead (rejected)")
            && dead_shown.contains("still dead: dead-letter copy made"),
        "{dead_shown}"
    );
    assert!(!dead_shown.contains("dlq_copy"), "{dead_shown}");

    // The same, as JSON: times as RFC 3339 and epoch milliseconds, never a recipient.
    let json = |args: &[&str]| -> Vec<serde_json::Value> {
        let mut a = args.to_vec();
        a.push("--json");
        let text = ok(&a, &env);
        assert!(
            !text.contains("secret-token-1"),
            "recipients are never shown"
        );
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
    };
    let summary = json(&["dlq", "summary", "--channel", "push"]);
    assert_eq!(summary.len(), 1, "one object");
    assert_eq!(summary[0]["push"]["dead"], 1, "{}", summary[0]);
    assert!(summary[0]["push"]["by_reason"]["rejected"]["oldest_dead_at_ms"].is_i64());
    let dead = json(&["dlq", "show", "--channel", "push", "--reason", "rejected"]);
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0]["last_error"], "channel_disabled", "{}", dead[0]);
    assert!(dead[0]["dead_at_ms"].is_i64() && dead[0]["dead_at"].is_string());
    let shown = json(&["remind", "show", "--id", "op-1"]);
    let delivery = &shown[0]["deliveries"][0];
    assert_eq!(delivery["channel"], "push", "{}", shown[0]);
    assert_eq!(delivery["ledger"]["status"], "dead", "{}", shown[0]);
    assert_eq!(
        delivery["ledger"]["dead_reason"], "rejected",
        "{}",
        shown[0]
    );
    assert_eq!(shown[0]["status"], "enqueued", "{}", shown[0]);
    assert_eq!(
        shown[0]["status_detail"], "enqueued — 1 delivery: dead (rejected)",
        "{}",
        shown[0]
    );
    assert_eq!(shown[0]["outcome"], "failed", "{}", shown[0]);
    // The ledger's codes stay for scripts; beside them, the operator's words.
    let history = delivery["ledger"]["history"].as_array().unwrap();
    let copy = history.iter().find(|h| h["detail"] == "dlq_copy");
    let copy = copy.unwrap_or_else(|| panic!("no dlq_copy entry: {}", shown[0]));
    assert_eq!(copy["meaning"], "dead-letter copy made", "{copy}");
    assert!(shown[0]["due_at_ms"].is_i64());
    let dry_json = json(&[
        "redrive",
        "--channel",
        "push",
        "--reason",
        "rejected",
        "--max",
        "5",
    ]);
    assert_eq!(dry_json[0]["dry_run"], true, "{}", dry_json[0]);
    assert_eq!(
        dry_json[0]["by_reason"]["rejected"]["matched"], 1,
        "{}",
        dry_json[0]
    );

    let base = [
        "redrive",
        "--channel",
        "push",
        "--reason",
        "rejected",
        "--max",
        "5",
    ];
    let dry = ok(&base, &env);
    assert!(dry.contains("dry run"), "{dry}");
    let mut execute = base.to_vec();
    execute.extend([
        "--execute",
        "--note",
        "provider configured",
        "--operator",
        "ana",
    ]);
    // The prompt names the reasons in plain words, and its line ends before the error,
    // whether the answer is a no or stdin is closed.
    for answer in ["n\n", ""] {
        let refused = remindctl(&execute, &env, answer);
        assert!(!refused.status.success());
        let err = String::from_utf8_lossy(&refused.stderr);
        assert!(err.contains("not confirmed"), "{err}");
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(
            lines,
            [
                "redrive up to 5 rejected message(s) from the push DLQ back to its queue? [y/N] ",
                "remindctl: not confirmed; nothing moved",
            ],
            "{answer:?}: {err}"
        );
    }
    let moved = remindctl(&execute, &env, "y\n");
    assert!(
        moved.status.success(),
        "{}",
        String::from_utf8_lossy(&moved.stderr)
    );
    let moved = String::from_utf8(moved.stdout).unwrap();
    let row = moved
        .lines()
        .find(|l| l.starts_with("rejected"))
        .unwrap_or_default();
    let cols: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cols.get(3), Some(&"1"), "moved 1: {moved}");
    let after = ok(&["remind", "show", "--id", "op-1"], &env);
    assert!(
        after.contains("dead → ready") && after.contains("provider configured"),
        "{after}"
    );
    assert!(after.contains(" by ana: provider configured]"), "{after}");

    // Without --note, the audit names the batch and the operator, and no empty note.
    let email = [
        "redrive",
        "--channel",
        "email",
        "--reason",
        "rejected",
        "--max",
        "5",
        "--execute",
        "--yes",
        "--operator",
        "ana",
    ];
    let moved = ok(&email, &env);
    assert!(moved.contains("rejected"), "{moved}");
    let after = ok(&["remind", "show", "--id", "op-3"], &env);
    let audit = after.lines().find(|l| l.contains("[redrive "));
    let audit = audit.unwrap_or_else(|| panic!("no redrive in the history: {after}"));
    assert!(
        audit.contains("dead → ready [redrive rd") && audit.ends_with(" by ana]"),
        "{audit}"
    );
    assert!(!after.contains(": ]"), "{after}");

    ok(
        &[
            "remind",
            "create",
            "--id",
            "op-2",
            "--subscriber",
            "u-1",
            "--due-in",
            "3600",
            "--body",
            "later",
            "--sms",
            "+14155550123",
        ],
        &env,
    );
    let cancelled = ok(&["remind", "cancel", "--id", "op-2"], &env);
    assert!(
        cancelled.contains("sms    cancelled: it will not be sent")
            && cancelled.contains("reminder cancelled"),
        "{cancelled}"
    );
    let again = ok(&["remind", "cancel", "--id", "op-2"], &env);
    assert!(
        again.contains("sms    already cancelled") && again.contains("reminder already cancelled"),
        "{again}"
    );
    let shown = ok(&["remind", "show", "--id", "op-2"], &env);
    assert!(
        shown.contains("status       cancelled") && shown.contains("scheduled → cancelled"),
        "{shown}"
    );
    assert!(shown.contains("outcome      cancelled"), "{shown}");
}

/// An item the scheduler quarantined, or one that does not decode at all, is still shown:
/// its raw status, the reason naming the attribute, and what cannot be read.
#[tokio::test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn remind_show_explains_a_quarantined_item() {
    use aws_sdk_dynamodb::types::AttributeValue as Av;
    std::env::var("AWS_ENDPOINT_URL")
        .expect("AWS_ENDPOINT_URL is not set: run the emulator tests through infra/test.sh");
    let prefix = format!("show-{}", std::process::id());
    let mut env = BTreeMap::new();
    let up = ok(&["local", "up", "--prefix", &prefix], &env);
    for line in up.lines().filter_map(|l| l.strip_prefix("export ")) {
        let (k, v) = line.split_once('=').unwrap();
        env.insert(k.to_owned(), v.to_owned());
    }
    let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let dynamo = aws_sdk_dynamodb::Client::new(&sdk);
    let reason = "reminder_id: reminder_id contains a character outside [A-Za-z0-9._:-]";
    dynamo
        .put_item()
        .table_name(&env["REMINDERS_TABLE"])
        .item("reminder_id", Av::S("bad id".into()))
        .item("status", Av::S("invalid".into()))
        .item("invalid_reason", Av::S(reason.into()))
        .item("due_at", Av::N("1800000000000".into()))
        .send()
        .await
        .unwrap();
    let shown = ok(&["remind", "show", "--id", "bad id"], &env);
    assert!(shown.contains("status       invalid"), "{shown}");
    assert!(shown.contains(reason), "{shown}");
    assert!(shown.contains("unreadable"), "{shown}");
    let listed = ok(&["remind", "quarantined"], &env);
    assert!(
        listed.contains("bad id") && listed.contains(reason),
        "{listed}"
    );
}

/// `local up` resources for a test of its own; the variables it exports.
fn stack(prefix: &str) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    let up = ok(&["local", "up", "--prefix", prefix], &env);
    for line in up.lines().filter_map(|l| l.strip_prefix("export ")) {
        let (k, v) = line.split_once('=').unwrap();
        env.insert(k.to_owned(), v.to_owned());
    }
    for p in ["PUSH_PROVIDER", "EMAIL_PROVIDER", "SMS_PROVIDER"] {
        env.insert(p.into(), "none".into());
    }
    env
}

/// A valid reminder made by `remind create`, and its stored item.
async fn created(
    dynamo: &aws_sdk_dynamodb::Client,
    env: &BTreeMap<String, String>,
    id: &str,
) -> std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue> {
    let args = [
        "remind",
        "create",
        "--id",
        id,
        "--subscriber",
        "u-1",
        "--body",
        "hi",
    ];
    let mut args = args.to_vec();
    args.extend(["--push", "token-1"]);
    ok(&args, env);
    let got = dynamodb_get(dynamo, env, id).await;
    got.expect("the created item")
}

async fn dynamodb_get(
    dynamo: &aws_sdk_dynamodb::Client,
    env: &BTreeMap<String, String>,
    id: &str,
) -> Option<std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue>> {
    use aws_sdk_dynamodb::types::AttributeValue as Av;
    let got = dynamo
        .get_item()
        .table_name(&env["REMINDERS_TABLE"])
        .key("reminder_id", Av::S(id.into()))
        .consistent_read(true)
        .send()
        .await
        .unwrap();
    got.item
}

/// Items no shard query reaches, through `local run`, as an application in another language would
/// meet it: an item whose `due_shard` no query reads, and one whose `due_at` can never come due,
/// both written raw, end quarantined with a reason naming the field within one sweep (the first
/// run sweeps), and `remind quarantined` lists them.
#[tokio::test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn local_run_quarantines_items_no_query_reaches() {
    use aws_sdk_dynamodb::types::AttributeValue as Av;
    let env = stack(&format!("w6-{}", std::process::id()));
    let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let dynamo = aws_sdk_dynamodb::Client::new(&sdk);
    let valid = created(&dynamo, &env, "w6-valid").await;
    for (id, field, value) in [
        ("w6-shard-77", "due_shard", Av::N("77".into())),
        ("w6-never-due", "due_at", Av::N("1e30".into())),
    ] {
        let mut item = valid.clone();
        item.insert("reminder_id".into(), Av::S(id.into()));
        item.insert(field.into(), value);
        let put = dynamo.put_item().table_name(&env["REMINDERS_TABLE"]);
        put.set_item(Some(item)).send().await.unwrap();
    }
    let run = ok(
        &["local", "run", "--schedule-period", "1", "--for", "4"],
        &env,
    );
    assert!(run.contains("quarantined 2"), "{run}");
    let listed = ok(&["remind", "quarantined"], &env);
    for (id, field) in [("w6-shard-77", "due_shard"), ("w6-never-due", "due_at")] {
        let line = listed.lines().find(|l| l.contains(id));
        let line = line.unwrap_or_else(|| panic!("{id} not listed: {listed}"));
        assert!(line.contains(&format!("{field}:")), "{line}");
    }
}

/// A failing shard through `local run`: a shard whose due-index query keeps failing is reported in
/// the run's summary, naming the shard and the runs in a row, not only in a debug log.
#[tokio::test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn local_run_reports_a_failing_shard() {
    use aws_sdk_dynamodb::types::AttributeValue as Av;
    let env = stack(&format!("w7-{}", std::process::id()));
    let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let dynamo = aws_sdk_dynamodb::Client::new(&sdk);
    let valid = created(&dynamo, &env, "w7-valid").await;
    let Some(Av::N(shard)) = valid.get("due_shard").cloned() else {
        panic!("no due_shard: {valid:?}");
    };
    // Real DynamoDB refuses a text key attribute in the index; the emulator stores it and
    // then fails every query of the shard, as any lasting failure of one shard would.
    let mut text_due = valid.clone();
    text_due.insert("reminder_id".into(), Av::S("w7-text-due".into()));
    text_due.insert("due_at".into(), Av::S("soon".into()));
    let put = dynamo.put_item().table_name(&env["REMINDERS_TABLE"]);
    put.set_item(Some(text_due)).send().await.unwrap();
    let run = ok(
        &["local", "run", "--schedule-period", "1", "--for", "12"],
        &env,
    );
    let line = run
        .lines()
        .find(|l| l.starts_with(&format!("shard {shard}:")));
    let line = line.unwrap_or_else(|| panic!("shard {shard} not reported: {run}"));
    assert!(line.contains("due-index query failing ("), "{line}");
    assert!(line.contains(" in a row), its reminders wait: "), "{line}");
    // Reported on consecutive runs, counted: four runs in four seconds.
    let in_a_row: u32 = line
        .split_once("failing (")
        .and_then(|(_, rest)| rest.split_once(' '))
        .and_then(|(n, _)| n.parse().ok())
        .unwrap_or_else(|| panic!("no count: {line}"));
    assert!(in_a_row >= 2, "{line}");
    let json = ok(
        &[
            "local",
            "run",
            "--schedule-period",
            "1",
            "--for",
            "2",
            "--json",
        ],
        &env,
    );
    let last = json.lines().last().expect("a summary line");
    let summary: serde_json::Value = serde_json::from_str(last).unwrap();
    let failing = summary["failing_shards"]
        .as_array()
        .expect("failing_shards");
    assert_eq!(failing.len(), 1, "{summary}");
    assert_eq!(failing[0]["shard"].to_string(), shard, "{summary}");
}

/// `remindctl --stack NAME` (and `REMINDERS_STACK`): the stack's outputs configure every
/// command, with no table or queue variable set. The stack here is one on the emulator whose
/// outputs name the resources `local up` made, as the template's outputs name its own.
#[tokio::test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
async fn a_stack_name_configures_every_command() {
    let prefix = format!("stk-{}", std::process::id());
    let made = stack(&prefix);
    let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let mut outputs = serde_json::Map::new();
    for (output, var) in reminders::aws::config::STACK_OUTPUTS {
        let value = made.get(var).cloned().unwrap_or_else(|| match var {
            "RETENTION_SECS" => "1296000".into(),
            other => panic!("local up exported no {other}"),
        });
        outputs.insert(output.into(), serde_json::json!({ "Value": value }));
    }
    let template = serde_json::json!({
        "Resources": {"Marker": {"Type": "AWS::SQS::Queue"}},
        "Outputs": outputs,
    });
    let cf = aws_sdk_cloudformation::Client::new(&sdk);
    let create = cf.create_stack().stack_name(&prefix);
    create
        .template_body(template.to_string())
        .send()
        .await
        .unwrap();

    // Nothing but the emulator's own variables (the test's environment has no stack ones).
    let none = BTreeMap::new();
    let created = ok(
        &[
            "--stack",
            &prefix,
            "remind",
            "create",
            "--id",
            "stk-1",
            "--subscriber",
            "u-1",
            "--body",
            "hi",
            "--push",
            "token-1",
        ],
        &none,
    );
    assert!(created.contains("created stk-1"), "{created}");
    let dynamo = aws_sdk_dynamodb::Client::new(&sdk);
    let item = dynamodb_get(&dynamo, &made, "stk-1").await;
    assert!(item.is_some(), "created in another table than the stack's");
    let summary = ok(&["--stack", &prefix, "dlq", "summary"], &none);
    assert!(summary.contains("push"), "{summary}");
    let by_env: BTreeMap<String, String> =
        BTreeMap::from([("REMINDERS_STACK".to_owned(), prefix.clone())]);
    let shown = ok(&["remind", "show", "--id", "stk-1"], &by_env);
    assert!(shown.contains("stk-1"), "{shown}");

    // A variable already set to another value: refused, naming it, before anything runs.
    let clash = BTreeMap::from([("PUSH_DLQ_URL".to_owned(), "http://elsewhere/1/q".to_owned())]);
    let out = remindctl(&["--stack", &prefix, "dlq", "summary"], &clash, "");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("PUSH_DLQ_URL is set") && err.contains(&prefix),
        "{err}"
    );
    // The offline commands never ask AWS for the stack.
    let offline = BTreeMap::from([("REMINDERS_STACK".to_owned(), "no-such-stack".to_owned())]);
    let key = ok(
        &[
            "key",
            "--reminder",
            "r-1",
            "--subscriber",
            "u-1",
            "--channel",
            "email",
        ],
        &offline,
    );
    assert!(key.trim_start().starts_with("d1_"), "{key}");

    // An unknown stack: one line naming it.
    let out = remindctl(&["--stack", "no-such-stack", "dlq", "summary"], &none, "");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("no-such-stack"), "{err}");
}
