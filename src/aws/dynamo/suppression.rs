//! Suppressions in the reminders table (docs/design.md, "Suppressions"): one item per suppressed
//! (channel, address), keyed `suppress#<s1_ hash>`, holding the hash, the masked address, the
//! source and the time — never the address. `#` never occurs in a reminder id and the item has
//! neither `due_shard` nor `subscriber_id`, so no index holds it. The consumer reads one by its key
//! (strongly consistent) before a send; operators list and lift them
//! (`remindctl suppression list | remove`).

use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::delete_item::DeleteItemError;
use aws_sdk_dynamodb::operation::get_item::GetItemError;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::scan::ScanError;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue};

use super::reminders::DynamoReminderStore;
use super::reminders::{decode_preferences, preferences_key};
use super::{dynamo_kind, s};
use crate::aws::error::{corrupt, port_error};
use crate::domain::{AddressHash, Preferences, ReminderId, SubscriberId, Suppression};
use crate::ports::reminders::{
    DeliveryRead, OP_DELIVERY_READ, OP_GET, OP_PUT_SUPPRESSION, OP_RULES, OP_SUPPRESSION,
};
use crate::ports::PortError;
use aws_sdk_dynamodb::operation::batch_get_item::BatchGetItemError;
use aws_sdk_dynamodb::types::KeysAndAttributes;

pub const KIND: &str = "suppression";

/// The item key of an address's suppression.
pub fn suppression_key(address: &AddressHash) -> String {
    format!("suppress#{}", address.as_str())
}

fn decode(
    mut item: std::collections::HashMap<String, AttributeValue>,
    op: &'static str,
) -> Result<Suppression, PortError> {
    let Some(value) = item.remove(KIND) else {
        return Err(corrupt(op, "suppression: missing"));
    };
    serde_dynamo::from_attribute_value(value).map_err(|e| corrupt(op, format!("suppression: {e}")))
}

/// Rounds of `UnprocessedKeys` a batch read retries before it gives up (as unavailable).
const BATCH_ROUNDS: usize = 4;

impl DynamoReminderStore {
    /// The subscriber's preferences and the address's suppression in one `BatchGetItem`
    /// (strongly consistent).
    pub(super) async fn rules_batch(
        &self,
        subscriber: &SubscriberId,
        address: &AddressHash,
    ) -> Result<(Option<Preferences>, Option<Suppression>), PortError> {
        let prefs_key = preferences_key(subscriber);
        let sup_key = suppression_key(address);
        let items = self.batch_get(&[&prefs_key, &sup_key], OP_RULES).await?;
        rules_of(items, &prefs_key, &sup_key)
    }

    /// The consumer's one read after a sole message's claim: the reminder, the preferences
    /// and (given its hash) the address's suppression, in one strongly consistent
    /// `BatchGetItem`. An unreadable reminder is its own answer (`Corrupt`), not the batch's.
    pub(super) async fn delivery_batch(
        &self,
        id: &ReminderId,
        subscriber: &SubscriberId,
        address: Option<&AddressHash>,
    ) -> Result<DeliveryRead, PortError> {
        let prefs_key = preferences_key(subscriber);
        let sup_key = address.map(suppression_key);
        let mut keys = vec![id.as_str(), prefs_key.as_str()];
        keys.extend(sup_key.as_deref());
        let items = self.batch_get(&keys, OP_DELIVERY_READ).await?;
        let (mut reminder, mut rules) = (Ok(None), Vec::new());
        for item in items {
            match item.get("reminder_id") {
                Some(AttributeValue::S(k)) if k == id.as_str() => {
                    reminder = super::item::reminder(item)
                        .map(Some)
                        .map_err(|e| corrupt(OP_GET, e));
                }
                _ => rules.push(item),
            }
        }
        let (prefs, suppression) = rules_of(rules, &prefs_key, sup_key.as_deref().unwrap_or(""))?;
        Ok(DeliveryRead {
            reminder,
            prefs,
            suppression,
        })
    }

    /// One strongly consistent `BatchGetItem` of `keys`, retrying keys DynamoDB left
    /// unprocessed.
    async fn batch_get(
        &self,
        keys: &[&str],
        op: &'static str,
    ) -> Result<Vec<std::collections::HashMap<String, AttributeValue>>, PortError> {
        let key = |k: &str| std::collections::HashMap::from([("reminder_id".to_owned(), s(k))]);
        let mut pending = KeysAndAttributes::builder()
            .set_keys(Some(keys.iter().map(|k| key(k)).collect()))
            .consistent_read(true)
            .build()
            .map_err(|e| invariant(e.to_string()))?;
        let mut items = Vec::new();
        for _ in 0..BATCH_ROUNDS {
            let out = self
                .client
                .batch_get_item()
                .request_items(&self.table, pending.clone())
                .send()
                .await
                .map_err(|e| port_error(op, e, dynamo_kind!(BatchGetItemError)))?;
            if let Some(mut got) = out.responses {
                items.extend(got.remove(&self.table).unwrap_or_default());
            }
            match out.unprocessed_keys.and_then(|mut u| u.remove(&self.table)) {
                Some(rest) if !rest.keys().is_empty() => {
                    pending = KeysAndAttributes::builder()
                        .set_keys(Some(rest.keys))
                        .consistent_read(true)
                        .build()
                        .map_err(|e| invariant(e.to_string()))?;
                    // DynamoDB left keys unprocessed under load: a short pause before asking
                    // again.
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
                _ => return Ok(items),
            }
        }
        Err(PortError::Throttled {
            op,
            message: "keys left unprocessed by every round of the batch read".into(),
        })
    }

    pub(super) async fn get_suppression(
        &self,
        address: &AddressHash,
    ) -> Result<Option<Suppression>, PortError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("reminder_id", s(suppression_key(address)))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| port_error(OP_SUPPRESSION, e, dynamo_kind!(GetItemError)))?;
        // An unreadable item fails the read: the address may be dead, and sending to it is
        // worse than retrying (an operator can lift it by its hash).
        out.item.map(|i| decode(i, OP_SUPPRESSION)).transpose()
    }

    /// The first suppression of an address stands: a later answer changes nothing.
    pub(super) async fn insert_suppression(&self, sup: &Suppression) -> Result<(), PortError> {
        let value: AttributeValue =
            serde_dynamo::to_attribute_value(sup).map_err(|e| corrupt(OP_PUT_SUPPRESSION, e))?;
        let put = self
            .client
            .put_item()
            .table_name(&self.table)
            .item("reminder_id", s(suppression_key(&sup.address_hash)))
            .item("kind", s(KIND))
            .item(KIND, value)
            .condition_expression("attribute_not_exists(reminder_id)")
            .send()
            .await;
        match put {
            Ok(_) => Ok(()),
            Err(SdkError::ServiceError(e))
                if matches!(e.err(), PutItemError::ConditionalCheckFailedException(_)) =>
            {
                Ok(())
            }
            Err(e) => Err(port_error(
                OP_PUT_SUPPRESSION,
                e,
                dynamo_kind!(PutItemError),
            )),
        }
    }

    /// Every suppression, oldest first, and the keys of items that do not decode (so an
    /// operator can lift those too). A filtered scan: an operator's command, not a hot path.
    pub async fn suppressions(&self) -> Result<(Vec<Suppression>, Vec<String>), PortError> {
        let mut found = Vec::new();
        let mut unreadable = Vec::new();
        let mut start = None;
        loop {
            let page = self
                .client
                .scan()
                .table_name(&self.table)
                .filter_expression("#kind = :kind")
                .expression_attribute_names("#kind", "kind")
                .expression_attribute_values(":kind", s(KIND))
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(|e| port_error(OP_SUPPRESSION, e, dynamo_kind!(ScanError)))?;
            for item in page.items.unwrap_or_default() {
                let key = match item.get("reminder_id") {
                    Some(AttributeValue::S(k)) => k.clone(),
                    _ => String::new(),
                };
                match decode(item, OP_SUPPRESSION) {
                    Ok(sup) => found.push(sup),
                    Err(_) => unreadable.push(key),
                }
            }
            start = page.last_evaluated_key;
            if start.is_none() {
                break;
            }
        }
        found.sort_by(|a: &Suppression, b| (a.at, &a.address_hash).cmp(&(b.at, &b.address_hash)));
        Ok((found, unreadable))
    }

    /// Lift an address's suppression: the one it was, if there was one (readable or not).
    pub async fn lift_suppression(
        &self,
        address: &AddressHash,
    ) -> Result<Option<Result<Suppression, String>>, PortError> {
        let out = self
            .client
            .delete_item()
            .table_name(&self.table)
            .key("reminder_id", s(suppression_key(address)))
            .condition_expression("#kind = :kind")
            .expression_attribute_names("#kind", "kind")
            .expression_attribute_values(":kind", s(KIND))
            .return_values(ReturnValue::AllOld)
            .send()
            .await;
        match out {
            Ok(out) => Ok(out
                .attributes
                .map(|item| decode(item, OP_SUPPRESSION).map_err(|e| e.to_string()))),
            Err(SdkError::ServiceError(e))
                if matches!(e.err(), DeleteItemError::ConditionalCheckFailedException(_)) =>
            {
                Ok(None)
            }
            Err(e) => Err(port_error(OP_SUPPRESSION, e, dynamo_kind!(DeleteItemError))),
        }
    }
}

fn invariant(message: String) -> PortError {
    PortError::Invariant {
        op: OP_RULES,
        message,
    }
}

/// The two items a batch read returned, by key.
fn rules_of(
    items: Vec<std::collections::HashMap<String, AttributeValue>>,
    prefs_key: &str,
    sup_key: &str,
) -> Result<(Option<Preferences>, Option<Suppression>), PortError> {
    let (mut prefs, mut sup) = (None, None);
    for item in items {
        match item.get("reminder_id") {
            Some(AttributeValue::S(k)) if k == prefs_key => {
                prefs = Some(decode_preferences(item)?);
            }
            Some(AttributeValue::S(k)) if k == sup_key => sup = Some(decode(item, OP_SUPPRESSION)?),
            _ => {}
        }
    }
    Ok((prefs, sup))
}
