//! Where SMS may go: a text message costs money per country and is the channel fraudsters pump,
//! so the stack sends only to the calling codes an operator allowed. The API refuses a reminder
//! whose SMS number is elsewhere (`400` naming `channels.sms`), and the consumer, the last word
//! before any send, dies such a delivery `country_not_allowed` without calling the provider (a
//! reminder written by another path, or an allow-list narrowed since).

use crate::config::{ConfigError, Vars};

/// The variable that sets it: `*`, or calling codes separated by commas (`1,44,33`).
pub const SMS_COUNTRIES_VAR: &str = "SMS_ALLOWED_COUNTRY_CODES";

/// The template's default too: North America's numbering plan (`+1`) only.
pub const DEFAULT_SMS_COUNTRIES: &str = "1";

/// The calling codes SMS may go to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SmsCountries {
    /// Every number (`*`): only for a stack whose SMS provider limits spend itself.
    Any,
    /// Numbers whose digits after `+` start with one of these codes (1 to 4 digits each, so
    /// that `1` allows the whole plan and `1809` one of its areas).
    Codes(Vec<String>),
}

impl Default for SmsCountries {
    fn default() -> Self {
        SmsCountries::Codes(vec![DEFAULT_SMS_COUNTRIES.to_owned()])
    }
}

impl SmsCountries {
    pub fn parse(raw: &str) -> Result<Self, String> {
        let raw = raw.trim();
        if raw == "*" {
            return Ok(SmsCountries::Any);
        }
        let mut codes = Vec::new();
        for code in raw.split(',').map(|c| c.trim().trim_start_matches('+')) {
            let digits = code.bytes().all(|b| b.is_ascii_digit());
            if code.is_empty() || code.len() > 4 || !digits || code.starts_with('0') {
                return Err(format!(
                    "{code:?}: each code must be 1 to 4 digits with no leading zero (1,44,33), or the \
                     whole value * for every country"
                ));
            }
            codes.push(code.to_owned());
        }
        Ok(SmsCountries::Codes(codes))
    }

    pub fn from_vars<F: Fn(&str) -> Option<String>>(vars: &Vars<F>) -> Result<Self, ConfigError> {
        match vars.get(SMS_COUNTRIES_VAR) {
            None => Ok(Self::default()),
            Some(raw) => Self::parse(&raw).map_err(|e| ConfigError::invalid(SMS_COUNTRIES_VAR, e)),
        }
    }

    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_vars(&Vars::env())
    }

    /// Whether SMS may go to `e164` (`+` and digits, as a recipient holds it).
    pub fn allows(&self, e164: &str) -> bool {
        match self {
            SmsCountries::Any => true,
            SmsCountries::Codes(codes) => {
                let digits = e164.trim_start_matches('+');
                codes.iter().any(|c| digits.starts_with(c.as_str()))
            }
        }
    }

    /// The allow-list as the variable states it, for an error message.
    pub fn describe(&self) -> String {
        match self {
            SmsCountries::Any => "*".to_owned(),
            SmsCountries::Codes(codes) => codes
                .iter()
                .map(|c| format!("+{c}"))
                .collect::<Vec<_>>()
                .join(", "),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_allows_north_america_only() {
        let d = SmsCountries::default();
        assert!(d.allows("+14155550100"));
        assert!(!d.allows("+447700900123"));
        assert!(!d.allows("+33612345678"));
        assert_eq!(d.describe(), "+1");
        let none = Vars::new(|_: &str| None);
        assert_eq!(SmsCountries::from_vars(&none), Ok(d));
    }

    #[test]
    fn a_list_any_and_garbage() {
        let l = SmsCountries::parse(" 1, +44 ,33").unwrap();
        assert!(l.allows("+447700900123") && l.allows("+33612345678") && l.allows("+12125550100"));
        assert!(!l.allows("+4915112345678"));
        let area = SmsCountries::parse("1809").unwrap();
        assert!(area.allows("+18095550100") && !area.allows("+14155550100"));
        assert!(SmsCountries::parse("*").unwrap().allows("+8613800138000"));
        for bad in ["", "1,,44", "0044", "12345", "uk", "1;44", "*,1"] {
            assert!(SmsCountries::parse(bad).is_err(), "{bad:?}");
        }
        let vars = Vars::new(|k: &str| (k == SMS_COUNTRIES_VAR).then(|| "x".to_owned()));
        let err = SmsCountries::from_vars(&vars).unwrap_err();
        assert!(err.to_string().contains(SMS_COUNTRIES_VAR), "{err}");
    }
}
