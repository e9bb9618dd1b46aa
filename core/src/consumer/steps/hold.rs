//! Waiting: keep the message until a time, on its visibility when that fits and the receive
//! budget has room, otherwise as a fresh delayed copy with `not_before` (docs/design.md, "Receive
//! budget"). The handler never sleeps: the delay goes to SQS.

use super::{Action, InFlight};
use crate::clock::Timestamp;
use crate::domain::DeliveryMessage;
use crate::policy::{wait_until, Wait, MAX_DELAY_SECS};
use crate::ports::{DeliveryQueue, OutgoingMessage, PortError, Ports};

impl<P: Ports> InFlight<'_, P> {
    pub(super) async fn hold(
        &mut self,
        msg: &DeliveryMessage,
        at: Timestamp,
        now: Timestamp,
    ) -> Result<Action, PortError> {
        let cfg = &self.consumer.cfg;
        let queue = self.consumer.ports.queue();
        let near_limit = self.inc.receive_count + cfg.reenqueue_margin >= cfg.max_receive_count;
        let wait = wait_until(now, at);
        if let (Wait::Visibility { secs }, false) = (wait, near_limit) {
            queue
                .change_visibility(self.inc.channel, &self.inc.receipt_handle, secs)
                .await?;
            return Ok(Action::Hold { secs });
        }
        let delay_secs = match wait {
            Wait::Visibility { secs } => secs.min(MAX_DELAY_SECS as u32),
            Wait::Reenqueue { delay_secs, .. } => delay_secs,
        };
        let mut copy = msg.clone();
        copy.not_before = Some(at);
        let entry = OutgoingMessage {
            entry_id: "0".into(),
            body: copy.encode(),
            delay_secs,
        };
        let failed = queue.send_batch(self.inc.channel, &[entry]).await?;
        if let Some(f) = failed.first() {
            return Err(PortError::Unavailable {
                op: "consumer.reenqueue",
                message: format!("copy not accepted: {}", f.code),
            });
        }
        self.m.reenqueued += 1;
        Ok(Action::Reenqueued)
    }
}
