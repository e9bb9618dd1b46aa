//! `infra/quickstart.yaml`, the template a guided deploy asks ten questions of at most: it
//! nests `template.yaml` and passes its own parameters through, each one of template.yaml's
//! with the same type, allowed values, pattern and default, every other parameter at its
//! default. Its rules are template.yaml's over the parameters it asks (refused before the
//! nested stack is made; the others hold at their defaults), and it
//! gives back every output of template.yaml (`remindctl --stack` reads them). The check is
//! run on the file and on copies with a fault planted, so each of its refusals is seen.

use std::collections::BTreeSet;

use serde_norway::Value;

use super::iam::{condition_expr, params};
use super::{keys, template};

/// `sam deploy --guided` asks one question per parameter of the template it deploys.
const MAX_QUESTIONS: usize = 10;

fn quickstart() -> Value {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/infra/quickstart.yaml"
    ))
    .expect("infra/quickstart.yaml");
    serde_norway::from_str(&text).expect("infra/quickstart.yaml parses as YAML")
}

/// The parameters a value refers to (`!Ref`), at any depth.
fn refs(v: &Value) -> BTreeSet<String> {
    match v {
        Value::Tagged(t) if t.tag == "Ref" => {
            t.value.as_str().map(str::to_owned).into_iter().collect()
        }
        Value::Tagged(t) => refs(&t.value),
        Value::Sequence(items) => items.iter().flat_map(refs).collect(),
        Value::Mapping(m) => m.values().flat_map(refs).collect(),
        _ => BTreeSet::new(),
    }
}

fn is_ref(v: &Value, name: &str) -> bool {
    matches!(v, Value::Tagged(t) if t.tag == "Ref" && t.value.as_str() == Some(name))
}

fn check(q: &Value, t: &Value) -> Result<(), String> {
    let asked = keys(&q["Parameters"]);
    if asked.len() > MAX_QUESTIONS {
        return Err(format!(
            "{} parameters: a guided deploy asks each",
            asked.len()
        ));
    }
    for name in &asked {
        let (mine, theirs) = (&q["Parameters"][name], &t["Parameters"][name]);
        if theirs.is_null() {
            return Err(format!("{name} is not a parameter of template.yaml"));
        }
        for field in [
            "Type",
            "Default",
            "AllowedValues",
            "AllowedPattern",
            "MinValue",
            "MaxValue",
        ] {
            if mine[field] != theirs[field] {
                return Err(format!(
                    "{name}.{field} is {:?} here and {:?} in template.yaml",
                    mine[field], theirs[field]
                ));
            }
        }
    }
    // The "Start here" group is asked, whatever else is.
    let groups = &t["Metadata"]["AWS::CloudFormation::Interface"]["ParameterGroups"];
    let start = groups
        .as_sequence()
        .and_then(|g| g.first())
        .ok_or("template.yaml has no parameter groups")?;
    for p in start["Parameters"].as_sequence().into_iter().flatten() {
        let p = p.as_str().unwrap_or_default();
        if !asked.contains(p) {
            return Err(format!(
                "{p} is in template.yaml's \"Start here\" group and not asked"
            ));
        }
    }
    let app = &q["Resources"]["App"];
    if app["Type"].as_str() != Some("AWS::Serverless::Application")
        || app["Properties"]["Location"].as_str() != Some("../template.yaml")
    {
        return Err(format!("App does not nest ../template.yaml: {app:?}"));
    }
    let passed = &app["Properties"]["Parameters"];
    if keys(passed) != asked {
        return Err(format!(
            "passed {:?}, asked {asked:?}: each question, and nothing else",
            keys(passed)
        ));
    }
    for name in &asked {
        if !is_ref(&passed[name], name) {
            return Err(format!(
                "{name} is passed as {:?}, not as asked",
                passed[name]
            ));
        }
    }
    // Everything not asked must deploy at its default.
    for name in keys(&t["Parameters"]).difference(&asked) {
        if t["Parameters"][name]["Default"].is_null() {
            return Err(format!("{name} has no default and is not asked"));
        }
    }
    // template.yaml's rules over the parameters asked here, each as written there. A rule
    // over parameters only template.yaml has must hold at their defaults (the nested stack
    // gets no other value); one over both would refuse an answer only mid-deploy.
    let empty = serde_norway::Mapping::new();
    let rules = t["Rules"].as_mapping().unwrap_or(&empty);
    let defaults = params(t, &[]);
    for (name, rule) in rules {
        let used = refs(rule);
        if used.is_subset(&asked) {
            continue;
        }
        if !used.is_disjoint(&asked) {
            return Err(format!(
                "rule {name:?} refers to asked and unasked parameters"
            ));
        }
        let holds = rule["Assertions"].as_sequence().into_iter().flatten();
        if !holds
            .into_iter()
            .all(|a| condition_expr(t, &defaults, &a["Assert"]))
        {
            return Err(format!("rule {name:?} fails at the defaults"));
        }
    }
    let applicable: serde_norway::Mapping = rules
        .iter()
        .filter(|(_, rule)| refs(rule).is_subset(&asked))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if q["Rules"] != Value::Mapping(applicable) {
        return Err("the rules differ from template.yaml's".into());
    }
    let outputs = keys(&q["Outputs"]);
    if outputs != keys(&t["Outputs"]) {
        return Err(format!("outputs {outputs:?}, not template.yaml's"));
    }
    for name in &outputs {
        let v = &q["Outputs"][name]["Value"];
        let want = format!("App.Outputs.{name}");
        if !matches!(v, Value::Tagged(g) if g.tag == "GetAtt" && g.value.as_str() == Some(&want)) {
            return Err(format!("output {name} is {v:?}, not !GetAtt {want}"));
        }
    }
    Ok(())
}

#[test]
fn the_quick_start_asks_ten_questions_at_most_and_passes_each_through() {
    let (q, t) = (quickstart(), template());
    check(&q, &t).unwrap();
    let asked: BTreeSet<String> = keys(&q["Parameters"]);
    assert!(
        asked.len() <= MAX_QUESTIONS && !asked.is_empty(),
        "{asked:?}"
    );

    let planted = |plant: &dyn Fn(&mut Value), want: &str| {
        let mut q = quickstart();
        plant(&mut q);
        let err = check(&q, &t).expect_err(want);
        assert!(err.contains(want), "{want}: {err}");
    };
    // An eleventh question.
    planted(
        &|q| {
            q["Parameters"]["Tracing"] = t["Parameters"]["Tracing"].clone();
            q["Resources"]["App"]["Properties"]["Parameters"]["Tracing"] =
                q["Resources"]["App"]["Properties"]["Parameters"]["AlarmEmail"].clone();
        },
        "11 parameters",
    );
    // A default that drifted from template.yaml's.
    planted(
        &|q| q["Parameters"]["DeletionProtection"]["Default"] = Value::String("false".into()),
        "DeletionProtection.Default",
    );
    // Allowed values that drifted.
    planted(
        &|q| {
            q["Parameters"]["SmsProvider"]["AllowedValues"] =
                serde_norway::from_str("[sns, none]").unwrap()
        },
        "SmsProvider.AllowedValues",
    );
    // A question asked and not passed on (the nested stack would deploy its default).
    planted(
        &|q| {
            q["Resources"]["App"]["Properties"]["Parameters"]
                .as_mapping_mut()
                .unwrap()
                .remove("EmailSesFrom");
        },
        "each question, and nothing else",
    );
    // A parameter passed as a literal instead of the answer.
    planted(
        &|q| {
            q["Resources"]["App"]["Properties"]["Parameters"]["JwtIssuer"] =
                Value::String(String::new())
        },
        "JwtIssuer is passed as",
    );
    // A name template.yaml does not have.
    planted(
        &|q| {
            let p = q["Parameters"].as_mapping_mut().unwrap();
            let v = p.remove("AlarmTopicArn").unwrap();
            p.insert(Value::String("AlarmTopic".into()), v);
        },
        "AlarmTopic is not a parameter",
    );
    // A "Start here" question dropped.
    planted(
        &|q| {
            q["Parameters"]
                .as_mapping_mut()
                .unwrap()
                .remove("AlarmEmail");
        },
        "AlarmEmail is in template.yaml's \"Start here\" group",
    );
    // An output not given back.
    planted(
        &|q| {
            q["Outputs"].as_mapping_mut().unwrap().remove("ApiUrl");
        },
        "outputs",
    );
    // A rule over the questions asked, dropped.
    planted(
        &|q| {
            q["Rules"]
                .as_mapping_mut()
                .unwrap()
                .remove("AlarmsReachSomeone");
        },
        "the rules differ",
    );
    // A rule over a parameter not asked here (it would refer to nothing), copied in.
    planted(
        &|q| {
            let rule = t["Rules"]["ConsumerMinPollersIsNotOne"].clone();
            assert!(
                !rule.is_null(),
                "template.yaml's rule over an unasked parameter"
            );
            q["Rules"]["ConsumerMinPollersIsNotOne"] = rule;
        },
        "the rules differ",
    );
}

/// The quick start's rule checks on template.yaml's side, each with a fault planted there: a
/// rule over parameters it does not ask must hold at their defaults, and no rule may mix
/// asked and unasked parameters.
#[test]
fn a_rule_over_unasked_parameters_holds_at_their_defaults() {
    let q = quickstart();
    let mut t = template();
    t["Parameters"]["ConsumerMinPollers"]["Default"] = Value::Number(1.into());
    let err = check(&q, &t).unwrap_err();
    assert!(err.contains("fails at the defaults"), "{err}");

    let mut t = template();
    let mixed = "Assertions:\n  - Assert: !Or [!Equals [!Ref AlarmEmail, \"\"], !Equals [!Ref ConsumerMinPollers, \"0\"]]";
    t["Rules"]["Mixed"] = serde_norway::from_str(mixed).unwrap();
    let err = check(&q, &t).unwrap_err();
    assert!(err.contains("asked and unasked"), "{err}");
}
