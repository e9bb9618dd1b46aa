//! A tiny HTTP/1.1 server on 127.0.0.1 for provider tests: each connection reads one request,
//! records it, and does what the script (or a function of the request) says.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

#[derive(Debug, Clone)]
pub enum Behaviour {
    Respond {
        status: u16,
        headers: Vec<(String, String)>,
        body: String,
    },
    /// Read the request, then never answer (the client times out after writing).
    Hang,
    /// Read the request, then close without a response.
    Drop,
}

pub fn respond(status: u16, body: &str) -> Behaviour {
    Behaviour::Respond {
        status,
        headers: Vec::new(),
        body: body.into(),
    }
}

pub fn respond_with(status: u16, header: (&str, &str)) -> Behaviour {
    Behaviour::Respond {
        status,
        headers: vec![(header.0.into(), header.1.into())],
        body: String::new(),
    }
}

/// A recorded request: head (request line and headers, lowercased names) and body.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub head: String,
    pub body: String,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<String> {
        self.head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim().eq_ignore_ascii_case(name)).then(|| v.trim().to_owned())
        })
    }
}

pub struct Server {
    pub url: String,
    pub requests: Arc<Mutex<Vec<Recorded>>>,
}

/// Decides each request's answer.
pub type Decide = Arc<dyn Fn(&Recorded) -> Behaviour + Send + Sync>;

/// Serve `script` in order (the last behaviour repeats) until the test ends.
pub async fn serve(script: Vec<Behaviour>) -> Server {
    let next = Arc::new(Mutex::new(0usize));
    serve_fn(Arc::new(move |_| {
        let mut i = next.lock().unwrap();
        let b = script[(*i).min(script.len() - 1)].clone();
        *i += 1;
        b
    }))
    .await
}

/// Serve, answering each request with `decide(request)`.
pub async fn serve_fn(decide: Decide) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1/messages", listener.local_addr().unwrap());
    let requests = Arc::new(Mutex::new(Vec::new()));
    let recorded = requests.clone();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let recorded = recorded.clone();
            let decide = decide.clone();
            tokio::spawn(async move {
                let Some(req) = read_request(&mut sock).await else {
                    return;
                };
                let behaviour = decide(&req);
                recorded.lock().unwrap().push(req);
                match behaviour {
                    Behaviour::Respond {
                        status,
                        headers,
                        body,
                    } => {
                        let mut out = format!(
                            "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\n",
                            body.len()
                        );
                        for (k, v) in headers {
                            out.push_str(&format!("{k}: {v}\r\n"));
                        }
                        out.push_str("\r\n");
                        out.push_str(&body);
                        let _ = sock.write_all(out.as_bytes()).await;
                    }
                    Behaviour::Hang => tokio::time::sleep(Duration::from_secs(30)).await,
                    Behaviour::Drop => drop(sock),
                }
            });
        }
    });
    Server { url, requests }
}

async fn read_request(sock: &mut tokio::net::TcpStream) -> Option<Recorded> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        let n = sock.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(pos) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break pos + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let len: usize = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .unwrap_or(0);
    while buf.len() < head_end + len {
        let n = sock.read(&mut chunk).await.ok()?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let body = String::from_utf8_lossy(&buf[head_end..]).to_string();
    Some(Recorded { head, body })
}
