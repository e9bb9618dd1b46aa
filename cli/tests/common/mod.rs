//! What the remindctl suites share: the binary, a command's output, `local up` for one test, a
//! long-running command whose lines are collected, a free port, the wall clock, an HTTP call.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_remindctl")
}

/// `remindctl args` with `env` added to this process's environment.
pub fn remindctl(args: &[&str], env: &BTreeMap<String, String>) -> Output {
    Command::new(bin())
        .args(args)
        .envs(env)
        .output()
        .expect("remindctl runs")
}

/// A command that must succeed: its standard output.
pub fn ok(args: &[&str], env: &BTreeMap<String, String>) -> String {
    let out = remindctl(args, env);
    assert!(
        out.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `local up` for this test alone; the variables it exports.
pub fn stack(prefix: &str) -> BTreeMap<String, String> {
    ok(&["local", "up", "--prefix", prefix], &BTreeMap::new())
        .lines()
        .filter_map(|l| l.strip_prefix("export "))
        .map(|l| l.split_once('=').unwrap())
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// A long-running `remindctl` whose output lines are collected; killed on drop.
pub struct Running {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Running {
    pub fn start(args: &[&str], env: &BTreeMap<String, String>) -> Self {
        let mut child = Command::new(bin())
            .args(args)
            .envs(env)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let out = child.stdout.take().unwrap();
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        Self { child, lines }
    }

    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    /// Every line so far, as one text.
    pub fn text(&self) -> String {
        self.lines().join("\n")
    }

    /// The first line, once printed.
    pub fn first_line(&self) -> String {
        for _ in 0..200 {
            if let Some(l) = self.lines().first() {
                return l.clone();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("no output")
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn free_port() -> u16 {
    let socket = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    socket.local_addr().unwrap().port()
}

/// The wall clock, in epoch milliseconds.
pub fn now_ms() -> i64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    i64::try_from(since.unwrap().as_millis()).unwrap()
}

pub async fn send(
    http: &reqwest::Client,
    method: reqwest::Method,
    url: String,
    b: Option<Value>,
) -> (u16, Value) {
    let mut req = http.request(method, url);
    if let Some(b) = b {
        req = req
            .header("content-type", "application/json")
            .body(b.to_string());
    }
    let answer = req.send().await.unwrap();
    let status = answer.status().as_u16();
    (status, answer.json().await.unwrap())
}
