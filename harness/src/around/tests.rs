use std::sync::Mutex;

use reminders_core::domain::{
    AddressHash, Channel, DeliveryKey, Recipient, ReminderId, SubscriberId, SuppressionKey,
};
use reminders_core::ports::reminders::{OP_PREFERENCES, OP_RULES, OP_SUPPRESSION};
use reminders_core::ports::{
    FaultPoint, Faults, Ledger, MemoryLedger, MemoryReminderStore, PortError, ReminderStore,
};

use super::{Answer, Around, Call, Hook};

/// The consumer's read of the rules through the wrapper is the wrapped store's own, one call
/// (one `BatchGetItem` on DynamoDB, as deployed): a fault planted on either single read leaves
/// it alone, one planted on the batch fails it, and without an address it is the preferences'
/// one read.
#[tokio::test]
async fn the_rules_read_is_passed_through_as_one_call() {
    let faults = Faults::default();
    let store = Around::new(MemoryReminderStore::new(4), faults.clone());
    let sub = SubscriberId::parse("sub-1").unwrap();
    let key = SuppressionKey::new(b"wrap tests' suppression key".to_vec()).unwrap();
    let to = Recipient::parse(Channel::Sms, "+14155550123").unwrap();
    let address = AddressHash::of(&key, &to);
    faults.fail(OP_PREFERENCES, FaultPoint::Before, 1);
    faults.fail(OP_SUPPRESSION, FaultPoint::Before, 1);
    let read = store.recipient_rules(&sub, Some(&address)).await;
    assert_eq!(read.unwrap(), (None, None), "no single read was made");
    faults.clear();
    faults.fail(OP_RULES, FaultPoint::After, 1);
    assert!(store.recipient_rules(&sub, Some(&address)).await.is_err());
    assert!(store.recipient_rules(&sub, Some(&address)).await.is_ok());
    faults.fail(OP_PREFERENCES, FaultPoint::Before, 1);
    assert!(store.recipient_rules(&sub, None).await.is_err());
    assert!(store.recipient_rules(&sub, None).await.is_ok());
}

/// Writes down each call it sees, before and after, with whether the call answered.
#[derive(Default)]
struct Log {
    tag: &'static str,
    seen: std::sync::Arc<Mutex<Vec<String>>>,
    splits: bool,
}

impl Hook for Log {
    async fn before(&self, call: &Call<'_>) -> Result<(), PortError> {
        self.seen
            .lock()
            .unwrap()
            .push(format!("{} before {}", self.tag, call.name()));
        Ok(())
    }

    fn after(&self, call: &Call<'_>, answer: Answer<'_>) -> Result<(), PortError> {
        let how = if answer.is_ok() { "answered" } else { "failed" };
        self.seen
            .lock()
            .unwrap()
            .push(format!("{} after {} {how}", self.tag, call.name()));
        Ok(())
    }

    fn splits_compound_reads(&self) -> bool {
        self.splits
    }
}

/// Two hooks compose: the outer's before runs first and its after last.
#[tokio::test]
async fn hooks_compose_outer_before_inner_and_after_it() {
    let seen = std::sync::Arc::new(Mutex::new(Vec::new()));
    let log = |tag| Log {
        tag,
        seen: seen.clone(),
        splits: false,
    };
    let ledger = Around::new(MemoryLedger::default(), (log("outer"), log("inner")));
    let key = DeliveryKey::derive(
        &ReminderId::parse("r-1").unwrap(),
        &SubscriberId::parse("s-1").unwrap(),
        Channel::Email,
    );
    assert_eq!(ledger.get(&key).await.unwrap(), None);
    assert_eq!(
        *seen.lock().unwrap(),
        [
            "outer before ledger.get",
            "inner before ledger.get",
            "inner after ledger.get answered",
            "outer after ledger.get answered",
        ]
    );
}

/// A fault plan checks after a call only when the call answered: a rule for a lost response
/// waits for a call that was made.
#[tokio::test]
async fn a_lost_response_waits_for_a_call_that_answered() {
    let (outer, inner) = (Faults::default(), Faults::default());
    let ledger = Around::new(
        Around::new(MemoryLedger::default(), inner.clone()),
        outer.clone(),
    );
    let key = DeliveryKey::derive(
        &ReminderId::parse("r-1").unwrap(),
        &SubscriberId::parse("s-1").unwrap(),
        Channel::Email,
    );
    let op = reminders_core::ports::ledger::OP_GET;
    outer.fail(op, FaultPoint::After, 1);
    inner.fail(op, FaultPoint::Before, 1);
    let point = |r: Result<_, PortError>| match r {
        Err(PortError::Injected { point, .. }) => Some(point),
        _ => None,
    };
    assert_eq!(point(ledger.get(&key).await), Some(FaultPoint::Before));
    assert_eq!(point(ledger.get(&key).await), Some(FaultPoint::After));
    assert_eq!(ledger.get(&key).await.unwrap(), None);
}

/// A failing hook ends the call there: a fault the inner plan raises after the call answered is
/// the caller's answer, and the outer hook does not see the call end.
#[tokio::test]
async fn an_inner_lost_response_ends_the_call_before_the_outer_after() {
    let seen = std::sync::Arc::new(Mutex::new(Vec::new()));
    let outer = Log {
        tag: "outer",
        seen: seen.clone(),
        splits: false,
    };
    let faults = Faults::default();
    let ledger = Around::new(MemoryLedger::default(), (outer, faults.clone()));
    let key = DeliveryKey::derive(
        &ReminderId::parse("r-1").unwrap(),
        &SubscriberId::parse("s-1").unwrap(),
        Channel::Email,
    );
    assert_eq!(ledger.get(&key).await.unwrap(), None);
    faults.fail(reminders_core::ports::ledger::OP_GET, FaultPoint::After, 1);
    assert!(matches!(
        ledger.get(&key).await,
        Err(PortError::Injected {
            point: FaultPoint::After,
            ..
        })
    ));
    assert_eq!(
        *seen.lock().unwrap(),
        [
            "outer before ledger.get",
            "outer after ledger.get answered",
            "outer before ledger.get",
        ],
        "the inner plan's lost response fails the call before the outer's after"
    );
}

/// A hook that models single reads sees a delivery's read as its parts, each named; a hook
/// that does not sees one call.
#[tokio::test]
async fn a_splitting_hook_sees_a_delivery_read_as_its_single_reads() {
    let sub = SubscriberId::parse("sub-1").unwrap();
    let id = ReminderId::parse("r-1").unwrap();
    for (splits, shared, expected) in [
        (
            true,
            false,
            vec![
                "x before reminders.get",
                "x after reminders.get answered",
                "x before reminders.preferences",
                "x after reminders.preferences answered",
            ],
        ),
        (
            false,
            false,
            vec![
                "x before reminders.delivery_read",
                "x after reminders.delivery_read answered",
            ],
        ),
        // A shared hook (the simulation's one meter) splits them too.
        (
            true,
            true,
            vec![
                "x before reminders.get",
                "x after reminders.get answered",
                "x before reminders.preferences",
                "x after reminders.preferences answered",
            ],
        ),
    ] {
        let seen = std::sync::Arc::new(Mutex::new(Vec::new()));
        let hook = Log {
            tag: "x",
            seen: seen.clone(),
            splits,
        };
        let read = if shared {
            let store = Around::new(MemoryReminderStore::new(4), std::sync::Arc::new(hook));
            store.delivery_read(&id, &sub, None).await.unwrap()
        } else {
            let store = Around::new(MemoryReminderStore::new(4), hook);
            store.delivery_read(&id, &sub, None).await.unwrap()
        };
        assert!(matches!(read.reminder, Ok(None)));
        assert_eq!(*seen.lock().unwrap(), expected, "splits: {splits}");
    }
}
