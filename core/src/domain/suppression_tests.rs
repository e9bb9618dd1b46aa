use proptest::prelude::*;

use super::*;

fn key(b: u8) -> SuppressionKey {
    SuppressionKey::new((0..32).map(|i| i + b).collect::<Vec<u8>>()).unwrap()
}

fn r(channel: Channel, address: &str) -> Recipient {
    Recipient::parse(channel, address).unwrap()
}

#[test]
fn the_mac_is_hmac_sha256() {
    // RFC 4231, test cases 1 and 2.
    let hex = |b: [u8; 32]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    assert_eq!(
        hex(hmac_sha256(&[0x0b; 20], b"Hi There")),
        "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
    );
    assert_eq!(
        hex(hmac_sha256(b"Jefe", b"what do ya want for nothing?")),
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
    );
}

#[test]
fn hashes_are_fixed_by_the_s1_recipe() {
    // Computed apart (Python's hmac): a change here orphans every stored suppression.
    let k = key(0);
    let h = |c, a| AddressHash::of(&k, &r(c, a)).to_string();
    assert_eq!(
        h(Channel::Email, "user@example.org"),
        "s1_0f6446bb1ebc4cc94d3880173d98ba5d"
    );
    assert_eq!(
        h(Channel::Sms, "+14155550100"),
        "s1_d54bacc8de54f88ffdfa1bc9660dd779"
    );
    assert_eq!(
        h(Channel::Push, "+14155550100"),
        "s1_3cbfcc657da199b7afba86e3c274557f"
    );
    assert_eq!(
        h(Channel::Email, "User@EXAMPLE.org"),
        h(Channel::Email, "user@example.org"),
        "email addresses are compared lowercased"
    );
    assert_ne!(h(Channel::Push, "AbC123"), h(Channel::Push, "abc123"));
}

#[test]
fn keys_are_secret_and_long_enough() {
    assert_eq!(
        SuppressionKey::new(vec![7u8; 15]).unwrap_err(),
        SuppressionError::ShortKey
    );
    let k = SuppressionKey::new(b"a-secret-key-of-thirty-two-bytes".to_vec()).unwrap();
    assert_eq!(format!("{k:?}"), "SuppressionKey(..)");
}

#[test]
fn hashes_parse_only_in_their_form() {
    let good = "s1_0f6446bb1ebc4cc94d3880173d98ba5d";
    assert_eq!(AddressHash::parse(good).unwrap().as_str(), good);
    for bad in [
        "",
        "s1_",
        "s2_0f6446bb1ebc4cc94d3880173d98ba5d",
        "s1_0F6446BB1EBC4CC94D3880173D98BA5D",
        "s1_0f6446bb1ebc4cc94d3880173d98ba5",
        "s1_0f6446bb1ebc4cc94d3880173d98ba5dd",
        "s1_0f6446bb1ebc4cc94d3880173d98ba5g",
        "user@example.org",
    ] {
        assert_eq!(
            AddressHash::parse(bad),
            Err(SuppressionError::BadHash),
            "{bad:?}"
        );
    }
    let json: Result<AddressHash, _> = serde_json::from_str("\"user@example.org\"");
    assert!(json.is_err());
}

#[test]
fn sources_have_fixed_wire_strings() {
    let wire: Vec<&str> = SuppressionSource::ALL.iter().map(|s| s.as_str()).collect();
    assert_eq!(wire.join(", "), SOURCE_NAMES);
    for s in SuppressionSource::ALL {
        assert_eq!(s.as_str().parse::<SuppressionSource>(), Ok(s));
        assert_eq!(serde_json::to_string(&s).unwrap(), format!("\"{s}\""));
    }
    assert!("http410".parse::<SuppressionSource>().is_err());
}

#[test]
fn a_suppression_never_shows_the_address() {
    let addr = "secret.person@example.com";
    let s = Suppression::record(
        &key(1),
        &r(Channel::Email, addr),
        SuppressionSource::SesBounce,
        Timestamp::from_millis(1_780_000_000_000),
    );
    assert_eq!(s.masked, "s***@example.com");
    let json = serde_json::to_value(&s).unwrap();
    assert_eq!(json["source"], "ses_bounce");
    assert_eq!(json["channel"], "email");
    assert_eq!(json["address_hash"], s.address_hash.as_str());
    assert_eq!(
        serde_json::from_value::<Suppression>(json.clone()).unwrap(),
        s
    );
    for shown in [format!("{s:?}"), s.to_string(), json.to_string()] {
        assert!(!shown.contains("secret.person"), "{shown}");
        assert!(shown.contains("s***@example.com"), "{shown}");
    }
    let sms = Suppression::record(
        &key(1),
        &r(Channel::Sms, "+14155550123"),
        SuppressionSource::Http410,
        Timestamp::from_millis(0),
    );
    for shown in [format!("{sms:?}"), sms.to_string()] {
        assert!(!shown.contains("4155550123"), "{shown}");
    }
}

fn any_recipient() -> impl Strategy<Value = Recipient> {
    prop_oneof![
        "[a-z0-9]{1,12}@[a-z]{1,8}\\.(org|com|io)".prop_map(|a| r(Channel::Email, &a)),
        "\\+[1-9][0-9]{7,13}".prop_map(|a| r(Channel::Sms, &a)),
        "[A-Za-z0-9:_-]{1,64}".prop_map(|a| r(Channel::Push, &a)),
    ]
}

proptest! {
    #[test]
    fn stable_per_key_and_separate_across_keys_and_channels(
        rec in any_recipient(),
        k1 in 0u8..100,
        k2 in 100u8..200,
    ) {
        let h = AddressHash::of(&key(k1), &rec);
        prop_assert_eq!(&h, &AddressHash::of(&key(k1), &rec.clone()));
        prop_assert_eq!(AddressHash::parse(h.as_str()), Ok(h.clone()));
        prop_assert_ne!(&h, &AddressHash::of(&key(k2), &rec));
        for other in Channel::ALL.into_iter().filter(|c| *c != rec.channel()) {
            // The same text, where it is an address on another channel too.
            if let Ok(there) = Recipient::parse(other, rec.expose()) {
                prop_assert_ne!(&h, &AddressHash::of(&key(k1), &there));
            }
        }
    }
}
