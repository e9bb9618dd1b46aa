//! `remindctl plan --target-p99` as a user runs it: the `sam deploy --parameter-overrides`
//! line (template.yaml's names), the simulated answer with it, and provisioned mode only when
//! standard mode's scaling is what keeps the target out of reach.

use std::process::Command;

fn remindctl(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_remindctl"))
        .args(args)
        .env_remove("AWS_ENDPOINT_URL")
        .output()
        .expect("remindctl runs")
}

const STANDARD_OVERRIDES: [&str; 5] = [
    "SchedulerParallelism",
    "DueShards",
    "SchedulerMaxPerRun",
    "ConsumerMaxConcurrency",
    "ConsumerBatchSize",
];

/// The names of the `parameters` line's `--parameter-overrides`, each checked to be a Number
/// parameter of template.yaml with a whole value.
fn override_names(text: &str) -> Vec<String> {
    let line = text
        .lines()
        .find(|l| l.starts_with("parameters"))
        .unwrap_or_else(|| panic!("{text}"));
    let overrides = line.split("--parameter-overrides ").nth(1).unwrap();
    let template =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../template.yaml")).unwrap();
    let mut names = Vec::new();
    for pair in overrides.split_whitespace() {
        let (name, value) = pair.split_once('=').unwrap();
        assert!(value.parse::<u32>().is_ok(), "{pair}");
        assert!(
            template.contains(&format!("\n  {name}:\n    Type: Number")),
            "{name} is a template parameter"
        );
        names.push(name.to_owned());
    }
    names
}

/// A spike standard mode's scaling (five batches, 300 more a minute) keeps from its target:
/// the search goes to provisioned mode, and the line names its two parameters (template.yaml's)
/// after the standard ones.
#[test]
fn the_planner_turns_to_provisioned_pollers_only_when_the_ramp_holds_it_back() {
    let args = [
        "plan",
        "--reminders",
        "10000",
        "--throughput",
        "4000",
        "--target-p99",
        "6",
    ];
    let out = remindctl(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("p99 ≤ 6 s: met"), "{text}");
    let names = override_names(&text);
    assert_eq!(names[..5], STANDARD_OVERRIDES, "{text}");
    assert_eq!(
        names[5..],
        ["ConsumerMinPollers", "ConsumerMaxPollers"],
        "{text}"
    );
    assert!(
        text.contains("mappings            provisioned mode"),
        "{text}"
    );
    // Standard mode was tried first, and its ramp was what it fell behind on.
    let tried: Vec<&str> = text.lines().filter(|l| l.contains("  tried ")).collect();
    assert!(!tried[0].contains("ConsumerMinPollers"), "{text}");
    assert!(tried[0].contains("bottleneck consumer"), "{text}");
}

/// `plan --target-p99` as a user runs it: a `sam deploy --parameter-overrides` line whose
/// names are template.yaml's parameters, the simulated answer with them and each stage's
/// utilisation; the same as one JSON object with --json (and no progress bar on a pipe).
#[test]
fn the_planner_searches_parameters_for_a_target() {
    let args = [
        "plan",
        "--reminders",
        "2000",
        "--throughput",
        "500",
        "--target-p99",
        "30",
    ];
    let out = remindctl(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stderr.is_empty(), "no progress on a pipe");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("p99 ≤ 30 s: met"), "{text}");
    assert_eq!(
        override_names(&text),
        STANDARD_OVERRIDES,
        "standard mode: no pollers"
    );
    assert!(!text.contains("provisioned mode"), "{text}");
    for stage in [
        "scheduler",
        "due index",
        "queue",
        "consumer",
        "ledger",
        "provider",
    ] {
        assert!(
            text.lines().any(|l| l.starts_with(stage)),
            "{stage} row: {text}"
        );
    }
    assert!(text.contains("bottleneck:"), "{text}");

    let out = remindctl(&[&args[..], &["--json"]].concat());
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["met"], true, "{v}");
    assert!(
        v["plan"]["simulated"]["lateness_ms"]["p99"]
            .as_i64()
            .unwrap()
            <= 30_000
    );
    assert_eq!(
        v["plan"]["simulated"]["stages"]["stages"]
            .as_array()
            .unwrap()
            .len(),
        7
    );
    assert!(v["command"]
        .as_str()
        .unwrap()
        .starts_with("sam deploy --parameter-overrides "));
}
