//! What erasing a subscriber removes ([`crate::erasure`]): a settled reminder's item (its
//! recipients and content with it), a subscriber's preferences, a suppression. A port of
//! its own, beside [`super::ReminderStore`], so the pipeline's stores and their wrappers never
//! carry deletes.

use std::future::Future;

use crate::domain::{AddressHash, ReminderId, SubscriberId};
use crate::ports::PortError;

pub const OP_DELETE_REMINDER: &str = "reminders.delete";
pub const OP_DELETE_PREFERENCES: &str = "reminders.delete_preferences";
pub const OP_LIFT_SUPPRESSION: &str = "reminders.lift_suppression";
pub const OP_DELETE_SERIES: &str = "series.delete";

/// How a delete went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deleted {
    Deleted,
    /// Nothing was there.
    Missing,
    /// Still `scheduled` or `enqueued` (an erasure cancels first): left as it is.
    Pending,
}

pub trait Eraser: Send + Sync {
    /// Delete a reminder's item unless it is still `scheduled` or `enqueued`; `force` deletes
    /// whatever is stored (an item this version cannot read, which can never be sent).
    fn delete_reminder(
        &self,
        id: &ReminderId,
        force: bool,
    ) -> impl Future<Output = Result<Deleted, PortError>> + Send;

    fn delete_preferences(
        &self,
        subscriber: &SubscriberId,
    ) -> impl Future<Output = Result<Deleted, PortError>> + Send;

    fn lift_suppression(
        &self,
        address: &AddressHash,
    ) -> impl Future<Output = Result<Deleted, PortError>> + Send;

    /// Delete a series (its recipients and content with it), whatever its status: an erasure
    /// cancels it first. A store that keeps no series refuses, so an erasure never says it
    /// removed what it could not.
    fn delete_series(
        &self,
        _id: &crate::domain::SeriesId,
    ) -> impl Future<Output = Result<Deleted, PortError>> + Send {
        async {
            Err(PortError::Refused {
                op: OP_DELETE_SERIES,
                message: "this store keeps no series".into(),
            })
        }
    }
}

impl<T: Eraser> Eraser for std::sync::Arc<T> {
    fn delete_reminder(
        &self,
        id: &ReminderId,
        force: bool,
    ) -> impl Future<Output = Result<Deleted, PortError>> + Send {
        (**self).delete_reminder(id, force)
    }
    fn delete_preferences(
        &self,
        subscriber: &SubscriberId,
    ) -> impl Future<Output = Result<Deleted, PortError>> + Send {
        (**self).delete_preferences(subscriber)
    }
    fn lift_suppression(
        &self,
        address: &AddressHash,
    ) -> impl Future<Output = Result<Deleted, PortError>> + Send {
        (**self).lift_suppression(address)
    }
    fn delete_series(
        &self,
        id: &crate::domain::SeriesId,
    ) -> impl Future<Output = Result<Deleted, PortError>> + Send {
        (**self).delete_series(id)
    }
}
