//! A reminder in the in-memory table's compact byte form ([`crate::packed`]): every field in
//! the order below, read back into the reminder that was written. The id is the table's own
//! key, not repeated; the status and due time come first, for the index and the filters that
//! read only them ([`head`]).

use std::collections::{BTreeMap, BTreeSet};

use crate::clock::Timestamp;
use crate::domain::{
    Channel, Content, Owner, Recipient, Reminder, ReminderId, ReminderStatus, SubscriberId,
};
use crate::packed::{Reader, Writer};
use crate::ports::reminders::DueReminder;

const STATUSES: [ReminderStatus; 5] = [
    ReminderStatus::Scheduled,
    ReminderStatus::Enqueued,
    ReminderStatus::Cancelled,
    ReminderStatus::Expired,
    ReminderStatus::Invalid,
];

/// The reminder's bytes.
pub(super) fn pack(r: &Reminder) -> Box<[u8]> {
    // Every field named: a field added to the reminder and not kept here does not compile.
    let Reminder {
        reminder_id: _,
        subscriber_id,
        due_at,
        fresh_until,
        content,
        recipients,
        payload_version,
        status,
        invalid_reason,
        unsendable,
        expires_at,
        enqueued,
        owner,
        detached,
        // A newer version's attributes reach only the DynamoDB table: never written here.
        unknown: _,
    } = r;
    let mut w = Writer::with_capacity(128);
    w.u64(status_index(*status));
    w.time(*due_at);
    w.str(subscriber_id.as_str());
    w.i64(fresh_until.as_millis().wrapping_sub(due_at.as_millis()));
    match content {
        Content::Text { subject, body } => {
            w.u64(0);
            w.str(subject);
            w.str(body);
        }
        Content::Template {
            template_id,
            template_data,
        } => {
            w.u64(1);
            w.str(template_id);
            w.str(template_data);
        }
    }
    w.u64(recipients.len() as u64);
    for (c, to) in recipients {
        channel(&mut w, *c);
        w.str(to.expose());
    }
    w.u64(*payload_version);
    w.opt(invalid_reason.as_deref(), Writer::str);
    w.u64(unsendable.len() as u64);
    for (c, why) in unsendable {
        channel(&mut w, *c);
        w.str(why);
    }
    w.i64(*expires_at);
    w.u64(enqueued.len() as u64);
    for c in enqueued {
        channel(&mut w, *c);
    }
    w.opt(owner.as_ref(), |w, o| w.str(o.as_str()));
    w.bool(*detached);
    w.finish()
}

/// The reminder `pack` made these bytes of, under its id; `None` if they are not one.
pub(super) fn unpack(id: &str, bytes: &[u8]) -> Option<Reminder> {
    let mut r = Reader::new(bytes);
    let (status, due_at) = head_of(&mut r)?;
    let reminder = Reminder {
        reminder_id: ReminderId::parse(id).ok()?,
        subscriber_id: SubscriberId::parse(r.str()?).ok()?,
        due_at,
        fresh_until: Timestamp::from_millis(due_at.as_millis().wrapping_add(r.i64()?)),
        content: match r.u64()? {
            0 => Content::Text {
                subject: r.string()?,
                body: r.string()?,
            },
            1 => Content::Template {
                template_id: r.string()?,
                template_data: r.string()?,
            },
            _ => return None,
        },
        recipients: {
            let mut m = BTreeMap::new();
            for _ in 0..r.u64()? {
                let c = channel_of(&mut r)?;
                m.insert(c, Recipient::parse(c, r.str()?).ok()?);
            }
            m
        },
        payload_version: r.u64()?,
        status,
        invalid_reason: r.opt(Reader::string)?,
        unsendable: {
            let mut m = BTreeMap::new();
            for _ in 0..r.u64()? {
                m.insert(channel_of(&mut r)?, r.string()?);
            }
            m
        },
        expires_at: r.i64()?,
        enqueued: {
            let mut s = BTreeSet::new();
            for _ in 0..r.u64()? {
                s.insert(channel_of(&mut r)?);
            }
            s
        },
        owner: r.opt(|r| Owner::parse(r.str()?).ok())?,
        detached: r.bool()?,
        unknown: Default::default(),
    };
    r.end()?;
    Some(reminder)
}

/// What the due index projects of the reminder `pack` made these bytes of (the fields of
/// [`DueReminder`], as [`DueReminder::from`] takes them), reading past the rest without
/// building it: the scheduler's queries and sweeps read every scheduled item, a million of
/// them in the embedded pipeline. Agrees with `DueReminder::from(&unpack(..))` (tested).
pub(super) fn due(id: &str, bytes: &[u8]) -> Option<DueReminder> {
    let mut r = Reader::new(bytes);
    let (status, due_at) = head_of(&mut r)?;
    let subscriber_id = SubscriberId::parse(r.str()?).ok()?;
    let fresh_until = Timestamp::from_millis(due_at.as_millis().wrapping_add(r.i64()?));
    match r.u64()? {
        0 | 1 => {
            r.str()?;
            r.str()?;
        }
        _ => return None,
    }
    let (mut channels, mut addresses) = (Vec::new(), Vec::new());
    for _ in 0..r.u64()? {
        let c = channel_of(&mut r)?;
        channels.push(c);
        addresses.push(Recipient::parse(c, r.str()?).ok()?);
    }
    let payload_version = r.u64()?;
    r.opt(Reader::str)?;
    for _ in 0..r.u64()? {
        channel_of(&mut r)?;
        r.str()?;
    }
    r.i64()?;
    let mut enqueued = Vec::new();
    for _ in 0..r.u64()? {
        enqueued.push(channel_of(&mut r)?);
    }
    channels.retain(|c| !enqueued.contains(c));
    Some(DueReminder {
        reminder_id: ReminderId::parse(id).ok()?,
        subscriber_id,
        due_at,
        fresh_until,
        payload_version,
        channels,
        addresses,
        expiring: status == ReminderStatus::Expired,
    })
}

/// [`due`] of the table's own bytes (held to the whole reminder's in debug builds).
pub(super) fn read_due(id: &str, bytes: &[u8]) -> DueReminder {
    let due = due(id, bytes).expect("an item the in-memory table packed reads back");
    debug_assert_eq!(due, DueReminder::from(&read(id, bytes)));
    due
}

/// Only the table wrote the bytes: an item that does not read back is a bug there.
pub(super) fn read(id: &str, bytes: &[u8]) -> Reminder {
    unpack(id, bytes).expect("an item the in-memory table packed reads back")
}

/// [`head`] of the table's own bytes.
pub(super) fn read_head(bytes: &[u8]) -> (ReminderStatus, Timestamp) {
    head(bytes).expect("an item the in-memory table packed reads back")
}

/// The status and due time of packed bytes, without reading the rest.
pub(super) fn head(bytes: &[u8]) -> Option<(ReminderStatus, Timestamp)> {
    head_of(&mut Reader::new(bytes))
}

/// The subscriber of packed bytes, without reading the rest.
pub(super) fn subscriber(bytes: &[u8]) -> Option<&str> {
    let mut r = Reader::new(bytes);
    head_of(&mut r)?;
    r.str()
}

fn head_of(r: &mut Reader<'_>) -> Option<(ReminderStatus, Timestamp)> {
    let status = *STATUSES.get(usize::try_from(r.u64()?).ok()?)?;
    Some((status, r.time()?))
}

fn status_index(s: ReminderStatus) -> u64 {
    // Exhaustive: a status added to the enum and not to STATUSES does not compile.
    match s {
        ReminderStatus::Scheduled => 0,
        ReminderStatus::Enqueued => 1,
        ReminderStatus::Cancelled => 2,
        ReminderStatus::Expired => 3,
        ReminderStatus::Invalid => 4,
    }
}

fn channel(w: &mut Writer, c: Channel) {
    w.code(&c, &Channel::ALL, c.as_str());
}

fn channel_of(r: &mut Reader<'_>) -> Option<Channel> {
    r.code(&Channel::ALL)?.ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_status_has_its_own_index() {
        for (i, s) in STATUSES.into_iter().enumerate() {
            assert_eq!(status_index(s), i as u64);
        }
    }

    /// The due index's projection read from the bytes is what the whole reminder gives, for
    /// each content kind, with channels enqueued, unsendable, an owner, and in each status.
    #[test]
    fn the_projection_read_from_the_bytes_is_the_reminders() {
        let mut r = Reminder {
            reminder_id: ReminderId::parse("r-1").unwrap(),
            subscriber_id: SubscriberId::parse("s-1").unwrap(),
            due_at: Timestamp::from_millis(1_000_000),
            fresh_until: Timestamp::from_millis(1_600_000),
            content: Content::Text {
                subject: "s".into(),
                body: "b".into(),
            },
            recipients: [
                (
                    Channel::Sms,
                    Recipient::parse(Channel::Sms, "+14155550123").unwrap(),
                ),
                (
                    Channel::Email,
                    Recipient::parse(Channel::Email, "a@example.org").unwrap(),
                ),
            ]
            .into(),
            payload_version: 3,
            status: ReminderStatus::Scheduled,
            invalid_reason: None,
            unsendable: BTreeMap::new(),
            expires_at: 9,
            enqueued: BTreeSet::new(),
            owner: None,
            detached: false,
            unknown: Default::default(),
        };
        let check = |r: &Reminder| {
            let bytes = pack(r);
            let due = due(r.reminder_id.as_str(), &bytes).unwrap();
            assert_eq!(due, DueReminder::from(r));
            due
        };
        assert_eq!(check(&r).channels, vec![Channel::Email, Channel::Sms]);
        r.enqueued.insert(Channel::Sms);
        r.unsendable
            .insert(Channel::Push, "recipients.push: empty".into());
        r.invalid_reason = Some("why".into());
        r.owner = Some(Owner::parse("app-1").unwrap());
        r.content = Content::Template {
            template_id: "t".into(),
            template_data: "{}".into(),
        };
        assert_eq!(check(&r).channels, vec![Channel::Email]);
        for s in STATUSES {
            r.status = s;
            assert_eq!(check(&r).expiring, s == ReminderStatus::Expired);
        }
    }
}
