//! `remindctl key`: the delivery key of (reminder, subscriber, channel), as the consumer
//! derives it, so an application or an operator can find a delivery in the ledger or a DLQ.

use reminders_core::domain::{Channel, DeliveryKey, ReminderId, SubscriberId};

/// Print the delivery key of (reminder, subscriber, channel).
///
/// Example: remindctl key --reminder order-42 --subscriber user-7 --channel sms
#[derive(Debug, clap::Args)]
pub struct KeyArgs {
    #[arg(long)]
    reminder: String,
    #[arg(long)]
    subscriber: String,
    /// push, email or sms
    #[arg(long)]
    channel: String,
}

pub fn run(args: KeyArgs) -> Result<(), String> {
    let reminder = ReminderId::parse(args.reminder).map_err(|e| e.to_string())?;
    let subscriber = SubscriberId::parse(args.subscriber).map_err(|e| e.to_string())?;
    let channel: Channel = args.channel.parse().map_err(|e| format!("{e}"))?;
    println!("{}", DeliveryKey::derive(&reminder, &subscriber, channel));
    Ok(())
}
