//! The CLI as a user runs it: deterministic demo output, one-line errors.

use std::process::Command;

fn remindctl(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_remindctl"))
        .args(args)
        .env_remove("AWS_ENDPOINT_URL")
        .output()
        .expect("remindctl runs")
}

#[test]
fn demo_json_is_the_same_twice_for_a_seed() {
    let dir = std::env::temp_dir().join(format!("remindctl-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let chart = dir.join("chart.svg");
    let chart = chart.to_str().unwrap();
    let args = [
        "demo",
        "--reminders",
        "600",
        "--window-secs",
        "300",
        "--seed",
        "11",
        "--json",
        "--chart",
        chart,
    ];
    let a = remindctl(&args);
    let b = remindctl(&args);
    assert!(a.status.success(), "{}", String::from_utf8_lossy(&a.stderr));
    assert_eq!(a.stdout, b.stdout);
    let line = String::from_utf8(a.stdout).unwrap();
    assert_eq!(line.lines().count(), 1, "one JSON line");
    let v: serde_json::Value = serde_json::from_str(line.trim()).unwrap();
    assert_eq!(v["duplicates"], 0);
    assert!(!line.contains(chart), "no paths in the JSON");
    let svg = std::fs::read_to_string(chart).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("polyline"));
}

#[test]
fn bad_flags_and_missing_configuration_give_one_line() {
    for (args, needle) in [
        (vec!["demo", "--reminders", "lots"], "invalid value"),
        (vec!["demo", "--rate-429", "2"], "--rate-429"),
        (vec!["plan"], "--throughput"),
        (vec!["demo", "--rule", "FREQ=DAILY"], "--series"),
        (
            vec!["demo", "--series", "3", "--rule", "FREQ=HOURLY"],
            "--rule: rule part FREQ",
        ),
        (
            vec![
                "plan",
                "--throughput",
                "5",
                "--series",
                "3",
                "--rule",
                "FREQ=DAILY",
                "--zone",
                "subscriber",
            ],
            "--zone: name an IANA zone",
        ),
        (vec!["local", "up"], "AWS_ENDPOINT_URL"),
        (vec!["frobnicate"], "unrecognized subcommand"),
        (
            vec!["demo", "--stack", "x"],
            "--stack: `demo` needs no deployed stack",
        ),
        (
            vec!["remind", "show", "--idd", "x"],
            "(tip: a similar argument exists: '--id'); see '--help'",
        ),
        (
            vec!["remind", "show", "--id", "r-1", "--stack", "prod"],
            "--stack goes before the command: remindctl --stack NAME remind",
        ),
        (vec!["local", "up", "--shards", "0"], "--shards"),
        (vec!["local", "up", "--shards", "65"], "--shards"),
        (
            vec!["local", "run", "--schedule-period", "0"],
            "--schedule-period",
        ),
    ] {
        let out = remindctl(&args);
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

/// A series load through the planner as a user runs it: every occurrence of the day owed,
/// counted and delivered, in one JSON line.
#[test]
fn the_planner_takes_a_series_load() {
    let out = remindctl(&[
        "plan",
        "--series",
        "50",
        "--rule",
        "FREQ=DAILY;BYHOUR=9;BYMINUTE=0,30",
        "--zone",
        "Asia/Kolkata",
        "--throughput",
        "20",
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["simulated"]["reminders"], 100, "{v}");
    assert_eq!(v["simulated"]["delivered"], 100, "{v}");
    assert_eq!(v["simulated"]["duplicates"], 0, "{v}");
}

/// A series load through the demo as a user runs it: the report counts each occurrence of
/// the day as a reminder owed, every one settles, none twice; and the text says the same.
#[test]
fn the_demo_runs_a_series_load() {
    let chart = std::env::temp_dir().join(format!("remindctl-series-{}.svg", std::process::id()));
    let chart = chart.to_str().unwrap();
    let args = [
        "demo",
        "--series",
        "20",
        "--rule",
        "FREQ=DAILY;BYHOUR=9;BYMINUTE=0,30",
        "--zone",
        "Asia/Kolkata",
        "--chart",
        chart,
    ];
    let out = remindctl(&[&args[..], &["--json"]].concat());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // 20 subscribers, two occurrences each in the day: 40 owed, each settled once.
    assert_eq!(v["reminders"], 40, "{v}");
    let dead: u64 = v["dead"]
        .as_object()
        .unwrap()
        .values()
        .map(|n| n.as_u64().unwrap())
        .sum();
    let settled = ["delivered", "expired", "cancelled", "pending"]
        .iter()
        .map(|k| v[k].as_u64().unwrap())
        .sum::<u64>()
        + dead;
    assert_eq!(settled, 40, "{v}");
    assert!(v["delivered"].as_u64().unwrap() > 0, "{v}");
    assert_eq!(v["duplicates"], 0, "{v}");
    let text = remindctl(&args);
    assert!(text.status.success());
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(
        text.lines()
            .any(|l| l.split_whitespace().eq(["reminders", "40"])),
        "{text}"
    );
}

/// The system checker as a user runs it: one JSON line of zeros for the promises; a planted
/// fault fails the run and prints the command that replays the failing world.
#[test]
fn chaos_reports_one_json_line_and_names_the_seed_to_replay() {
    let ok = remindctl(&["chaos", "--seeds", "20", "--json"]);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let line = String::from_utf8(ok.stdout).unwrap();
    assert_eq!(line.trim().lines().count(), 1, "{line}");
    let v: serde_json::Value = serde_json::from_str(line.trim()).unwrap();
    assert_eq!(v["seeds"], 20);
    assert!(v["faults_injected"].as_u64().unwrap() > 100, "{v}");
    for field in [
        "lost",
        "duplicated",
        "stale_sends",
        "early_sends",
        "sends_after_cancel",
        "dead_without_copy",
        "extra_dlq_copies",
        "budget_exceeded",
        "unjustified_endings",
    ] {
        assert_eq!(v[field], 0, "{field}: {v}");
    }
    let planted = remindctl(&[
        "chaos",
        "--seeds",
        "20",
        "--json",
        "--plant",
        "drop-dead-letters",
    ]);
    assert!(!planted.status.success());
    let err = String::from_utf8(planted.stderr).unwrap();
    assert!(
        err.contains("replay: remindctl chaos --seeds 1 --from "),
        "{err}"
    );
    let bad = remindctl(&["chaos", "--plant", "nonsense"]);
    let err = String::from_utf8(bad.stderr).unwrap();
    assert!(
        !bad.status.success() && err.trim().lines().count() == 1,
        "{err}"
    );
}

/// The stack's variables, pointing at nothing (port 1): commands that validate before any
/// call fail on their own error, never on the network.
fn stack_env() -> Vec<(&'static str, &'static str)> {
    vec![
        ("REMINDERS_TABLE", "t-rem"),
        ("DELIVERIES_TABLE", "t-del"),
        ("PUSH_QUEUE_URL", "http://127.0.0.1:1/000000000000/p"),
        ("EMAIL_QUEUE_URL", "http://127.0.0.1:1/000000000000/e"),
        ("SMS_QUEUE_URL", "http://127.0.0.1:1/000000000000/s"),
        ("PUSH_DLQ_URL", "http://127.0.0.1:1/000000000000/pd"),
        ("EMAIL_DLQ_URL", "http://127.0.0.1:1/000000000000/ed"),
        ("SMS_DLQ_URL", "http://127.0.0.1:1/000000000000/sd"),
        ("AWS_ENDPOINT_URL", "http://127.0.0.1:1"),
        ("AWS_REGION", "us-east-1"),
        ("AWS_ACCESS_KEY_ID", "test"),
        ("AWS_SECRET_ACCESS_KEY", "test"),
    ]
}

/// `remindctl args` with only the stack's variables and `extra`.
fn against_stack(args: &[&str], extra: &[(&str, &str)]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_remindctl"))
        .args(args)
        .env_clear()
        .envs(stack_env())
        .envs(extra.iter().copied())
        .output()
        .unwrap()
}

/// Arguments, extra variables, and what the one error line must name.
type Case = (
    Vec<&'static str>,
    Vec<(&'static str, &'static str)>,
    &'static str,
);

/// Each validation gap an operator hit, closed with one line naming the flag or variable.
#[test]
fn every_operator_bad_input_names_its_flag_or_variable() {
    let providers = [
        ("PUSH_PROVIDER", "none"),
        ("EMAIL_PROVIDER", "none"),
        ("SMS_PROVIDER", "none"),
    ];
    let cases: Vec<Case> = vec![
        // A reminder with no recipient names the three flags.
        (
            vec![
                "remind",
                "create",
                "--id",
                "r-1",
                "--subscriber",
                "u-1",
                "--subject",
                "s",
                "--body",
                "b",
            ],
            vec![],
            "give --email, --sms or --push",
        ),
        // `config` passes only what every function would accept at cold start.
        (vec!["config"], vec![], "PUSH_PROVIDER"),
        (
            vec!["config"],
            [providers.as_slice(), &[("MAX_ATTEMPTS", "0")]].concat(),
            "MAX_ATTEMPTS",
        ),
        (
            vec!["config"],
            [providers.as_slice(), &[("LOOK_AHEAD_SECS", "soon")]].concat(),
            "LOOK_AHEAD_SECS",
        ),
        // A redrive window that cannot match anything is refused before any call.
        (
            vec![
                "redrive",
                "--channel",
                "push",
                "--reason",
                "rejected",
                "--max",
                "5",
                "--dead-after",
                "2000",
                "--dead-before",
                "1000",
                "--operator",
                "ana",
            ],
            vec![],
            "dead_after",
        ),
        (
            vec![
                "redrive",
                "--channel",
                "fax",
                "--reason",
                "rejected",
                "--max",
                "5",
            ],
            vec![],
            "--channel",
        ),
    ];
    for (args, extra, needle) in cases {
        let out = against_stack(&args, &extra);
        assert!(!out.status.success(), "{args:?} {extra:?}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?} {extra:?}: {err}");
        assert!(
            String::from_utf8(out.stdout).unwrap().is_empty(),
            "{args:?}: nothing printed before the error"
        );
    }
    // An executed redrive names someone: without --operator, $USER or $LOGNAME it is refused.
    let out = against_stack(
        &[
            "redrive",
            "--channel",
            "push",
            "--reason",
            "rejected",
            "--max",
            "5",
            "--execute",
            "--yes",
        ],
        &[],
    );
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(!out.status.success() && err.contains("--operator"), "{err}");
    // A negative --due-in is a time in the past, not clap's "unexpected argument '-1'": the
    // command gets as far as the (unreachable) table.
    let out = against_stack(
        &[
            "remind",
            "create",
            "--id",
            "x",
            "--subscriber",
            "s",
            "--body",
            "b",
            "--push",
            "tok",
            "--due-in",
            "-100",
        ],
        &[],
    );
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(!err.contains("unexpected argument"), "{err}");
    assert!(err.contains("reminders.insert"), "{err}");
}

/// The redrive confirmation names its reasons in plain words, and with stdin closed (no
/// answer) its line ends before the refusal: two lines, nothing moved, nothing on stdout.
#[test]
fn redrive_prompt_names_reasons_in_words_and_ends_its_line() {
    let out = against_stack(
        &[
            "redrive",
            "--channel",
            "push",
            "--reason",
            "attempts_exhausted",
            "--reason",
            "rejected",
            "--max",
            "5",
            "--execute",
            "--operator",
            "ana",
        ],
        &[],
    );
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(
        lines,
        [
            "redrive up to 5 rejected, attempts_exhausted message(s) from the push DLQ back to its queue? [y/N] ",
            "remindctl: not confirmed; nothing moved",
        ],
        "{err}"
    );
    assert!(String::from_utf8(out.stdout).unwrap().is_empty());
}

/// `chaos --help` says which counter each plant fires, for every plant there is.
#[test]
fn chaos_help_lists_which_plant_fires_which_counter() {
    let out = remindctl(&["chaos", "--help"]);
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    for plant in reminders_harness::chaos::Plant::ALL {
        let pair = format!("{} → {}", plant.name(), plant.fires());
        assert!(help.contains(&pair), "{pair} missing from:\n{help}");
    }
}

/// The demo's report explains itself: it opens with what it simulated (the load, the seed, the
/// provider's failure rates and outage), says what a death's reason means, defines the stage
/// table's columns, and closes with what to try next.
#[test]
fn the_demo_report_says_what_it_simulated_and_what_to_try_next() {
    let chart = std::env::temp_dir().join(format!("remindctl-report-{}.svg", std::process::id()));
    let out = remindctl(&[
        "demo",
        "--reminders",
        "2000",
        "--seed",
        "3",
        "--rate-permanent",
        "0.05",
        "--chart",
        chart.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let first = text.lines().next().unwrap();
    assert!(
        first.starts_with("simulated           2000 reminders due over 30 min"),
        "{text}"
    );
    for said in [
        "seed 3 (the same seed gives the same run)",
        "5% are refused for good",
        "sms down (503 to every call) from 10 min to 15 min into the run",
        "(refused for good by the provider: the profile's permanent failures)",
        "peak: the busiest moment's share of the stage's capacity",
        "limit s: seconds the",
        "1 schedule, 50 s deadline, at most 120000 reminders a run",
        "try next remindctl demo --seed 8",
        "docs/performance.md",
    ] {
        // As read: the report wraps its long lines under their label.
        let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(flat.contains(said), "{said:?} missing from:\n{text}");
    }
    let svg = std::fs::read_to_string(&chart).unwrap();
    assert!(
        svg.contains("Not delivered per minute"),
        "the deaths' own panel"
    );
}

/// Without credentials the SDK fails before it reaches the emulator, and says so as a failed
/// dispatch after asking the instance metadata service: the error says what to export instead.
#[test]
fn missing_credentials_say_what_to_export() {
    let home = std::env::temp_dir().join(format!("remindctl-nohome-{}", std::process::id()));
    std::fs::create_dir_all(&home).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_remindctl"))
        .args(["local", "up", "--prefix", "no-credentials"])
        .env_remove("AWS_ACCESS_KEY_ID")
        .env_remove("AWS_SECRET_ACCESS_KEY")
        .env_remove("AWS_SESSION_TOKEN")
        .env_remove("AWS_PROFILE")
        .env("HOME", &home)
        .env("AWS_CONFIG_FILE", home.join("config"))
        .env("AWS_SHARED_CREDENTIALS_FILE", home.join("credentials"))
        // Nothing listens there: the credentials fail first.
        .env("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
        .env("AWS_REGION", "us-east-1")
        // No instance metadata service to wait for.
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.starts_with("remindctl: no AWS credentials found")
            && err.contains("export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test"),
        "{err}"
    );
}

/// `--stack` is remindctl's own option, shown in its help and not in the help of the commands
/// that need no stack; the checker's help stays a screen.
#[test]
fn help_shows_stack_only_where_it_belongs_and_stays_short() {
    let help = |args: &[&str]| String::from_utf8(remindctl(args).stdout).unwrap();
    assert!(help(&["--help"]).contains("--stack <NAME>"));
    for command in ["demo", "chaos", "plan", "local"] {
        assert!(!help(&[command, "--help"]).contains("--stack"), "{command}");
    }
    let chaos = help(&["chaos", "--help"]);
    let about = chaos.split("Usage:").next().unwrap();
    assert!(about.lines().count() <= 12, "{about}");
}

/// The report's opening follows the profile it ran: another outage, or none.
#[test]
fn the_demo_report_opens_with_the_profile_it_ran() {
    let chart = std::env::temp_dir().join(format!("remindctl-outage-{}.svg", std::process::id()));
    let opening = |extra: &[&str]| {
        let mut args = vec!["demo", "--chart", chart.to_str().unwrap()];
        args.extend_from_slice(extra);
        let out = remindctl(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap();
        let head = text.split("\n\n").next().unwrap().to_owned();
        head.split_whitespace().collect::<Vec<_>>().join(" ")
    };
    let small = ["--reminders", "300", "--window-secs", "300"];
    let moved = opening(
        &[
            &small[..],
            &["--outage-start-secs", "90", "--outage-secs", "30"],
        ]
        .concat(),
    );
    assert!(
        moved.contains("sms down (503 to every call) from 90 s to 2 min into the run"),
        "{moved}"
    );
    let none = opening(&[&small[..], &["--no-outage"]].concat());
    assert!(!none.contains("down"), "{none}");
    let series = opening(&[
        "--reminders",
        "10",
        "--series",
        "5",
        "--rule",
        "FREQ=DAILY;BYHOUR=9;BYMINUTE=0",
    ]);
    assert!(
        series.contains("10 reminders and 5 occurrences of series"),
        "{series}"
    );
}

/// `remindctl` (or `remindctl remind`) with nothing after it shows that command's whole help,
/// the commands to choose from, not one squeezed line.
#[test]
fn a_command_without_its_subcommand_shows_its_help() {
    for args in [vec![], vec!["remind"]] {
        let out = remindctl(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let help = String::from_utf8(out.stderr).unwrap();
        assert!(
            help.contains("Usage:") && help.contains("Commands:"),
            "{args:?}: {help}"
        );
    }
}

/// An endpoint where nothing listens (the emulator stopped, its variables still exported): the
/// one error line says to start it, or to unset the variable for AWS.
#[test]
fn an_endpoint_that_does_not_answer_says_to_start_the_emulator() {
    let out = against_stack(&["remind", "show", "--id", "r-1"], &[]);
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("Nothing answers at the endpoint (AWS_ENDPOINT_URL=http://127.0.0.1:1)")
            && err.contains("infra/emulator.sh"),
        "{err}"
    );
}

/// `eval "$(remindctl local up)"` fails when `local up` does (here, nothing answers at the
/// endpoint): it prints `false` for the shell, never nothing, which would eval to success and
/// leave the tour without its variables.
#[test]
fn a_failed_local_up_fails_the_eval() {
    let out = against_stack(&["local", "up", "--prefix", "eval-check"], &[]);
    assert!(!out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), "false\n");
    let shell = format!(
        "eval \"$(AWS_ENDPOINT_URL=http://127.0.0.1:1 AWS_ACCESS_KEY_ID=test \
         AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1 {} local up 2>/dev/null)\"",
        env!("CARGO_BIN_EXE_remindctl")
    );
    let eval = Command::new("bash").args(["-c", &shell]).status().unwrap();
    assert!(!eval.success(), "the eval succeeded on a failed local up");
    // The same after remindctl's own option and its value.
    let staged = against_stack(&["--stack", "prod", "local", "up"], &[]);
    assert!(!staged.status.success());
    assert_eq!(String::from_utf8_lossy(&staged.stdout), "false\n");
    // Another command's failure prints nothing on stdout.
    let show = against_stack(&["remind", "show", "--id", "r-1"], &[]);
    assert!(show.stdout.is_empty(), "{:?}", show.stdout);
}

/// A table that does not exist on the emulator (restarted, `local up` not run again): the one
/// error line says to create them.
#[test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
fn a_table_missing_from_the_emulator_says_to_run_local_up() {
    let endpoint = std::env::var("AWS_ENDPOINT_URL").expect("AWS_ENDPOINT_URL");
    let table = format!("no-such-table-{}", std::process::id());
    let out = against_stack(
        &["remind", "show", "--id", "r-1"],
        &[("AWS_ENDPOINT_URL", &endpoint), ("REMINDERS_TABLE", &table)],
    );
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains(&format!("does not exist at {endpoint}"))
            && err.contains("remindctl local up"),
        "{err}"
    );
}
