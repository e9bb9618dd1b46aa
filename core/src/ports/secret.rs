//! The suppression key's source (docs/design.md, "Suppressions"): a fixed key (local runs, the
//! harness), or a secret read on first use through [`SecretRead`]. The AWS crate reads Secrets
//! Manager; nothing here knows it.

use std::future::Future;
use std::pin::Pin;

use crate::domain::SuppressionKey;
use crate::ports::PortError;

const OP_SUPPRESSION_KEY: &str = "secrets.suppression_key";

/// A secret's string, read (and cached) by whoever holds it: Secrets Manager on AWS.
pub trait SecretRead: Send + Sync {
    /// The secret's name for logs (its ARN); never its value.
    fn name(&self) -> &str;
    /// The secret's string, or why it could not be had.
    fn read(&self) -> Pin<Box<dyn Future<Output = Result<String, String>> + Send + '_>>;
}

/// Where the suppression key comes from. A secret is read on first use (never at cold start:
/// nothing at init touches the network) and kept for the container's life; a failed read
/// fails only the record that needed it, which is retried.
pub enum SuppressionKeySource {
    Fixed(SuppressionKey),
    Secret(Box<dyn SecretRead>),
}

impl std::fmt::Debug for SuppressionKeySource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SuppressionKeySource::Fixed(_) => f.write_str("Fixed(<redacted>)"),
            SuppressionKeySource::Secret(s) => write!(f, "Secret({})", s.name()),
        }
    }
}

impl SuppressionKeySource {
    /// The key: a secret that cannot be read is unavailable (retried); one that is no key
    /// (under 16 bytes) is refused.
    pub async fn get(&self) -> Result<SuppressionKey, PortError> {
        match self {
            SuppressionKeySource::Fixed(k) => Ok(k.clone()),
            SuppressionKeySource::Secret(s) => {
                let raw = s.read().await.map_err(|message| PortError::Unavailable {
                    op: OP_SUPPRESSION_KEY,
                    message,
                })?;
                SuppressionKey::new(raw.into_bytes()).map_err(|e| PortError::Refused {
                    op: OP_SUPPRESSION_KEY,
                    message: e.to_string(),
                })
            }
        }
    }
}
