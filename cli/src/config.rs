//! `remindctl config`: the environment every function reads at cold start, checked as each
//! would check it, and printed.

use reminders::aws::Settings;
use reminders::consumer::ConsumerConfig;
use reminders::domain::Channel;
use reminders::redrive::RedriveConfig;
use reminders::scheduler::SchedulerConfig;

/// Check the environment the functions read (tables, queue URLs, shards).
///
/// Example: REMINDERS_TABLE=… DELIVERIES_TABLE=… remindctl config
#[derive(Debug, clap::Args)]
pub struct ConfigArgs {}

/// What the check found, printed only once all of it passed.
struct Checked {
    settings: Settings,
    providers: Vec<(Channel, String)>,
    consumer: ConsumerConfig,
    scheduler: SchedulerConfig,
}

pub fn run(_: ConfigArgs) -> Result<(), String> {
    print(&check()?);
    Ok(())
}

/// The first problem is one line naming the variable, and nothing is printed before it.
fn check() -> Result<Checked, String> {
    let settings = Settings::from_env().map_err(|e| e.to_string())?;
    let mut providers = Vec::new();
    for c in Channel::ALL {
        let var = format!("{}_PROVIDER", c.as_str().to_uppercase());
        match reminders::config::env(&var) {
            Some(p) => providers.push((c, p)),
            None => {
                return Err(format!(
                    "{var} is not set (http, ses, sns or none): the consumer would refuse to start"
                ))
            }
        }
    }
    let consumer = ConsumerConfig::from_env().map_err(|e| format!("consumer: {e}"))?;
    let scheduler = SchedulerConfig::from_env().map_err(|e| format!("scheduler: {e}"))?;
    RedriveConfig::from_env().map_err(|e| format!("redrive: {e}"))?;
    Ok(Checked {
        settings,
        providers,
        consumer,
        scheduler,
    })
}

fn print(c: &Checked) {
    let s = &c.settings;
    println!("reminders table:  {}", s.reminders_table);
    println!("deliveries table: {}", s.deliveries_table);
    println!("due shards:       {}", s.due_shards);
    for ch in Channel::ALL {
        println!("{ch:<6} queue: {}", s.queue_urls.get(ch));
        println!("{ch:<6} dlq:   {}", s.dlq_urls.get(ch));
    }
    for (ch, p) in &c.providers {
        println!("{ch:<6} provider: {p}");
    }
    println!(
        "consumer:         policy {}, {} attempts, lease {} s",
        c.consumer.policy.version,
        c.consumer.policy.max_attempts,
        c.consumer.lease.as_secs()
    );
    println!(
        "scheduler:        look-ahead {} s, every {} s",
        c.scheduler.look_ahead.as_secs(),
        c.scheduler.schedule_period.as_secs()
    );
}
