//! Quiet hours: a local window such as 22:00–07:00 in an IANA time zone, and the instant a
//! delivery held by it may go.
//!
//! The zone rules are jiff's bundled copy of the Time Zone Database (`tzdb-bundle-always`), so
//! a Lambda image without `/usr/share/zoneinfo` decides as a laptop does; a tzdb release
//! reaches the functions with a jiff upgrade.
//!
//! A window is one interval of instants per local night: from the start time on local date
//! `d` to the end time on `d` (or `d + 1` when the window crosses midnight). Each end is the
//! instant the recipient's clock shows that time, with two rules for the days a clock skips or
//! repeats an hour:
//! - a time skipped by a spring-forward gap resolves to the first instant after the gap (an
//!   end of 02:30 on a night that jumps from 02:00 to 03:00 ends at 03:00 local);
//! - a time repeated by a fall-back fold resolves to its earlier instant, so a window never
//!   lasts longer than its nominal length: 22:00–01:30 ends at the first 01:30, and a delivery
//!   due during the repeated 01:00–01:30 goes out.
//!
//! A window whose both ends fall into the same gap is empty that night. `start == end` is no
//! window at all.

use std::fmt;

use jiff::civil::{Date, DateTime, Time};
use jiff::tz::{AmbiguousOffset, TimeZone};

use crate::clock::Timestamp;

/// A time of day to the minute, written `HH:MM` (00:00 to 23:59).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LocalTime(u16);

impl LocalTime {
    pub fn new(hour: u8, minute: u8) -> Option<Self> {
        (hour < 24 && minute < 60).then(|| Self(u16::from(hour) * 60 + u16::from(minute)))
    }

    /// Exactly `HH:MM`: two digits, a colon, two digits.
    pub fn parse(s: &str) -> Option<Self> {
        let b = s.as_bytes();
        if b.len() != 5 || b[2] != b':' {
            return None;
        }
        let two = |hi: u8, lo: u8| {
            (hi.is_ascii_digit() && lo.is_ascii_digit()).then(|| (hi - b'0') * 10 + (lo - b'0'))
        };
        Self::new(two(b[0], b[1])?, two(b[3], b[4])?)
    }

    fn civil(self) -> Time {
        let (h, m) = (self.0 / 60, self.0 % 60);
        Time::constant(h as i8, m as i8, 0, 0)
    }
}

impl fmt::Display for LocalTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:02}:{:02}", self.0 / 60, self.0 % 60)
    }
}

/// An IANA time zone known to the bundled database, kept under its canonical name
/// (`europe/paris` is stored as `Europe/Paris`).
#[derive(Clone)]
pub struct Zone {
    name: String,
    tz: TimeZone,
}

impl Zone {
    pub fn parse(name: &str) -> Option<Self> {
        // The longest IANA name is about 30 bytes; a longer one is not worth a lookup.
        if name.is_empty() || name.len() > 64 {
            return None;
        }
        let tz = jiff::tz::db().get(name).ok()?;
        let name = tz.iana_name().unwrap_or(name).to_owned();
        Some(Self { name, tz })
    }

    pub fn name(&self) -> &str {
        &self.name
    }
}

impl PartialEq for Zone {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for Zone {}

impl fmt::Debug for Zone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Zone({})", self.name)
    }
}

impl fmt::Display for Zone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&self.name)
    }
}

/// One channel's quiet hours. Start inclusive, end exclusive; `start > end` crosses midnight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuietHours {
    pub start: LocalTime,
    pub end: LocalTime,
    pub zone: Zone,
}

impl QuietHours {
    /// Whether `at` falls inside a night's window.
    pub fn contains(&self, at: Timestamp) -> bool {
        jiff::Timestamp::from_millisecond(at.as_millis())
            .ok()
            .and_then(|t| self.end_of_window_at(t))
            .is_some()
    }

    /// When `at` falls inside the window, the instant the window ends (never itself inside a
    /// window: back-to-back nights, possible only when a gap swallows the gap between them,
    /// are followed to their end); otherwise `None`. An `at` outside the dates the zone rules
    /// cover (years beyond ±9999) is never inside.
    pub fn hold_until(&self, at: Timestamp) -> Option<Timestamp> {
        let at = jiff::Timestamp::from_millisecond(at.as_millis()).ok()?;
        let mut until = self.end_of_window_at(at)?;
        for _ in 0..3 {
            match self.end_of_window_at(until) {
                Some(later) if later > until => until = later,
                _ => break,
            }
        }
        Some(Timestamp::from_millis(until.as_millisecond()))
    }

    /// The end of the night's window that contains `t`, if one does.
    fn end_of_window_at(&self, t: jiff::Timestamp) -> Option<jiff::Timestamp> {
        if self.start == self.end {
            return None;
        }
        let today = self.zone.tz.to_datetime(t).date();
        // Two nights back: a night starting the day before yesterday can still reach today
        // only through a gap at midnight, but the check is cheap.
        let nights = [
            today.yesterday().ok()?.yesterday().ok()?,
            today.yesterday().ok()?,
            today,
        ];
        nights
            .into_iter()
            .filter_map(|night| self.window(night))
            .filter(|(start, end)| *start <= t && t < *end)
            .map(|(_, end)| end)
            .max()
    }

    /// The instants the window of local night `night` starts and ends.
    fn window(&self, night: Date) -> Option<(jiff::Timestamp, jiff::Timestamp)> {
        let end_date = if self.start > self.end {
            night.tomorrow().ok()?
        } else {
            night
        };
        let start = resolve(&self.zone.tz, night.to_datetime(self.start.civil()))?;
        let end = resolve(&self.zone.tz, end_date.to_datetime(self.end.civil()))?;
        Some((start, end))
    }
}

/// The instant a local clock in `tz` shows `dt`: a skipped time is the first instant after
/// its gap, a repeated one its earlier instant (the module's rules).
fn resolve(tz: &TimeZone, dt: DateTime) -> Option<jiff::Timestamp> {
    match tz.to_ambiguous_timestamp(dt).offset() {
        AmbiguousOffset::Unambiguous { offset } => offset.to_timestamp(dt).ok(),
        // `before` is the larger offset of a fold: the earlier instant.
        AmbiguousOffset::Fold { before, .. } => before.to_timestamp(dt).ok(),
        AmbiguousOffset::Gap { after, .. } => {
            // Read with the offset after the gap, `dt` lands before the transition; the next
            // transition is the gap's own, the first instant the clock shows after it.
            let before_gap = after.to_timestamp(dt).ok()?;
            tz.following(before_gap).next().map(|t| t.timestamp())
        }
    }
}

#[cfg(test)]
#[path = "quiet_tests.rs"]
mod tests;
