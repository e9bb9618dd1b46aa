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
    let shown = ok(&["remind", "show", "--id", "op-1"], &env);
    assert!(shown.contains("no item: not enqueued yet"), "{shown}");
    assert!(
        !shown.contains("secret-token-1"),
        "recipients are never shown"
    );

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
    let refused = remindctl(&execute, &env, "n\n");
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("not confirmed"));
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
}

/// An item the scheduler quarantined, or one that does not decode at all, is still shown:
/// its raw status, the reason naming the attribute, and what cannot be read.
#[tokio::test]
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
