//! The probes' endpoint: `GET /healthz` answers 200 while the process serves, `GET
//! /readyz` answers 200 once the caches have synced and 503 before. A few lines over a
//! TCP listener, because the probes need nothing more; the full HTTP API lives elsewhere.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

/// Serves the probes on `listener` until `shutdown` resolves.
pub async fn serve(
    listener: TcpListener,
    ready: Arc<AtomicBool>,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = &mut shutdown => return,
        };
        let Ok((stream, _)) = accepted else { continue };
        let ready = ready.clone();
        tokio::spawn(async move {
            let (read, mut write) = stream.into_split();
            let mut line = String::new();
            if BufReader::new(read).read_line(&mut line).await.is_err() {
                return;
            }
            let path = line.split_whitespace().nth(1).unwrap_or("");
            let (status, body) = match path {
                "/healthz" => ("200 OK", "ok"),
                "/readyz" if ready.load(Ordering::SeqCst) => ("200 OK", "ready"),
                "/readyz" => ("503 Service Unavailable", "caches not synced"),
                _ => ("404 Not Found", "not found"),
            };
            let response = format!(
                "HTTP/1.1 {status}\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = write.write_all(response.as_bytes()).await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    async fn get(addr: std::net::SocketAddr, path: &str) -> String {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        stream
            .write_all(format!("GET {path} HTTP/1.1\r\nhost: x\r\n\r\n").as_bytes())
            .await
            .unwrap();
        let mut out = String::new();
        stream.read_to_string(&mut out).await.unwrap();
        out.lines().next().unwrap_or_default().to_string()
    }

    #[tokio::test]
    async fn readiness_follows_the_cache_sync_and_liveness_is_always_ok() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let ready = Arc::new(AtomicBool::new(false));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve(listener, ready.clone(), async {
            stopped.await.ok();
        }));
        assert_eq!(get(addr, "/healthz").await, "HTTP/1.1 200 OK");
        assert_eq!(
            get(addr, "/readyz").await,
            "HTTP/1.1 503 Service Unavailable"
        );
        ready.store(true, Ordering::SeqCst);
        assert_eq!(get(addr, "/readyz").await, "HTTP/1.1 200 OK");
        assert_eq!(get(addr, "/other").await, "HTTP/1.1 404 Not Found");
        stop.send(()).unwrap();
        server.await.unwrap();
    }
}
