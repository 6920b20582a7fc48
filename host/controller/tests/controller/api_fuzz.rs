//! The HTTP API under random requests (methods, paths, headers, bodies), in process:
//! it never panics and never answers a 5xx other than the documented 503; without the
//! token nothing changes; with it, the controller still answers afterwards.

use crate::support;
use std::time::Duration;

use axum::body::Body;
use axum::http::Request;
use proptest::prelude::*;
use switchyard_controller::Controller;
use switchyard_controller::{ApiConfig, Token};
use tower::ServiceExt as _;

const TOKEN: &str = "fuzz-token";

/// What a request could have changed.
fn observable(controller: &Controller) -> String {
    let policies: Vec<String> = controller
        .catalog()
        .list()
        .into_iter()
        .map(|p| format!("{} {} {:?}", p.name, p.digest, p.settings))
        .collect();
    let (active, experiment) =
        controller.with_status(|s| (s.active.clone(), s.experiment.is_some()));
    format!("{active} {experiment} {policies:?}")
}

fn method() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS",
    ])
}

fn path() -> impl Strategy<Value = String> {
    let segment = prop_oneof![
        Just("default".to_string()),
        Just("even".to_string()),
        Just("%2F".to_string()),
        Just("..".to_string()),
        "[a-zA-Z0-9_.%~-]{0,12}",
        "\\PC{0,8}".prop_map(|s| urlencode(&s)),
    ];
    let query = prop_oneof![
        Just(String::new()),
        Just("?limit=0".to_string()),
        Just("?limit=18446744073709551616".to_string()),
        Just("?since=-99999999999999&limit=1000".to_string()),
        "\\?[a-z=&0-9-]{0,16}",
    ];
    (
        prop::sample::select(vec![
            "/v1/policies",
            "/v1/policies/{}/activate",
            "/v1/policies/{}/parameters",
            "/v1/experiment",
            "/v1/jobs/{}/loss",
            "/v1/decisions",
            "/v1/status",
            "/v1/snapshot",
            "/v1/jobs/labels",
            "/v1/jobs",
            "/v1/utilisation",
            "/console/{}",
            "/metrics",
            "/healthz",
            "/readyz",
            "/{}",
            "/v1/{}/{}",
        ]),
        segment.clone(),
        segment,
        query,
    )
        .prop_map(|(template, a, b, query)| {
            format!(
                "{}{query}",
                template.replacen("{}", &a, 1).replacen("{}", &b, 1)
            )
        })
}

fn urlencode(text: &str) -> String {
    text.bytes().map(|b| format!("%{b:02X}")).collect()
}

fn body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        Just(Vec::new()),
        Just(b"{}".to_vec()),
        Just(br#"{"mode": "split", "policy_b": "even", "ratio": 2}"#.to_vec()),
        Just(br#"{"mode": "shadow", "policy_b": "even"}"#.to_vec()),
        Just(br#"{"step": 1, "value": 1e308}"#.to_vec()),
        Just(br#"{"alpha": "-3", "scoring": "most-allocated"}"#.to_vec()),
        Just(b"\0asm\x01\0\0\0".to_vec()),
        prop::collection::vec(any::<u8>(), 0..256),
        "\\PC{0,64}".prop_map(String::into_bytes),
    ]
}

fn content_type() -> impl Strategy<Value = Option<&'static str>> {
    prop::option::of(prop::sample::select(vec![
        "application/json",
        "application/wasm",
        "application/octet-stream",
        "text/plain",
        "multipart/form-data; boundary=x",
        "application/json; charset=latin1",
    ]))
}

#[test]
fn random_requests_get_no_undocumented_error_and_change_nothing_without_the_token() {
    let tokio = tokio::runtime::Runtime::new().unwrap();
    let live = tokio.block_on(support::start_live(
        support::STREAM,
        20.0,
        Duration::from_millis(500),
    ));
    let router = switchyard_controller::router(
        live.controller.clone(),
        ApiConfig {
            token: Token::new(TOKEN),
            max_upload_bytes: 1 << 20,
            ..ApiConfig::default()
        },
    );
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 400,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    let strategy = (
        method(),
        path(),
        body(),
        content_type(),
        prop::option::of(prop_oneof![
            Just("Bearer wrong".to_string()),
            Just("Bearer ".to_string()),
            Just(format!("Basic {TOKEN}")),
            "\\PC{0,20}",
        ]),
    );
    runner
        .run(
            &strategy,
            |(method, path, body, content_type, authorization)| {
                let before = observable(&live.controller);
                let mut request = Request::builder().method(method).uri(&path);
                if let Some(ct) = content_type {
                    request = request.header("content-type", ct);
                }
                if let Some(auth) = authorization.filter(|a| http_header_ok(a)) {
                    request = request.header("authorization", auth);
                }
                let Ok(request) = request.body(Body::from(body)) else {
                    // Not even a request (an invalid URI); nothing to send.
                    return Ok(());
                };
                let response = tokio.block_on(router.clone().oneshot(request)).unwrap();
                let status = response.status().as_u16();
                prop_assert!(
                    status < 500 || status == 503,
                    "{method} {path} answered {status}"
                );
                let after = observable(&live.controller);
                prop_assert_eq!(
                    &before,
                    &after,
                    "{} {} changed the controller without the token",
                    method,
                    path
                );
                Ok(())
            },
        )
        .unwrap();

    // With the token: documented errors only, and the controller answers afterwards.
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 300,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    runner
        .run(
            &(method(), path(), body(), content_type()),
            |(method, path, body, content_type)| {
                let mut request = Request::builder()
                    .method(method)
                    .uri(&path)
                    .header("authorization", format!("Bearer {TOKEN}"));
                if let Some(ct) = content_type {
                    request = request.header("content-type", ct);
                }
                let Ok(request) = request.body(Body::from(body)) else {
                    return Ok(());
                };
                let response = tokio.block_on(router.clone().oneshot(request)).unwrap();
                let status = response.status().as_u16();
                prop_assert!(
                    status < 500 || status == 503,
                    "{method} {path} answered {status}"
                );
                Ok(())
            },
        )
        .unwrap();
    let healthz = Request::builder()
        .uri("/healthz")
        .body(Body::empty())
        .unwrap();
    let response = tokio.block_on(router.clone().oneshot(healthz)).unwrap();
    assert_eq!(response.status(), 200);
    tokio.block_on(live.stop());
}

/// Whether `value` can be sent as a header value at all.
fn http_header_ok(value: &str) -> bool {
    axum::http::HeaderValue::from_str(value).is_ok()
}
