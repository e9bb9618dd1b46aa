//! Taking due reminders fairly: a merge of the shards' due-time pages, oldest first, with a
//! per-subscriber cap per run (DESIGN §6). Reminders over the cap are skipped, not taken:
//! they stay in the index and lead the next run.

use std::collections::{BTreeMap, VecDeque};

use crate::clock::Timestamp;
use crate::domain::SubscriberId;
use crate::ports::{DueCursor, DueReminder, PortError, ReminderStore};

pub(super) struct Limits {
    pub until: Timestamp,
    pub per_subscriber_cap: u32,
    pub max_take: u32,
    pub max_scan: u32,
    pub page_size: u32,
}

#[derive(Debug, Default)]
pub(super) struct Taken {
    pub picked: Vec<DueReminder>,
    pub scanned: u32,
    pub skipped_over_cap: u32,
    pub queries: u32,
}

struct Shard {
    id: u32,
    buf: VecDeque<DueReminder>,
    cursor: Option<DueCursor>,
    done: bool,
}

pub(super) async fn take_due<S: ReminderStore>(
    store: &S,
    limits: &Limits,
    mut out_of_time: impl FnMut() -> bool,
) -> Result<Taken, PortError> {
    let mut shards: Vec<Shard> = (0..store.shards())
        .map(|id| Shard {
            id,
            buf: VecDeque::new(),
            cursor: None,
            done: false,
        })
        .collect();
    let mut taken = Taken::default();
    let mut per_subscriber: BTreeMap<SubscriberId, u32> = BTreeMap::new();
    while (taken.picked.len() as u32) < limits.max_take
        && taken.scanned < limits.max_scan
        && !out_of_time()
    {
        for shard in shards.iter_mut().filter(|s| s.buf.is_empty() && !s.done) {
            let page = store
                .query_due(
                    shard.id,
                    limits.until,
                    limits.page_size,
                    shard.cursor.as_ref(),
                )
                .await?;
            taken.queries += 1;
            shard.buf.extend(page.items);
            shard.done = page.next.is_none();
            shard.cursor = page.next;
        }
        // The oldest head across shards (ties broken by id, so a run is deterministic).
        let Some(next) = shards
            .iter_mut()
            .filter(|s| !s.buf.is_empty())
            .min_by(|a, b| {
                let (x, y) = (&a.buf[0], &b.buf[0]);
                (x.due_at, &x.reminder_id).cmp(&(y.due_at, &y.reminder_id))
            })
        else {
            break;
        };
        let Some(item) = next.buf.pop_front() else {
            break;
        };
        taken.scanned += 1;
        let count = per_subscriber
            .entry(item.subscriber_id.clone())
            .or_default();
        if *count >= limits.per_subscriber_cap {
            taken.skipped_over_cap += 1;
            continue;
        }
        *count += 1;
        taken.picked.push(item);
    }
    Ok(taken)
}
