//! An occurrence's id: its series' id and its instant, so that the id says which series made
//! it, and the same instant always makes the same reminder.

use crate::clock::Timestamp;
use crate::domain::{ReminderId, SeriesId};

/// What separates a series id from the instant in an occurrence's id. Refused in the id of a
/// reminder created on its own, so an id that parses as an occurrence is one.
pub const OCCURRENCE_SEPARATOR: &str = "::";

/// The id of the occurrence of `series` at `at`: `{series}::20270104T081500Z`.
pub fn occurrence_id(series: &SeriesId, at: Timestamp) -> ReminderId {
    let t = jiff::Timestamp::from_millisecond(at.as_millis())
        .unwrap_or(jiff::Timestamp::UNIX_EPOCH)
        .strftime("%Y%m%dT%H%M%SZ")
        .to_string();
    // A series id is at most MAX_SERIES_ID_LEN of the id alphabet: always a valid id.
    ReminderId::parse(format!("{series}{OCCURRENCE_SEPARATOR}{t}"))
        .expect("a series id and an instant make a reminder id")
}

/// The series and the instant of an occurrence's id; `None` for any other reminder id.
pub fn occurrence_of(id: &ReminderId) -> Option<(SeriesId, Timestamp)> {
    let (series, at) = id.as_str().rsplit_once(OCCURRENCE_SEPARATOR)?;
    let at = jiff::civil::DateTime::strptime("%Y%m%dT%H%M%SZ", at).ok()?;
    let at = at.to_zoned(jiff::tz::TimeZone::UTC).ok()?.timestamp();
    let series = SeriesId::parse(series).ok()?;
    Some((series, Timestamp::from_millis(at.as_millisecond())))
}
