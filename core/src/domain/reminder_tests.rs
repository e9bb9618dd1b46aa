use super::*;

fn new_reminder() -> NewReminder {
    NewReminder {
        reminder_id: ReminderId::parse("r1").unwrap(),
        subscriber_id: SubscriberId::parse("s1").unwrap(),
        due_at: Timestamp::from_millis(1_000_000),
        fresh_until: None,
        content: Content::Text {
            subject: "Pickup".into(),
            body: "at 5pm".into(),
        },
        recipients: vec![Recipient::parse(Channel::Sms, "+14155550123").unwrap()],
    }
}

#[test]
fn defaults_freshness_and_ttl() {
    let r = Reminder::new(
        new_reminder(),
        Duration::from_secs(600),
        Duration::from_secs(86_400),
    )
    .unwrap();
    assert_eq!(r.fresh_until, Timestamp::from_millis(1_600_000));
    assert_eq!(r.expires_at, 1_600 + 86_400);
    assert_eq!(r.payload_version, 1);
    assert_eq!(r.channels().collect::<Vec<_>>(), vec![Channel::Sms]);
}

#[test]
fn refuses_inconsistent_reminders() {
    let mut n = new_reminder();
    n.fresh_until = Some(n.due_at);
    assert_eq!(
        Reminder::new(n, Duration::ZERO, Duration::ZERO),
        Err(ReminderError::FreshBeforeDue)
    );
    // A window no longer than the clock margin could never be sent.
    let mut n = new_reminder();
    n.fresh_until = Some(n.due_at.plus(CLOCK_MARGIN));
    assert_eq!(
        Reminder::new(n, Duration::ZERO, Duration::ZERO),
        Err(ReminderError::FreshBeforeDue)
    );
    let mut n = new_reminder();
    n.fresh_until = Some(n.due_at.plus(CLOCK_MARGIN + Duration::from_millis(1)));
    assert!(Reminder::new(n, Duration::ZERO, Duration::ZERO).is_ok());
    let mut n = new_reminder();
    n.recipients.clear();
    assert_eq!(
        Reminder::new(n, Duration::from_secs(60), Duration::ZERO),
        Err(ReminderError::NoRecipients)
    );
    let mut n = new_reminder();
    n.recipients
        .push(Recipient::parse(Channel::Sms, "+14155550199").unwrap());
    assert_eq!(
        Reminder::new(n, Duration::from_secs(60), Duration::ZERO),
        Err(ReminderError::DuplicateChannel(Channel::Sms))
    );
    let mut n = new_reminder();
    n.content = Content::Template {
        template_id: "t".into(),
        template_data: "[1]".into(),
    };
    assert_eq!(
        Reminder::new(n, Duration::from_secs(60), Duration::ZERO),
        Err(ReminderError::BadTemplateData)
    );
}

#[test]
fn shard_hash_is_stable_and_in_range() {
    let id = ReminderId::parse("r1").unwrap();
    let first = due_shard(&id, 8);
    assert!(first < 8);
    assert_eq!(due_shard(&id, 8), first);
    assert_eq!(due_shard(&id, 1), 0);
}
