//! The README's local walk-through, run as written: its commands are read from README.md
//! (between the `walkthrough` markers), so the two cannot drift. On a clean emulator: the
//! tour's first line starts one of its own (`infra/emulator.sh`, on a free port this test
//! picks); on the LocalStack leg, the leg's LocalStack, with the tables and queues under a
//! prefix of their own. What else differs is only what must (see `adapt`):
//! `cargo run -q -p remindctl --` is the binary cargo built, and the receiver and the API a
//! free port each.

use std::process::Command;

/// The lines of the README's shell block between `<!-- NAME:start -->` and `<!-- NAME:end -->`.
fn readme_block(name: &str) -> Vec<String> {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
        .expect("README.md at the project root");
    let start = readme
        .find(&format!("<!-- {name}:start -->"))
        .unwrap_or_else(|| panic!("the {name}:start marker"));
    let end = readme[start..]
        .find(&format!("<!-- {name}:end -->"))
        .unwrap_or_else(|| panic!("the {name}:end marker"));
    let block = &readme[start..start + end];
    block
        .lines()
        .skip_while(|l| !l.starts_with("```sh"))
        .skip(1)
        .take_while(|l| !l.starts_with("```"))
        .map(str::to_owned)
        .collect()
}

fn walkthrough() -> Vec<String> {
    readme_block("walkthrough")
}

/// Where a run of the tour runs.
struct Setup {
    /// The port the tour's own emulator gets (`infra/emulator.sh PORT`); `None` on the LocalStack
    /// leg, whose emulator the test runner started and exported.
    emulator: Option<u16>,
    /// The tables' and queues' prefix on a shared emulator.
    prefix: String,
    /// The receiver's port and the API's.
    ports: (u16, u16),
}

impl Setup {
    fn new(name: &str) -> Self {
        // The LocalStack leg points some services elsewhere (DynamoDB at moto): the tour runs
        // against what it exported, not an emulator of its own.
        let leg = std::env::var_os("AWS_ENDPOINT_URL_DYNAMODB").is_some();
        Setup {
            emulator: (!leg).then(free_port),
            // Each test its own tables and queues: under plain `cargo test` both run in one
            // process.
            prefix: format!("walk-{name}-{}", std::process::id()),
            ports: (free_port(), free_port()),
        }
    }
}

/// A README line as this test runs it; `None` for what the test's environment already did.
fn adapt(line: &str, setup: &Setup) -> Option<String> {
    let command = line.split(" # ").next().unwrap_or(line).trim_end();
    let (port, api_port) = setup.ports;
    let bin = env!("CARGO_BIN_EXE_remindctl");
    let mut command = command
        .replace("cargo run -q -p remindctl --", bin)
        .replace("8080", &port.to_string())
        .replace("8081", &api_port.to_string());
    match setup.emulator {
        // The script's default port (4566, or a free one) may be another test's: this one's
        // own, picked free.
        Some(emulator) => {
            command = command.replace(
                "infra/emulator.sh)",
                &format!("infra/emulator.sh {emulator})"),
            );
        }
        // The emulator is the leg's: started, and its variables exported, by the test runner.
        None => {
            if command.starts_with("export AWS_") || command.contains("infra/emulator.sh") {
                return None;
            }
            command = command
                .replace("local up", &format!("local up --prefix {}", setup.prefix))
                .replace(" $EMULATOR_PID", "");
        }
    }
    // The README gives a server a second to listen; a loaded machine may need more, so the
    // test waits until it does.
    let command = match command.strip_suffix("; sleep 1") {
        Some(start) => format!("{start}\n{}", listening(api_port)),
        None => command,
    };
    // What `remind show` prints is checked on its own, after this marker; a process killed is
    // waited for, so the next block's receiver finds its port free.
    Some(if command.contains("remind show") {
        format!("echo '{SHOW}'\n{command}")
    } else if command.starts_with("kill ") {
        format!("{command}; wait || true")
    } else {
        command
    })
}

const SHOW: &str = "--- remind show";

/// A shell line that waits (at most 30 s) until something listens on `port`.
fn listening(port: u16) -> String {
    format!(
        "for _ in $(seq 150); do (echo > /dev/tcp/127.0.0.1/{port}) 2>/dev/null && break; sleep 0.2; done; \
         (echo > /dev/tcp/127.0.0.1/{port}) 2>/dev/null || {{ echo 'nothing listens on {port}' >&2; exit 1; }}"
    )
}

fn free_port() -> u16 {
    let socket = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    socket.local_addr().unwrap().port()
}

/// The README's blocks, as this test runs them in one shell (the second needs the first's
/// variables), bounded: a walk-through that cannot deliver would otherwise retry until
/// freshness ends. Its stdout.
fn run_blocks(name: &str, blocks: &[Vec<String>]) -> String {
    let setup = Setup::new(name);
    if setup.emulator.is_none() {
        std::env::var("AWS_ENDPOINT_URL")
            .expect("AWS_ENDPOINT_URL is not set: run the emulator tests through infra/test.sh");
    }
    let mut script = Vec::new();
    for lines in blocks {
        assert!(lines.len() >= 6, "a block lost its lines: {lines:?}");
        let mut block: Vec<String> = lines.iter().filter_map(|l| adapt(l, &setup)).collect();
        let receiver = block.iter().position(|l| l.contains("local receive"));
        let receiver = receiver.expect("each block starts the receiver");
        // The receiver needs a moment to listen before anything sends to it.
        block.insert(receiver + 1, listening(setup.ports.0));
        script.extend(block);
    }
    // Under `set -e` a failing command (a curl with no connection) ends the script. On any
    // exit, the servers it started stop, the emulator too when the README's last line did not
    // run.
    let text = format!(
        "set -euo pipefail\n\
         trap 'kill $(jobs -p) ${{EMULATOR_PID:-}} 2>/dev/null || true' EXIT\n{}\n",
        script.join("\n")
    );
    // From the repository root, as the README says. With an emulator of its own, the tour starts
    // without the runner's: only its first line can point it at one.
    let mut bash = Command::new("timeout");
    bash.args(["300", "bash", "-c"])
        .arg(&text)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    if setup.emulator.is_some() {
        for var in [
            "AWS_ENDPOINT_URL",
            "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_REGION",
        ] {
            bash.env_remove(var);
        }
    }
    let out = bash.output().expect("bash runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the walk-through failed:\n{text}\n{stdout}\n{stderr}"
    );
    assert!(
        !stdout.contains("you@example.org") && !stdout.contains("user@example.org"),
        "a recipient in clear:\n{stdout}"
    );
    stdout
}

#[test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
fn the_readme_walkthrough_delivers_a_reminder_to_the_local_receiver() {
    let stdout = run_blocks("cli", &[walkthrough()]);
    let delivered = stdout
        .lines()
        .find(|l| l.starts_with("delivered email "))
        .unwrap_or_else(|| panic!("the receiver got nothing:\n{stdout}"));
    assert!(delivered.contains("subject \"Pickup\""), "{delivered}");
    let key = delivered.split_whitespace().nth(2).expect("a delivery key");
    assert!(key.starts_with("d1_"), "{delivered}");
    let shown = stdout
        .lines()
        .skip_while(|l| !l.contains("hello"))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        shown.contains(key),
        "remind show names the key the provider saw:\n{shown}"
    );
    assert!(shown.contains("delivered"), "{shown}");
    // What became of it, in one word, beside the status that says only it was enqueued.
    assert!(shown.contains("outcome      delivered"), "{shown}");
}

/// The tour's second block, after the first in the same shell: a reminder PUT with curl
/// through `local api`, delivered by `local run`, then read back with its outcome, and its
/// outcome event heard from the bus.
#[test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
fn the_readme_api_block_delivers_and_reports_the_outcome() {
    let stdout = run_blocks("api", &[walkthrough(), readme_block("walkthrough-api")]);
    let api: Vec<&str> = stdout
        .lines()
        .skip_while(|l| !l.starts_with(SHOW))
        .skip_while(|l| !l.contains("\"reminder_id\":\"r-1\""))
        .collect();
    let created = api
        .first()
        .unwrap_or_else(|| panic!("no PUT answer:\n{stdout}"));
    assert!(created.contains("\"status\":\"scheduled\""), "{created}");
    // Then the status code the README's comment names, on its own line.
    assert_eq!(api.get(1).map(|l| l.trim()), Some("201"), "{stdout}");
    assert!(
        api.iter()
            .any(|l| l.contains("\"reminder_id\":\"r-1\"")
                && l.contains("\"outcome\":\"delivered\"")),
        "GET never said delivered:\n{stdout}"
    );
    assert!(
        api.iter()
            .any(|l| l.contains("delivered email ") && l.contains("subject \"Pickup at 5 pm\"")),
        "the receiver never got it:\n{stdout}"
    );
    // As the emulator's bus wrote it (moto and LocalStack space their JSON differently).
    let event = api
        .iter()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|e| {
            e["detail-type"] == "Reminder Delivery Settled" && e["detail"]["reminder_id"] == "r-1"
        })
        .unwrap_or_else(|| panic!("no outcome event for r-1:\n{stdout}"));
    assert_eq!(event["detail"]["outcome"], "delivered", "{event}");
}

/// `infra/emulator.sh`, the tour's first line: it starts the pinned moto on the port it is given
/// and prints the variables that point the SDK at it, and refuses a port already taken rather
/// than leave the tour writing into whatever holds it.
#[test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
fn the_emulator_script_starts_moto_and_refuses_a_port_already_taken() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../infra/emulator.sh");
    let port = free_port().to_string();
    let out = Command::new(script).arg(&port).output().expect("bash runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pid = stdout
        .split_whitespace()
        .find_map(|w| w.strip_prefix("EMULATOR_PID="))
        .unwrap_or_else(|| panic!("no EMULATOR_PID in {stdout}"))
        .to_owned();
    let stop = || {
        let _ = Command::new("kill").arg(&pid).status();
    };
    let endpoint = format!("AWS_ENDPOINT_URL=http://127.0.0.1:{port}");
    let again = Command::new(script).arg(&port).output().expect("bash runs");
    let answered = std::net::TcpStream::connect(("127.0.0.1", port.parse::<u16>().unwrap()));
    stop();
    assert!(stdout.contains(&endpoint), "{stdout}");
    assert!(answered.is_ok(), "nothing listens on {port}");
    let refusal = String::from_utf8_lossy(&again.stderr);
    assert!(
        !again.status.success() && refusal.contains("is taken"),
        "a second start on a taken port: {refusal}"
    );
    // What `eval` then runs: a failing status, no variables.
    let printed = String::from_utf8_lossy(&again.stdout);
    assert_eq!(
        printed.trim(),
        "false",
        "for a taken port it printed {printed}"
    );
}

/// `infra/emulator.sh` without a port, as the tour runs it, when 4566 is taken (here, by this
/// test): moto on a free port instead, said so, and its variables name that port.
#[test]
#[cfg_attr(
    not(feature = "emulator"),
    ignore = "needs an AWS emulator: infra/test.sh starts one and runs it"
)]
fn without_a_port_the_emulator_script_takes_a_free_one_when_4566_is_taken() {
    // Held for the whole test; if something else holds it already, the case is the same.
    let _held = std::net::TcpListener::bind("127.0.0.1:4566");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../infra/emulator.sh");
    let out = Command::new(script).output().expect("bash runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let pid = stdout
        .split_whitespace()
        .find_map(|w| w.strip_prefix("EMULATOR_PID="))
        .map(str::to_owned);
    let port: Option<u16> = stdout
        .split_whitespace()
        .find_map(|w| w.strip_prefix("AWS_ENDPOINT_URL=http://127.0.0.1:"))
        .and_then(|p| p.parse().ok());
    let answered = port.map(|p| std::net::TcpStream::connect(("127.0.0.1", p)).is_ok());
    if let Some(pid) = &pid {
        let _ = Command::new("kill").arg(pid).status();
    }
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        port.is_some_and(|p| p != 4566),
        "not another port: {stdout}"
    );
    assert_eq!(answered, Some(true), "nothing listens: {stdout}");
    assert!(stderr.contains("4566 is taken"), "{stderr}");
}
