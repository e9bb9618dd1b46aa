//! The claim orders the recipient's word against the send (docs/design.md, "Recipient rules"): an
//! opt-out, a suppression or a cancel that lands after the consumer read the reminder but before
//! its claim wins — never sent, no attempt spent. [`BeforeClaim`] lands it at the latest moment
//! there is: inside the claim's own ledger call, right before the conditional write. Any change to
//! how the consumer reads (one batch before the claim, say) must keep these passing; here on
//! in-memory ports, and on the emulator in [`crate::emulator_reads`]. Each case runs on both
//! paths: a plain message (the reminder read before the claim, the rules after it) and a
//! sole one (claimed first, everything read after the claim in one request).

use std::sync::{Arc, Mutex};

use reminders::clock::Timestamp;
use reminders::consumer::{Action, Consumer};
use reminders::domain::{
    Channel, DeadReason, Preferences, Reminder, ReminderId, Retention, SubscriberId, Suppression,
    SuppressionSource,
};
use reminders::ledger::{DeliveryRecord, Status};
use reminders::ports::{
    Ledger, MemoryGate, MemoryLedger, MemoryQueue, MemoryReminderStore, PortError, PortSet,
    ReminderStore,
};
use reminders::providers::secret::SuppressionKeySource;
use reminders::reminder_writes;
use reminders_harness::around::{Around, Call, Hook};
use reminders_harness::ScriptedProvider;
use reminders_harness::{ManualClock, MemoryStack};

use crate::harness::{
    message, queue_urls, reminder, sole_message, suppression_key, test_config, T0,
};

/// A write of the recipient's (or an operator's) that lands right before the claim.
pub enum Landing {
    /// The subscriber's preferences become these (an opt-out).
    Preferences(SubscriberId, Preferences),
    /// The address is suppressed.
    Suppress(Suppression),
    /// The operator cancels the reminder (the ledger first, as `reminder_writes::cancel` does).
    Cancel(ReminderId, Timestamp),
}

/// A hook on a ledger by which [`Landing`] is written right before the first claim (the first
/// write of a `sending` item), through the same stores the consumer uses.
pub struct BeforeClaim<L, R> {
    pub ledger: L,
    pub store: R,
    pub landing: Arc<Mutex<Option<Landing>>>,
}

impl<L: Ledger + Clone, R: ReminderStore> BeforeClaim<L, R> {
    /// `ledger`, with `landing` written before its first claim.
    pub fn around(ledger: L, store: R, landing: Arc<Mutex<Option<Landing>>>) -> Around<L, Self> {
        let hook = BeforeClaim {
            ledger: ledger.clone(),
            store,
            landing,
        };
        Around::new(ledger, hook)
    }

    async fn land(&self, landing: Landing) {
        match landing {
            Landing::Preferences(s, p) => self.store.put_preferences(&s, &p).await.unwrap(),
            Landing::Suppress(sup) => self.store.put_suppression(&sup).await.unwrap(),
            Landing::Cancel(id, now) => {
                let report = reminder_writes::cancel(
                    &self.store,
                    &self.ledger,
                    &id,
                    now,
                    Retention::default(),
                )
                .await
                .unwrap();
                assert!(report.is_some(), "the reminder to cancel exists");
            }
        }
    }
}

impl<L: Ledger + Clone, R: ReminderStore> Hook for BeforeClaim<L, R> {
    async fn before(&self, call: &Call<'_>) -> Result<(), PortError> {
        let Call::PutIf { record, .. } = call else {
            return Ok(());
        };
        if record.status() == Status::Sending {
            let landing = self.landing.lock().unwrap().take();
            if let Some(landing) = landing {
                self.land(landing).await;
            }
        }
        Ok(())
    }
}

pub fn opted_out_of(channel: Channel) -> Preferences {
    serde_json::from_value(serde_json::json!({ "opted_out": [channel.as_str()] })).unwrap()
}

type Ports = PortSet<
    ManualClock,
    Arc<MemoryReminderStore>,
    Around<Arc<MemoryLedger>, BeforeClaim<Arc<MemoryLedger>, Arc<MemoryReminderStore>>>,
    Arc<MemoryGate>,
    Arc<MemoryQueue<ManualClock>>,
    Arc<MemoryQueue<ManualClock>>,
    Arc<ScriptedProvider<ManualClock>>,
>;

/// What became of one single-channel SMS delivery, with `landing` written before its claim.
struct Ran {
    action: Action,
    record: DeliveryRecord,
    calls: u32,
    /// The landing was written (a claim was attempted).
    landed: bool,
    /// Claims the one-read path made, and of them the ones given back.
    one_read: u32,
    released: u32,
}

/// The two messages each case is tried with: plain, and sole.
const PATHS: [bool; 2] = [false, true];

async fn deliver_with(sole: bool, landing: impl FnOnce(&Reminder) -> Option<Landing>) -> Ran {
    let stack = MemoryStack::on(ManualClock::at(T0));
    let MemoryStack {
        clock,
        store,
        ledger,
        queue,
        ..
    } = stack.clone();
    let provider = Arc::new(ScriptedProvider::new(clock.clone(), true));
    let r = reminder("before-claim", &[Channel::Sms]);
    store.insert(&r).await.unwrap();
    let landing = Arc::new(Mutex::new(landing(&r)));
    let ports: Ports = stack
        .ports(provider.clone())
        .map_ledger(|l| BeforeClaim::around(l, store.clone(), landing.clone()));
    let consumer = Consumer::new(ports, test_config(), queue_urls(), 5)
        .with_suppression_key(Some(SuppressionKeySource::Fixed(suppression_key())));
    let msg = match sole {
        true => sole_message(&r, Channel::Sms),
        false => message(&r, Channel::Sms),
    };
    let entry = reminders::ports::OutgoingMessage {
        entry_id: "0".into(),
        body: msg.encode(),
        delay_secs: 0,
    };
    use reminders::ports::DeliveryQueue;
    assert!(queue
        .send_batch(Channel::Sms, &[entry])
        .await
        .unwrap()
        .is_empty());
    let out = reminders_harness::mapping::Mapping::new(&queue_urls(), Channel::Sms, 10, 180)
        .poll(&consumer, None)
        .await
        .unwrap()
        .expect("the message was received");
    let landed = landing.lock().unwrap().is_none();
    Ran {
        action: out.records[0].action,
        record: ledger
            .get(&msg.delivery_key)
            .await
            .unwrap()
            .expect("a ledger item"),
        calls: provider.calls_for(&msg.delivery_key),
        landed,
        one_read: out.metrics.get(Channel::Sms).one_read,
        released: out.metrics.get(Channel::Sms).one_read_released,
    }
}

#[tokio::test]
async fn with_nothing_landing_before_the_claim_it_is_sent() {
    for sole in PATHS {
        let ran = deliver_with(sole, |_| None).await;
        assert_eq!(ran.record.status(), Status::Delivered, "sole: {sole}");
        assert_eq!(ran.calls, 1, "sole: {sole}");
        assert_eq!(
            (ran.one_read, ran.released),
            (u32::from(sole), 0),
            "the path taken"
        );
    }
}

#[tokio::test]
async fn an_opt_out_landing_right_before_the_claim_wins() {
    for sole in PATHS {
        let ran = deliver_with(sole, |r| {
            Some(Landing::Preferences(
                r.subscriber_id.clone(),
                opted_out_of(Channel::Sms),
            ))
        })
        .await;
        assert!(ran.landed, "the opt-out was written before the claim");
        assert_eq!(
            (ran.one_read, ran.released),
            (u32::from(sole), 0),
            "the path taken"
        );
        assert_eq!(ran.calls, 0, "never sent (sole: {sole})");
        assert_eq!(ran.record.status(), Status::Dead, "sole: {sole}");
        assert_eq!(ran.record.dead_reason(), Some(DeadReason::OptedOut));
        assert_eq!(ran.record.attempt_count(), 0, "no attempt spent");
        assert_eq!(ran.action, Action::Ack);
    }
}

#[tokio::test]
async fn a_suppression_landing_right_before_the_claim_wins() {
    for sole in PATHS {
        let ran = deliver_with(sole, |r| {
            let to = &r.recipients[&Channel::Sms];
            let sup = Suppression::record(&suppression_key(), to, SuppressionSource::Operator, T0);
            Some(Landing::Suppress(sup))
        })
        .await;
        assert!(ran.landed, "the suppression was written before the claim");
        assert_eq!(
            (ran.one_read, ran.released),
            (u32::from(sole), 0),
            "the path taken"
        );
        assert_eq!(ran.calls, 0, "never sent (sole: {sole})");
        assert_eq!(ran.record.status(), Status::Dead, "sole: {sole}");
        assert_eq!(ran.record.dead_reason(), Some(DeadReason::Suppressed));
        assert_eq!(ran.record.attempt_count(), 0, "no attempt spent");
    }
}

#[tokio::test]
async fn a_cancel_landing_right_before_the_claim_wins() {
    for sole in PATHS {
        let ran = deliver_with(sole, |r| Some(Landing::Cancel(r.reminder_id.clone(), T0))).await;
        assert!(ran.landed, "the cancel was written before the claim");
        assert_eq!(ran.calls, 0, "never sent (sole: {sole})");
        assert_eq!(ran.record.status(), Status::Cancelled, "sole: {sole}");
        assert_eq!(ran.action, Action::Ack);
    }
}
