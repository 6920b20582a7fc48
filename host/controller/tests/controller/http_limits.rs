//! The API's server against slow and flooding clients, over real sockets on loopback: a
//! head sent a byte at a time, kept-alive and idle connections, a flood past the
//! connection limit, uploads past the number received at once, a body trickled past its
//! deadline. The limits are short here (through the same `HttpLimits` the flags set) so
//! the tests wait for fractions of a second; what each asserts is what the client sees.

use crate::support;

use std::time::{Duration, Instant};

use support::{Live, STREAM, TOKEN, start_live_serving};
use switchyard_controller::{HttpLimits, LiveConfig};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

/// Long enough that nothing is cut by accident while a test does its part.
const LONG: Duration = Duration::from_secs(60);

/// How long a test waits for what must happen before it calls it a hang.
const HANG: Duration = Duration::from_secs(20);

fn limits() -> HttpLimits {
    HttpLimits {
        max_connections: 64,
        header_read_timeout: LONG,
        idle_timeout: LONG,
        body_read_timeout: LONG,
        max_concurrent_uploads: 2,
    }
}

async fn start(limits: HttpLimits) -> Live {
    start_live_serving(
        STREAM,
        LiveConfig {
            speed: 10.0,
            ..LiveConfig::default()
        },
        Duration::from_millis(500),
        limits,
    )
    .await
}

async fn connect(live: &Live) -> TcpStream {
    TcpStream::connect(live.base.trim_start_matches("http://"))
        .await
        .unwrap()
}

/// Everything the server sends until it closes the connection (a reset counts as a
/// close); a hang fails the test.
async fn until_closed(stream: &mut TcpStream) -> String {
    let mut received = Vec::new();
    let read = tokio::time::timeout(HANG, async {
        let mut buf = [0_u8; 4096];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => received.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    assert!(read.is_ok(), "the server kept the connection open");
    String::from_utf8_lossy(&received).into_owned()
}

/// The value of the sample `name` (with its labels) in the controller's /metrics.
async fn metric(live: &Live, name: &str) -> f64 {
    let (status, text) = live.get("/metrics").await;
    assert_eq!(status, 200);
    sample(text.as_str().unwrap(), name)
}

/// One kept-alive connection of the test's own, for requests made while a flood holds
/// the server at its connection limit. A pooled client would open another connection
/// whenever its last one is not back in its pool yet (on a busy machine, often), and
/// each new connection at the limit evicts an open one, maybe the pool's own: which
/// connections are open would depend on the scheduler. Through one connection, the
/// test's requests add exactly one.
struct Probe(TcpStream);

impl Probe {
    async fn open(live: &Live) -> Self {
        Self(connect(live).await)
    }

    /// GET `path`: the status and the body.
    async fn get(&mut self, path: &str) -> (u16, String) {
        let exchange = async {
            let request = format!("GET {path} HTTP/1.1\r\nhost: x\r\n\r\n");
            self.0.write_all(request.as_bytes()).await.unwrap();
            let mut head = Vec::new();
            while !head.ends_with(b"\r\n\r\n") {
                let mut byte = [0_u8; 1];
                self.0.read_exact(&mut byte).await.unwrap();
                head.push(byte[0]);
            }
            let head = String::from_utf8(head).unwrap();
            let status = head.split(' ').nth(1).unwrap().parse().unwrap();
            let length: usize = head
                .lines()
                .find_map(|line| {
                    let (name, value) = line.split_once(':')?;
                    name.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse().unwrap())
                })
                .unwrap_or_else(|| panic!("{path} answered without a content-length:\n{head}"));
            let mut body = vec![0_u8; length];
            self.0.read_exact(&mut body).await.unwrap();
            (status, String::from_utf8(body).unwrap())
        };
        tokio::time::timeout(HANG, exchange)
            .await
            .unwrap_or_else(|_| panic!("GET {path} got no answer"))
    }

    /// The value of the sample `name` (with its labels) in the controller's /metrics.
    async fn metric(&mut self, name: &str) -> f64 {
        let (status, text) = self.get("/metrics").await;
        assert_eq!(status, 200);
        sample(&text, name)
    }
}

/// The value of the sample `name` (with its labels) in a /metrics text, 0 when absent.
fn sample(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
        .map_or(0.0, |value| value.trim().parse().unwrap())
}

/// The head of an upload with a body of `length` bytes, of which none is sent yet.
fn upload_head(length: usize) -> String {
    format!(
        "POST /v1/policies HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {TOKEN}\r\n\
         content-type: application/wasm\r\ncontent-length: {length}\r\n\r\n"
    )
}

/// `n` authenticated uploads whose bodies stop after a few bytes, each holding its
/// connection (being served) and an upload slot. Each asks `Expect: 100-continue`, so
/// the server's `100 Continue` says its handler is reading the body before the test
/// goes on.
async fn stalled_uploads(live: &Live, n: usize) -> Vec<TcpStream> {
    let mut stalled = Vec::new();
    for _ in 0..n {
        let mut stream = connect(live).await;
        let head = upload_head(1 << 20).replace("\r\n\r\n", "\r\nexpect: 100-continue\r\n\r\n");
        stream.write_all(head.as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        while !answer.ends_with(b"\r\n\r\n") {
            let mut byte = [0_u8; 1];
            stream.read_exact(&mut byte).await.unwrap();
            answer.push(byte[0]);
        }
        assert!(
            answer.starts_with(b"HTTP/1.1 100"),
            "{:?}",
            String::from_utf8_lossy(&answer)
        );
        stream.write_all(&[0; 16]).await.unwrap();
        stalled.push(stream);
    }
    stalled
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_sending_its_head_a_byte_at_a_time_is_cut_off_at_the_header_read_timeout() {
    let timeout = Duration::from_millis(600);
    let live = start(HttpLimits {
        header_read_timeout: timeout,
        ..limits()
    })
    .await;
    let mut stream = connect(&live).await;
    let started = Instant::now();
    let (mut reader, mut writer) = stream.split();
    let trickle = async {
        for byte in b"GET /healthz HTTP/1.1\r\nhost: x\r\nx-slow: "
            .iter()
            .cycle()
        {
            if writer.write_all(&[*byte]).await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    let closed = async {
        let mut buf = [0_u8; 64];
        matches!(reader.read(&mut buf).await, Ok(0) | Err(_))
    };
    let closed = tokio::time::timeout(HANG, async {
        tokio::select! {
            () = trickle => false,
            closed = closed => closed,
        }
    })
    .await
    .expect("a slow head holds its connection for ever");
    assert!(closed, "the server answered a head it never received whole");
    assert!(started.elapsed() >= timeout, "cut before the timeout");
    assert_eq!(
        metric(
            &live,
            "switchyard_http_connections_closed_total{reason=\"header-timeout\"}"
        )
        .await,
        1.0
    );
    live.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_alive_connection_is_closed_after_the_idle_timeout_but_not_while_in_use() {
    let idle = Duration::from_millis(1500);
    let live = start(HttpLimits {
        idle_timeout: idle,
        ..limits()
    })
    .await;
    let mut stream = connect(&live).await;
    // Requests closer together than the idle timeout keep the connection, for longer
    // than the timeout in all.
    let started = Instant::now();
    while started.elapsed() < idle * 2 {
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .unwrap();
        let mut buf = [0_u8; 1024];
        let n = stream.read(&mut buf).await.unwrap();
        assert!(
            String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"),
            "a connection in use was closed"
        );
        tokio::time::sleep(idle / 10).await;
    }
    let waiting = Instant::now();
    assert_eq!(until_closed(&mut stream).await, "");
    assert!(
        waiting.elapsed() >= idle / 2,
        "closed before the idle timeout"
    );
    assert_eq!(
        metric(
            &live,
            "switchyard_http_connections_closed_total{reason=\"idle-timeout\"}"
        )
        .await,
        1.0
    );
    live.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_idle_connections_past_the_limit_closes_the_oldest_and_the_probes_answer() {
    let max = 4;
    let live = start(HttpLimits {
        max_connections: max,
        ..limits()
    })
    .await;
    let mut flood = Vec::new();
    for _ in 0..3 * max {
        flood.push(connect(&live).await);
    }
    let mut probe = Probe::open(&live).await;
    for path in ["/healthz", "/readyz", "/metrics", "/v1/status"] {
        let (status, body) = probe.get(path).await;
        assert_eq!(status, 200, "{path} during the flood: {body}");
    }
    // The oldest connections were closed to make room; the host holds no more than the
    // limit, the probe's own connection included: one closed for each connection past
    // the limit, the probe's too.
    assert_eq!(until_closed(&mut flood[0]).await, "");
    assert_eq!(
        probe.metric("switchyard_http_connections").await,
        max as f64
    );
    assert_eq!(
        probe
            .metric("switchyard_http_connections_closed_total{reason=\"evicted\"}")
            .await,
        (2 * max + 1) as f64
    );
    live.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_every_connection_is_serving_a_new_one_gets_503_with_retry_after_naming_the_flag() {
    let live = start(HttpLimits {
        max_connections: 2,
        ..limits()
    })
    .await;
    // Two uploads whose bodies never come hold both connections while being served.
    let slow = stalled_uploads(&live, 2).await;
    let mut refused = connect(&live).await;
    let answer = until_closed(&mut refused).await;
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains("retry-after: "), "{answer}");
    assert!(answer.contains("--max-connections 2"), "{answer}");
    drop(slow);
    live.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploads_past_the_limit_get_503_with_retry_after_while_the_probes_answer() {
    let live = start(limits()).await;
    let slow = stalled_uploads(&live, 2).await;
    let response = live
        .client
        .post(live.url("/v1/policies"))
        .bearer_auth(TOKEN)
        .header("content-type", "application/wasm")
        .body(vec![0_u8; 1024])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 503);
    assert!(
        response.headers().contains_key("retry-after"),
        "{:?}",
        response.headers()
    );
    let body: serde_json::Value = response.json().await.unwrap();
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("--max-concurrent-uploads 2"),
        "{body}"
    );
    for probe in ["/healthz", "/readyz", "/metrics"] {
        let (status, body) = live.get(probe).await;
        assert_eq!(
            status, 200,
            "{probe} while uploads are at their limit: {body}"
        );
    }
    assert_eq!(
        metric(
            &live,
            "switchyard_http_requests_refused_total{reason=\"uploads-busy\"}"
        )
        .await,
        1.0
    );
    drop(slow);
    live.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_trickled_past_the_body_read_timeout_is_refused_with_408_naming_the_flag() {
    let live = start(HttpLimits {
        body_read_timeout: Duration::from_millis(600),
        ..limits()
    })
    .await;
    let mut stream = connect(&live).await;
    stream
        .write_all(upload_head(1 << 20).as_bytes())
        .await
        .unwrap();
    let (mut reader, mut writer) = stream.split();
    let trickle = async {
        loop {
            if writer.write_all(&[0; 64]).await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    let answer = async {
        let mut received = Vec::new();
        let _ = reader.read_to_end(&mut received).await;
        String::from_utf8_lossy(&received).into_owned()
    };
    let answer = tokio::time::timeout(HANG, async {
        tokio::select! {
            () = trickle => String::new(),
            answer = answer => answer,
        }
    })
    .await
    .expect("a trickled body holds its upload slot for ever");
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("--body-read-timeout"), "{answer}");
    live.stop().await;
}
