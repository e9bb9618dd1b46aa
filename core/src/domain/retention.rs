//! Retention, in one place: how long reminders and ledger items outlive `fresh_until` before
//! DynamoDB's TTL removes them (docs/design.md, "Retention"). Every TTL of a reminder or a delivery
//! is [`Retention::expires_at`] of its `fresh_until`, and every function that writes one reads
//! the same variable, so changing it moves every TTL together. (Provider gate items are not
//! deliveries and hold no personal data: they expire a day after the time they close until.)

use std::time::Duration;

use crate::clock::Timestamp;
use crate::config::{ConfigError, Vars};

/// The variable that sets it (seconds).
pub const RETENTION_VAR: &str = "RETENTION_SECS";

/// How long past `fresh_until` an item lives. Longer than the DLQ's retention, so an old
/// redriven message still finds its ledger record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention(pub Duration);

impl Default for Retention {
    fn default() -> Self {
        Retention(Duration::from_secs(15 * 24 * 3600))
    }
}

impl Retention {
    /// The TTL attribute (epoch seconds, rounded up) of an item fresh until `fresh_until`.
    pub fn expires_at(self, fresh_until: Timestamp) -> i64 {
        fresh_until.plus(self.0).as_epoch_seconds_ceil()
    }

    pub fn from_vars<F: Fn(&str) -> Option<String>>(vars: &Vars<F>) -> Result<Self, ConfigError> {
        vars.secs_or(RETENTION_VAR, Self::default().0)
            .map(Retention)
    }

    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_vars(&Vars::env())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttl_is_fresh_until_plus_retention_in_seconds() {
        let r = Retention(Duration::from_secs(10));
        assert_eq!(r.expires_at(Timestamp::from_millis(1_001)), 12);
        let vars = Vars::new(|k: &str| (k == RETENTION_VAR).then(|| "60".to_owned()));
        assert_eq!(
            Retention::from_vars(&vars),
            Ok(Retention(Duration::from_secs(60)))
        );
        let none = Vars::new(|_: &str| None);
        assert_eq!(Retention::from_vars(&none), Ok(Retention::default()));
    }
}
