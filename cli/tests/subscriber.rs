//! `remindctl subscriber set | show` against the emulator, as an operator types them: tables
//! from `local up`, preferences set by flags and shown (text and a `--json` that `set --json`
//! takes back), bad values refused in one line naming the field; then the consumer applies
//! them under `local run`, and `remind show` tells why (opted out, held for quiet hours).

use std::collections::BTreeMap;
use std::process::Command;

mod common;
use common::{ok, remindctl};

/// A refused command: its exit code and its one line of error.
fn refused(args: &[&str], env: &BTreeMap<String, String>) -> (i32, String) {
    let out = remindctl(args, env);
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
    (out.status.code().unwrap(), stderr.trim_end().to_owned())
}

fn local_up(prefix: &str) -> BTreeMap<String, String> {
    std::env::var("AWS_ENDPOINT_URL")
        .expect("AWS_ENDPOINT_URL is not set: run the emulator tests through infra/test.sh");
    let mut env = BTreeMap::new();
    let up = ok(&["local", "up", "--prefix", prefix], &env);
    for line in up.lines().filter_map(|l| l.strip_prefix("export ")) {
        let (k, v) = line.split_once('=').unwrap();
        env.insert(k.to_owned(), v.to_owned());
    }
    assert!(env.contains_key("REMINDERS_TABLE"), "{up}");
    env
}

/// `HH:MM` in UTC, `minutes` from now (wrapping at midnight).
fn utc_clock(minutes: i64) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let m = (now / 60 + minutes).rem_euclid(24 * 60);
    format!("{:02}:{:02}", m / 60, m % 60)
}

#[test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
fn subscriber_preferences_are_set_shown_and_explained() {
    let env = local_up(&format!("subs-{}", std::process::id()));

    let none = ok(&["subscriber", "show", "--id", "u-1"], &env);
    assert!(none.contains("no preferences"), "{none}");
    assert_eq!(
        ok(&["subscriber", "show", "--id", "u-1", "--json"], &env),
        "null\n"
    );

    let set = ok(
        &[
            "subscriber",
            "set",
            "--id",
            "u-1",
            "--opt-out",
            "sms",
            "--quiet",
            "push=22:00-07:00@Europe/Paris",
            "--fallback",
            "push,email",
        ],
        &env,
    );
    assert!(set.starts_with("preferences set\n"), "{set}");
    let shown = ok(&["subscriber", "show", "--id", "u-1"], &env);
    assert!(shown.contains("opted out    sms"), "{shown}");
    assert!(
        shown.contains("quiet hours  push   22:00–07:00 Europe/Paris · ")
            && (shown.contains("quiet now, until") || shown.contains("not quiet now")),
        "{shown}"
    );
    assert!(shown.contains("fallback     push → email"), "{shown}");

    // `show --json` is the stored shape, and `set --json` takes it back unchanged.
    let json = ok(&["subscriber", "show", "--id", "u-1", "--json"], &env);
    let value: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(
        value,
        serde_json::json!({
            "opted_out": ["sms"],
            "quiet_hours": {"push": {"start": "22:00", "end": "07:00", "zone": "Europe/Paris"}},
            "fallback": ["push", "email"],
        })
    );
    ok(
        &["subscriber", "set", "--id", "u-2", "--json", json.trim()],
        &env,
    );
    assert_eq!(
        ok(&["subscriber", "show", "--id", "u-2", "--json"], &env),
        json
    );

    // Refused before anything is written, in one line naming the flag and the field.
    let (code, e) = refused(
        &[
            "subscriber",
            "set",
            "--id",
            "u-1",
            "--quiet",
            "push=22:00-07:00@Mars/Base",
        ],
        &env,
    );
    assert_eq!(code, 1);
    assert_eq!(
        e,
        "remindctl: --quiet: quiet_hours.push.zone: unknown IANA time zone"
    );
    let (code, e) = refused(
        &["subscriber", "set", "--id", "u-1", "--opt-out", "pigeon"],
        &env,
    );
    assert_eq!(code, 1);
    assert_eq!(
        e,
        "remindctl: --opt-out: opted_out[0]: unknown channel (expected push, email or sms)"
    );
    let (code, e) = refused(
        &[
            "subscriber",
            "set",
            "--id",
            "u-1",
            "--json",
            "{}",
            "--opt-out",
            "sms",
        ],
        &env,
    );
    assert_eq!(code, 2, "a usage error, as clap's are: {e}");
    assert_eq!(
        ok(&["subscriber", "show", "--id", "u-1", "--json"], &env),
        json
    );

    explained_by_remind_show(&env);
}

/// The consumer applies them: push opted out ends dead `opted_out`; email inside a quiet
/// window that holds now (from an hour ago to two hours on, UTC) is held until it ends.
fn explained_by_remind_show(env: &BTreeMap<String, String>) {
    let window = format!("email={}-{}@UTC", utc_clock(-60), utc_clock(120));
    ok(
        &[
            "subscriber",
            "set",
            "--id",
            "u-3",
            "--opt-out",
            "push",
            "--quiet",
            &window,
        ],
        env,
    );
    for (id, flag, to) in [
        ("q-push", "--push", "token-1"),
        ("q-mail", "--email", "a@example.com"),
    ] {
        ok(
            &[
                "remind",
                "create",
                "--id",
                id,
                "--subscriber",
                "u-3",
                "--body",
                "hi",
                "--fresh-secs",
                "86400",
                flag,
                to,
            ],
            env,
        );
    }
    let run_env = providers_off(env);
    ok(
        &["local", "run", "--schedule-period", "1", "--for", "8"],
        &run_env,
    );

    let push = ok(&["remind", "show", "--id", "q-push"], env);
    assert!(
        push.contains("1 delivery: dead (opted_out)")
            && push.contains("why        the subscriber opted out of this channel"),
        "{push}"
    );
    let mail = ok(&["remind", "show", "--id", "q-mail"], env);
    assert!(
        mail.contains("1 delivery: held for quiet hours until ")
            && mail.contains("why        held for the subscriber's quiet hours until ")
            && mail.contains("sending → deferred (held for the subscriber's quiet hours)"),
        "{mail}"
    );
    let json = ok(&["remind", "show", "--id", "q-mail", "--json"], env);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let ledger = &v["deliveries"][0]["ledger"];
    assert_eq!(ledger["status"], "deferred", "{json}");
    assert!(ledger["held_until"].is_string(), "{json}");
}

/// `subscriber erase` on the emulator, with `local up`'s suppression key: the subscriber's
/// reminder is cancelled and deleted, their preferences too; again, nothing is left to erase.
#[test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
fn subscriber_erase_cancels_and_deletes_and_is_idempotent() {
    let env = local_up(&format!("erase-{}", std::process::id()));
    let created = ok(
        &[
            "remind",
            "create",
            "--id",
            "er-1",
            "--subscriber",
            "u-8",
            "--body",
            "hi",
            "--push",
            "secret-token-8",
        ],
        &env,
    );
    assert!(created.contains("created er-1"), "{created}");
    ok(
        &["subscriber", "set", "--id", "u-8", "--opt-out", "sms"],
        &env,
    );
    let erased = ok(&["subscriber", "erase", "--id", "u-8", "--json"], &env);
    let v: serde_json::Value = serde_json::from_str(&erased).unwrap();
    assert_eq!(v["reminders_cancelled"], 1, "{v}");
    assert_eq!(v["reminders_deleted"], 1, "{v}");
    assert_eq!(v["preferences_deleted"], true, "{v}");
    assert_eq!(
        v["suppressions_lifted"], 0,
        "the key is there, nothing was suppressed: {v}"
    );
    assert_eq!(v["complete"], true, "{v}");
    assert!(!erased.contains("secret-token-8"), "{erased}");
    let none = ok(&["subscriber", "show", "--id", "u-8", "--json"], &env);
    assert_eq!(none, "null\n");
    let (code, err) = refused(&["remind", "show", "--id", "er-1"], &env);
    assert_ne!(code, 0, "{err}");
    let again = ok(&["subscriber", "erase", "--id", "u-8"], &env);
    assert!(again.contains("reminders deleted     0"), "{again}");
    assert!(again.contains("preferences           none"), "{again}");
}

/// `local run` until idle (its default), waiting for work due within 5 s.
const IDLE_RUN: [&str; 6] = [
    "local",
    "run",
    "--schedule-period",
    "1",
    "--idle-horizon",
    "5",
];

/// `env` with every provider off (`none`): a send then fails permanently, unless the
/// recipient's rules decide before it.
fn providers_off(env: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut run_env = env.clone();
    for p in ["PUSH_PROVIDER", "EMAIL_PROVIDER", "SMS_PROVIDER"] {
        run_env.insert(p.into(), "none".into());
    }
    run_env
}

/// `remindctl args`, failing the test when it has not finished within `secs`.
fn finishes_within(secs: u64, args: &[&str], env: &BTreeMap<String, String>) -> String {
    let mut child = Command::new(env!("CARGO_BIN_EXE_remindctl"))
        .args(args)
        .envs(env)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let until = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > until {
            let _ = child.kill();
            panic!("{args:?} still running after {secs} s");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// An idle run that held a delivery for quiet hours (beyond its idle horizon) stops, and its
/// summary says what is still pending and when it comes back; a second run, which cannot know
/// when that message comes back, stops too (rather than waiting out the quiet hours) and names it.
#[test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
fn an_idle_run_names_the_delivery_it_held_past_its_horizon() {
    let env = local_up(&format!("held-{}", std::process::id()));
    let window = format!("email={}-{}@UTC", utc_clock(-60), utc_clock(120));
    ok(
        &["subscriber", "set", "--id", "u-9", "--quiet", &window],
        &env,
    );
    ok(
        &[
            "remind",
            "create",
            "--id",
            "held-1",
            "--subscriber",
            "u-9",
            "--body",
            "hi",
            "--fresh-secs",
            "86400",
            "--email",
            "a@example.com",
        ],
        &env,
    );
    let run_env = providers_off(&env);
    let first = finishes_within(90, &IDLE_RUN, &run_env);
    assert!(
        first.contains("1 delivery still pending (below)")
            && first.contains("still pending: email: 1 delivery held until ")
            && first.contains("its message waits in the queue"),
        "{first}"
    );
    let mut json_args = IDLE_RUN.to_vec();
    json_args.push("--json");
    let second = finishes_within(90, &json_args, &run_env);
    let v: serde_json::Value = serde_json::from_str(second.trim()).unwrap();
    assert_eq!(v["idle"], true, "{v}");
    assert_eq!(
        v["held"],
        serde_json::json!([{"channel": "email", "messages": 1, "first_back": null}]),
        "{v}"
    );
}

/// SES feedback on the emulator: `local feedback` puts a permanent bounce and a complaint on the
/// feedback queue `local up` made, `local run` plays it with the feedback function's handler,
/// both addresses are suppressed, and the next reminder to one of them ends `suppressed`
/// without a send. A bad address is refused in one line.
#[test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
fn a_bounce_and_a_complaint_fed_locally_suppress_their_addresses() {
    let env = local_up(&format!("feedback-{}", std::process::id()));
    let run_env = providers_off(&env);
    let (code, e) = refused(&["local", "feedback", "--bounce", "nobody"], &env);
    assert!(code != 0 && e.starts_with("remindctl: --bounce: "), "{e}");
    let sent = ok(&["local", "feedback", "--bounce", "gone@example.org"], &env);
    assert!(
        sent.contains("a permanent bounce of g***@example.org"),
        "{sent}"
    );
    ok(
        &["local", "feedback", "--complaint", "angry@example.org"],
        &env,
    );
    let run = finishes_within(90, &IDLE_RUN, &run_env);
    assert!(
        run.contains("feedback: 2 addresses suppressed · 0 ignored · 0 not SES feedback"),
        "{run}"
    );
    let list = ok(&["suppression", "list"], &env);
    assert!(
        list.contains("email g***@example.org") && list.contains("by ses_bounce"),
        "{list}"
    );
    assert!(
        list.contains("by ses_complaint") && list.contains("2 suppressed"),
        "{list}"
    );

    ok(
        &[
            "remind",
            "create",
            "--id",
            "to-gone",
            "--subscriber",
            "u-5",
            "--body",
            "hi",
            "--email",
            "gone@example.org",
        ],
        &env,
    );
    finishes_within(90, &IDLE_RUN, &run_env);
    let shown = ok(&["remind", "show", "--id", "to-gone"], &env);
    assert!(
        shown.contains("dead (suppressed)") && shown.contains("by ses_bounce"),
        "{shown}"
    );
}
