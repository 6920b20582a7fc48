//! The flags of the HTTP API's limits (`HttpLimits`), shared by both backends of `run`.
//! It turns flags into the library's limits and checks their values; what each limit
//! does is the controller's business.

use std::time::Duration;

use switchyard_controller::HttpLimits;

/// What one client may hold of the API (docs/security.md lists each with its test).
#[derive(Debug, clap::Args)]
pub(in crate::cli) struct HttpLimitArgs {
    /// Connections the API holds open at once; past it a new one closes the oldest idle
    /// one, or is answered 503 when every one is serving.
    #[arg(long, default_value_t = HttpLimits::default().max_connections, value_name = "N")]
    pub max_connections: usize,
    /// Seconds a client has to send a request's line and headers.
    #[arg(long, default_value_t = HttpLimits::default().header_read_timeout.as_secs_f64(), value_name = "SECONDS", value_parser = seconds)]
    pub header_read_timeout: f64,
    /// Seconds a kept-alive connection may wait for its next request.
    #[arg(long, default_value_t = HttpLimits::default().idle_timeout.as_secs_f64(), value_name = "SECONDS", value_parser = seconds)]
    pub idle_timeout: f64,
    /// Seconds a client has to send a request's whole body (an upload).
    #[arg(long, default_value_t = HttpLimits::default().body_read_timeout.as_secs_f64(), value_name = "SECONDS", value_parser = seconds)]
    pub body_read_timeout: f64,
    /// Policy uploads received at once; more are answered 503 with Retry-After.
    #[arg(long, default_value_t = HttpLimits::default().max_concurrent_uploads, value_name = "N")]
    pub max_concurrent_uploads: usize,
}

/// A number of seconds above 0 and at most a day.
fn seconds(text: &str) -> Result<f64, String> {
    let value: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("`{text}` is not a number of seconds"))?;
    if value.is_finite() && value > 0.0 && value <= 86_400.0 {
        Ok(value)
    } else {
        Err(format!(
            "`{text}`: give a number of seconds above 0 and at most 86400 (a day)"
        ))
    }
}

impl HttpLimitArgs {
    /// The limits these flags give.
    pub(in crate::cli) fn limits(&self) -> anyhow::Result<HttpLimits> {
        if self.max_connections == 0 {
            anyhow::bail!("--max-connections 0 would refuse every client; give 1 or more");
        }
        if self.max_concurrent_uploads == 0 {
            anyhow::bail!("--max-concurrent-uploads 0 would refuse every upload; give 1 or more");
        }
        Ok(HttpLimits {
            max_connections: self.max_connections,
            header_read_timeout: Duration::from_secs_f64(self.header_read_timeout),
            idle_timeout: Duration::from_secs_f64(self.idle_timeout),
            body_read_timeout: Duration::from_secs_f64(self.body_read_timeout),
            max_concurrent_uploads: self.max_concurrent_uploads,
        })
    }
}
