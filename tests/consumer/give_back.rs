//! The one-read give-back when an edit lands between the claim and the read: the edit's
//! horizon write lands on the item the claim just created (keeping our lease, bumping its
//! version), the read sees the edited reminder, and the claim is still undone — never left
//! `sending` for a takeover to judge `ambiguous` with nothing sent.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use reminders::clock::{ManualClock, Timestamp};
use reminders::consumer::Consumer;
use reminders::domain::{Channel, DeliveryKey, PerChannel, Retention};
use reminders::ledger::{DeliveryRecord, Status};
use reminders::outbox::{self, Edit};
use reminders::ports::{
    Cas, DeliveryQueue, Expected, Ledger, MemoryGate, MemoryLedger, MemoryQueue,
    MemoryReminderStore, OutgoingMessage, PortError, PortSet, ReminderStore, ScriptedProvider,
};
use reminders::providers::secret::SuppressionKeySource;

use crate::harness::{queue_urls, reminder, sole_message, suppression_key, test_config, T0};

const SMS: Channel = Channel::Sms;

/// A ledger on which, right after the first claim lands, the application's edit is applied
/// (through the same stores the consumer uses).
struct AfterClaim {
    inner: Arc<MemoryLedger>,
    store: Arc<MemoryReminderStore>,
    edit: Mutex<Option<Edit>>,
}

impl Ledger for AfterClaim {
    async fn get(&self, key: &DeliveryKey) -> Result<Option<DeliveryRecord>, PortError> {
        self.inner.get(key).await
    }

    async fn put_if(&self, record: &DeliveryRecord, expected: Expected) -> Result<Cas, PortError> {
        let answer = self.inner.put_if(record, expected).await?;
        let claimed = answer == Cas::Applied && record.status() == Status::Sending;
        let edit = claimed.then(|| self.edit.lock().unwrap().take()).flatten();
        if let Some(edit) = edit {
            let id = reminders::domain::ReminderId::parse("snoozed").unwrap();
            let store = &*self.store;
            let edited = outbox::edit(store, &*self.inner, &id, edit, T0, Retention::default())
                .await
                .unwrap();
            assert!(
                matches!(edited, outbox::Edited::Edited(_)),
                "the edit applied: {edited:?}"
            );
        }
        Ok(answer)
    }

    async fn delete_if(&self, key: &DeliveryKey, expected: Expected) -> Result<Cas, PortError> {
        self.inner.delete_if(key, expected).await
    }
}

type Ports = PortSet<
    ManualClock,
    Arc<MemoryReminderStore>,
    AfterClaim,
    Arc<MemoryGate>,
    Arc<MemoryQueue<ManualClock>>,
    Arc<MemoryQueue<ManualClock>>,
    Arc<ScriptedProvider<ManualClock>>,
>;

/// A snooze at the due time: ten minutes later, fresh ten minutes longer. Its horizon write
/// lands on the item the one-read claim created, before the read.
#[tokio::test]
async fn an_edit_between_the_claim_and_the_read_leaves_no_claim_behind() {
    let clock = ManualClock::at(T0);
    let store = Arc::new(MemoryReminderStore::new(4));
    let ledger = Arc::new(MemoryLedger::default());
    let queue = Arc::new(MemoryQueue::new(clock.clone()));
    // Not idempotent (SES, SNS): a lapsed claim would die `ambiguous`.
    let provider = Arc::new(ScriptedProvider::new(clock.clone(), false));
    let r = reminder("snoozed", &[SMS]);
    store.insert(&r).await.unwrap();
    let later = Duration::from_secs(600);
    let snooze = Edit {
        due_at: Some(r.due_at.plus(later)),
        fresh_until: Some(r.fresh_until.plus(later)),
        content: None,
        recipients: None,
        detach: false,
    };
    let ports: Ports = PortSet {
        clock: clock.clone(),
        reminders: store.clone(),
        ledger: AfterClaim {
            inner: ledger.clone(),
            store: store.clone(),
            edit: Mutex::new(Some(snooze)),
        },
        gate: Arc::new(MemoryGate::default()),
        queue: queue.clone(),
        dead_letters: Arc::new(MemoryQueue::new(clock.clone())),
        providers: PerChannel::from_fn(|_| provider.clone()),
    };
    let consumer = Consumer::new(ports, test_config(), queue_urls(), 9)
        .with_suppression_key(Some(SuppressionKeySource::Fixed(suppression_key())));
    let msg = sole_message(&r, SMS);
    let entry = OutgoingMessage {
        entry_id: "0".into(),
        body: msg.encode(),
        delay_secs: 0,
    };
    assert!(queue.send_batch(SMS, &[entry]).await.unwrap().is_empty());
    let urls = queue_urls();
    let poll = |at: Timestamp| {
        clock.set(at);
        reminders_harness::local::poll_once(&consumer, &urls, SMS, 10, 30, None)
    };
    let out = poll(T0).await.unwrap().expect("received");
    let m = out.metrics.get(SMS);
    assert_eq!(
        (m.one_read, m.one_read_released),
        (1, 1),
        "claimed, given back"
    );
    assert_eq!(provider.calls_for(&msg.delivery_key), 0);
    // The two-read path held it for the new due time: no claim left behind.
    let item = ledger.get(&msg.delivery_key).await.unwrap();
    assert!(
        item.as_ref().is_none_or(|i| i.status() != Status::Sending),
        "no claim left sending: {item:?}"
    );
    // Past the new due time (and past any lease), it is sent once, never `ambiguous`.
    let mut at = T0;
    for _ in 0..40 {
        at = at.plus(Duration::from_secs(30));
        let _ = poll(at).await.unwrap();
    }
    let item = ledger
        .get(&msg.delivery_key)
        .await
        .unwrap()
        .expect("an item");
    assert_eq!(item.status(), Status::Delivered, "{item:?}");
    assert_eq!(provider.calls_for(&msg.delivery_key), 1);
}
