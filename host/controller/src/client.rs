//! A client of a running controller's HTTP API (`docs/openapi.json`), for `switchyard
//! ctl`: one request per call, the answer as JSON, and every failure as a message that
//! names the request and what the controller said. It knows the paths and the token
//! header; what to print is the command's business.

use std::time::Duration;

use serde_json::Value;

/// A request that failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The address is not an `http://` URL.
    #[error(
        "`{url}` is not a controller address: give http://HOST:PORT (plain HTTP; reach a \
         cluster's controller through `kubectl port-forward`)"
    )]
    BadUrl {
        /// The address given.
        url: String,
    },
    /// No answer: nothing listens there, or the connection broke.
    #[error("{method} {url}: no answer from the controller: {source}")]
    Unreachable {
        /// The request's method.
        method: String,
        /// The full URL.
        url: String,
        /// What the HTTP client saw.
        #[source]
        source: reqwest::Error,
    },
    /// The controller refused the request.
    #[error("{method} {path}: {status}: {message}{hint}")]
    Refused {
        /// The request's method.
        method: String,
        /// The path asked for.
        path: String,
        /// The HTTP status.
        status: u16,
        /// The controller's `error`, or its whole answer.
        message: String,
        /// What to do about it, when that is known.
        hint: &'static str,
    },
    /// The controller did not answer `/readyz` in time.
    #[error("{url}/readyz did not answer 200 within {seconds} s (last: {last})")]
    NotReady {
        /// The controller's address.
        url: String,
        /// How long was waited.
        seconds: u64,
        /// The last failure seen.
        last: String,
    },
}

impl ClientError {
    /// Short label for metrics and tests.
    pub fn metric_label(&self) -> &'static str {
        match self {
            ClientError::BadUrl { .. } => "bad-url",
            ClientError::Unreachable { .. } => "unreachable",
            ClientError::Refused { .. } => "refused",
            ClientError::NotReady { .. } => "not-ready",
        }
    }
}

/// What a request sends.
pub enum Body {
    /// Nothing.
    Empty,
    /// A JSON document.
    Json(Value),
    /// A policy component.
    Wasm(Vec<u8>),
}

/// A controller's API at one address, with the operator's token when one is given.
pub struct Client {
    base: String,
    token: Option<String>,
    http: reqwest::Client,
}

/// How long one request may take: an upload is compiled before the answer comes.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

impl Client {
    /// A client of the controller at `url` (`http://host:port`, a trailing `/` ignored).
    pub fn new(url: &str, token: Option<String>) -> Result<Self, ClientError> {
        let base = url.trim_end_matches('/').to_string();
        let rest = base.strip_prefix("http://").unwrap_or_default();
        if rest.is_empty() || rest.contains(char::is_whitespace) {
            return Err(ClientError::BadUrl {
                url: url.to_string(),
            });
        }
        let http = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .build()
            .map_err(|source| ClientError::Unreachable {
                method: "-".into(),
                url: base.clone(),
                source,
            })?;
        Ok(Self { base, token, http })
    }

    /// `GET path`.
    pub async fn get(&self, path: &str) -> Result<Value, ClientError> {
        self.send(reqwest::Method::GET, path, Body::Empty).await
    }

    /// `method path` with `body`, the token attached; the answer's JSON (`null` when it
    /// has none).
    pub async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Body,
    ) -> Result<Value, ClientError> {
        let url = format!("{}{path}", self.base);
        let mut request = self.http.request(method.clone(), &url);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        request = match body {
            Body::Empty => request,
            Body::Json(value) => request
                .header("content-type", "application/json")
                .body(value.to_string()),
            Body::Wasm(bytes) => request
                .header("content-type", "application/wasm")
                .body(bytes),
        };
        let unreachable = |source| ClientError::Unreachable {
            method: method.to_string(),
            url: url.clone(),
            source,
        };
        let response = request.send().await.map_err(unreachable)?;
        let status = response.status();
        let text = response.text().await.map_err(unreachable)?;
        let value: Value = if text.trim().is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        if status.is_success() {
            return Ok(value);
        }
        let message = value["error"]
            .as_str()
            .map_or_else(|| value.to_string(), str::to_string);
        let hint = match (status.as_u16(), &self.token) {
            (401, None) => {
                " (give the token with --token-file FILE, --token, SWITCHYARD_TOKEN_FILE or SWITCHYARD_TOKEN)"
            }
            (401, Some(_)) => " (the token given is not the controller's)",
            _ => "",
        };
        Err(ClientError::Refused {
            method: method.to_string(),
            path: path.to_string(),
            status: status.as_u16(),
            message,
            hint,
        })
    }

    /// Waits until `/readyz` answers 200, asking every half second, at most `timeout`.
    pub async fn wait_ready(&self, timeout: Duration) -> Result<(), ClientError> {
        let started = tokio::time::Instant::now();
        loop {
            let last = match self.get("/readyz").await {
                Ok(_) => return Ok(()),
                Err(error) => error.to_string(),
            };
            if started.elapsed() >= timeout {
                return Err(ClientError::NotReady {
                    url: self.base.clone(),
                    seconds: timeout.as_secs(),
                    last,
                });
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}
