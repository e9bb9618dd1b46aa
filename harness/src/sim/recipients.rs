//! The demo's recipient profile (`remindctl demo --recipient-rules`): subscribers with
//! preferences set before the run, so the report shows the consumer's recipient rules at
//! work. Times are local to real IANA zones, chosen against the simulated epoch
//! (2023-11-14 22:13:20 UTC, 17:13 in New York, 22:13 in London):
//! - one subscriber in ten has opted out of SMS: their SMS ends `opted_out`;
//! - one in five has push quiet hours 17:25–17:40 New York: pushes due then are held and go
//!   out at 17:40 local (later, still fresh);
//! - one in five has email quiet hours 22:00–07:00 London: emails are held past their
//!   freshness and end `expired_quiet_hours`.

use reminders_core::domain::preferences::{LocalTime, QuietHours, Zone};
use reminders_core::domain::{Channel, Preferences, SubscriberId};
use reminders_core::ports::{MemoryReminderStore, ReminderStore};

/// The preferences of subscriber `i` under the profile, if any.
pub fn preferences_of(i: u32) -> Option<Preferences> {
    let quiet = |start: (u8, u8), end: (u8, u8), zone: &str| {
        Some(QuietHours {
            start: LocalTime::new(start.0, start.1)?,
            end: LocalTime::new(end.0, end.1)?,
            zone: Zone::parse(zone)?,
        })
    };
    let mut p = Preferences::default();
    if i.is_multiple_of(10) {
        p.opted_out.insert(Channel::Sms);
    }
    match i % 5 {
        1 => {
            p.quiet_hours.insert(
                Channel::Push,
                quiet((17, 25), (17, 40), "America/New_York")?,
            );
        }
        2 => {
            p.quiet_hours
                .insert(Channel::Email, quiet((22, 0), (7, 0), "Europe/London")?);
        }
        _ => {}
    }
    (p != Preferences::default()).then_some(p)
}

/// Write the profile's preferences for subscribers `s-0 .. s-{subscribers}`.
pub(super) async fn seed(store: &MemoryReminderStore, subscribers: u32) {
    for i in 0..subscribers {
        let (Some(prefs), Ok(id)) = (preferences_of(i), SubscriberId::parse(format!("s-{i}")))
        else {
            continue;
        };
        let _ = store.put_preferences(&id, &prefs).await;
    }
}
