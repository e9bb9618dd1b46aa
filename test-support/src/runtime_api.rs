//! A Lambda Runtime API on loopback, for driving a real function bootstrap as Lambda (or
//! `cargo lambda watch`) would: the bootstrap is started with `AWS_LAMBDA_RUNTIME_API` pointing
//! here, gets one event from `/invocation/next` with the headers given, and its answer (the
//! `/response` or `/error` body) is returned. Shared by the function packages' tests.

use std::process::{Command, Stdio};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// The deadline header `cargo lambda watch` sends: relative milliseconds, not an epoch.
pub const CARGO_LAMBDA_WATCH_DEADLINE: &str = "600000";

/// What the function answered: `"response"` or `"error"`, and the JSON body; and every AWS
/// SDK call it made (`Service.Operation`, from its `reminders::aws_calls` log lines).
#[derive(Debug)]
pub struct Answer {
    pub kind: String,
    pub body: serde_json::Value,
    pub aws_calls: std::collections::BTreeSet<String>,
}

/// Every AWS call the answer shows is one `function` declares (and so its role is granted).
pub fn assert_calls_declared(function: &str, answer: &Answer) {
    let declared = reminders::wiring::aws_calls(function);
    for call in &answer.aws_calls {
        assert!(
            declared.contains(&call.as_str()),
            "{function} called {call}, which reminders::wiring::aws_calls does not declare (nor its IAM role grant)"
        );
    }
}

/// Run `exe` with `env`, hand it `event` once with `deadline_ms` as `Lambda-Runtime-Deadline-Ms`,
/// and return its answer (the process is killed afterwards).
pub async fn invoke(
    exe: &str,
    env: &[(String, String)],
    event: serde_json::Value,
    deadline_ms: &str,
) -> Answer {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel::<Answer>();
    let event = event.to_string();
    let deadline = deadline_ms.to_owned();
    tokio::spawn(async move {
        let mut handed_out = false;
        while let Ok((sock, _)) = listener.accept().await {
            let tx = tx.clone();
            let event = event.clone();
            let deadline = deadline.clone();
            let first = !handed_out;
            handed_out = true;
            tokio::spawn(serve(sock, event, deadline, first, tx));
        }
    });
    let mut child = Command::new(exe)
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .env("AWS_LAMBDA_RUNTIME_API", addr.to_string())
        .env("AWS_LAMBDA_FUNCTION_NAME", "under-test")
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "512")
        .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        .env("AWS_LAMBDA_LOG_STREAM_NAME", "test")
        .env("AWS_LAMBDA_LOG_GROUP_NAME", "test")
        .env(
            "RUST_LOG",
            format!("warn,{}=debug", reminders::telemetry::AWS_CALLS_TARGET),
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let answer = tokio::time::timeout(Duration::from_secs(60), rx.recv()).await;
    let _ = child.kill();
    let mut out = String::new();
    if let Some(mut stdout) = child.stdout.take() {
        use std::io::Read;
        let _ = stdout.read_to_string(&mut out);
    }
    let _ = child.wait();
    let mut answer = answer
        .expect("the function never answered")
        .expect("the stub stopped");
    answer.aws_calls = out
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["aws_call"].as_str().map(str::to_owned))
        .collect();
    answer
}

/// One connection, any number of requests on it (the runtime client keeps it alive).
async fn serve(
    mut sock: TcpStream,
    event: String,
    deadline: String,
    first: bool,
    tx: mpsc::UnboundedSender<Answer>,
) {
    let mut given = !first;
    loop {
        let Some((head, body)) = read_request(&mut sock).await else {
            return;
        };
        let line = head.lines().next().unwrap_or_default().to_owned();
        if line.starts_with("GET ") && line.contains("/runtime/invocation/next") {
            if given {
                // Between invocations Lambda keeps the caller waiting.
                tokio::time::sleep(Duration::from_secs(120)).await;
                return;
            }
            given = true;
            let reply = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
                 Lambda-Runtime-Aws-Request-Id: req-1\r\nLambda-Runtime-Deadline-Ms: {deadline}\r\n\
                 Lambda-Runtime-Invoked-Function-Arn: arn:aws:lambda:us-east-1:123456789012:function:under-test\r\n\
                 Lambda-Runtime-Trace-Id: Root=1-00000000-000000000000000000000000;Sampled=0\r\n\r\n{event}",
                event.len()
            );
            if sock.write_all(reply.as_bytes()).await.is_err() {
                return;
            }
        } else if line.starts_with("POST ") {
            let kind = if line.contains("/response") {
                "response"
            } else {
                "error"
            };
            let _ = sock
                .write_all(b"HTTP/1.1 202 Accepted\r\nContent-Length: 2\r\n\r\n{}")
                .await;
            let body = serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
            let _ = tx.send(Answer {
                kind: kind.to_owned(),
                body,
                aws_calls: Default::default(),
            });
        } else {
            let _ = sock
                .write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
                .await;
        }
    }
}

async fn read_request(sock: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = sock.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let length = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse::<usize>().ok())?
        })
        .unwrap_or(0);
    let mut body = buf[head_end..].to_vec();
    while body.len() < length {
        let n = sock.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Some((head, body))
}

/// The environment every function reads: the stack's tables and queues.
pub fn stack_env(
    reminders_table: &str,
    deliveries_table: &str,
    queues: &[(String, String)],
) -> Vec<(String, String)> {
    let mut env = vec![
        ("REMINDERS_TABLE".to_owned(), reminders_table.to_owned()),
        ("DELIVERIES_TABLE".to_owned(), deliveries_table.to_owned()),
    ];
    env.extend(queues.iter().cloned());
    for k in [
        "AWS_ENDPOINT_URL",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_REGION",
    ] {
        if let Ok(v) = std::env::var(k) {
            env.push((k.to_owned(), v));
        }
    }
    env
}

/// A stack on the emulator: both tables and the channel queues, unique to `tag`.
pub struct Stack {
    pub sdk: aws_config::SdkConfig,
    pub reminders_table: String,
    pub deliveries_table: String,
    pub queues: reminders::aws::ChannelUrls,
    pub dlqs: reminders::aws::ChannelUrls,
}

impl Stack {
    pub async fn create(tag: &str) -> Self {
        use reminders::aws::bootstrap::*;
        std::env::var("AWS_ENDPOINT_URL")
            .expect("AWS_ENDPOINT_URL is not set: run the emulator tests through infra/test.sh");
        let sdk = reminders::aws::sdk_config().await;
        let dynamo = aws_sdk_dynamodb::Client::new(&sdk);
        let sqs = aws_sdk_sqs::Client::new(&sdk);
        let unique = format!("{tag}-{}", std::process::id());
        let (reminders_table, deliveries_table) =
            (format!("{unique}-rem"), format!("{unique}-del"));
        create_reminders_table(&dynamo, &reminders_table)
            .await
            .unwrap();
        create_deliveries_table(&dynamo, &deliveries_table)
            .await
            .unwrap();
        let (queues, dlqs) = create_channel_queues(&sqs, &unique, QueueSpec::default())
            .await
            .unwrap();
        Self {
            sdk,
            reminders_table,
            deliveries_table,
            queues,
            dlqs,
        }
    }

    /// What the template sets for every function.
    pub fn env(&self) -> Vec<(String, String)> {
        use reminders::aws::config::{DLQ_URL_VARS, QUEUE_URL_VARS};
        use reminders::domain::Channel;
        let mut urls = Vec::new();
        for (i, c) in Channel::ALL.into_iter().enumerate() {
            urls.push((QUEUE_URL_VARS[i].to_owned(), self.queues.get(c).clone()));
            urls.push((DLQ_URL_VARS[i].to_owned(), self.dlqs.get(c).clone()));
        }
        stack_env(&self.reminders_table, &self.deliveries_table, &urls)
    }
}
