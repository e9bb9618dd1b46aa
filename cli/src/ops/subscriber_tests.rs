use super::*;

fn args(flags: &[&str]) -> Result<SetArgs, String> {
    use clap::Parser;
    #[derive(Debug, clap::Parser)]
    struct Cli {
        #[command(flatten)]
        set: SetArgs,
    }
    let mut argv = vec!["set", "--id", "u-1"];
    argv.extend_from_slice(flags);
    Cli::try_parse_from(argv)
        .map(|c| c.set)
        .map_err(|e| e.to_string())
}

fn parsed(flags: &[&str]) -> Result<Preferences, String> {
    preferences(&args(flags)?)
}

const ISSUE: &str = r#"{"opted_out":["sms"],"quiet_hours":{"push":{"start":"22:00","end":"07:00","zone":"Europe/Paris"}},"fallback":["push","email"]}"#;

#[test]
fn the_flags_and_the_json_give_the_same_preferences() {
    let flags = parsed(&[
        "--opt-out",
        "sms",
        "--quiet",
        "push=22:00-07:00@Europe/Paris",
        "--fallback",
        "push,email",
    ])
    .unwrap();
    let json = parsed(&["--json", ISSUE]).unwrap();
    assert_eq!(flags, json);
    assert_eq!(serde_json::to_string(&Some(&flags)).unwrap(), ISSUE);
    assert_eq!(parsed(&[]).unwrap(), Preferences::default());
}

#[test]
fn a_bad_value_names_its_flag_and_field() {
    let cases: [(&[&str], &str); 10] = [
        (
            &["--opt-out", "push", "--opt-out", "pigeon"],
            "--opt-out: opted_out[1]: unknown channel (expected push, email or sms)",
        ),
        (
            &["--quiet", "push=22:00-07:00@Mars/Olympus"],
            "--quiet: quiet_hours.push.zone: unknown IANA time zone",
        ),
        (
            &["--quiet", "push=22:00-7:00@UTC"],
            "--quiet: quiet_hours.push.end: must be HH:MM (00:00 to 23:59)",
        ),
        (
            &["--quiet", "fax=22:00-07:00@UTC"],
            "--quiet: quiet_hours: keys must be channels (push, email or sms)",
        ),
        (
            &["--quiet", "push 22-07"],
            "--quiet: expected CHANNEL=HH:MM-HH:MM@ZONE",
        ),
        (
            &[
                "--quiet",
                "push=22:00-07:00@UTC",
                "--quiet",
                "push=01:00-02:00@UTC",
            ],
            "--quiet: push given twice (one window per channel)",
        ),
        (
            &["--fallback", "push,push"],
            "--fallback: fallback: lists push twice",
        ),
        (
            &[
                "--json",
                r#"{"quiet_hours":{"sms":{"start":"22:00","end":"07:00","zone":"Nowhere"}}}"#,
            ],
            "--json: quiet_hours.sms.zone: unknown IANA time zone",
        ),
        (
            &["--json", r#"{"opted_outt":["sms"]}"#],
            "--json: opted_outt: unknown field (expected opted_out, quiet_hours, fallback or time_zone)",
        ),
        (
            &["--time-zone", "Mars/Olympus"],
            "--time-zone: time_zone: unknown IANA time zone",
        ),
    ];
    for (flags, expected) in cases {
        let e = parsed(flags).unwrap_err();
        assert!(e.starts_with(expected), "{flags:?}: {e}");
        assert!(!e.contains('\n'), "{flags:?}: one line: {e}");
    }
}

#[test]
fn json_is_exclusive_with_the_flags() {
    let e = args(&["--json", "{}", "--opt-out", "sms"]).unwrap_err();
    assert!(e.contains("cannot be used with"), "{e}");
}

#[test]
fn show_tells_each_window_and_whether_it_is_quiet_now() {
    let sub = SubscriberId::parse("u-1").unwrap();
    let prefs: Preferences = serde_json::from_str(ISSUE).unwrap();
    // 23:30 in Paris (summer time): inside 22:00–07:00.
    let night = Timestamp::parse_rfc3339("2026-06-10T23:30:00+02:00").unwrap();
    assert_eq!(
        describe(&sub, Some(&prefs), night),
        [
            "subscriber   u-1",
            "opted out    sms",
            "quiet hours  push   22:00–07:00 Europe/Paris · quiet now, until 2026-06-11T05:00:00.000Z",
            "fallback     push → email",
            "time zone    none",
        ]
    );
    let noon = Timestamp::parse_rfc3339("2026-06-10T12:00:00+02:00").unwrap();
    assert!(describe(&sub, Some(&prefs), noon)[2].ends_with("· not quiet now"));
    assert_eq!(
        describe(&sub, Some(&Preferences::default()), noon)[1..],
        [
            "opted out    none",
            "quiet hours  none",
            "fallback     none: every listed channel is sent",
            "time zone    none",
        ]
    );
    let abroad = Preferences {
        time_zone: reminders::domain::preferences::Zone::parse("america/new_york"),
        ..Preferences::default()
    };
    assert_eq!(
        describe(&sub, Some(&abroad), noon)[4],
        "time zone    America/New_York (series in the zone \"subscriber\" follow it)"
    );
    assert_eq!(
        describe(&sub, None, noon)[1],
        "no preferences: every listed channel is sent, at any hour"
    );
}
