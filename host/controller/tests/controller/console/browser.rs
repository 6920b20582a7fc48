//! Driving the console in a real browser: Debian's Chromium behind a chromedriver the
//! test starts, waits on the page with a bound, screenshots for the docs and axe-core's
//! accessibility rules. It holds no scenario; the tests beside it do.

use crate::support;

use std::any::Any;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::actions::{InputSource as _, KeyAction, KeyActions};
use fantoccini::key::Key;
use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{Value, json};

/// How long any one wait on the page may take: generous for a loaded two-core machine,
/// not a performance figure.
pub(super) const PATIENCE: Duration = Duration::from_secs(45);

pub(super) struct Tools {
    chromium: PathBuf,
    chromedriver: PathBuf,
    pub(super) axe: Option<String>,
}

/// The browser and its driver, which CI requires with `SWITCHYARD_REQUIRE_CHROMIUM`.
const CHROMIUM: support::Tool = support::Tool {
    name: "Chromium and chromedriver",
    install: "Debian: apt-get install chromium chromium-driver",
    required_by: "SWITCHYARD_REQUIRE_CHROMIUM",
};

/// axe-core, for the accessibility rules; required with the browser.
const AXE_CORE: support::Tool = support::Tool {
    name: "axe-core",
    install: "npm install axe-core, then SWITCHYARD_AXE_CORE=node_modules/axe-core/axe.min.js",
    required_by: "SWITCHYARD_REQUIRE_CHROMIUM",
};

/// The browser, its driver and axe-core; `None` (after saying what to install) when the
/// browser or its driver is missing, unless CI requires them.
pub(super) fn tools() -> Option<Tools> {
    let found = support::executable("CHROMIUM", "chromium").and_then(|chromium| {
        let chromedriver = support::executable("CHROMEDRIVER", "chromedriver")
            .map_err(|missing| format!("{} is installed but {missing}", chromium.display()))?;
        Ok((chromium, chromedriver))
    });
    let (chromium, chromedriver) = support::optional_tool(CHROMIUM, "the console test", found)?;
    let axe = match std::env::var_os("SWITCHYARD_AXE_CORE") {
        Some(path) => Ok(std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("SWITCHYARD_AXE_CORE={}: {e}", Path::new(&path).display()))),
        None => Err("SWITCHYARD_AXE_CORE does not name axe-core's axe.min.js".to_string()),
    };
    let axe = support::optional_tool(AXE_CORE, "the console's accessibility rules", axe);
    Some(Tools {
        chromium,
        chromedriver,
        axe,
    })
}

/// Headless Chromium behind a chromedriver this test started.
pub(super) struct Browser {
    pub(super) client: Client,
    chromedriver: Child,
    _profile: tempfile::TempDir,
}

impl Browser {
    pub(super) async fn start(tools: &Tools) -> Browser {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let chromedriver = Command::new(&tools.chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting chromedriver");
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(started.elapsed() < PATIENCE, "chromedriver never listened");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let profile = tempfile::tempdir().unwrap();
        // This machine's network is closed: background networking makes Chromium hang.
        let args = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            "--force-device-scale-factor=1",
            "--window-size=1440,2000",
            &format!("--user-data-dir={}", profile.path().display()),
        ];
        let capabilities = json!({
            "goog:chromeOptions": {"binary": tools.chromium, "args": args},
        });
        let client = ClientBuilder::new(HttpConnector::new())
            .capabilities(capabilities.as_object().unwrap().clone())
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
            .expect("starting a Chromium session");
        Browser {
            client,
            chromedriver,
            _profile: profile,
        }
    }

    pub(super) async fn close(mut self) {
        let _ = self.client.clone().close().await;
        let _ = self.chromedriver.kill();
        let _ = self.chromedriver.wait();
    }
}

/// Runs `script` (a function body) until it returns neither `null` nor `false`, and
/// returns that; fails naming `what`, with the page's messages, after [`PATIENCE`].
pub(super) async fn wait_js(client: &Client, what: &str, script: &str) -> Value {
    let started = Instant::now();
    loop {
        let value = client.execute(script, vec![]).await.unwrap();
        if !(value.is_null() || value == Value::Bool(false)) {
            return value;
        }
        if started.elapsed() > PATIENCE {
            let messages = client
                .execute(
                    "return document.querySelector('.messages').innerText",
                    vec![],
                )
                .await
                .unwrap();
            panic!("gave up waiting for {what}; the page says: {messages}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub(super) async fn text_of(client: &Client, css: &str) -> String {
    client
        .find(Locator::Css(css))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

pub(super) async fn press(client: &Client, key: Key) {
    let keys = KeyActions::new("keyboard".into())
        .then(KeyAction::Down { value: key.into() })
        .then(KeyAction::Up { value: key.into() });
    client.perform_actions(keys).await.unwrap();
}

/// Saves a screenshot of the viewport as `name` when `SWITCHYARD_CONSOLE_SCREENSHOTS`
/// names a folder (relative to the repository's root).
pub(super) async fn screenshot(client: &Client, name: &str) {
    let Some(dir) = std::env::var_os("SWITCHYARD_CONSOLE_SCREENSHOTS") else {
        return;
    };
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(dir);
    std::fs::create_dir_all(&dir).unwrap();
    let png = client.screenshot().await.unwrap();
    std::fs::write(dir.join(name), png).unwrap();
}

/// Scrolls the element `id` to the top of the viewport, then saves a [`screenshot`].
pub(super) async fn screenshot_of(client: &Client, id: &str, name: &str) {
    client
        .execute(
            "document.getElementById(arguments[0]).scrollIntoView()",
            vec![json!(id)],
        )
        .await
        .unwrap();
    screenshot(client, name).await;
}

/// axe-core's WCAG 2.1 A and AA rules on the page as it is now; each violation as text.
pub(super) async fn accessibility_violations(client: &Client, axe: &str) -> Vec<String> {
    // A WebDriver script runs outside the page's Content-Security-Policy.
    client.execute(axe, vec![]).await.unwrap();
    let violations = client
        .execute_async(
            "const done = arguments[arguments.length - 1];
             axe.run(document, {runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']}})
               .then((r) => done(r.violations.map((v) =>
                 `${v.id} (${v.impact}): ${v.help} at ${v.nodes.slice(0, 3).map((n) => n.target.join(' ')).join('; ')}`)))
               .catch((e) => done([`axe failed: ${e}`]));",
            vec![],
        )
        .await
        .unwrap();
    serde_json::from_value(violations).unwrap()
}

/// Runs `scenario` on a new browser's client as a task of its own, so that a failed
/// assertion still closes the browser; then closes it and returns the scenario's
/// failure, for the caller to stop what it started before failing with it.
pub(super) async fn drive<F>(
    tools: &Tools,
    scenario: impl FnOnce(Client) -> F,
) -> Option<Box<dyn Any + Send>>
where
    F: Future<Output = ()> + Send + 'static,
{
    let browser = Browser::start(tools).await;
    let outcome = tokio::spawn(scenario(browser.client.clone())).await;
    browser.close().await;
    outcome.err().map(|failure| failure.into_panic())
}
