//! `--stack NAME` (or `REMINDERS_STACK`): configure every command from a deployed stack's
//! outputs (CloudFormation `DescribeStacks`), instead of exporting a dozen variables by hand.
//! A variable already set wins, so one can still point a command somewhere else.

use aws_sdk_cloudformation::Client;
use reminders::aws::config::STACK_OUTPUTS;

/// Read `name`'s outputs and set the variables they configure (those not set already).
/// Before any other thread starts: the environment is the process's configuration.
pub fn configure(name: &str) -> Result<(), String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let outputs = rt.block_on(outputs(name))?;
    let mut missing = Vec::new();
    for (output, var) in STACK_OUTPUTS {
        match outputs.iter().find(|(k, _)| k == output) {
            Some((_, value)) if std::env::var_os(var).is_none() => std::env::set_var(var, value),
            Some(_) => {}
            None => missing.push(output),
        }
    }
    if !missing.is_empty() {
        return Err(format!(
            "stack {name} has no output {}: deployed from an older template.yaml?",
            missing.join(", ")
        ));
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
            let e = e.into_service_error();
            format!(
                "stack {name}: {}",
                e.meta().message().unwrap_or("not readable")
            )
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
