//! Configuration, the bottom floor: the error type, the variable lookup and the one set of
//! parsers every feature uses. Each feature module declares the variables it reads beside the
//! code that reads them and parses them through a [`Vars`]; this module imports none of them,
//! and no SDK type. Which function reads which variables is the wiring's business
//! (the `reminders` crate's `wiring::reads`).
//!
//! Numbers are parsed as `u64` and narrowed with `try_from`: a value too large for its field is
//! an error that names the variable, never a silent truncation.

use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("environment variable {0} is not set{next}", next = next_step(.0))]
    Missing(&'static str),
    #[error("environment variable {var} is invalid: {problem}")]
    Invalid { var: &'static str, problem: String },
}

/// What to do about a variable that is not set, for the ones a reader meets first: a
/// provider's choice names its values; a table, a queue or the event bus is exported by
/// `remindctl local up` (the template sets each on Lambda).
fn next_step(var: &str) -> &'static str {
    let exported = [
        "REMINDERS_TABLE",
        "DELIVERIES_TABLE",
        "DUE_SHARDS",
        "EVENT_BUS_NAME",
    ];
    if var.ends_with("_PROVIDER") {
        ": set it to http, none, ses (email) or sns (sms, push)"
    } else if exported.contains(&var) || var.ends_with("_QUEUE_URL") || var.ends_with("_DLQ_URL") {
        ": locally, run `eval \"$(remindctl local up)\"` in this shell (it exports the \
         tables and queues); on a stack, pass `--stack NAME` (the template sets it on Lambda)"
    } else {
        ""
    }
}

impl ConfigError {
    pub fn invalid(var: &'static str, problem: impl Into<String>) -> Self {
        ConfigError::Invalid {
            var,
            problem: problem.into(),
        }
    }
}

/// An environment variable, with the empty string meaning "not set" (so a template can set
/// every variable a function reads and leave the optional ones empty).
pub fn env(var: &str) -> Option<String> {
    std::env::var(var).ok().filter(|v| !v.is_empty())
}

/// Typed reads from a lookup: the environment ([`env`]), or a map in tests.
pub struct Vars<F> {
    get: F,
}

impl Vars<fn(&str) -> Option<String>> {
    /// The process environment.
    pub fn env() -> Self {
        Vars { get: env }
    }
}

impl<F: Fn(&str) -> Option<String>> Vars<F> {
    pub fn new(get: F) -> Self {
        Vars { get }
    }

    /// The raw value, as the lookup gives it.
    pub fn get(&self, var: &str) -> Option<String> {
        (self.get)(var)
    }

    /// A value that must be set; blank counts as unset.
    pub fn required(&self, var: &'static str) -> Result<String, ConfigError> {
        self.get(var)
            .filter(|v| !v.trim().is_empty())
            .ok_or(ConfigError::Missing(var))
    }

    pub fn u64_or(&self, var: &'static str, default: u64) -> Result<u64, ConfigError> {
        self.get(var)
            .map_or(Ok(default), |raw| parse_u64(var, &raw))
    }

    pub fn u32_or(&self, var: &'static str, default: u32) -> Result<u32, ConfigError> {
        narrow(var, self.u64_or(var, default.into())?)
    }

    pub fn usize_or(&self, var: &'static str, default: usize) -> Result<usize, ConfigError> {
        let default = u64::try_from(default).unwrap_or(u64::MAX);
        narrow(var, self.u64_or(var, default)?)
    }

    /// Whole seconds.
    pub fn secs_or(&self, var: &'static str, default: Duration) -> Result<Duration, ConfigError> {
        self.u64_or(var, default.as_secs()).map(Duration::from_secs)
    }
}

/// A whole number, surrounding blanks allowed.
pub fn parse_u64(var: &'static str, raw: &str) -> Result<u64, ConfigError> {
    raw.trim()
        .parse()
        .map_err(|_| ConfigError::invalid(var, format!("{raw:?} is not a whole number")))
}

/// A whole number within `range`, narrowed without truncation.
pub fn parse_in<T>(
    var: &'static str,
    raw: &str,
    range: std::ops::RangeInclusive<T>,
) -> Result<T, ConfigError>
where
    T: TryFrom<u64> + PartialOrd + std::fmt::Display,
{
    let n: T = narrow(var, parse_u64(var, raw)?)?;
    if !range.contains(&n) {
        return Err(ConfigError::invalid(
            var,
            format!("{n} is outside {}..={}", range.start(), range.end()),
        ));
    }
    Ok(n)
}

fn narrow<T: TryFrom<u64>>(var: &'static str, n: u64) -> Result<T, ConfigError> {
    T::try_from(n).map_err(|_| ConfigError::invalid(var, format!("{n} is too large")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(
        pairs: &'static [(&'static str, &'static str)],
    ) -> Vars<impl Fn(&str) -> Option<String>> {
        Vars::new(move |k: &str| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        })
    }

    #[test]
    fn numbers_are_never_truncated() {
        let v = vars(&[("BIG", "4294967296"), ("OK", " 7 "), ("NEG", "-1")]);
        let err = v.u32_or("BIG", 1).unwrap_err();
        assert_eq!(err, ConfigError::invalid("BIG", "4294967296 is too large"));
        assert_eq!(v.u64_or("BIG", 1), Ok(4_294_967_296));
        assert_eq!(v.u32_or("OK", 1), Ok(7));
        assert!(v.u32_or("NEG", 1).unwrap_err().to_string().contains("NEG"));
        assert_eq!(v.u32_or("UNSET", 9), Ok(9));
        assert_eq!(v.secs_or("OK", Duration::ZERO), Ok(Duration::from_secs(7)));
    }

    #[test]
    fn blank_required_is_missing_and_names_the_variable() {
        let v = vars(&[("BLANK", "  ")]);
        assert_eq!(v.required("BLANK"), Err(ConfigError::Missing("BLANK")));
    }

    #[test]
    fn ranges_name_the_variable_and_the_bounds() {
        assert_eq!(parse_in("N", "3", 1u32..=64), Ok(3));
        let e = parse_in("N", "65", 1u32..=64).unwrap_err();
        assert_eq!(
            e.to_string(),
            "environment variable N is invalid: 65 is outside 1..=64"
        );
        let e = parse_in("N", "99999999999", 1u32..=64).unwrap_err();
        assert!(e.to_string().contains("too large"), "{e}");
    }
}

#[cfg(test)]
mod next_step_tests {
    use super::ConfigError;

    /// A variable a reader meets unset says what to do next: a table or a queue names the
    /// command that exports it, a provider's choice names its values; another says only that.
    #[test]
    fn an_unset_variable_says_what_to_do_next() {
        let table = ConfigError::Missing("REMINDERS_TABLE").to_string();
        assert!(table.contains(r#"eval "$(remindctl local up)""#), "{table}");
        let queue = ConfigError::Missing("SMS_QUEUE_URL").to_string();
        assert!(queue.contains("remindctl local up"), "{queue}");
        let provider = ConfigError::Missing("PUSH_PROVIDER").to_string();
        assert!(
            provider.ends_with("http, none, ses (email) or sns (sms, push)"),
            "{provider}"
        );
        assert_eq!(
            ConfigError::Missing("CLAIM_LEASE_SECS").to_string(),
            "environment variable CLAIM_LEASE_SECS is not set"
        );
    }
}
