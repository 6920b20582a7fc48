//! A scripted mock API server for tests (the kube-rs `tower_test` pattern): a list of
//! expected requests, each with its method, path (and query), a JSON body the request
//! must contain, and the response to give. Requests are checked in order (except where
//! two concurrent tasks of the controller may send theirs either way round, marked
//! [`Expect::either_order_with_previous`]); a request that differs fails the test, and
//! one that never comes fails it after a timeout. Every request is also recorded as
//! (verb, group, resource, subresource) for the RBAC test.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use http::{Method, Request, Response, StatusCode};
use kube::Client;
use kube::client::Body;
use serde_json::Value;

/// What one request was, in RBAC terms.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Access {
    /// `get`, `list`, `watch`, `create`, `update`, `patch` or `delete`.
    pub verb: String,
    /// API group (`""` for the core group).
    pub group: String,
    /// Resource (`pods`).
    pub resource: String,
    /// Subresource (`binding`), empty for none.
    pub subresource: String,
}

/// One expected request and its scripted answer.
#[derive(Clone, Debug)]
pub struct Expect {
    method: Method,
    path: String,
    body: Option<Value>,
    query: Vec<String>,
    status: StatusCode,
    response: Value,
    text: Option<String>,
    delay: Option<Duration>,
    either_order: bool,
}

impl Expect {
    /// Expects `method` on `path` (the query, if given, must match exactly; a trailing
    /// `*` matches any rest).
    pub fn new(method: Method, path: &str) -> Self {
        Self {
            method,
            path: path.into(),
            body: None,
            query: Vec::new(),
            status: StatusCode::OK,
            response: Value::Null,
            text: None,
            delay: None,
            either_order: false,
        }
    }
    /// `GET path`.
    pub fn get(path: &str) -> Self {
        Self::new(Method::GET, path)
    }
    /// `POST path`.
    pub fn post(path: &str) -> Self {
        Self::new(Method::POST, path)
    }
    /// `PUT path`.
    pub fn put(path: &str) -> Self {
        Self::new(Method::PUT, path)
    }
    /// `PATCH path`.
    pub fn patch(path: &str) -> Self {
        Self::new(Method::PATCH, path)
    }
    /// `DELETE path`.
    pub fn delete(path: &str) -> Self {
        Self::new(Method::DELETE, path)
    }
    /// The request body must contain `body` (objects: these keys, recursively; arrays:
    /// same length, element by element; anything else: equal).
    pub fn body(mut self, body: Value) -> Self {
        self.body = Some(body);
        self
    }
    /// The query string must contain each of `parts` (`watch=true`, ...).
    pub fn query_has(mut self, parts: &[&str]) -> Self {
        self.query = parts.iter().map(|p| p.to_string()).collect();
        self
    }
    /// Answers 200 with a plain-text body (logs, watch event streams).
    pub fn text(mut self, body: &str) -> Self {
        self.text = Some(body.to_string());
        self
    }
    /// Answers with `status` and `response`.
    pub fn respond(mut self, status: u16, response: Value) -> Self {
        self.status = StatusCode::from_u16(status).expect("a valid status code");
        self.response = response;
        self
    }
    /// Answers only after `delay` (a call that hangs); later requests are served meanwhile.
    pub fn after(mut self, delay: Duration) -> Self {
        self.delay = Some(delay);
        self
    }
    /// This request and the one scripted before it may come in either order: the
    /// controller sends them from two tasks that run concurrently (a loss write and a
    /// log follower), so neither order is wrong.
    pub fn either_order_with_previous(mut self) -> Self {
        self.either_order = true;
        self
    }
    /// Answers 200 with `response`.
    pub fn ok(self, response: Value) -> Self {
        self.respond(200, response)
    }
    /// Answers `code` with a Kubernetes `Status` failure of `reason`.
    pub fn fail(self, code: u16, reason: &str, message: &str) -> Self {
        self.respond(
            code,
            serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                "code": code, "reason": reason, "message": message}),
        )
    }
}

impl Expect {
    /// The request's path, with its query when the script gives one.
    fn actual(&self, uri: &http::Uri) -> String {
        match uri.query() {
            Some(q) if self.path.contains('?') => format!("{}?{q}", uri.path()),
            _ => uri.path().to_string(),
        }
    }

    /// Whether a request's method and path are this one's.
    fn matches(&self, method: &Method, uri: &http::Uri) -> bool {
        let actual = self.actual(uri);
        let path_matches = match self.path.strip_suffix('*') {
            Some(prefix) => actual.starts_with(prefix),
            None => actual == self.path,
        };
        *method == self.method && path_matches
    }
}

/// A client talking to a scripted server, and the server's task.
pub struct MockServer {
    handle: tokio::task::JoinHandle<Served>,
    served: Arc<AtomicUsize>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

/// What the server saw: the scripted accesses, and requests that came after the script
/// ended (each a failure of the scenario).
struct Served {
    seen: Vec<Access>,
    unexpected: Vec<String>,
}

/// How long a scenario may wait for a request: virtual time in the tests that pause the
/// clock, wall time in those that run the control loop on a blocking thread.
pub const TIMEOUT: Duration = Duration::from_secs(60);

impl MockServer {
    /// Starts serving `script`; returns the client to use and the server. A request
    /// after the last scripted one is answered with a 500 and fails [`MockServer::finish`].
    pub fn start(script: Vec<Expect>) -> (Client, MockServer) {
        let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let served = Arc::new(AtomicUsize::new(0));
        let counter = served.clone();
        let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(async move {
            let mut seen = Vec::new();
            let mut script = std::collections::VecDeque::from(script);
            let mut index = 0;
            while let Some(first) = script.front() {
                let (request, send) = tokio::time::timeout(TIMEOUT, handle.next_request())
                    .await
                    .unwrap_or_else(|_| {
                        panic!(
                            "request {index} ({} {}) never came",
                            first.method, first.path
                        )
                    })
                    .unwrap_or_else(|| {
                        panic!(
                            "client dropped before request {index} ({} {})",
                            first.method, first.path
                        )
                    });
                let method = request.method().clone();
                let uri = request.uri().clone();
                // The first scripted request, or one marked as coming in either order
                // with those before it, whichever this request is.
                let candidates = 1 + script.iter().skip(1).take_while(|e| e.either_order).count();
                let position = (0..candidates)
                    .find(|&i| script[i].matches(&method, &uri))
                    .unwrap_or(0);
                let expect = script.remove(position).expect("a scripted request");
                let actual = expect.actual(&uri);
                assert!(
                    expect.matches(&method, &uri),
                    "request {index}: got {method} {actual}, expected {} {}",
                    expect.method,
                    expect.path
                );
                let query = uri.query().unwrap_or("");
                for part in &expect.query {
                    assert!(
                        query.split('&').any(|kv| kv == part),
                        "request {index} ({actual}): query `{query}` lacks `{part}`"
                    );
                }
                seen.push(access(&method, uri.path(), uri.query().unwrap_or("")));
                let bytes = request
                    .into_body()
                    .collect_bytes()
                    .await
                    .expect("a readable body");
                if let Some(wanted) = &expect.body {
                    let got: Value = serde_json::from_slice(&bytes).expect("a JSON body");
                    assert!(
                        contains(&got, wanted),
                        "request {index} ({method} {actual}) body\n{got:#}\ndoes not contain\n{wanted:#}"
                    );
                }
                let body = match &expect.text {
                    Some(text) => text.clone().into_bytes(),
                    None => serde_json::to_vec(&expect.response).expect("JSON"),
                };
                counter.fetch_add(1, Ordering::SeqCst);
                let response = Response::builder()
                    .status(expect.status)
                    .body(Body::from(body))
                    .expect("a response");
                match expect.delay {
                    // A call that hangs holds up only its caller: the next scripted
                    // request is served meanwhile.
                    Some(delay) => {
                        tokio::spawn(async move {
                            tokio::time::sleep(delay).await;
                            send.send_response(response);
                        });
                    }
                    None => send.send_response(response),
                }
                index += 1;
            }
            let mut unexpected = Vec::new();
            loop {
                tokio::select! {
                    biased;
                    _ = &mut stopped => break,
                    next = handle.next_request() => match next {
                        Some((request, send)) => {
                            unexpected.push(format!("{} {}", request.method(), request.uri()));
                            send.send_response(
                                Response::builder()
                                    .status(StatusCode::INTERNAL_SERVER_ERROR)
                                    .body(Body::from(
                                        br#"{"kind":"Status","apiVersion":"v1","status":"Failure","code":500,"reason":"InternalError","message":"not in the script"}"#
                                            .to_vec(),
                                    ))
                                    .expect("a response"),
                            );
                        }
                        None => break,
                    },
                }
            }
            Served { seen, unexpected }
        });
        (
            Client::new(service, "default"),
            MockServer {
                handle: server,
                served,
                stop: Some(stop),
            },
        )
    }

    /// How many requests have come so far.
    pub fn served(&self) -> usize {
        self.served.load(Ordering::SeqCst)
    }

    /// Waits for the whole script to be served and returns what was accessed; fails when
    /// a request came after the script.
    pub async fn finish(mut self) -> Vec<Access> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let served = tokio::time::timeout(TIMEOUT, &mut self.handle)
            .await
            .expect("the scenario finished in time")
            .expect("the scripted server did not panic");
        assert!(
            served.unexpected.is_empty(),
            "requests after the script: {:#?}",
            served.unexpected
        );
        served.seen
    }
}

/// Whether `got` contains `wanted` (see [`Expect::body`]).
pub fn contains(got: &Value, wanted: &Value) -> bool {
    match (got, wanted) {
        (Value::Object(g), Value::Object(w)) => w
            .iter()
            .all(|(k, v)| g.get(k).is_some_and(|gv| contains(gv, v))),
        (Value::Array(g), Value::Array(w)) => {
            g.len() == w.len() && g.iter().zip(w).all(|(a, b)| contains(a, b))
        }
        // `"*"` stands for any value that is present (times, generated names).
        (_, Value::String(w)) if w == "*" => !got.is_null(),
        // `"text*"` stands for any string that starts with `text`.
        (Value::String(g), Value::String(w)) if w.ends_with('*') => {
            g.starts_with(&w[..w.len() - 1])
        }
        _ => got == wanted,
    }
}

/// The RBAC view of a request: verb, group, resource, subresource.
pub fn access(method: &Method, path: &str, query: &str) -> Access {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, rest) = match segments.as_slice() {
        ["api", _version, rest @ ..] => (String::new(), rest),
        ["apis", group, _version, rest @ ..] => (group.to_string(), rest),
        _ => panic!("not an API path: {path}"),
    };
    let rest = match rest {
        ["namespaces", _ns, rest @ ..] if !rest.is_empty() => rest,
        rest => rest,
    };
    let (resource, name, subresource) = match rest {
        [resource] => (*resource, None, ""),
        [resource, name] => (*resource, Some(*name), ""),
        [resource, name, sub] => (*resource, Some(*name), *sub),
        _ => panic!("unexpected API path: {path}"),
    };
    let watching = query.split('&').any(|kv| kv == "watch=true");
    let verb = match *method {
        Method::GET if watching => "watch",
        Method::GET if name.is_none() => "list",
        Method::GET => "get",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE => "delete",
        ref other => panic!("unexpected method {other}"),
    };
    Access {
        verb: verb.into(),
        group,
        resource: resource.into(),
        subresource: subresource.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn requests_map_to_the_verbs_rbac_checks() {
        let a = access(&Method::POST, "/api/v1/namespaces/ml/pods/p-0/binding", "");
        assert_eq!(
            (
                a.verb.as_str(),
                a.group.as_str(),
                a.resource.as_str(),
                a.subresource.as_str()
            ),
            ("create", "", "pods", "binding")
        );
        let a = access(&Method::GET, "/api/v1/pods", "watch=true&resourceVersion=1");
        assert_eq!((a.verb.as_str(), a.resource.as_str()), ("watch", "pods"));
        let a = access(&Method::GET, "/api/v1/namespaces", "");
        assert_eq!(
            (a.verb.as_str(), a.resource.as_str()),
            ("list", "namespaces")
        );
        let a = access(
            &Method::PUT,
            "/apis/switchyard.dev/v1alpha1/namespaces/ml/trainingjobs/a/status",
            "",
        );
        assert_eq!(
            (a.verb.as_str(), a.group.as_str(), a.subresource.as_str()),
            ("update", "switchyard.dev", "status")
        );
    }

    #[test]
    fn body_containment_checks_keys_recursively_and_arrays_exactly() {
        let got = json!({"a": {"b": 1, "c": [1, {"d": 2, "e": 3}]}, "f": "x"});
        assert!(contains(&got, &json!({"a": {"c": [1, {"d": 2}]}})));
        assert!(!contains(&got, &json!({"a": {"c": [1]}})));
        assert!(!contains(&got, &json!({"a": {"b": 2}})));
        assert!(!contains(&got, &json!({"g": null})));
    }
}
