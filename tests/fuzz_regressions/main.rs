//! The fuzz targets on stable Rust, in CI. Every input kept under `fuzz/regressions/<target>/`
//! (crashes the fuzzers found, once fixed, and seeds worth keeping) is replayed, and each
//! target then runs a bounded number of generated cases: mutations of its corpus (kept
//! inputs and seeds built by the real encoders), byte-level and, for JSON, of the values
//! themselves, plus raw bytes. Same checks as the cargo-fuzz targets (`checks.rs`).

mod checks;

use proptest::prelude::*;
use serde_json::Value;

/// Generated cases per target per run.
const CASES: u32 = 20_000;

fn kept(target: &str) -> Vec<Vec<u8>> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/regressions")
        .join(target);
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("the regression folder exists") {
        let path = entry.unwrap().path();
        if path.is_file() && path.file_name().is_some_and(|f| f != ".gitkeep") {
            out.push(std::fs::read(&path).unwrap());
        }
    }
    out
}

fn replay(target: &str, check: fn(&[u8])) -> usize {
    let inputs = kept(target);
    for input in &inputs {
        check(input);
    }
    inputs.len()
}

#[test]
fn kept_inputs_pass_their_checks() {
    let total = replay("message", checks::message)
        + replay("reminder_item", checks::reminder_item)
        + replay("redrive_request", checks::redrive_request)
        + replay("retry_after", checks::retry_after)
        + replay("recipient", checks::recipient)
        + replay("ledger_item", checks::ledger_item)
        + replay("dlq_evidence", checks::dlq_evidence)
        + replay("sqs_event", checks::sqs_event);
    assert!(total >= 8, "only {total} kept inputs");
}

/// A DynamoDB item as the JSON the checks read (`N` as `"n:…"`).
fn item_json(
    item: std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue>,
) -> Vec<u8> {
    use aws_sdk_dynamodb::types::AttributeValue as A;
    fn value(v: A) -> Value {
        match v {
            A::S(s) => Value::String(s),
            A::N(n) => Value::String(format!("n:{n}")),
            A::Bool(b) => Value::Bool(b),
            A::L(l) => Value::Array(l.into_iter().map(value).collect()),
            A::M(m) => Value::Object(m.into_iter().map(|(k, v)| (k, value(v))).collect()),
            _ => Value::Null,
        }
    }
    let map: serde_json::Map<String, Value> =
        item.into_iter().map(|(k, v)| (k, value(v))).collect();
    serde_json::to_vec(&Value::Object(map)).unwrap()
}

/// Seeds the real encoders write, beside the kept inputs.
fn built(target: &str) -> Vec<Vec<u8>> {
    use reminders::clock::Timestamp;
    use reminders::domain::{Channel, DeadReason, DeliveryKey, DeliveryMessage};
    use reminders::ledger::{apply, Change, Ctx, LeaseToken};
    let r = reminders::domain::Reminder::new(
        reminders::domain::NewReminder {
            reminder_id: reminders::domain::ReminderId::parse("fz-1").unwrap(),
            subscriber_id: reminders::domain::SubscriberId::parse("s-1").unwrap(),
            due_at: Timestamp::from_millis(1_800_000_000_000),
            fresh_until: None,
            content: reminders::domain::Content::Text {
                subject: "s".into(),
                body: "b".into(),
            },
            recipients: vec![
                reminders::domain::Recipient::parse(Channel::Sms, "+14155550123").unwrap(),
            ],
        },
        std::time::Duration::from_secs(3600),
        std::time::Duration::from_secs(86_400),
    )
    .unwrap();
    let msg = DeliveryMessage::new(
        r.reminder_id.clone(),
        r.subscriber_id.clone(),
        Channel::Sms,
        1,
        r.due_at,
        r.fresh_until,
    );
    let key = DeliveryKey::derive(&r.reminder_id, &r.subscriber_id, Channel::Sms);
    let ctx = Ctx {
        key,
        now: r.due_at,
        expires_at: r.expires_at,
        origin: None,
    };
    let token = LeaseToken::generate(&mut rand::rng());
    let claim = Change::Claim {
        token: token.clone(),
        lease_expires_at: r.due_at.plus(std::time::Duration::from_secs(60)),
        payload_version: 1,
        policy: reminders::policy::RetryPolicy::default(),
    };
    let sending = apply(None, claim, &ctx).unwrap();
    let die = Change::Die {
        token: Some(token),
        reason: DeadReason::Rejected,
        spends_attempt: true,
        error: Some("http_400".into()),
        fallback_to: None,
        maybe_sent: false,
    };
    let dead = apply(Some(&sending), die, &ctx).unwrap();
    match target {
        "message" => vec![msg.encode().into_bytes()],
        "ledger_item" => [sending, dead]
            .iter()
            .map(|rec| item_json(reminders::aws::dynamo::encode_ledger_item(rec).unwrap()))
            .collect(),
        "dlq_evidence" => {
            let evidence = reminders::deadletter::Evidence {
                attempts: dead.attempt_count(),
                first_seen_at: Some(dead.first_seen_at()),
                dead_at: r.due_at,
                last_error: dead.last_error().map(str::to_owned),
                policy_version: Some("v2-fitted".into()),
                source_queue: "reminders-sms".into(),
            };
            let letter = reminders::deadletter::DeadLetter::new(DeadReason::Rejected, evidence);
            vec![serde_json::to_vec(&letter.to_attributes()).unwrap()]
        }
        "sqs_event" => {
            let received = reminders::ports::ReceivedMessage {
                message_id: "m-1".into(),
                receipt_handle: "h-1".into(),
                body: msg.encode(),
                attributes: Default::default(),
                system: [("ApproximateReceiveCount".to_owned(), "3".to_owned())].into(),
            };
            let arn = "arn:aws:sqs:us-east-1:123456789012:reminders-sms";
            let event = reminders::consumer::event::to_sqs_event(arn, &[received]);
            vec![serde_json::to_vec(&event).unwrap()]
        }
        _ => Vec::new(),
    }
}

/// Byte edits: (where, byte, kind) — overwrite, insert, delete, truncate, duplicate a run.
fn edit_bytes(mut data: Vec<u8>, edits: &[(usize, u8, u8)]) -> Vec<u8> {
    for &(at, byte, kind) in edits {
        let len = data.len();
        let i = if len == 0 { 0 } else { at % len };
        match kind % 5 {
            0 if len > 0 => data[i] = byte,
            1 => data.insert(i.min(len), byte),
            2 if len > 0 => {
                data.remove(i);
            }
            3 => data.truncate(i),
            4 if len > 0 => {
                let run: Vec<u8> = data[i..(i + usize::from(byte % 16)).min(len)].to_vec();
                data.splice(i..i, run);
            }
            _ => {}
        }
    }
    data
}

/// JSON edits: a value somewhere in the document replaced (a string, a number, a `n:` number
/// as text, null, a list, an empty object) or removed from its object.
fn edit_json(data: &[u8], edits: &[(usize, u8, u8)]) -> Option<Vec<u8>> {
    let mut doc: Value = serde_json::from_slice(data).ok()?;
    for &(at, byte, kind) in edits {
        let mut n = 0;
        let count = count_values(&doc);
        replace_nth(&mut doc, at % count.max(1), &mut n, kind, byte);
    }
    serde_json::to_vec(&doc).ok()
}

fn count_values(v: &Value) -> usize {
    1 + match v {
        Value::Array(a) => a.iter().map(count_values).sum(),
        Value::Object(m) => m.values().map(count_values).sum(),
        _ => 0,
    }
}

fn replacement(kind: u8, byte: u8) -> Option<Value> {
    Some(match kind % 8 {
        0 => Value::String(String::from_utf8_lossy(&[byte; 3]).into_owned()),
        1 => Value::from(i64::from(byte) - 128),
        2 => Value::String(format!("n:{}", u64::from(byte) << 40)),
        3 => Value::Null,
        4 => Value::Array(vec![Value::from(byte)]),
        5 => Value::Object(Default::default()),
        6 => Value::String("n:1e30".into()),
        _ => return None,
    })
}

fn replace_nth(v: &mut Value, target: usize, n: &mut usize, kind: u8, byte: u8) -> bool {
    if *n == target {
        // Half the edits keep the value's type (a string for a string, a number for a
        // number): the document stays decodable often enough to reach the deeper checks.
        let kept = match (&*v, kind % 2) {
            (Value::String(s), 0) if s.starts_with("n:") => {
                Some(Value::String(format!("n:{}", u64::from(byte) * 1_000_003)))
            }
            (Value::String(s), 0) => {
                let mut t = s.clone();
                t.push(char::from(byte.clamp(0x21, 0x7e)));
                Some(Value::String(t))
            }
            (Value::Number(_), 0) => Some(Value::from(u64::from(byte) * 7)),
            (Value::Bool(b), 0) => Some(Value::Bool(!b)),
            _ => None,
        };
        if let Some(new) = kept.or_else(|| replacement(kind / 2, byte)) {
            *v = new;
        }
        return true;
    }
    *n += 1;
    match v {
        Value::Array(a) => a.iter_mut().any(|x| replace_nth(x, target, n, kind, byte)),
        Value::Object(m) => {
            let keys: Vec<String> = m.keys().cloned().collect();
            for k in keys {
                if *n == target && kind % 8 == 7 {
                    m.remove(&k);
                    return true;
                }
                if replace_nth(m.get_mut(&k).unwrap(), target, n, kind, byte) {
                    return true;
                }
            }
            false
        }
        _ => false,
    }
}

fn inputs(target: &'static str) -> impl Strategy<Value = Vec<u8>> {
    let mut corpus = kept(target);
    corpus.extend(built(target));
    assert!(!corpus.is_empty(), "{target}: an empty corpus");
    let edits = prop::collection::vec((any::<usize>(), any::<u8>(), any::<u8>()), 1..4);
    let bytes = (prop::sample::select(corpus.clone()), edits.clone())
        .prop_map(|(seed, edits)| edit_bytes(seed, &edits));
    let json = (prop::sample::select(corpus), edits).prop_map(|(seed, edits)| {
        edit_json(&seed, &edits).unwrap_or_else(|| edit_bytes(seed, &edits))
    });
    prop_oneof![
        3 => json,
        2 => bytes,
        1 => prop::collection::vec(any::<u8>(), 0..256),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: CASES,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn fuzz_message(data in inputs("message")) { checks::message(&data) }

    #[test]
    fn fuzz_reminder_item(data in inputs("reminder_item")) { checks::reminder_item(&data) }

    #[test]
    fn fuzz_redrive_request(data in inputs("redrive_request")) { checks::redrive_request(&data) }

    #[test]
    fn fuzz_retry_after(data in inputs("retry_after")) { checks::retry_after(&data) }

    #[test]
    fn fuzz_recipient(data in inputs("recipient")) { checks::recipient(&data) }

    #[test]
    fn fuzz_ledger_item(data in inputs("ledger_item")) { checks::ledger_item(&data) }

    #[test]
    fn fuzz_dlq_evidence(data in inputs("dlq_evidence")) { checks::dlq_evidence(&data) }

    #[test]
    fn fuzz_sqs_event(data in inputs("sqs_event")) { checks::sqs_event(&data) }
}

/// The generated cases reach past the parsers: at least one in fifty decodes to a value the
/// deeper checks (round trips, intake) then run on. A generator of noise would pass every
/// check above and test nothing.
#[test]
fn generated_cases_reach_the_decoders() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    type Decodes = fn(&[u8]) -> bool;
    let decodes: [(&'static str, Decodes); 4] = [
        ("message", |d| {
            std::str::from_utf8(d)
                .is_ok_and(|t| reminders::domain::DeliveryMessage::decode(t).is_ok())
        }),
        ("ledger_item", |d| {
            serde_json::from_slice::<serde_json::Map<String, Value>>(d).is_ok_and(|_| {
                let item: std::collections::HashMap<_, _> = match serde_json::from_slice::<Value>(d)
                {
                    Ok(Value::Object(m)) => {
                        m.into_iter().map(|(k, v)| (k, to_attribute(v))).collect()
                    }
                    _ => return false,
                };
                reminders::aws::dynamo::decode_ledger_item(item).is_ok()
            })
        }),
        ("sqs_event", |d| {
            serde_json::from_slice::<aws_lambda_events::event::sqs::SqsEvent>(d)
                .is_ok_and(|e| !e.records.is_empty())
        }),
        ("dlq_evidence", |d| {
            serde_json::from_slice::<std::collections::BTreeMap<String, String>>(d).is_ok()
        }),
    ];
    for (target, decodes) in decodes {
        let strategy = inputs(target);
        let n = 2_000;
        let ok = (0..n)
            .filter(|_| decodes(&strategy.new_tree(&mut runner).unwrap().current()))
            .count();
        assert!(
            ok * 50 >= n,
            "{target}: only {ok} of {n} generated cases decode"
        );
        eprintln!("{target}: {ok} of {n} generated cases decode");
    }
}

fn to_attribute(v: Value) -> aws_sdk_dynamodb::types::AttributeValue {
    use aws_sdk_dynamodb::types::AttributeValue as A;
    match v {
        Value::Null => A::Null(true),
        Value::Bool(b) => A::Bool(b),
        Value::Number(n) => A::N(n.to_string()),
        Value::String(s) => match s.strip_prefix("n:") {
            Some(n) => A::N(n.to_owned()),
            None => A::S(s),
        },
        Value::Array(a) => A::L(a.into_iter().map(to_attribute).collect()),
        Value::Object(m) => A::M(m.into_iter().map(|(k, v)| (k, to_attribute(v))).collect()),
    }
}
