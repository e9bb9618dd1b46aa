//! The demo's and the planner's report keep the recipient's choices apart from deaths: a
//! delivery that ends `opted_out` or `expired_quiet_hours` is not a failure for an operator to
//! fix, so the report lists it under "recipient's choice", and neither its "dead" count nor the
//! chart's red line (each sample's `dead`) includes it.

use std::collections::BTreeMap;
use std::time::Duration;

use reminders::domain::DeadReason;
use reminders_harness::sim::{simulate, SimConfig};

/// A block of the report: its total and its rows (reason, count).
type Block = (u64, BTreeMap<String, u64>);

/// The report's text, split into its "dead" block and its "recipient's choice" block: each
/// block's total and its rows (reason, count). Refuses a text whose blocks disagree with their
/// rows, or that lists a recipient's choice as dead.
fn blocks(text: &str) -> Result<[Block; 2], String> {
    let mut out: [Block; 2] = Default::default();
    let mut at = None;
    for line in text.lines() {
        let number = |s: &str| -> Result<u64, String> {
            s.split_whitespace()
                .next()
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| format!("no count in {line:?}"))
        };
        if let Some(rest) = line.strip_prefix("dead ") {
            out[0].0 = number(rest)?;
            at = Some(0);
        } else if let Some(rest) = line.strip_prefix("recipient's choice ") {
            out[1].0 = number(rest)?;
            at = Some(1);
        } else if let (Some(i), Some(row)) = (at, line.strip_prefix("  ")) {
            // A row may end with what its reason means: `rejected  14  (refused for good …)`.
            let row = row.split("  (").next().unwrap_or(row);
            let (reason, n) = row
                .trim()
                .rsplit_once(' ')
                .ok_or_else(|| format!("not a row: {line:?}"))?;
            out[i].1.insert(reason.trim().to_owned(), number(n)?);
        } else {
            at = None;
        }
    }
    for (i, (total, rows)) in out.iter().enumerate() {
        if rows.values().sum::<u64>() != *total {
            return Err(format!("block {i}: total {total}, rows {rows:?}"));
        }
    }
    for choice in [
        DeadReason::OptedOut,
        DeadReason::Suppressed,
        DeadReason::ExpiredQuietHours,
    ] {
        if out[0].1.contains_key(choice.as_str()) {
            return Err(format!("{} is reported as dead", choice.as_str()));
        }
    }
    Ok(out)
}

#[tokio::test]
async fn opted_out_and_quiet_hours_endings_are_the_recipients_choice_not_deaths() {
    let cfg = SimConfig {
        reminders: 1_500,
        window: Duration::from_secs(600),
        seed: 11,
        recipient_rules: true,
        ..SimConfig::default()
    };
    let report = simulate(&cfg, |_, _| {}).await;
    let opted_out = report.dead.get(&DeadReason::OptedOut).copied().unwrap_or(0);
    let quiet = report
        .dead
        .get(&DeadReason::ExpiredQuietHours)
        .copied()
        .unwrap_or(0);
    assert!(
        opted_out > 0 && quiet > 0,
        "the profile ends some deliveries each way: {:?}",
        report.dead
    );
    let failures: u64 = report
        .dead
        .iter()
        .filter(|(r, _)| !r.is_recipients_choice())
        .map(|(_, n)| n)
        .sum();

    let text = report.to_string();
    let [(dead, dead_rows), (chosen, chosen_rows)] =
        blocks(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(dead, failures, "{text}");
    assert_eq!(chosen_rows.get("opted_out"), Some(&opted_out), "{text}");
    assert_eq!(
        chosen_rows.get("expired_quiet_hours"),
        Some(&quiet),
        "{text}"
    );
    assert!(chosen >= opted_out + quiet, "{text}");
    assert!(dead_rows
        .keys()
        .all(|r| r != "opted_out" && r != "expired_quiet_hours"));

    // The chart's red line: failures only.
    let red: u64 = report.samples.iter().map(|s| s.dead).sum();
    assert!(
        red <= failures,
        "the chart counts {red} deaths, the report {failures} failures"
    );
}

/// The check above fires on a report that lists a choice as dead (the report before the split).
#[test]
fn a_report_listing_an_opt_out_as_dead_is_refused() {
    let old = "dead                5\n  opted_out           3\n  attempts_exhausted  2\n";
    let err = blocks(old).unwrap_err();
    assert!(err.contains("opted_out is reported as dead"), "{err}");
    let split = "dead                2\n  attempts_exhausted  2\n\
                 recipient's choice  3 (not sent, by the recipient's rules)\n  opted_out           3\n";
    let [(dead, _), (chosen, rows)] = blocks(split).unwrap();
    assert_eq!((dead, chosen, rows.get("opted_out")), (2, 3, Some(&3)));
}
