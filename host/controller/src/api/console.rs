//! The operator's console: one HTML page, its script and stylesheet, and the vendored
//! chart library (uPlot), all compiled into the binary and served on the API's port
//! under `/console/`. The page reads the same public endpoints as anyone and sends
//! changes with the bearer token the operator types into it; it holds no authority of
//! its own, so serving it needs none.
//!
//! Every answer carries a Content-Security-Policy that allows only this origin's own
//! scripts, styles and requests (no inline script, no other host, no framing, no form
//! posted anywhere), and an ETag with `Cache-Control: no-cache`, so a browser revalidates
//! and a new binary's page is never mixed with an old script. This module does not read
//! the controller.

use axum::extract::Path;
use axum::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, ETAG, IF_NONE_MATCH, LOCATION,
    REFERRER_POLICY, X_CONTENT_TYPE_OPTIONS,
};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use super::error::ApiError;

/// Where the console is served.
pub(super) const PREFIX: &str = "/console/";

/// What the page may load and where it may send requests: only its own origin.
const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; \
                   connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; \
                   frame-ancestors 'none'";

struct Asset {
    name: &'static str,
    content_type: &'static str,
    bytes: &'static [u8],
    etag: u64,
}

macro_rules! asset {
    ($name:literal, $content_type:literal) => {{
        const BYTES: &[u8] = include_bytes!(concat!("../../console/", $name));
        Asset {
            name: $name,
            content_type: $content_type,
            bytes: BYTES,
            etag: fnv1a(BYTES),
        }
    }};
}

const ASSETS: &[Asset] = &[
    asset!("index.html", "text/html; charset=utf-8"),
    asset!("app.js", "text/javascript; charset=utf-8"),
    asset!("style.css", "text/css; charset=utf-8"),
    asset!("vendor/uPlot.iife.min.js", "text/javascript; charset=utf-8"),
    asset!("vendor/uPlot.min.css", "text/css; charset=utf-8"),
];

/// FNV-1a of the bytes, computed at compile time: a validator for the ETag, not a
/// security digest (the bytes come from this binary).
const fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut i = 0;
    while i < bytes.len() {
        hash ^= bytes[i] as u64;
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        i += 1;
    }
    hash
}

/// `/` and `/console` lead to the page.
pub(super) async fn to_console() -> Response {
    (StatusCode::SEE_OTHER, [(LOCATION, PREFIX)]).into_response()
}

/// The page itself.
pub(super) async fn index(headers: HeaderMap) -> Response {
    serve("index.html", &headers)
}

/// The page's script, stylesheet and vendored library.
pub(super) async fn asset(Path(name): Path<String>, headers: HeaderMap) -> Response {
    serve(&name, &headers)
}

fn serve(name: &str, request: &HeaderMap) -> Response {
    let Some(asset) = ASSETS.iter().find(|a| a.name == name) else {
        return ApiError::not_found(format!(
            "the console has no file `{}`; open {PREFIX}",
            name.escape_debug()
        ))
        .into_response();
    };
    let etag = format!("\"{:016x}\"", asset.etag);
    let fresh = request
        .get(IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|tag| tag.trim() == etag));
    let mut response = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        ([(CONTENT_TYPE, asset.content_type)], asset.bytes).into_response()
    };
    let headers = response.headers_mut();
    headers.insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if let Ok(value) = HeaderValue::from_str(&etag) {
        headers.insert(ETAG, value);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_answer_carries_the_content_policy_and_a_validator_that_turns_a_repeat_into_304() {
        let first = serve("app.js", &HeaderMap::new());
        assert_eq!(first.status(), StatusCode::OK);
        let headers = first.headers();
        assert_eq!(headers[CONTENT_TYPE], "text/javascript; charset=utf-8");
        assert_eq!(headers[CONTENT_SECURITY_POLICY], CSP);
        assert!(CSP.contains("script-src 'self';") && !CSP.contains("unsafe"));
        assert_eq!(headers[X_CONTENT_TYPE_OPTIONS], "nosniff");
        assert_eq!(headers[CACHE_CONTROL], "no-cache");
        let mut again = HeaderMap::new();
        again.insert(IF_NONE_MATCH, headers[ETAG].clone());
        let repeat = serve("app.js", &again);
        assert_eq!(repeat.status(), StatusCode::NOT_MODIFIED);
        assert_eq!(repeat.headers()[CONTENT_SECURITY_POLICY], CSP);
        let other = serve("style.css", &again);
        assert_eq!(
            other.status(),
            StatusCode::OK,
            "another file's tag does not match"
        );
        assert_eq!(
            serve("../Cargo.toml", &HeaderMap::new()).status(),
            StatusCode::NOT_FOUND
        );
    }

    #[test]
    fn every_file_the_page_names_is_embedded() {
        let page = std::str::from_utf8(ASSETS[0].bytes).unwrap();
        for reference in page
            .split(['"', '\''])
            .filter(|s| s.ends_with(".js") || s.ends_with(".css"))
        {
            assert!(
                ASSETS.iter().any(|a| a.name == reference),
                "index.html names `{reference}`, which is not embedded"
            );
        }
    }

    #[test]
    fn the_page_has_no_inline_script_or_style_the_policy_would_block() {
        let page = std::str::from_utf8(ASSETS[0].bytes).unwrap();
        for tag in page.split("<script").skip(1) {
            assert!(tag.contains("src="), "an inline <script>: {tag}");
        }
        assert!(!page.contains("<style"), "an inline <style> block");
        assert!(!page.contains(" style="), "an inline style attribute");
        let handler = page.match_indices(" on").find(|(at, _)| {
            let name: String = page[at + 3..]
                .chars()
                .take_while(char::is_ascii_lowercase)
                .collect();
            !name.is_empty() && page[at + 3 + name.len()..].starts_with('=')
        });
        assert!(handler.is_none(), "an inline event handler at {handler:?}");
    }
}
