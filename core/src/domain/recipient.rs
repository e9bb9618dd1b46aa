//! Recipients: an E.164 phone number, an email address or a push token, checked per channel.
//!
//! A recipient is personal data: its `Debug` and `Display` never print it, and [`Recipient::fingerprint`]
//! gives logs a stable, non-reversible handle instead.

use std::fmt;

use super::ids::Channel;

pub const MAX_PUSH_TOKEN_LEN: usize = 4096;
pub const MAX_EMAIL_LEN: usize = 254;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecipientError {
    #[error("phone number is not E.164 (+ then 7 to 15 digits, no leading zero)")]
    BadPhone,
    #[error("email address is not valid: {0}")]
    BadEmail(&'static str),
    #[error("push token is empty, too long or has whitespace or control characters")]
    BadPushToken,
}

/// Where one channel's message goes. Validated on construction; the value is only readable
/// through [`Recipient::expose`], which the providers call.
#[derive(Clone, PartialEq, Eq)]
pub struct Recipient {
    channel: Channel,
    value: String,
}

impl Recipient {
    pub fn parse(channel: Channel, raw: &str) -> Result<Self, RecipientError> {
        match channel {
            Channel::Sms => validate_e164(raw)?,
            Channel::Email => validate_email(raw)?,
            Channel::Push => validate_push_token(raw)?,
        }
        Ok(Self {
            channel,
            value: raw.to_owned(),
        })
    }

    pub fn channel(&self) -> Channel {
        self.channel
    }

    /// The address itself, for the provider call and the item write. Never log it.
    pub fn expose(&self) -> &str {
        &self.value
    }

    /// A form an operator or an application can recognise but not use: an email's first
    /// character and domain (`u***@example.org`), a number's country prefix and last two digits
    /// (`+14*******00`), a push token's first four characters and its length.
    pub fn masked(&self) -> String {
        let v = &self.value;
        match self.channel {
            Channel::Email => match v.rsplit_once('@') {
                Some((local, domain)) => {
                    format!("{}***@{domain}", local.chars().next().unwrap_or('*'))
                }
                None => "***".into(),
            },
            Channel::Sms => {
                let digits = &v[1..];
                let hidden = digits.len().saturating_sub(4);
                format!(
                    "+{}{}{}",
                    &digits[..2],
                    "*".repeat(hidden),
                    &digits[2 + hidden..]
                )
            }
            Channel::Push => format!("{}… ({} characters)", &v[..4.min(v.len())], v.len()),
        }
    }

    /// What tells recipients apart where the masked form cannot: the stack's keyed hash
    /// (HMAC-SHA256 under the suppression key, the hash suppressions are stored under), so a
    /// list of guessed numbers cannot be tested against it without the key. An unkeyed hash
    /// of a phone number is no protection: the numbers are few enough to enumerate.
    pub fn fingerprint(&self, key: &super::SuppressionKey) -> super::AddressHash {
        super::AddressHash::of(key, self)
    }
}

/// The masked form only: no log line, panic message or `{:?}` ever holds the address, nor an
/// unkeyed hash of it.
impl fmt::Debug for Recipient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Recipient({}, {})", self.channel, self.masked())
    }
}

fn validate_e164(s: &str) -> Result<(), RecipientError> {
    let digits = s.strip_prefix('+').ok_or(RecipientError::BadPhone)?;
    let ok = (7..=15).contains(&digits.len())
        && digits.bytes().all(|b| b.is_ascii_digit())
        && !digits.starts_with('0');
    ok.then_some(()).ok_or(RecipientError::BadPhone)
}

/// Address syntax as providers accept it: dot-atom local part, a DNS domain with at least two
/// labels. Quoted local parts, IP literals and raw non-ASCII are refused (use punycode).
fn validate_email(s: &str) -> Result<(), RecipientError> {
    use RecipientError::BadEmail;
    if s.len() > MAX_EMAIL_LEN {
        return Err(BadEmail("longer than 254 characters"));
    }
    let (local, domain) = s.rsplit_once('@').ok_or(BadEmail("no @"))?;
    if local.is_empty() || local.len() > 64 {
        return Err(BadEmail("local part empty or longer than 64"));
    }
    let atext = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+/=?^_`{|}~-".contains(c);
    if local
        .split('.')
        .any(|atom| atom.is_empty() || !atom.chars().all(atext))
    {
        return Err(BadEmail(
            "local part has a forbidden character or misplaced dot",
        ));
    }
    let labels: Vec<&str> = domain.split('.').collect();
    if labels.len() < 2 || domain.len() > 253 {
        return Err(BadEmail("domain needs at least two labels"));
    }
    let label_ok = |l: &&str| {
        !l.is_empty()
            && l.len() <= 63
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
    };
    if !labels.iter().all(label_ok) {
        return Err(BadEmail("domain label is malformed"));
    }
    Ok(())
}

fn validate_push_token(s: &str) -> Result<(), RecipientError> {
    let ok =
        !s.is_empty() && s.len() <= MAX_PUSH_TOKEN_LEN && s.bytes().all(|b| b.is_ascii_graphic());
    ok.then_some(()).ok_or(RecipientError::BadPushToken)
}

#[cfg(test)]
mod tests {
    #[test]
    fn masked_forms_keep_no_more_than_a_hint() {
        let m = |c, v| super::Recipient::parse(c, v).unwrap().masked();
        assert_eq!(m(Channel::Email, "user@example.org"), "u***@example.org");
        assert_eq!(m(Channel::Sms, "+14155550100"), "+14*******00");
        assert_eq!(m(Channel::Sms, "+1234567"), "+12***67");
        assert_eq!(m(Channel::Push, "abcdefghij"), "abcd… (10 characters)");
        assert_eq!(m(Channel::Push, "ab"), "ab… (2 characters)");
    }

    use super::*;

    #[test]
    fn phones_must_be_e164() {
        for good in ["+14155550123", "+447911123456", "+6831234"] {
            assert!(Recipient::parse(Channel::Sms, good).is_ok(), "{good}");
        }
        for bad in [
            "14155550123",
            "+0123456789",
            "+1 415 555 0123",
            "+1415555012345678",
            "+123",
            "+1415555O123",
            "",
            "+",
            "+14155550123\n",
            "+١٢٣٤٥٦٧٨",
        ] {
            assert_eq!(
                Recipient::parse(Channel::Sms, bad),
                Err(RecipientError::BadPhone),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn emails_are_checked_for_syntax() {
        for good in [
            "a@example.com",
            "first.last+tag@sub.example.co.uk",
            "x_y-z@e-x.io",
        ] {
            assert!(Recipient::parse(Channel::Email, good).is_ok(), "{good}");
        }
        let long_local = format!("{}@example.com", "a".repeat(65));
        let too_long = format!("a@{}.com", "b".repeat(250));
        for bad in [
            "",
            "plain",
            "@example.com",
            "a@",
            "a@localhost",
            "a..b@example.com",
            ".a@example.com",
            "a@-example.com",
            "a@example..com",
            "a b@example.com",
            "a@example.com\r\nBcc: victim@example.com",
            "\"quoted\"@example.com",
            "a@[127.0.0.1]",
            "é@example.com",
            "<a@example.com>",
            long_local.as_str(),
            too_long.as_str(),
        ] {
            assert!(
                matches!(
                    Recipient::parse(Channel::Email, bad),
                    Err(RecipientError::BadEmail(_))
                ),
                "{bad:?} should be refused"
            );
        }
    }

    #[test]
    fn push_tokens_are_bounded_and_printable() {
        assert!(Recipient::parse(Channel::Push, "abc123:XYZ_-").is_ok());
        for bad in ["", "a b", "tok\0en", "tab\t"] {
            assert_eq!(
                Recipient::parse(Channel::Push, bad),
                Err(RecipientError::BadPushToken)
            );
        }
        let long = "a".repeat(MAX_PUSH_TOKEN_LEN + 1);
        assert!(Recipient::parse(Channel::Push, &long).is_err());
        assert!(Recipient::parse(Channel::Push, &long[1..]).is_ok());
    }

    #[test]
    fn debug_never_shows_the_address() {
        let r = Recipient::parse(Channel::Email, "secret.person@example.com").unwrap();
        let shown = format!("{r:?}");
        assert!(!shown.contains("secret"), "{shown}");
        assert_eq!(shown, "Recipient(email, s***@example.com)");
        let phone = Recipient::parse(Channel::Sms, "+14155550123").unwrap();
        assert_eq!(format!("{phone:?}"), "Recipient(sms, +14*******23)");
        // Keyed: another key, another fingerprint.
        let k1 = super::super::SuppressionKey::new(vec![1; 16]).unwrap();
        let k2 = super::super::SuppressionKey::new(vec![2; 16]).unwrap();
        assert_ne!(phone.fingerprint(&k1), phone.fingerprint(&k2));
        assert_eq!(phone.fingerprint(&k1), phone.fingerprint(&k1));
    }
}
