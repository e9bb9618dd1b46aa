//! The redrive request (docs/design.md, "Dead letters and redrive") as the Lambda receives it:
//! `serde_json::from_str` then `validate` never panic, every field written is read back (defaults
//! where omitted), and `validate` accepts exactly the requests its rules allow.

use std::collections::BTreeSet;

use proptest::prelude::*;
use reminders::clock::Timestamp;
use reminders::domain::{Channel, DeadReason};
use reminders::redrive::request::MAX_MESSAGES_LIMIT;
use reminders::redrive::{RedriveRequest, RequestError};
use serde_json::{json, Map, Value};

/// The fields an operator writes; `None` leaves the field out.
#[derive(Debug, Clone)]
struct Fields {
    channel: Channel,
    reasons: BTreeSet<DeadReason>,
    times: [Option<i64>; 4],
    max_messages: u32,
    max_per_second: Option<u32>,
    dry_run: Option<bool>,
    operator: String,
    note: Option<String>,
    extend_freshness_secs: Option<u64>,
    accept_duplicates: Option<bool>,
}

const TIME_FIELDS: [&str; 4] = [
    "first_seen_after",
    "first_seen_before",
    "dead_after",
    "dead_before",
];

fn fields() -> impl Strategy<Value = Fields> {
    let reasons =
        prop::collection::btree_set(prop::sample::select(DeadReason::ALL.to_vec()), 0..=3);
    let counts = (
        prop_oneof![
            0u32..=12,
            MAX_MESSAGES_LIMIT - 2..=MAX_MESSAGES_LIMIT + 2,
            any::<u32>()
        ],
        prop::option::of(prop_oneof![0u32..=3, any::<u32>()]),
    );
    let text = (
        prop_oneof!["[a-z]{1,8}", "[ \t\n]{0,3}", "\\PC{0,12}"],
        prop::option::of(prop_oneof!["\\PC{0,20}", "\\PC{498,502}", "é{499,501}"]),
    );
    let options = (
        [(); 4].map(|_| prop::option::of(any::<i64>())),
        prop::option::of(any::<bool>()),
        // Around both ends of the allowed extension, and anything.
        prop::option::of(prop_oneof![
            0u64..4,
            31_622_398u64..31_622_403,
            any::<u64>()
        ]),
        prop::option::of(any::<bool>()),
    );
    let channel = prop::sample::select(Channel::ALL.to_vec());
    (channel, reasons, counts, text, options).prop_map(
        |(channel, reasons, (max_messages, max_per_second), (operator, note), o)| Fields {
            channel,
            reasons,
            times: o.0,
            max_messages,
            max_per_second,
            dry_run: o.1,
            operator,
            note,
            extend_freshness_secs: o.2,
            accept_duplicates: o.3,
        },
    )
}

impl Fields {
    fn to_json(&self) -> String {
        let mut m = Map::new();
        m.insert("channel".into(), json!(self.channel));
        m.insert("reasons".into(), json!(self.reasons));
        m.insert("max_messages".into(), json!(self.max_messages));
        m.insert("operator".into(), json!(self.operator));
        for (name, t) in TIME_FIELDS.iter().zip(self.times) {
            t.map(|t| m.insert((*name).into(), json!(t)));
        }
        let optional = [
            ("max_per_second", self.max_per_second.map(Value::from)),
            ("dry_run", self.dry_run.map(Value::from)),
            ("note", self.note.clone().map(Value::from)),
            (
                "extend_freshness_secs",
                self.extend_freshness_secs.map(Value::from),
            ),
            ("accept_duplicates", self.accept_duplicates.map(Value::from)),
        ];
        for (name, value) in optional {
            value.map(|v| m.insert(name.into(), v));
        }
        Value::Object(m).to_string()
    }

    /// The request's rules, restated: the first one broken, or none.
    fn broken_rule(&self) -> Option<RequestError> {
        let note_chars = self.note.as_deref().unwrap_or("").chars().count();
        let ambiguous = self.reasons.contains(&DeadReason::Ambiguous);
        let rules = [
            (self.reasons.is_empty(), RequestError::NoReasons),
            (
                self.max_messages == 0 || self.max_messages > 10_000,
                RequestError::BadMax,
            ),
            (self.max_per_second == Some(0), RequestError::BadRate),
            (self.operator.trim().is_empty(), RequestError::NoOperator),
            (note_chars > 500, RequestError::LongNote),
            (
                ambiguous && self.accept_duplicates != Some(true),
                RequestError::AmbiguousNeedsConsent,
            ),
            (
                self.extend_freshness_secs
                    .is_some_and(|s| !(2..=31_622_400).contains(&s)),
                RequestError::BadExtension,
            ),
            (
                empty(self.times[2], self.times[3]),
                RequestError::EmptyWindow("dead_after/dead_before"),
            ),
            (
                empty(self.times[0], self.times[1]),
                RequestError::EmptyWindow("first_seen_after/first_seen_before"),
            ),
        ];
        rules
            .into_iter()
            .find(|(broken, _)| *broken)
            .map(|(_, e)| e)
    }
}

/// A time window whose `after` is not before its `before`: nothing can match.
fn empty(after: Option<i64>, before: Option<i64>) -> bool {
    matches!((after, before), (Some(a), Some(b)) if a >= b)
}

fn parse(body: &str) -> Result<RedriveRequest, serde_json::Error> {
    serde_json::from_str::<RedriveRequest>(body)
}

/// JSON objects with the request's field names (and one stray) holding values of any type.
fn request_shaped() -> impl Strategy<Value = String> {
    let names: Vec<&str> = [
        "channel",
        "reasons",
        "max_messages",
        "max_per_second",
        "dry_run",
        "operator",
        "note",
        "extend_freshness_secs",
        "accept_duplicates",
        "stray",
    ]
    .into_iter()
    .chain(TIME_FIELDS)
    .collect();
    let value = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        "\\PC{0,6}".prop_map(Value::from),
        Just(json!("sms")),
        Just(json!(["rejected", "ambiguous"])),
        Just(json!(["nope"])),
        Just(json!([])),
        Just(json!({})),
    ];
    prop::collection::vec((prop::sample::select(names), value), 0..14).prop_map(|e| {
        Value::Object(e.into_iter().map(|(k, v)| (k.into(), v)).collect()).to_string()
    })
}

proptest! {
    #![proptest_config(crate::cheap())]

    #[test]
    fn parse_and_validate_never_panic_on_any_text(body in any::<String>()) {
        if let Ok(request) = parse(&body) {
            let _ = request.validate();
        }
    }

    /// Request-shaped input parses or not, and `validate` answers, without a panic; a
    /// request that parses has all its required fields.
    #[test]
    fn parse_and_validate_never_panic_on_request_shaped_json(body in request_shaped()) {
        if let Ok(request) = parse(&body) {
            let v: Value = serde_json::from_str(&body).unwrap();
            for required in ["channel", "reasons", "max_messages", "operator"] {
                prop_assert!(v.get(required).is_some(), "parsed without {}", required);
            }
            prop_assert!(v.get("stray").is_none(), "unknown field accepted");
            let _ = request.validate();
        }
    }

    /// Every field written is read back; what is left out takes its documented default.
    #[test]
    fn fields_round_trip_with_defaults(f in fields()) {
        let r = parse(&f.to_json()).expect("a well-formed request parses");
        prop_assert_eq!((r.channel, &r.reasons, r.max_messages), (f.channel, &f.reasons, f.max_messages));
        let times = [r.first_seen_after, r.first_seen_before, r.dead_after, r.dead_before];
        prop_assert_eq!(times, f.times.map(|t| t.map(Timestamp::from_millis)));
        prop_assert_eq!(r.max_per_second, f.max_per_second.unwrap_or(10));
        prop_assert_eq!(r.dry_run, f.dry_run.unwrap_or(true));
        prop_assert_eq!(&r.operator, &f.operator);
        prop_assert_eq!(&r.note, f.note.as_deref().unwrap_or(""));
        prop_assert_eq!(r.extend_freshness_secs, f.extend_freshness_secs);
        prop_assert_eq!(r.accept_duplicates, f.accept_duplicates.unwrap_or(false));
    }

    /// `validate` refuses exactly the requests that break a rule, naming the first broken.
    #[test]
    fn validate_enforces_exactly_the_rules(f in fields()) {
        let r = parse(&f.to_json()).expect("a well-formed request parses");
        prop_assert_eq!(r.validate().err(), f.broken_rule());
    }
}
