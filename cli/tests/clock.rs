//! The consumer's clock margin (docs/design.md, "Clock margin"), checked the way a user would, with
//! `remindctl chaos --skew-ms`. Every chaos world already runs its workers off by up to the
//! margin (the default, and the floors test's 300 worlds keep every promise with it); this
//! shows the checker catches a clock off by more than the margin allows.

use std::process::Command;

#[test]
fn chaos_workers_off_by_three_times_the_margin_break_the_freshness_promises() {
    let out = Command::new(env!("CARGO_BIN_EXE_remindctl"))
        .args(["chaos", "--seeds", "60", "--skew-ms", "3000", "--json"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "no world broke a promise: {err}");
    // The replay runs the same worlds: with the same skew.
    let replays: Vec<&str> = err.lines().filter(|l| l.contains("replay:")).collect();
    assert!(!replays.is_empty(), "{err}");
    assert!(
        replays.iter().all(|l| l.ends_with("--skew-ms 3000")),
        "{err}"
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let freshness = v["expired_while_fresh"].as_u64().unwrap() + v["stale_sends"].as_u64().unwrap();
    assert!(freshness > 0, "{v}");
    // Only the promises a clock decides break: nothing lost, doubled or sent after a cancel.
    for field in [
        "lost",
        "duplicated",
        "sends_after_cancel",
        "two_channels_sent",
    ] {
        assert_eq!(v[field], 0, "{field}: {v}");
    }
}
