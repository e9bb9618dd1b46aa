//! Who created a reminder, and who may act on one (docs/design.md, "Who may do what"): the API
//! stores the caller as the reminder's owner on create, and every later call by another owner finds
//! nothing.

use serde::{Deserialize, Serialize};

/// The longest caller identity stored: an IAM role session ARN fits with room to spare.
pub const MAX_OWNER_LEN: usize = 512;

/// A caller's identity as the API's authorizer states it: the JWT's `client_id` (or `sub`),
/// or the IAM principal's ARN. Opaque; compared, never parsed.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Owner(String);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("owner: must be 1 to {MAX_OWNER_LEN} printable characters")]
pub struct OwnerError;

impl Owner {
    pub fn parse(s: impl Into<String>) -> Result<Self, OwnerError> {
        let s = s.into();
        let printable = s.chars().all(|c| !c.is_control());
        if s.is_empty() || s.len() > MAX_OWNER_LEN || !printable {
            return Err(OwnerError);
        }
        Ok(Self(s))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for Owner {
    type Error = OwnerError;
    fn try_from(s: String) -> Result<Self, OwnerError> {
        Self::parse(s)
    }
}

impl From<Owner> for String {
    fn from(o: Owner) -> String {
        o.0
    }
}

impl std::fmt::Display for Owner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a caller may reach. A reminder with no owner (written before owners were stored, or
/// by the library or `remindctl remind create`) is an operator's: no owner-scoped caller
/// reaches it, or every application could read and take it over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Access {
    /// Every reminder: an operator, or an API deployed with owner isolation off.
    Any,
    /// The reminders this owner created.
    Owner(Owner),
    /// An end user's token: the reminders and preferences of this one subscriber, whoever
    /// created them.
    Subscriber(super::SubscriberId),
}

impl Access {
    /// Whether this caller may see and change `owner`'s reminder of `subscriber`.
    pub fn reaches(&self, owner: Option<&Owner>, subscriber: &super::SubscriberId) -> bool {
        match self {
            Access::Any => true,
            Access::Owner(me) => owner == Some(me),
            Access::Subscriber(s) => s == subscriber,
        }
    }

    /// Whether this caller may reach the subscriber itself (its list, its preferences).
    /// Preferences are the person's, not an application's: every application that holds
    /// the preferences scope reads and sets the same opt-outs and quiet hours, so that an
    /// opt-out given through one application holds for all.
    pub fn reaches_subscriber(&self, subscriber: &super::SubscriberId) -> bool {
        match self {
            Access::Subscriber(s) => s == subscriber,
            Access::Any | Access::Owner(_) => true,
        }
    }

    /// The owner a reminder created by this caller gets.
    pub fn owner(&self) -> Option<&Owner> {
        match self {
            Access::Owner(o) => Some(o),
            Access::Any | Access::Subscriber(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::SubscriberId;

    #[test]
    fn each_caller_reaches_what_it_may() {
        let a = Owner::parse("app-a").unwrap();
        let b = Owner::parse("app-b").unwrap();
        let u1 = SubscriberId::parse("u-1").unwrap();
        let u2 = SubscriberId::parse("u-2").unwrap();
        let owner_a = Access::Owner(a.clone());
        assert!(owner_a.reaches(Some(&a), &u1));
        assert!(!owner_a.reaches(Some(&b), &u1), "another owner's reminder");
        assert!(
            !owner_a.reaches(None, &u1),
            "an unowned reminder is an operator's"
        );
        assert!(Access::Any.reaches(None, &u1));
        let user = Access::Subscriber(u1.clone());
        assert!(
            user.reaches(Some(&b), &u1),
            "an end user reaches their own, any owner"
        );
        assert!(!user.reaches(Some(&a), &u2));
        assert!(!user.reaches_subscriber(&u2) && user.reaches_subscriber(&u1));
        assert!(Access::Any.reaches(Some(&b), &u2));
        assert_eq!(owner_a.owner(), Some(&a));
        assert_eq!(user.owner(), None);
    }

    #[test]
    fn an_owner_is_printable_and_bounded() {
        assert!(Owner::parse("").is_err());
        assert!(Owner::parse("a\nb").is_err());
        assert!(Owner::parse("x".repeat(MAX_OWNER_LEN + 1)).is_err());
        assert!(Owner::parse("arn:aws:sts::123456789012:assumed-role/app/s").is_ok());
    }
}
