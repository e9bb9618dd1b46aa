//! The alarm on a newer writer's ledger status that outlives its deploy: the consumer holds
//! such a message [`NEWER_STATUS_WAIT`] at a time and counts `newer_status` at each look; after
//! a rollback nothing ends the loop, so a look in every window for longer than a deploy takes
//! pages. Checked on the template and on copies with a fault planted, so each refusal is seen.

use std::collections::BTreeMap;
use std::time::Duration;

use reminders::consumer::NEWER_STATUS_WAIT;
use serde_norway::Value;

use super::alarms::{alarm_metrics, alarms, rendered_from, text};
use super::template;

/// Longer than any deploy rolls out (a CloudFormation update of the functions takes minutes):
/// newer statuses seen for this long are a rollback's, not a deploy's.
const LONGER_THAN_A_DEPLOY: Duration = Duration::from_secs(30 * 60);

/// `Ok` when each channel has one alarm on its `newer_status` that pages once looks have been
/// seen in every window for longer than a deploy, and never for one look; otherwise what is
/// wrong.
fn newer_status_alarms(resources: &BTreeMap<String, Value>) -> Result<(), String> {
    let all = alarms(resources);
    for channel in ["push", "email", "sms"] {
        let on: Vec<&Value> = all
            .iter()
            .filter(|(_, a)| {
                alarm_metrics(a).iter().any(|m| {
                    m.0 == "Reminders/reminders"
                        && m.1 == "newer_status"
                        && m.2 == [("channel".to_owned(), channel.to_owned())]
                })
            })
            .map(|(_, a)| *a)
            .collect();
        let [a] = on[..] else {
            return Err(format!("{channel}: {} alarms on newer_status", on.len()));
        };
        let number = |field: &str| {
            a[field]
                .as_u64()
                .ok_or_else(|| format!("{channel}: {field} is {:?}", a[field]))
        };
        let (period, windows) = (number("Period")?, number("EvaluationPeriods")?);
        // A message held in a loop is looked at once per wait: a window of twice the wait
        // holds a look however the looks drift, so a loop breaches every window.
        if period < 2 * NEWER_STATUS_WAIT.as_secs() {
            return Err(format!("{channel}: period {period} s may hold no look"));
        }
        if number("DatapointsToAlarm")? != windows {
            return Err(format!("{channel}: pages before every window saw a look"));
        }
        if period * windows < LONGER_THAN_A_DEPLOY.as_secs() {
            return Err(format!(
                "{channel}: pages after {} s, within a deploy",
                period * windows
            ));
        }
        let said = |field: &str| text(&a[field]);
        let rule = (
            said("Statistic"),
            said("Threshold"),
            said("ComparisonOperator"),
            said("TreatMissingData"),
        );
        let want = ("Sum", "0", "GreaterThanThreshold", "notBreaching");
        if (
            rule.0.as_str(),
            rule.1.as_str(),
            rule.2.as_str(),
            rule.3.as_str(),
        ) != want
        {
            return Err(format!("{channel}: {rule:?}, not any look in a window"));
        }
    }
    Ok(())
}

#[test]
fn a_newer_status_seen_for_longer_than_a_deploy_pages_on_each_channel() {
    newer_status_alarms(&rendered_from(&template(), "reminders", &[])).unwrap();
}

/// The check above, on copies of the template with one fault each: it refuses every one.
#[test]
fn the_newer_status_check_refuses_each_planted_fault() {
    let refused = |plant: &dyn Fn(&mut Value), want: &str| {
        let mut t = template();
        plant(&mut t);
        let got = newer_status_alarms(&rendered_from(&t, "reminders", &[]));
        let err = got.expect_err(&format!("the plant for {want:?} passed"));
        assert!(err.contains(want), "{want:?}: {err}");
    };
    let set = |name: &'static str, field: &'static str, v: Value| {
        move |t: &mut Value| t["Resources"][name]["Properties"][field] = v.clone()
    };
    refused(
        &|t: &mut Value| {
            let r = t["Resources"].as_mapping_mut().unwrap();
            r.remove("SmsNewerStatusTooLong");
        },
        "sms: 0 alarms",
    );
    refused(
        &set("PushNewerStatusTooLong", "Period", Value::from(300)),
        "may hold no look",
    );
    refused(
        &set(
            "EmailNewerStatusTooLong",
            "DatapointsToAlarm",
            Value::from(1),
        ),
        "before every window",
    );
    refused(
        &set(
            "EmailNewerStatusTooLong",
            "EvaluationPeriods",
            Value::from(1),
        ),
        "before every window",
    );
    refused(
        &|t: &mut Value| {
            set("SmsNewerStatusTooLong", "EvaluationPeriods", Value::from(1))(t);
            set("SmsNewerStatusTooLong", "DatapointsToAlarm", Value::from(1))(t);
        },
        "within a deploy",
    );
    refused(
        &set("PushNewerStatusTooLong", "Threshold", Value::from(5)),
        "not any look",
    );
    refused(
        &set("PushNewerStatusTooLong", "MetricName", Value::from("newer")),
        "push: 0 alarms",
    );
}
