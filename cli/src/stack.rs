//! `--stack NAME` (or `REMINDERS_STACK`): configure every command from a deployed stack's
//! outputs (CloudFormation `DescribeStacks`), instead of exporting a dozen variables by hand.
//! A variable already set to the same value is fine; to another value, refused.

use aws_sdk_cloudformation::error::DisplayErrorContext;
use aws_sdk_cloudformation::Client;
use reminders::aws::config::STACK_OUTPUTS;

/// Read `name`'s outputs and set the variables they configure. A variable already set to
/// another value is refused, naming it: a leftover `PUSH_DLQ_URL` beside `--stack prod` would
/// otherwise mix two stacks (a redrive reading one's DLQ into the other's queue).
/// The variables are set once the runtime is gone, before any other thread starts.
pub fn configure(name: &str) -> Result<(), String> {
    let outputs = {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        rt.block_on(outputs(name))?
    };
    let mut missing = Vec::new();
    let mut set = Vec::new();
    for (output, var) in STACK_OUTPUTS {
        let Some((_, value)) = outputs.iter().find(|(k, _)| k == output) else {
            missing.push(output);
            continue;
        };
        match std::env::var(var) {
            Ok(current) if current == *value => {}
            Ok(_) => {
                return Err(format!(
                    "{var} is set, and stack {name} says otherwise (output {output}): unset it, \
                     or drop --stack"
                ))
            }
            Err(_) => set.push((var, value.clone())),
        }
    }
    // For `subscriber erase`: the suppression key's secret, to find the suppressions of the
    // subscriber's addresses, and the bus its event goes to (optional: a stack from an older
    // template may lack them).
    for (output, var) in [
        (
            "SuppressionKeySecretArn",
            reminders::providers::secret::SUPPRESSION_KEY_SECRET_VAR,
        ),
        ("EventBusName", reminders::aws::eventbridge::EVENT_BUS_VAR),
    ] {
        let Some((_, value)) = outputs.iter().find(|(k, _)| k == output) else {
            continue;
        };
        match std::env::var(var) {
            Ok(current) if current != *value => {
                return Err(format!(
                    "{var} is set, and stack {name} says otherwise (output {output}): unset \
                     it, or drop --stack"
                ))
            }
            Ok(_) => {}
            Err(_) => set.push((var, value.clone())),
        }
    }
    if !missing.is_empty() {
        return Err(format!(
            "stack {name} has no output {}: deployed from an older template.yaml?",
            missing.join(", ")
        ));
    }
    for (var, value) in set {
        std::env::set_var(var, value);
    }
    Ok(())
}

async fn outputs(name: &str) -> Result<Vec<(String, String)>, String> {
    let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let found = Client::new(&sdk)
        .describe_stacks()
        .stack_name(name)
        .send()
        .await
        .map_err(|e| {
            // The service's message when it answered (no such stack), else why the call
            // failed (no credentials, no network), on one line.
            let why = match e.as_service_error().and_then(|s| s.meta().message()) {
                Some(message) => message.to_owned(),
                None => DisplayErrorContext(&e).to_string(),
            };
            let why = why.lines().next().unwrap_or("not readable").to_owned();
            format!("stack {name}: {why}")
        })?;
    let stack = found
        .stacks()
        .first()
        .ok_or_else(|| format!("stack {name} not found"))?;
    Ok(stack
        .outputs()
        .iter()
        .filter_map(|o| Some((o.output_key()?.to_owned(), o.output_value()?.to_owned())))
        .collect())
}
