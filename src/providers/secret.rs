//! Bearer tokens held in AWS Secrets Manager (`<CHANNEL>_HTTP_TOKEN_SECRET_ARN`), never in the
//! function's environment: read on first use after a cold start, kept for the container's
//! life, and read again after the remote answers 401 (a rotated token is picked up by the next
//! send). The secret's `SecretString` is the token. A plain `<CHANNEL>_HTTP_TOKEN` remains for
//! local runs only.

use tokio::sync::Mutex;

/// Where a channel's bearer token comes from.
pub enum Token {
    None,
    /// From the environment: local runs only (refused on Lambda).
    Plain(String),
    Secret(SecretToken),
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Token::None => f.write_str("None"),
            Token::Plain(_) => f.write_str("Plain(<redacted>)"),
            Token::Secret(s) => write!(f, "Secret({})", s.arn),
        }
    }
}

/// Why no token could be had: the send is not attempted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenUnavailable(pub String);

impl Token {
    /// The token to send, if any.
    pub async fn current(&self) -> Result<Option<String>, TokenUnavailable> {
        match self {
            Token::None => Ok(None),
            Token::Plain(t) => Ok(Some(t.clone())),
            Token::Secret(s) => s.get().await.map(Some),
        }
    }

    /// The remote refused the token (401): a secret is read again on the next send. Whether
    /// a fresh read can help (only a secret can change).
    pub async fn refused(&self) -> bool {
        match self {
            Token::Secret(s) => {
                s.forget().await;
                true
            }
            _ => false,
        }
    }
}

pub struct SecretToken {
    client: aws_sdk_secretsmanager::Client,
    arn: String,
    /// Single-flight: concurrent first sends share one read.
    cached: Mutex<Option<String>>,
}

impl SecretToken {
    pub fn new(sdk: &aws_config::SdkConfig, arn: String) -> Self {
        Self {
            client: aws_sdk_secretsmanager::Client::new(sdk),
            arn,
            cached: Mutex::new(None),
        }
    }

    pub(crate) async fn get(&self) -> Result<String, TokenUnavailable> {
        let mut cached = self.cached.lock().await;
        if let Some(t) = cached.as_ref() {
            return Ok(t.clone());
        }
        let out = self
            .client
            .get_secret_value()
            .secret_id(&self.arn)
            .send()
            .await
            .map_err(|e| {
                let e = aws_sdk_secretsmanager::error::DisplayErrorContext(e);
                TokenUnavailable(format!("secret {} unreadable: {e}", self.arn))
            })?;
        let token = out
            .secret_string
            .filter(|s| !s.is_empty())
            .ok_or_else(|| TokenUnavailable(format!("secret {} has no SecretString", self.arn)))?;
        *cached = Some(token.clone());
        Ok(token)
    }

    async fn forget(&self) {
        *self.cached.lock().await = None;
    }
}

/// The secret holding the key suppressed addresses are hashed with (docs/design.md,
/// "Suppressions").
pub const SUPPRESSION_KEY_SECRET_VAR: &str = "SUPPRESSION_KEY_SECRET_ARN";
/// The key itself, for local runs only (refused on Lambda, as plain tokens are).
pub const SUPPRESSION_KEY_VAR: &str = "SUPPRESSION_KEY";
pub use crate::ports::secret::SuppressionKeySource;

impl crate::ports::secret::SecretRead for SecretToken {
    fn name(&self) -> &str {
        &self.arn
    }

    fn read(
        &self,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<String, String>> + Send + '_>>
    {
        Box::pin(async move { self.get().await.map_err(|e| e.0) })
    }
}

/// The suppression key's source: the secret (`SUPPRESSION_KEY_SECRET_ARN`, required on
/// Lambda), or on a local run the plain variable; `None` off Lambda when neither is set
/// (suppressions neither checked nor recorded). A plain key under 16 bytes is refused, naming
/// the variable. Touches no network.
pub fn suppression_key(
    get: impl Fn(&str) -> Option<String>,
    sdk: &aws_config::SdkConfig,
) -> Result<Option<SuppressionKeySource>, crate::config::ConfigError> {
    use crate::config::ConfigError;
    use crate::domain::SuppressionKey;
    let on_lambda = get("AWS_LAMBDA_FUNCTION_NAME").is_some();
    match (get(SUPPRESSION_KEY_SECRET_VAR), get(SUPPRESSION_KEY_VAR)) {
        (Some(arn), _) => {
            // Bounded as a storage call: the read happens before a claim, never under a lease.
            let timeouts = aws_config::timeout::TimeoutConfig::builder()
                .operation_timeout(crate::ports::STORAGE_OPERATION_TIMEOUT)
                .build();
            let bounded = sdk.to_builder().timeout_config(timeouts).build();
            Ok(Some(SuppressionKeySource::Secret(Box::new(
                SecretToken::new(&bounded, arn),
            ))))
        }
        (None, Some(_)) if on_lambda => Err(ConfigError::invalid(
            SUPPRESSION_KEY_VAR,
            format!("a key in the environment is for local runs: set {SUPPRESSION_KEY_SECRET_VAR}"),
        )),
        (None, Some(raw)) => SuppressionKey::new(raw.into_bytes())
            .map(|k| Some(SuppressionKeySource::Fixed(k)))
            .map_err(|e| ConfigError::invalid(SUPPRESSION_KEY_VAR, e.to_string())),
        (None, None) if on_lambda => Err(ConfigError::Missing(SUPPRESSION_KEY_SECRET_VAR)),
        (None, None) => Ok(None),
    }
}
