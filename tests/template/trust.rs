//! Who may use what the stack hands to a service, as deployed: the alarm topic's key serves
//! CloudWatch only for this account's alarms in this region, the scheduler's invoke role is
//! assumed only by this stack's schedules, and the events role decrypts with the tables' key
//! only when the tables have a customer key. Each check is a function that names what is
//! wrong, run on the template and on a copy with the fault planted, so it is seen to fire.

use std::collections::BTreeMap;

use serde_norway::Value;

use super::iam::{condition, deployed_statements, iam_matches, params, resolve};
use super::template;

const ACCOUNT: &str = "123456789012";
const KEY: &str = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab";

fn text(v: &Value) -> Option<&str> {
    v.as_str()
}

/// The statements of a policy document, resolved for the parameters.
fn resolved_statements(t: &Value, p: &BTreeMap<String, String>, document: &Value) -> Vec<Value> {
    resolve(t, p, &document["Statement"])
        .and_then(|s| s.as_sequence().cloned())
        .unwrap_or_default()
}

/// A statement letting `service` in holds both confused-deputy conditions: the source account
/// is this one, and the source ARN matches `source_arn` (as written, wildcards included).
fn deputy_conditions(statements: &[Value], service: &str, source_arn: &str) -> Result<(), String> {
    let granting: Vec<&Value> = statements
        .iter()
        .filter(|s| text(&s["Effect"]) == Some("Allow"))
        .filter(|s| text(&s["Principal"]["Service"]) == Some(service))
        .collect();
    if granting.is_empty() {
        return Err(format!("no statement lets {service} in"));
    }
    for s in granting {
        let account = text(&s["Condition"]["StringEquals"]["aws:SourceAccount"]);
        if account != Some(ACCOUNT) {
            return Err(format!("{service}: aws:SourceAccount is {account:?}"));
        }
        let arn = text(&s["Condition"]["ArnLike"]["aws:SourceArn"]);
        if arn != Some(source_arn) {
            return Err(format!("{service}: aws:SourceArn is {arn:?}"));
        }
    }
    Ok(())
}

/// G4: the alarm topic's key lets CloudWatch use it for this account's alarms in this
/// region only.
fn alarm_key_check(t: &Value) -> Result<(), String> {
    let p = params(t, &[]);
    let key = &t["Resources"]["AlarmTopicKey"];
    if !condition(t, &p, key["Condition"].as_str().unwrap_or("")) {
        return Err("the default stack has no alarm topic key".into());
    }
    let statements = resolved_statements(t, &p, &key["Properties"]["KeyPolicy"]);
    deputy_conditions(
        &statements,
        "cloudwatch.amazonaws.com",
        &format!("arn:aws:cloudwatch:us-east-1:{ACCOUNT}:alarm:*"),
    )
}

/// G5: the scheduler's invoke role is assumed by this stack's schedules only, and every
/// schedule of the stack is one it trusts (a renamed schedule could not invoke).
fn schedule_trust_check(t: &Value) -> Result<(), String> {
    let p = params(t, &[("SchedulerParallelism", "16")]);
    let role = &t["Resources"]["ScheduleInvokeRole"]["Properties"];
    let statements = resolved_statements(t, &p, &role["AssumeRolePolicyDocument"]);
    let pattern =
        format!("arn:aws:scheduler:us-east-1:{ACCOUNT}:schedule/default/reminders-sched-*");
    deputy_conditions(&statements, "scheduler.amazonaws.com", &pattern)?;
    let mut schedules = 0;
    for (name, r) in t["Resources"].as_mapping().unwrap() {
        if r["Type"].as_str() != Some("AWS::Scheduler::Schedule") {
            continue;
        }
        schedules += 1;
        let group = r["Properties"]["GroupName"].as_str().unwrap_or("default");
        let schedule = resolve(t, &p, &r["Properties"]["Name"]).unwrap_or(Value::Null);
        let arn = format!(
            "arn:aws:scheduler:us-east-1:{ACCOUNT}:schedule/{group}/{}",
            schedule.as_str().unwrap_or("")
        );
        if !iam_matches(&pattern, &arn) {
            return Err(format!("{name:?} ({arn}) is not trusted by {pattern}"));
        }
    }
    if schedules != 16 {
        return Err(format!("{schedules} schedules, not 16"));
    }
    Ok(())
}

/// G7: the events role's `kms:Decrypt` exists only with a customer key, and then on that key
/// alone.
fn events_decrypt_check(t: &Value) -> Result<(), String> {
    for key in ["", KEY] {
        let p = params(t, &[("TableKmsKeyArn", key)]);
        let decrypt: Vec<Value> = deployed_statements(t, &p, "EventsRole")
            .into_iter()
            .filter(|s| format!("{:?}", s["Action"]).contains("kms:Decrypt"))
            .collect();
        match (key, decrypt.as_slice()) {
            ("", []) => {}
            ("", _) => return Err(format!("kms:Decrypt without a customer key: {decrypt:?}")),
            (_, [one]) if text(&one["Resource"]) == Some(key) => {}
            (_, _) => return Err(format!("with TableKmsKeyArn, kms:Decrypt is {decrypt:?}")),
        }
        // The key decrypts only what the tables were encrypted with.
        let sse = resolve(
            t,
            &p,
            &t["Resources"]["DeliveriesTable"]["Properties"]["SSESpecification"],
        )
        .unwrap_or(Value::Null);
        let used = text(&sse["KMSMasterKeyId"]).unwrap_or("");
        if used != key {
            return Err(format!(
                "the ledger is encrypted with {used:?}, not {key:?}"
            ));
        }
    }
    Ok(())
}

/// The first statement of a policy document whose text contains `marker`, to plant a fault in.
fn statement_mut<'a>(document: &'a mut Value, marker: &str) -> &'a mut Value {
    document["Statement"]
        .as_sequence_mut()
        .unwrap()
        .iter_mut()
        .find(|s| format!("{s:?}").contains(marker))
        .unwrap_or_else(|| panic!("no statement with {marker}"))
}

#[test]
fn the_alarm_key_serves_cloudwatch_only_for_this_accounts_alarms() {
    alarm_key_check(&template()).unwrap();
    fn policy(t: &mut Value) -> &mut Value {
        statement_mut(
            &mut t["Resources"]["AlarmTopicKey"]["Properties"]["KeyPolicy"],
            "cloudwatch.amazonaws.com",
        )
    }
    // Planted: no aws:SourceAccount.
    let mut t = template();
    let s = policy(&mut t);
    s["Condition"]["StringEquals"] = Value::Mapping(Default::default());
    let err = alarm_key_check(&t).unwrap_err();
    assert!(err.contains("aws:SourceAccount"), "{err}");
    // Planted: any CloudWatch resource, not the alarms.
    let mut t = template();
    let s = policy(&mut t);
    s["Condition"]["ArnLike"]["aws:SourceArn"] = Value::String("*".into());
    let err = alarm_key_check(&t).unwrap_err();
    assert!(err.contains("aws:SourceArn"), "{err}");
    // Planted: no condition at all.
    let mut t = template();
    let s = policy(&mut t);
    s.as_mapping_mut().unwrap().remove("Condition");
    assert!(alarm_key_check(&t).is_err());
}

#[test]
fn the_schedule_invoke_role_trusts_only_this_stacks_schedules() {
    schedule_trust_check(&template()).unwrap();
    fn trust(t: &mut Value) -> &mut Value {
        statement_mut(
            &mut t["Resources"]["ScheduleInvokeRole"]["Properties"]["AssumeRolePolicyDocument"],
            "scheduler.amazonaws.com",
        )
    }
    // Planted: trust on account only (the state before the fix).
    let mut t = template();
    let s = trust(&mut t);
    s["Condition"].as_mapping_mut().unwrap().remove("ArnLike");
    let err = schedule_trust_check(&t).unwrap_err();
    assert!(err.contains("aws:SourceArn"), "{err}");
    // Planted: any account's schedules.
    let mut t = template();
    let s = trust(&mut t);
    s["Condition"]
        .as_mapping_mut()
        .unwrap()
        .remove("StringEquals");
    let err = schedule_trust_check(&t).unwrap_err();
    assert!(err.contains("aws:SourceAccount"), "{err}");
    // Planted: a schedule renamed out of the trusted pattern.
    let mut t = template();
    t["Resources"]["SchedulerShare7"]["Properties"]["Name"] =
        Value::String("reminders-share-7".into());
    let err = schedule_trust_check(&t).unwrap_err();
    assert!(err.contains("SchedulerShare7"), "{err}");
}

#[test]
fn the_events_role_decrypts_only_with_a_customer_key() {
    events_decrypt_check(&template()).unwrap();
    fn statements(t: &mut Value) -> &mut Vec<Value> {
        t["Resources"]["EventsRole"]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]
            .as_sequence_mut()
            .unwrap()
    }
    let is_decrypt = |s: &Value| format!("{s:?}").contains("kms:Decrypt");
    // Planted: the statement without its `!If` (granted with the AWS managed key too).
    let mut t = template();
    let list = statements(&mut t);
    let at = list
        .iter()
        .position(is_decrypt)
        .expect("a kms:Decrypt statement");
    let Value::Tagged(tagged) = &list[at] else {
        panic!("the kms:Decrypt statement is an !If")
    };
    list[at] = tagged.value.as_sequence().unwrap()[1].clone();
    let err = events_decrypt_check(&t).unwrap_err();
    assert!(err.contains("without a customer key"), "{err}");
    // Planted: the statement gone (the state before the fix).
    let mut t = template();
    let list = statements(&mut t);
    list.retain(|s| !is_decrypt(s));
    let err = events_decrypt_check(&t).unwrap_err();
    assert!(err.contains("with TableKmsKeyArn"), "{err}");
}
