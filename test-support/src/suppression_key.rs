//! A suppression key secret on the emulator, for the Runtime API tests of the functions that
//! read one (api, feedback).

/// A suppression key secret on the emulator for `tag`, and the key it holds (to look
/// suppressions up by their hash as the functions do).
pub async fn suppression_key_secret(
    sdk: &aws_config::SdkConfig,
    tag: &str,
) -> (String, reminders::domain::SuppressionKey) {
    let secrets = aws_sdk_secretsmanager::Client::new(sdk);
    let arn = reminders::aws::bootstrap::create_suppression_key_secret(&secrets, tag)
        .await
        .unwrap();
    let raw = secrets
        .get_secret_value()
        .secret_id(&arn)
        .send()
        .await
        .unwrap()
        .secret_string
        .unwrap();
    let key = reminders::domain::SuppressionKey::new(raw.into_bytes()).unwrap();
    (arn, key)
}
