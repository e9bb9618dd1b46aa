//! A subscriber's items in the memory store: the list of their reminders, and the erasure of
//! what they own.

use super::*;

/// A scan of the table, newest due first: enough for the simulation and tests (DynamoDB keeps
/// the `subscriber-index` for it).
impl SubscriberIndex for MemoryReminderStore {
    async fn by_subscriber(
        &self,
        subscriber: &SubscriberId,
        after: Option<&SubscriberCursor>,
        limit: u32,
    ) -> Result<SubscriberPage, PortError> {
        self.with_table(|t| {
            let mut mine: Vec<Reminder> = t
                .items
                .iter()
                .filter(|(_, b)| packed::subscriber(b) == Some(subscriber.as_str()))
                .map(|(id, b)| packed::read(id, b))
                .filter(|r| match after {
                    None => true,
                    Some(c) => (r.due_at, r.reminder_id.as_str()) < (c.due_at, &c.reminder_id),
                })
                .collect();
            mine.sort_by(|a, b| {
                (b.due_at, b.reminder_id.as_str()).cmp(&(a.due_at, a.reminder_id.as_str()))
            });
            let limit = limit.max(1) as usize;
            let next = (mine.len() > limit).then(|| SubscriberCursor {
                due_at: mine[limit - 1].due_at,
                reminder_id: mine[limit - 1].reminder_id.as_str().to_owned(),
            });
            let items = mine
                .into_iter()
                .take(limit)
                .map(|r| Listed::Summary(summary(&r)))
                .collect();
            SubscriberPage { items, next }
        })
    }
}

fn summary(r: &Reminder) -> ReminderSummary {
    ReminderSummary {
        reminder_id: r.reminder_id.clone(),
        status: r.status,
        due_at: r.due_at,
        fresh_until: r.fresh_until,
        payload_version: r.payload_version,
        channels: r.listed_channels().collect(),
        owner: r.owner.clone(),
    }
}

impl crate::ports::Eraser for MemoryReminderStore {
    async fn delete_reminder(
        &self,
        id: &ReminderId,
        force: bool,
    ) -> Result<crate::ports::Deleted, PortError> {
        use crate::ports::Deleted;
        let shards = self.shards;
        self.with_table(|t| {
            let Some((status, due)) = t.head(id.as_str()) else {
                return Deleted::Missing;
            };
            if !force && editable(status) {
                return Deleted::Pending;
            }
            let shard = due_shard(id, shards);
            t.due.remove(&(shard, due, id.as_str().to_owned()));
            t.scheduled.remove(id.as_str());
            t.items.remove(id.as_str());
            Deleted::Deleted
        })
    }

    async fn delete_preferences(
        &self,
        subscriber: &SubscriberId,
    ) -> Result<crate::ports::Deleted, PortError> {
        use crate::ports::Deleted;
        self.with_table(|t| match t.preferences.remove(subscriber) {
            Some(_) => Deleted::Deleted,
            None => Deleted::Missing,
        })
    }

    async fn delete_series(
        &self,
        id: &crate::domain::SeriesId,
    ) -> Result<crate::ports::Deleted, PortError> {
        Ok(match self.remove_series(id)? {
            true => crate::ports::Deleted::Deleted,
            false => crate::ports::Deleted::Missing,
        })
    }

    async fn lift_suppression(
        &self,
        address: &AddressHash,
    ) -> Result<crate::ports::Deleted, PortError> {
        use crate::ports::Deleted;
        self.with_table(|t| match t.suppressions.remove(address) {
            Some(_) => Deleted::Deleted,
            None => Deleted::Missing,
        })
    }
}
