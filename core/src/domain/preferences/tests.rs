use std::time::Duration;

use proptest::prelude::*;
use serde_json::json;

use super::*;

const ISSUE_SHAPE: &str = r#"{"opted_out": ["sms"], "quiet_hours": {"push": {"start": "22:00",
    "end": "07:00", "zone": "Europe/Paris"}}, "fallback": ["push", "email"]}"#;

fn prefs(v: serde_json::Value) -> Result<Preferences, String> {
    serde_json::from_value(v).map_err(|e| e.to_string())
}

fn refused(v: serde_json::Value) -> PreferencesError {
    let wire: PreferencesWire = serde_json::from_value(v).unwrap();
    Preferences::try_from(wire).unwrap_err()
}

fn t(rfc3339: &str) -> Timestamp {
    Timestamp::parse_rfc3339(rfc3339).unwrap()
}

#[test]
fn the_issues_shape_round_trips() {
    let p: Preferences = serde_json::from_str(ISSUE_SHAPE).unwrap();
    assert_eq!(p.opted_out, [Channel::Sms].into());
    assert_eq!(p.fallback, [Channel::Push, Channel::Email]);
    let q = &p.quiet_hours[&Channel::Push];
    assert_eq!(
        (q.start.to_string(), q.end.to_string(), q.zone.name()),
        ("22:00".into(), "07:00".into(), "Europe/Paris")
    );
    let back = serde_json::to_value(&p).unwrap();
    let expected: serde_json::Value = serde_json::from_str(ISSUE_SHAPE).unwrap();
    assert_eq!(back, expected);
    assert_eq!(serde_json::from_value::<Preferences>(back).unwrap(), p);
}

#[test]
fn every_field_may_be_left_out() {
    let p = prefs(json!({})).unwrap();
    assert_eq!(p, Preferences::default());
    assert_eq!(
        serde_json::to_value(&p).unwrap(),
        json!({"opted_out": [], "quiet_hours": {}, "fallback": []})
    );
    // Repeated opt-outs say one thing.
    let p = prefs(json!({"opted_out": ["sms", "sms"]})).unwrap();
    assert_eq!(p.opted_out, [Channel::Sms].into());
}

#[test]
fn a_canonical_zone_name_is_stored() {
    let p = prefs(
        json!({"quiet_hours": {"sms": {"start": "21:30", "end": "08:15",
        "zone": "america/new_york"}}}),
    )
    .unwrap();
    let v = serde_json::to_value(&p).unwrap();
    assert_eq!(v["quiet_hours"]["sms"]["zone"], "America/New_York");
}

#[test]
fn each_refusal_names_its_field_and_never_echoes_the_value() {
    let qh = |start: &str, end: &str, zone: &str| json!({"quiet_hours": {"push": {"start": start, "end": end, "zone": zone}}});
    let cases = [
        (
            refused(qh("22:00", "07:00", "Secret/Place")),
            "quiet_hours.push.zone: unknown IANA time zone",
        ),
        (
            refused(qh("10pm", "07:00", "Europe/Paris")),
            "quiet_hours.push.start: must be HH:MM (00:00 to 23:59)",
        ),
        (
            refused(qh("22:00", "24:00", "Europe/Paris")),
            "quiet_hours.push.end: must be HH:MM (00:00 to 23:59)",
        ),
        (
            refused(json!({"fallback": ["push", "email", "email"]})),
            "fallback: lists email twice",
        ),
        (
            refused(json!({"fallback": ["push", "pigeon"]})),
            "fallback[1]: unknown channel (expected push, email or sms)",
        ),
        (
            refused(json!({"opted_out": ["fax"]})),
            "opted_out[0]: unknown channel (expected push, email or sms)",
        ),
        (
            refused(
                json!({"quiet_hours": {"telegram": {"start": "22:00", "end": "07:00",
                "zone": "UTC"}}}),
            ),
            "quiet_hours: keys must be channels (push, email or sms)",
        ),
    ];
    for (err, text) in cases {
        assert_eq!(err.to_string(), text);
        assert_eq!(format!("{}: {}", err.field(), err.requirement()), text);
        for secret in ["Secret", "10pm", "24:00", "pigeon", "fax", "telegram"] {
            assert!(!text.contains(secret), "{text}");
        }
    }
}

#[test]
fn a_refusal_through_serde_carries_the_field() {
    let err = prefs(
        json!({"quiet_hours": {"email": {"start": "22:00", "end": "07:00",
        "zone": "Nowhere/Land"}}}),
    )
    .unwrap_err();
    assert!(
        err.contains("quiet_hours.email.zone: unknown IANA time zone"),
        "{err}"
    );
    assert!(!err.contains("Nowhere"), "{err}");
}

#[test]
fn opt_out_wins_over_quiet_hours() {
    let p: Preferences = serde_json::from_value(json!({
        "opted_out": ["push"],
        "quiet_hours": {"push": {"start": "00:00", "end": "23:59", "zone": "UTC"}}
    }))
    .unwrap();
    let at = t("2026-06-10T12:00:00Z");
    assert_eq!(p.decide(Channel::Push, at, at), Decision::OptedOut);
    assert_eq!(p.decide(Channel::Email, at, at), Decision::Send);
}

#[test]
fn quiet_hours_hold_while_fresh_and_give_up_when_stale() {
    let p: Preferences = serde_json::from_str(ISSUE_SHAPE).unwrap();
    let at = t("2026-06-10T23:30:00+02:00");
    let seven = t("2026-06-11T07:00:00+02:00");
    let fresh = |h: u64| at.plus(Duration::from_secs(h * 3600));
    // Held until every clock within the margin is past the window's end (docs/design.md, "Clock
    // margin").
    let after = seven.plus(CLOCK_MARGIN);
    assert_eq!(
        p.decide(Channel::Push, at, fresh(12)),
        Decision::Hold { until: after }
    );
    assert_eq!(
        p.decide(Channel::Push, at, fresh(1)),
        Decision::QuietUntilStale
    );
    // Fresh by every clock within the margin when the hold ends: held; one millisecond less,
    // and it gives up (the one freshness rule).
    let edge = after.plus(CLOCK_MARGIN);
    assert_eq!(
        p.decide(Channel::Push, at, edge),
        Decision::Hold { until: after }
    );
    assert_eq!(
        p.decide(Channel::Push, at, edge.minus(Duration::from_millis(1))),
        Decision::QuietUntilStale
    );
    // A clock reading within the margin of either end of the window is held too.
    let ten = t("2026-06-10T22:00:00+02:00");
    let near = |t: Timestamp| p.decide(Channel::Push, t, fresh(12));
    assert_eq!(
        near(ten.minus(CLOCK_MARGIN)),
        Decision::Hold { until: after }
    );
    assert_eq!(
        near(ten.minus(CLOCK_MARGIN + Duration::from_millis(1))),
        Decision::Send
    );
    let later = fresh(12).plus(Duration::from_secs(3600));
    assert_eq!(
        p.decide(
            Channel::Push,
            seven.plus(CLOCK_MARGIN.saturating_sub(Duration::from_millis(1))),
            later
        ),
        Decision::Hold { until: after }
    );
    assert_eq!(p.decide(Channel::Push, after, later), Decision::Send);
    // Outside the window, or on a channel without quiet hours: sent.
    let noon = t("2026-06-11T12:00:00+02:00");
    assert_eq!(p.decide(Channel::Push, noon, fresh(1)), Decision::Send);
    assert_eq!(p.decide(Channel::Email, at, fresh(1)), Decision::Send);
}

#[test]
fn fallback_is_the_next_channel_in_the_order() {
    let p: Preferences = serde_json::from_str(ISSUE_SHAPE).unwrap();
    assert_eq!(p.fallback_after(Channel::Push), Some(Channel::Email));
    assert_eq!(p.fallback_after(Channel::Email), None);
    assert_eq!(p.fallback_after(Channel::Sms), None);
    let none = Preferences::default();
    for c in Channel::ALL {
        assert_eq!(none.fallback_after(c), None);
    }
}

#[test]
fn fallback_passes_over_channels_the_reminder_lacks_and_holds_later_ones_in_standby() {
    let p: Preferences =
        serde_json::from_value(json!({"fallback": ["push", "sms", "email"]})).unwrap();
    let all = |_: Channel| true;
    let no_sms = |c: Channel| c != Channel::Sms;
    let email_only = |c: Channel| c == Channel::Email;
    assert_eq!(p.fallback_for(Channel::Push, all), Some(Channel::Sms));
    assert_eq!(p.fallback_for(Channel::Push, no_sms), Some(Channel::Email));
    assert_eq!(
        p.fallback_for(Channel::Email, all),
        None,
        "last in the order"
    );
    // Standby: behind a listed channel only.
    assert!(!p.is_standby(Channel::Push, all), "first in the order");
    assert!(p.is_standby(Channel::Sms, all));
    assert!(p.is_standby(Channel::Email, no_sms), "behind push");
    assert!(
        !p.is_standby(Channel::Email, email_only),
        "nothing listed before it"
    );
    // No order: every channel is sent, none falls back.
    let none = Preferences::default();
    for c in Channel::ALL {
        assert!(!none.is_standby(c, all));
        assert_eq!(none.fallback_for(c, all), None);
    }
}

fn any_wire() -> impl Strategy<Value = PreferencesWire> {
    let channel = || prop::sample::select(vec!["push", "email", "sms", "fax"]);
    let time = prop::sample::select(vec!["22:00", "07:30", "00:00", "23:59", "7:00", "25:00"]);
    let zone = prop::sample::select(vec!["Europe/Paris", "Asia/Kolkata", "UTC", "Nowhere"]);
    let quiet = (time.clone(), time, zone).prop_map(|(s, e, z)| QuietHoursWire {
        start: s.into(),
        end: e.into(),
        zone: z.into(),
    });
    (
        prop::collection::vec(channel(), 0..4),
        prop::collection::btree_map(channel(), quiet, 0..3),
        prop::collection::vec(channel(), 0..4),
        prop::option::of(prop::sample::select(vec![
            "America/New_York",
            "australia/lord_howe",
            "Nowhere",
        ])),
    )
        .prop_map(|(o, q, f, z)| PreferencesWire {
            opted_out: o.into_iter().map(String::from).collect(),
            quiet_hours: q.into_iter().map(|(k, v)| (k.into(), v)).collect(),
            fallback: f.into_iter().map(String::from).collect(),
            time_zone: z.map(String::from),
        })
}

proptest! {
    #[test]
    fn what_is_accepted_round_trips_and_what_is_refused_names_a_field(w in any_wire()) {
        match Preferences::try_from(w) {
            Ok(p) => {
                let again: Preferences =
                    serde_json::from_value(serde_json::to_value(&p).unwrap()).unwrap();
                prop_assert_eq!(&again, &p);
                for c in Channel::ALL {
                    if let Some(next) = p.fallback_after(c) {
                        prop_assert_ne!(next, c);
                    }
                }
            }
            Err(e) => {
                let field = e.field();
                prop_assert!(
                    ["opted_out[", "quiet_hours", "fallback", "time_zone"].iter().any(|f| field.starts_with(f)),
                    "{}", field
                );
                let text = e.to_string();
                for leaked in ["fax", "Nowhere", "25:00"] {
                    prop_assert!(!text.contains(leaked), "{}", text);
                }
            }
        }
    }
}

#[test]
fn a_time_zone_is_kept_under_its_canonical_name_and_an_unknown_one_names_the_field() {
    let p: Preferences = serde_json::from_str(r#"{"time_zone": "america/new_york"}"#).unwrap();
    assert_eq!(
        p.time_zone.as_ref().map(|z| z.name()),
        Some("America/New_York")
    );
    let wire = serde_json::to_value(&p).unwrap();
    assert_eq!(wire["time_zone"], "America/New_York");
    let none = serde_json::to_value(Preferences::default()).unwrap();
    assert!(none.get("time_zone").is_none(), "{none}");
    let wire = PreferencesWire {
        time_zone: Some("Mars/Olympus".into()),
        ..PreferencesWire::default()
    };
    let e = Preferences::try_from(wire).unwrap_err();
    assert_eq!(e.field(), "time_zone");
    assert!(!e.to_string().contains("Mars"), "{e}");
}
