//! `Recipient::parse` for each channel: never a panic, an accepted address is kept exactly
//! (and parses again to the same recipient, never shown by `Debug`), what each channel's rule
//! allows is accepted, and nothing outside it is.

use proptest::prelude::*;
use reminders::domain::recipient::{MAX_EMAIL_LEN, MAX_PUSH_TOKEN_LEN};
use reminders::domain::{Channel, Recipient};

fn channel() -> impl Strategy<Value = Channel> {
    prop::sample::select(Channel::ALL.to_vec())
}

/// Addresses near each channel's rule, and anything at all.
fn near_address() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "\\+?[0-9]{0,17}",
        "\\+?[0-9 a٣+-]{0,17}",
        "[a-z0-9.!#+_\"é -]{0,6}@[a-z0-9.@-]{0,12}",
        "[a-z]{60,66}@[a-z]{1,3}\\.[a-z]{2,3}",
        "a@([a-z]{60,64}\\.){3}[a-z]{55,66}",
        "[!-~ \t\x00é]{0,8}",
        printable(MAX_PUSH_TOKEN_LEN - 2..=MAX_PUSH_TOKEN_LEN + 2),
    ]
}

/// A channel and an address: mostly one its rule accepts (each channel's own shape), else one
/// near some rule or anything at all.
fn valid_or_near() -> impl Strategy<Value = (Channel, String)> {
    channel().prop_flat_map(|c| {
        let valid = match c {
            Channel::Email => valid_email().boxed(),
            Channel::Sms => "\\+[1-9][0-9]{6,14}".boxed(),
            Channel::Push => printable(1..=256).boxed(),
        };
        (Just(c), prop_oneof![3 => valid, 1 => near_address()])
    })
}

/// Printable ASCII of a length in `len` (a regex is slow at these lengths).
fn printable(len: std::ops::RangeInclusive<usize>) -> impl Strategy<Value = String> {
    prop::collection::vec(0x21u8..=0x7e, len).prop_map(|b| b.into_iter().map(char::from).collect())
}

/// E.164 as documented: `+`, then 7 to 15 ASCII digits, no leading zero.
fn e164(s: &str) -> bool {
    s.strip_prefix('+').is_some_and(|d| {
        (7..=15).contains(&d.len()) && d.bytes().all(|b| b.is_ascii_digit()) && !d.starts_with('0')
    })
}

/// A push token as documented: 1 to 4096 printable ASCII characters, no spaces.
fn push_token(s: &str) -> bool {
    (1..=MAX_PUSH_TOKEN_LEN).contains(&s.len()) && s.bytes().all(|b| (0x21..=0x7e).contains(&b))
}

/// What an accepted email address must never be: non-ASCII, with whitespace or controls (a
/// header injection), without exactly one `@`, with an empty or dotted-out part, too long.
fn plain_email(s: &str) -> Result<(), TestCaseError> {
    prop_assert!(s.len() <= MAX_EMAIL_LEN && s.is_ascii());
    prop_assert!(!s
        .bytes()
        .any(|b| b.is_ascii_whitespace() || b.is_ascii_control()));
    prop_assert!(!s.contains('"') && !s.contains('[') && !s.contains(".."));
    let (local, domain) = s.split_once('@').expect("an @");
    prop_assert!(!domain.contains('@'), "two @ in {:?}", s);
    prop_assert!((1..=64).contains(&local.len()), "local part {:?}", local);
    prop_assert!(!local.starts_with('.') && !local.ends_with('.'));
    let labels: Vec<&str> = domain.split('.').collect();
    prop_assert!(labels.len() >= 2, "one label: {:?}", domain);
    for l in labels {
        prop_assert!((1..=63).contains(&l.len()) && !l.starts_with('-') && !l.ends_with('-'));
    }
    Ok(())
}

/// Valid addresses built from the rule's parts: dot-atoms of `atext`, hostname labels.
fn valid_email() -> impl Strategy<Value = String> {
    let atom = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]{1,8}";
    let label = "[A-Za-z0-9]([A-Za-z0-9-]{0,20}[A-Za-z0-9])?";
    let local = prop::collection::vec(atom, 1..4).prop_map(|a| a.join("."));
    let domain = prop::collection::vec(label, 2..5).prop_map(|l| l.join("."));
    (local, domain)
        .prop_filter("local part ≤ 64", |(l, _)| l.len() <= 64)
        .prop_map(|(l, d)| format!("{l}@{d}"))
}

proptest! {
    #![proptest_config(crate::cheap())]

    /// Never a panic; an accepted address is kept verbatim, parses again to the same
    /// recipient and stays out of `Debug`.
    #[test]
    fn parse_keeps_what_it_accepts((c, raw) in valid_or_near()) {
        let parsed = Recipient::parse(c, &raw);
        prop_assume!(parsed.is_ok());
        let r = parsed.unwrap();
        prop_assert_eq!((r.channel(), r.expose()), (c, raw.as_str()));
        prop_assert_eq!(Recipient::parse(c, r.expose()), Ok(r.clone()));
        let key = reminders::domain::SuppressionKey::new(vec![7; 16]).unwrap();
        let fp = r.fingerprint(&key);
        prop_assert!(fp.as_str().starts_with("s1_"), "{}", fp);
        // The masked form: an email's first character and domain, so only an address whose
        // local part is the mask's own stars after its first character could read whole in it.
        let shown = format!("{r:?}");
        prop_assert_eq!(&shown, &format!("Recipient({}, {})", c, r.masked()));
        // The mask keeps the first character and stars the rest: a local part that is
        // already one character and stars reads whole in it, by design.
        let local_all_stars = raw
            .split_once('@')
            .is_some_and(|(local, _)| local.chars().skip(1).all(|ch| ch == '*'));
        prop_assert!(raw.len() <= 8 || local_all_stars || !shown.contains(&raw), "{} shows the address", shown);
    }

    /// SMS takes exactly E.164; push exactly bounded printable tokens.
    #[test]
    fn sms_and_push_accept_exactly_their_rule(raw in near_address()) {
        prop_assert_eq!(Recipient::parse(Channel::Sms, &raw).is_ok(), e164(&raw), "{:?}", raw);
        prop_assert_eq!(Recipient::parse(Channel::Push, &raw).is_ok(), push_token(&raw), "{:?}", raw);
    }

    #[test]
    fn accepted_emails_are_plain_addresses(raw in near_address()) {
        if Recipient::parse(Channel::Email, &raw).is_ok() {
            plain_email(&raw)?;
        }
    }

    #[test]
    fn valid_addresses_are_accepted(
        phone in "\\+[1-9][0-9]{6,14}",
        email in valid_email(),
        token in prop_oneof![printable(1..=64), printable(MAX_PUSH_TOKEN_LEN - 6..=MAX_PUSH_TOKEN_LEN)],
    ) {
        prop_assert!(Recipient::parse(Channel::Sms, &phone).is_ok(), "{}", phone);
        prop_assert!(Recipient::parse(Channel::Email, &email).is_ok(), "{}", email);
        prop_assert!(Recipient::parse(Channel::Push, &token).is_ok(), "{}", token);
    }
}
