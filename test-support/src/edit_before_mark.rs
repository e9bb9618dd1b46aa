//! [`EditBeforeMark`]: an application's edit landing between a writer's read and its
//! conditional mark, the interleaving behind a cancel against an edit that adds a channel and a
//! stale edit racing the expiry.

use std::sync::{Arc, Mutex};

use reminders::clock::Timestamp;
use reminders::ports::{MemoryLedger, MemoryReminderStore, PortError};
use reminders::reminder_writes::{self, Edit, Edited, Retention};
use reminders_harness::around::{Around, Call, Hook};

/// A hook on a reminders table by which an application's edit lands right before the first
/// mark (a scheduler's or a cancel's): the writer read one version, the edit makes the next.
pub struct EditBeforeMark {
    pub store: Arc<MemoryReminderStore>,
    pub ledger: Arc<MemoryLedger>,
    pub edit: Mutex<Option<Edit>>,
    /// When the edit is made.
    pub now: Timestamp,
}

impl EditBeforeMark {
    /// `store`, with `edit` landing (at `now`) before its first mark.
    pub fn around(
        store: Arc<MemoryReminderStore>,
        ledger: Arc<MemoryLedger>,
        edit: Edit,
        now: Timestamp,
    ) -> Around<Arc<MemoryReminderStore>, EditBeforeMark> {
        let hook = EditBeforeMark {
            store: store.clone(),
            ledger,
            edit: Mutex::new(Some(edit)),
            now,
        };
        Around::new(store, hook)
    }
}

impl Hook for EditBeforeMark {
    async fn before(&self, call: &Call<'_>) -> Result<(), PortError> {
        let Call::Mark { id, .. } = call else {
            return Ok(());
        };
        let edit = self.edit.lock().unwrap().take();
        if let Some(edit) = edit {
            let got = reminder_writes::edit(
                &*self.store,
                &*self.ledger,
                id,
                edit,
                self.now,
                Retention::default(),
            )
            .await
            .unwrap();
            assert!(matches!(got, Edited::Edited(_)), "{got:?}");
        }
        Ok(())
    }
}
