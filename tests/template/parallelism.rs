//! Changing `SchedulerParallelism` without a throttled run. During a stack update
//! CloudFormation updates the scheduler function (its reservation) in the update phase, but
//! deletes the schedules a smaller value leaves out only in the cleanup phase, after every
//! update: for a while the old schedules all fire into the new reservation. A deploy is safe
//! when that reservation is absent or covers the old schedules, and, once they are gone, the
//! new ones. The README's two deploys for lowering it are read from the README and checked
//! here, and a one-step lowering is seen to fail the same check.

use std::collections::BTreeMap;

use serde_norway::Value;

use super::iam::{condition, params, resolve};
use super::{resource, template};

/// Schedules deployed, and the function's reservation (`None`: none), for these parameters.
fn deployed(t: &Value, overrides: &BTreeMap<String, String>) -> (usize, Option<usize>) {
    let o: Vec<(&str, &str)> = overrides
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let p = params(t, &o);
    let schedules = t["Resources"]
        .as_mapping()
        .unwrap()
        .values()
        .filter(|r| r["Type"].as_str() == Some("AWS::Scheduler::Schedule"))
        .filter(|r| r["Condition"].as_str().is_none_or(|c| condition(t, &p, c)))
        .count();
    let reserved = resolve(
        t,
        &p,
        &resource(t, "SchedulerFunction")["ReservedConcurrentExecutions"],
    )
    .map(|v| match v {
        Value::String(s) => s.parse().expect("a number"),
        Value::Number(n) => n.as_u64().expect("a count") as usize,
        other => panic!("reservation {other:?}"),
    });
    (schedules, reserved)
}

/// One deploy from `from` to `to` (each the overrides in force): the old schedules fire into
/// the new reservation until the cleanup phase, the new ones after it.
fn deploy(
    t: &Value,
    from: &BTreeMap<String, String>,
    to: &BTreeMap<String, String>,
) -> Result<(), String> {
    let (old_schedules, _) = deployed(t, from);
    let (new_schedules, reserved) = deployed(t, to);
    match reserved {
        None => Ok(()),
        Some(r) if r < old_schedules => Err(format!(
            "{old_schedules} schedules fire into a reservation of {r} until the cleanup phase"
        )),
        Some(r) if r < new_schedules => Err(format!("{new_schedules} schedules, {r} reserved")),
        Some(_) => Ok(()),
    }
}

/// The README's numbered steps under "Lowering `SchedulerParallelism`": each step's
/// `Name=value` overrides, `<new N>` replaced by `n`.
fn readme_steps(n: u32) -> Vec<Vec<(String, String)>> {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("README.md at the project root");
    let section: Vec<&str> = readme
        .lines()
        .skip_while(|l| !l.starts_with("**Lowering `SchedulerParallelism`"))
        .take_while(|l| !l.starts_with("Raising it"))
        .collect();
    assert!(
        !section.is_empty(),
        "the README lost its lowering procedure"
    );
    section
        .iter()
        .filter(|l| l.starts_with(|c: char| c.is_ascii_digit()) && l.contains(". `"))
        .map(|l| {
            let code = l
                .split('`')
                .nth(1)
                .expect("a step's overrides in backticks");
            code.replace("<new N>", &n.to_string())
                .split_whitespace()
                .map(|kv| {
                    let (k, v) = kv.split_once('=').expect("Name=value");
                    (k.to_owned(), v.to_owned())
                })
                .collect()
        })
        .collect()
}

#[test]
fn lowering_scheduler_parallelism_in_the_readmes_two_deploys_never_throttles() {
    let t = template();
    for (old, new) in [(16, 1), (8, 2), (4, 3)] {
        let start: BTreeMap<String, String> =
            [("SchedulerParallelism".to_owned(), old.to_string())].into();
        let steps = readme_steps(new);
        assert_eq!(steps.len(), 2, "two deploys: {steps:?}");
        let mut state = start.clone();
        for step in &steps {
            let mut next = state.clone();
            next.extend(step.iter().cloned());
            deploy(&t, &state, &next).unwrap_or_else(|e| panic!("{old} → {new}, {step:?}: {e}"));
            state = next;
        }
        // The end state is the plain one: N schedules, N reserved.
        assert_eq!(deployed(&t, &state), (new as usize, Some(new as usize)));
        // The check fires on the one-step lowering the README warns against.
        let one_step: BTreeMap<String, String> =
            [("SchedulerParallelism".to_owned(), new.to_string())].into();
        let err = deploy(&t, &start, &one_step).unwrap_err();
        assert!(err.contains("until the cleanup phase"), "{err}");
    }
}

/// Raising it is one deploy: the new schedules name the function (`!GetAtt`), so
/// CloudFormation updates its reservation before it creates them.
#[test]
fn raising_scheduler_parallelism_is_one_deploy() {
    let t = template();
    for (name, r) in t["Resources"].as_mapping().unwrap() {
        if r["Type"].as_str() != Some("AWS::Scheduler::Schedule") {
            continue;
        }
        let target = &r["Properties"]["Target"]["Arn"];
        assert!(
            matches!(target, Value::Tagged(g) if g.tag == "GetAtt"
                && g.value.as_str() == Some("SchedulerFunction.Arn")),
            "{name:?} targets {target:?}: without the reference the schedule could be made first"
        );
    }
    let from = [("SchedulerParallelism".to_owned(), "2".to_owned())].into();
    let to = [("SchedulerParallelism".to_owned(), "16".to_owned())].into();
    deploy(&t, &from, &to).unwrap();
}
