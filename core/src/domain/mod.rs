//! The vocabulary: identities, recipients, delivery keys, reminders, queue messages, dead
//! reasons, and the recipient rules (preferences, suppressions). Everything here is parsed at
//! the edge and pure: no I/O, no AWS types.

pub mod ids;
pub mod key;
pub mod message;
pub mod owner;
pub mod preferences;
pub mod reason;
pub mod recipient;
pub mod reminder;
pub mod retention;
pub mod sealed;
pub mod series;
pub mod sms_countries;
pub mod suppression;
pub mod wire;

pub use ids::{Channel, IdError, PerChannel, ReminderId, SeriesId, SubscriberId};
pub use key::{DeliveryKey, KeyError};
pub use message::{DecodeError, DeliveryMessage, RedriveMarker};
pub use owner::{Access, Owner, OwnerError};
pub use preferences::{
    Decision, LocalTime, Preferences, PreferencesError, PreferencesWire, QuietHours, Zone,
};
pub use reason::DeadReason;
pub use recipient::{Recipient, RecipientError};
pub use reminder::{
    check_due_ahead, due_shard, Content, NewReminder, Reminder, ReminderError, ReminderStatus,
    DEFAULT_DUE_SHARDS, MAX_DUE_AHEAD, MAX_DUE_SHARDS, MAX_FRESHNESS,
};
pub use retention::Retention;
pub use sealed::CursorSeal;
pub use sms_countries::SmsCountries;
pub use suppression::{AddressHash, Suppression, SuppressionKey, SuppressionSource};
