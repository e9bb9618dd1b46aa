use std::sync::Mutex;

use reminders_core::domain::{
    AddressHash, Channel, DeliveryKey, Recipient, ReminderId, SubscriberId, SuppressionKey,
};
use reminders_core::ports::reminders::{OP_PREFERENCES, OP_RULES, OP_SUPPRESSION};
use reminders_core::ports::{
    FaultPoint, Ledger, MemoryLedger, MemoryReminderStore, PortError, ReminderStore,
};

use super::{Answer, Around, Call, Faults, Hook, Next, Value};

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

/// Two hooks nest as two wrappers would: a lost response the inner plan raises after the call
/// answered reaches the outer hook as the call's failure.
#[tokio::test]
async fn an_inner_lost_response_reaches_the_outer_hook_as_a_failure() {
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
            "outer after ledger.get failed",
        ],
    );
}

/// A hook that plays the SDK's resend of a write whose answer was lost: every conditional
/// write is made twice, and the caller hears the second answer.
struct SentTwice;

impl Hook for SentTwice {
    async fn around<R: Value>(&self, call: &Call<'_>, next: Next<'_, R>) -> Result<R, PortError> {
        let first = next().await;
        match call {
            Call::PutIf { .. } if first.is_ok() => next().await,
            _ => first,
        }
    }
}

/// A write sent again meets the item its own first try wrote: the caller hears a conflict
/// naming it, and the item is written once.
#[tokio::test]
async fn a_hook_may_make_the_call_again_and_the_caller_hears_the_second_answer() {
    use reminders_core::ports::{Cas, Expected};
    let memory = std::sync::Arc::new(MemoryLedger::default());
    let ledger = Around::new(memory.clone(), SentTwice);
    let key = DeliveryKey::derive(
        &ReminderId::parse("r-1").unwrap(),
        &SubscriberId::parse("s-1").unwrap(),
        Channel::Email,
    );
    let record = first_claim(&key);
    let answer = ledger.put_if(&record, Expected::Absent).await.unwrap();
    let Cas::Conflict(Some(current)) = answer else {
        panic!("the second try meets the first's item, got {answer:?}");
    };
    assert_eq!(*current, record);
    assert_eq!(memory.get(&key).await.unwrap(), Some(record));
}

/// A delivery's first claim, as the consumer writes it.
fn first_claim(key: &DeliveryKey) -> reminders_core::ledger::DeliveryRecord {
    use rand::SeedableRng;
    use reminders_core::clock::Timestamp;
    use reminders_core::ledger::{apply, Change, Ctx, LeaseToken};
    let now = Timestamp::from_millis(1_000_000);
    let claim = Change::Claim {
        token: LeaseToken::generate(&mut rand::rngs::StdRng::seed_from_u64(1)),
        lease_expires_at: now.plus(std::time::Duration::from_secs(60)),
        payload_version: 1,
        policy: Default::default(),
    };
    let ctx = Ctx {
        key: key.clone(),
        now,
        expires_at: 5_000,
        origin: None,
    };
    apply(None, claim, &ctx).expect("a first claim")
}

/// A hook that answers of its own: every reminder reads as missing, and the store is never
/// asked.
struct Gone(std::sync::atomic::AtomicU32);

impl Hook for Gone {
    async fn around<R: Value>(&self, call: &Call<'_>, next: Next<'_, R>) -> Result<R, PortError> {
        match call {
            Call::Get { .. } => Ok(super::cast(None::<reminders_core::domain::Reminder>)),
            _ => {
                self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                next().await
            }
        }
    }
}

#[tokio::test]
async fn a_hook_may_answer_without_making_the_call() {
    let store = Around::new(
        MemoryReminderStore::new(4),
        Gone(std::sync::atomic::AtomicU32::new(0)),
    );
    let made = || store.hook.0.load(std::sync::atomic::Ordering::SeqCst);
    let id = ReminderId::parse("r-1").unwrap();
    assert_eq!(store.get(&id).await.unwrap(), None);
    assert_eq!(made(), 0, "the read answered without the store");
    let sub = SubscriberId::parse("s-1").unwrap();
    assert_eq!(store.preferences(&sub).await.unwrap(), None);
    assert_eq!(made(), 1, "any other call is made");
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

fn batch(n: usize) -> Vec<reminders_core::ports::OutgoingMessage> {
    (0..n)
        .map(|i| reminders_core::ports::OutgoingMessage {
            entry_id: i.to_string(),
            body: format!("m{i}"),
            delay_secs: 0,
        })
        .collect()
}

/// A plan's single-entry failures: SQS answers those entries failed and sends the others;
/// when every entry fails, nothing is sent.
#[tokio::test]
async fn a_plan_fails_single_entries_of_a_batch_and_the_rest_is_sent() {
    use crate::ManualClock;
    use reminders_core::clock::Timestamp;
    use reminders_core::ports::queue::OP_SEND_ENTRY;
    use reminders_core::ports::{DeliveryQueue, MemoryQueue};
    let memory = std::sync::Arc::new(MemoryQueue::new(ManualClock::at(Timestamp::from_millis(0))));
    let faults = Faults::default();
    let queue = Around::new(memory.clone(), faults.clone());
    faults.fail_after(OP_SEND_ENTRY, FaultPoint::Before, 1, 2);
    let failed = queue.send_batch(Channel::Sms, &batch(4)).await.unwrap();
    let ids: Vec<&str> = failed.iter().map(|f| f.entry_id.as_str()).collect();
    assert_eq!(ids, ["1", "2"]);
    assert_eq!(memory.len(Channel::Sms), 2, "entries 0 and 3 sent");
    faults.fail(OP_SEND_ENTRY, FaultPoint::Before, 2);
    let failed = queue.send_batch(Channel::Sms, &batch(2)).await.unwrap();
    assert_eq!(failed.len(), 2);
    assert_eq!(memory.len(Channel::Sms), 2, "nothing more sent");
}

/// Two plans nest: an entry the outer fails is not asked of the inner, which fails the next.
#[tokio::test]
async fn nested_plans_fail_each_entry_once() {
    use crate::ManualClock;
    use reminders_core::clock::Timestamp;
    use reminders_core::ports::queue::OP_SEND_ENTRY;
    use reminders_core::ports::{DeliveryQueue, MemoryQueue};
    let memory = std::sync::Arc::new(MemoryQueue::new(ManualClock::at(Timestamp::from_millis(0))));
    let (outer, inner) = (Faults::default(), Faults::default());
    let queue = Around::new(memory.clone(), (outer.clone(), inner.clone()));
    outer.fail(OP_SEND_ENTRY, FaultPoint::Before, 1);
    inner.fail(OP_SEND_ENTRY, FaultPoint::Before, 1);
    let failed = queue.send_batch(Channel::Sms, &batch(3)).await.unwrap();
    let ids: Vec<&str> = failed.iter().map(|f| f.entry_id.as_str()).collect();
    assert_eq!(ids, ["0", "1"]);
    assert_eq!(memory.len(Channel::Sms), 1);
}

/// A fault on a name no port call carries is refused when it is planted: it would never fire,
/// and the test that planted it would pass without its fault. Every name a call answers is
/// accepted.
#[test]
fn a_fault_on_a_name_no_call_carries_is_refused() {
    use reminders_core::ports::queue::{OP_DEAD_RECEIVE, OP_SEND_ENTRY};
    let faults = Faults::default();
    for &op in Call::NAMES.iter().chain([&OP_SEND_ENTRY]) {
        faults.fail(op, FaultPoint::Before, 1);
    }
    let refused = std::panic::catch_unwind(|| {
        Faults::default().fail(OP_DEAD_RECEIVE, FaultPoint::Before, 1);
    });
    assert!(
        refused.is_err(),
        "a rule on {OP_DEAD_RECEIVE} would never fire"
    );
    let refused = std::panic::catch_unwind(|| Faults::default().corrupt("reminders.gte", 1));
    assert!(refused.is_err(), "a misspelt name is refused too");
}
