//! The origin (reminder, subscriber, channel) on the ledger item: named by the first write
//! that knows it, kept by every later one, absent from items written before it existed.

use super::*;

fn origin(reminder: &str) -> Origin {
    Origin {
        reminder_id: ReminderId::parse(reminder).unwrap(),
        subscriber_id: SubscriberId::parse("s").unwrap(),
        channel: Channel::Sms,
        fallback_from: None,
        chain_head: false,
        chain: Vec::new(),
        unknown: Default::default(),
    }
}

fn naming(o: Option<Origin>) -> Ctx {
    Ctx {
        origin: o,
        ..ctx_at(T0)
    }
}

#[test]
fn the_first_write_names_the_origin_and_later_writes_keep_it() {
    let first = apply(None, claim(tok(1)), &naming(Some(origin("r")))).unwrap();
    assert_eq!(first.origin(), Some(&origin("r")));
    let deliver = Change::Deliver {
        token: tok(1),
        receipt: None,
    };
    // A writer that does not know it (None), or names another, changes nothing.
    let delivered = apply(Some(&first), deliver, &naming(None)).unwrap();
    assert_eq!(delivered.origin(), Some(&origin("r")));
    let extended = apply(Some(&delivered), Change::Extend, &naming(Some(origin("x")))).unwrap();
    assert_eq!(extended.origin(), Some(&origin("r")));
}

#[test]
fn an_item_without_origin_decodes_and_gets_one_from_its_next_write() {
    let old = apply(None, claim(tok(1)), &naming(None)).unwrap();
    assert_eq!(old.origin(), None);
    let json = serde_json::to_value(&old).unwrap();
    assert!(
        json.get("origin").is_none(),
        "not stored when unknown: {json}"
    );
    let decoded: DeliveryRecord = serde_json::from_value(json).unwrap();
    let cancelled_later = Change::Release {
        token: tok(1),
        why: "lease too short",
    };
    let next = apply(Some(&decoded), cancelled_later, &naming(Some(origin("r")))).unwrap();
    assert_eq!(next.origin(), Some(&origin("r")));
}
