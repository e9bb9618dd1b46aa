//! `remindctl suppression list | remove`: the addresses providers declared dead (docs/design.md,
//! "Suppressions"). A suppression shows its channel, the masked address, its keyed hash (`s1_…`),
//! who declared it dead and when — never the address. Lifting one by its hash lets the next
//! delivery to the address be sent again.

use reminders::domain::AddressHash;

use super::{err, ports};

/// List or lift suppressed addresses (same configuration as the functions).
#[derive(Debug, clap::Subcommand)]
pub enum SuppressionCommand {
    /// Every suppressed address, oldest first: channel, masked address, hash, source, time.
    List {
        /// One JSON object per line instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Lift a suppression by its hash (from `list`): later deliveries to the address are sent.
    ///
    /// Example: remindctl suppression remove --hash s1_0123456789abcdef0123456789abcdef
    Remove {
        #[arg(long, value_name = "s1_HASH")]
        hash: String,
    },
}

pub async fn run(cmd: SuppressionCommand) -> Result<(), String> {
    match cmd {
        SuppressionCommand::List { json } => list(json).await,
        SuppressionCommand::Remove { hash } => remove(&hash).await,
    }
}

async fn list(json: bool) -> Result<(), String> {
    let p = ports().await?;
    let (found, unreadable) = p.reminders.suppressions().await.map_err(err)?;
    for s in &found {
        if json {
            println!("{}", serde_json::to_string(s).map_err(err)?);
        } else {
            println!("{s}");
        }
    }
    for key in &unreadable {
        // Still suppressing (the consumer will not send past an item it cannot read).
        eprintln!("unreadable suppression item {key}: lift it with remove --hash");
    }
    if !json {
        println!("{} suppressed", found.len() + unreadable.len());
    }
    Ok(())
}

async fn remove(hash: &str) -> Result<(), String> {
    let hash = AddressHash::parse(hash).map_err(|e| format!("--hash: {e}"))?;
    let p = ports().await?;
    match p.reminders.lift_suppression(&hash).await.map_err(err)? {
        Some(Ok(s)) => println!("lifted: {s}"),
        Some(Err(_)) => println!("lifted: {hash} (its item was unreadable)"),
        None => return Err(format!("--hash: no suppression {hash}")),
    }
    Ok(())
}
