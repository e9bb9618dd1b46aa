//! `remindctl series create | show | list | cancel` and `remind show` of an occurrence against
//! the emulator, as an operator types them: a series in Kathmandu (UTC+05:45) whose first
//! occurrence is five minutes away (so the create makes it at once), created, created again
//! unchanged, edited; shown as JSON; listed; a bad rule refused in one line; an occurrence
//! shown with its series; the series cancelled with its per-channel answers.

use std::collections::BTreeMap;

use reminders::clock::Timestamp;
use reminders::domain::series::occurrence_id;
use reminders::domain::SeriesId;
use serde_json::Value;

mod common;
use common::{now_ms, ok, remindctl};

/// The one-line error of a command that must fail.
fn refused(args: &[&str], env: &BTreeMap<String, String>) -> String {
    let out = remindctl(args, env);
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(!out.status.success(), "{args:?} succeeded");
    assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
    err
}

fn create_args<'a>(id: &'a str, rule: &'a str, starts_at: &'a str, body: &'a str) -> Vec<&'a str> {
    vec![
        "series",
        "create",
        "--id",
        id,
        "--subscriber",
        "u-cli",
        "--rule",
        rule,
        "--zone",
        "Asia/Kathmandu",
        "--starts-at",
        starts_at,
        "--fresh-secs",
        "600",
        "--subject",
        "Standup",
        "--body",
        body,
        "--email",
        "u-cli@example.org",
    ]
}

#[test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
fn series_commands_against_the_emulator() {
    std::env::var("AWS_ENDPOINT_URL")
        .expect("AWS_ENDPOINT_URL is not set: run the emulator tests through infra/test.sh");
    let prefix = format!("series-cli-{}", std::process::id());
    let mut env = BTreeMap::new();
    let up = ok(&["local", "up", "--prefix", &prefix], &env);
    for line in up.lines().filter_map(|l| l.strip_prefix("export ")) {
        let (k, v) = line.split_once('=').unwrap();
        env.insert(k.to_owned(), v.to_owned());
    }

    // The first occurrence five minutes from now, on the minute: inside the make-ahead, so
    // the create makes it. Kathmandu's wall clock is UTC+05:45 all year.
    let now = now_ms();
    let at = (now / 60_000 + 5) * 60_000;
    let local = (at / 60_000 + 5 * 60 + 45).rem_euclid(24 * 60);
    let (hour, minute) = (local / 60, local % 60);
    let rule = format!("FREQ=DAILY;BYHOUR={hour};BYMINUTE={minute}");
    // On the minute: a rule without BYSECOND takes its seconds from the start (RFC 5545).
    let starts_at = (now / 60_000 * 60_000).to_string();
    let at_text = Timestamp::from_millis(at).to_rfc3339();
    let occurrence = occurrence_id(
        &SeriesId::parse("s-cli-1").unwrap(),
        Timestamp::from_millis(at),
    )
    .to_string();

    let created = ok(&create_args("s-cli-1", &rule, &starts_at, "in 5"), &env);
    assert!(
        created.starts_with("created s-cli-1 (version 1, active)"),
        "{created}"
    );
    assert!(created.contains(&format!("next {at_text}")), "{created}");
    // The same flags again change nothing; another body is an edit.
    let again = ok(&create_args("s-cli-1", &rule, &starts_at, "in 5"), &env);
    assert!(
        again.starts_with("unchanged s-cli-1 (version 1, active)"),
        "{again}"
    );
    let edited = ok(&create_args("s-cli-1", &rule, &starts_at, "in 3"), &env);
    assert!(
        edited.starts_with("edited s-cli-1 (version 2, active)"),
        "{edited}"
    );

    let shown: Value =
        serde_json::from_str(&ok(&["series", "show", "--id", "s-cli-1", "--json"], &env)).unwrap();
    assert_eq!(shown["series_id"], "s-cli-1", "{shown}");
    assert_eq!(shown["subscriber_id"], "u-cli", "{shown}");
    assert_eq!(shown["status"], "active", "{shown}");
    assert_eq!(shown["version"], 2, "{shown}");
    assert_eq!(shown["rule"], rule, "{shown}");
    assert_eq!(shown["zone"], "Asia/Kathmandu", "{shown}");
    let next = &shown["next_occurrences"][0];
    assert_eq!(next["occurrence_at"], at_text, "{shown}");
    assert_eq!(next["reminder_id"], occurrence, "{shown}");
    let wall = next["wall_time"].as_str().unwrap();
    assert!(
        wall.contains(&format!("T{hour:02}:{minute:02}:00+05:45[Asia/Kathmandu]")),
        "{wall}"
    );
    let made = shown["occurrences"].as_array().unwrap();
    assert_eq!(made.len(), 1, "the create made the first: {shown}");
    assert_eq!(made[0]["reminder_id"], occurrence, "{shown}");
    assert_eq!(made[0]["occurrence_at"], at_text, "{shown}");
    assert_eq!(made[0]["status"], "scheduled", "{shown}");

    // The occurrence is a reminder that names its series and instant.
    let reminder = ok(&["remind", "show", "--id", &occurrence], &env);
    assert!(
        reminder.contains(&format!("series       s-cli-1 · occurrence at {at_text}")),
        "{reminder}"
    );
    let reminder: Value = serde_json::from_str(&ok(
        &["remind", "show", "--id", &occurrence, "--json"],
        &env,
    ))
    .unwrap();
    assert_eq!(reminder["series_id"], "s-cli-1", "{reminder}");
    assert_eq!(reminder["occurrence_at"], at_text, "{reminder}");

    // A rule outside the subset: one line naming the flag and the part; nothing written.
    let err = refused(
        &create_args("s-cli-bad", "FREQ=HOURLY", &starts_at, "x"),
        &env,
    );
    assert!(err.contains("--rule") && err.contains("FREQ"), "{err}");
    let err = refused(&["series", "show", "--id", "s-cli-bad"], &env);
    assert!(err.contains("no such series"), "{err}");

    // A second series of the subscriber: both listed, and a page of one says there is more.
    ok(
        &create_args("s-cli-2", "FREQ=WEEKLY;BYDAY=MO", &starts_at, "weekly"),
        &env,
    );
    let listed = ok(&["series", "list", "--subscriber", "u-cli"], &env);
    for (id, rule) in [
        ("s-cli-1", rule.as_str()),
        ("s-cli-2", "FREQ=WEEKLY;BYDAY=MO"),
    ] {
        let line = listed
            .lines()
            .find(|l| l.split_whitespace().next() == Some(id))
            .unwrap_or_else(|| panic!("{id} not listed: {listed}"));
        assert!(line.contains("active"), "{line}");
        assert!(
            line.contains(&format!("{rule} in Asia/Kathmandu")),
            "{line}"
        );
    }
    assert!(!listed.contains("(more"), "{listed}");
    let page = ok(
        &["series", "list", "--subscriber", "u-cli", "--limit", "1"],
        &env,
    );
    assert_eq!(page.lines().count(), 2, "{page}");
    assert!(page.contains("(more: raise --limit)"), "{page}");

    // The cancel answers per occurrence and channel; the series and its occurrence end
    // cancelled, and the series can no longer change.
    let cancelled = ok(&["series", "cancel", "--id", "s-cli-1"], &env);
    let mut lines = cancelled.lines();
    assert_eq!(
        lines.next(),
        Some("series s-cli-1 cancelled"),
        "{cancelled}"
    );
    let answer: Vec<&str> = lines.next().unwrap_or("").split_whitespace().collect();
    assert_eq!(
        answer,
        [at_text.as_str(), "email", "cancelled"],
        "{cancelled}"
    );
    let shown: Value =
        serde_json::from_str(&ok(&["series", "show", "--id", "s-cli-1", "--json"], &env)).unwrap();
    assert_eq!(shown["status"], "cancelled", "{shown}");
    assert_eq!(shown["occurrences"][0]["status"], "cancelled", "{shown}");
    let err = refused(&create_args("s-cli-1", &rule, &starts_at, "in 5"), &env);
    assert!(err.contains("cancelled: it can no longer change"), "{err}");

    // Without --starts-at the series starts this minute, not this millisecond: its
    // occurrences fall on the minute the rule names, second 0 (RFC 5545 takes the seconds of
    // a rule without BYSECOND from the start).
    let mut args = create_args("s-cli-3", "FREQ=DAILY;BYHOUR=9;BYMINUTE=15", "", "x");
    let at = args.iter().position(|a| *a == "--starts-at").unwrap();
    args.drain(at..at + 2);
    ok(&args, &env);
    let shown: Value =
        serde_json::from_str(&ok(&["series", "show", "--id", "s-cli-3", "--json"], &env)).unwrap();
    let next = shown["next_occurrences"][0]["occurrence_at"]
        .as_str()
        .unwrap_or_else(|| panic!("{shown}"));
    let wall = shown["next_occurrences"][0]["wall_time"].as_str().unwrap();
    assert!(
        next.ends_with(":00Z") || next.ends_with(":00.000Z"),
        "{next}"
    );
    assert!(wall.contains("T09:15:00+05:45"), "{wall}");
}
