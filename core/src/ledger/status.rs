//! The delivery's state on the ledger item (docs/design.md, "States and transitions"), with its
//! fixed wire strings, and the unknown case a newer version's state reads into.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Status {
    /// No ledger item yet (never stored as such).
    Scheduled,
    /// Put back by redrive.
    Ready,
    Sending,
    Deferred,
    Delivered,
    Expired,
    Cancelled,
    Dead,
    /// A status this version does not know, written by a newer one (a deploy rolling out a
    /// new state): read with its wire string, carried on, logged where it is read and
    /// published as it is. Every change from it is refused
    /// ([`Why::NewerStatus`](super::Why::NewerStatus)): only a writer that knows the state may move the item on.
    Unknown(&'static str),
}

impl Status {
    pub const ALL: [Status; 8] = [
        Status::Scheduled,
        Status::Ready,
        Status::Sending,
        Status::Deferred,
        Status::Delivered,
        Status::Expired,
        Status::Cancelled,
        Status::Dead,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            Status::Scheduled => "scheduled",
            Status::Ready => "ready",
            Status::Sending => "sending",
            Status::Deferred => "deferred",
            Status::Delivered => "delivered",
            Status::Expired => "expired",
            Status::Cancelled => "cancelled",
            Status::Dead => "dead",
            Status::Unknown(s) => s,
        }
    }

    /// `delivered`, `expired` and `cancelled` never change again.
    pub const fn is_terminal(self) -> bool {
        matches!(
            self,
            Status::Delivered | Status::Expired | Status::Cancelled
        )
    }

    /// Whether this version knows the status (not [`Status::Unknown`]).
    pub const fn is_known(self) -> bool {
        !matches!(self, Status::Unknown(_))
    }

    /// A stored wire string: a listed status, or one this version does not know
    /// ([`Status::Unknown`], logged once per read).
    pub fn read(s: &str) -> Status {
        s.parse().unwrap_or_else(|_| {
            tracing::warn!(
                status = s,
                "ledger status unknown to this version: carried on as it is, never changed here"
            );
            Status::Unknown(crate::domain::wire::intern(s))
        })
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

impl std::str::FromStr for Status {
    type Err = String;
    /// Listed statuses only: an unknown one is an error here ([`Status::read`] keeps it).
    fn from_str(s: &str) -> Result<Self, String> {
        Status::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| format!("unknown ledger status {s:?}"))
    }
}

impl Serialize for Status {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Status {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = std::borrow::Cow::<'de, str>::deserialize(d)?;
        Ok(Status::read(&s))
    }
}
