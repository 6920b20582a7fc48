//! The operator's console in a real browser: Debian's Chromium, driven over WebDriver
//! (chromedriver, through fantoccini), on a controller that runs the simulator behind a
//! loopback port. The page loads and lists the policies and a refused upload; without
//! the token its actions are disabled and the server refuses them; a wrong token is
//! refused and said so; with the right one (typed by keyboard) it activates another
//! policy and the decisions that follow carry it; it sets another policy's parameters;
//! it starts a shadow experiment and shows both arms, then the queue heading the jobs
//! with SpeCon's labels; the decisions filter by job and by policy; axe-core finds no
//! WCAG 2.1 A/AA violation; a split experiment replaces the shadow one and shows both
//! arms' figures.
//!
//! Needs `chromium` and `chromedriver` (Debian's packages `chromium` and
//! `chromium-driver`; `CHROMIUM` and `CHROMEDRIVER` name other binaries) and, for the
//! accessibility rules, axe-core's `axe.min.js` named by `SWITCHYARD_AXE_CORE`. `.ci/run`
//! installs all three and sets `SWITCHYARD_REQUIRE_CHROMIUM=1`, under which a missing
//! tool fails the test. Elsewhere a missing browser or driver skips the test, and a
//! missing axe-core the accessibility rules, each with a note on the terminal saying
//! what to install. The screenshots of `docs/console.md` come from this test:
//!
//! ```sh
//! SWITCHYARD_CONSOLE_SCREENSHOTS=docs/console cargo test -p switchyard-controller --test controller console::
//! ```

mod browser;
mod experiment_panel;

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use browser::{accessibility_violations, drive, press, screenshot, text_of, tools, wait_js};
use fantoccini::key::Key;
use fantoccini::{Client, Locator};
use serde_json::Value;
use support::{Live, TOKEN};
use switchyard_controller::LiveConfig;

/// CPU jobs with SpeCon's loss curves arriving faster than they finish, so a queue
/// forms, and parameter-server jobs on the GPU node.
const WORKLOAD: &str = "
seed: 7
cluster:
  nodes:
    - {name: cpu, count: 2, cpus: 8, memory_gib: 32}
    - {name: gpu, cpus: 16, memory_gib: 64, gpus: 4}
templates:
  vae: {work: 900, speed: 1.0, cpus: 1, max_cores: 4, memory_gib: 2, curve: vae}
  birnn: {work: 600, speed: 1.0, cpus: 1, max_cores: 4, memory_gib: 2, curve: birnn}
  resnet:
    work: 20000
    model: resnet50
    curve: gru
    roles:
      - {name: ps, cpus: 2, memory_gib: 4}
      - {name: worker, count: 2, cpus: 2, memory_gib: 8, gpus: 1}
    scale: {role: worker, min: 1, max: 4}
jobs:
  - {template: vae, count: 5000, every: 8}
  - {template: birnn, count: 5000, every: 10}
  - {template: resnet, count: 500, every: 80}
";

/// A ready controller on `workload` at `speed`, sampling allocation five times a second
/// so the chart has a line to draw within a test's seconds.
async fn live_at(workload: &str, speed: f64) -> Live {
    let live = support::start_live_with(
        workload,
        LiveConfig {
            speed,
            utilisation_every: Duration::from_millis(200),
            ..LiveConfig::default()
        },
        Duration::from_millis(500),
    )
    .await;
    live.wait_ready().await;
    live
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_shows_the_controller_reads_without_the_token_and_steers_it_with_it() {
    let Some(tools) = tools() else { return };
    let live = Arc::new(live_at(WORKLOAD, 20.0).await);
    let (axe, shared) = (tools.axe.clone(), live.clone());
    let failure = drive(&tools, |client| scenario(client, shared, axe)).await;
    if let Ok(live) = Arc::try_unwrap(live) {
        live.stop().await;
    }
    if let Some(failure) = failure {
        std::panic::resume_unwind(failure);
    }
}

async fn scenario(client: Client, live: Arc<Live>, axe: Option<String>) {
    let c = &client;
    // A refused upload, for the page to list among the load errors.
    let (status, _) = live.upload(b"#!/bin/sh\necho hi\n".to_vec()).await;
    assert_eq!(status, 422);
    c.goto(&live.url("/")).await.unwrap();
    assert!(
        c.current_url().await.unwrap().path().ends_with("/console/"),
        "/ leads to the console"
    );

    // It loads and lists every policy, read-only.
    let names = wait_js(
        c,
        "the policies table",
        "const names = [...document.querySelectorAll('#policies tbody th')].map((e) => e.firstChild.textContent);
         return names.length ? names : null;",
    )
    .await;
    for builtin in ["default", "even", "specon", "flowcon", "dragon", "gang"] {
        assert!(
            names.as_array().unwrap().iter().any(|n| n == builtin),
            "{builtin} is not listed: {names}"
        );
    }
    let refused = wait_js(
        c,
        "the refused upload",
        "const t = document.getElementById('load-errors').textContent; return t.includes('Load errors') ? t : null;",
    )
    .await;
    assert!(
        refused
            .as_str()
            .unwrap()
            .contains("not a WebAssembly component"),
        "{refused}"
    );
    let all_disabled = c
        .execute(
            "return [...document.querySelectorAll('button.act')].every((b) => b.disabled)",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(
        all_disabled, true,
        "without the token every action is disabled"
    );
    let status = c
        .execute_async(
            "fetch('/v1/policies/specon/activate', {method: 'POST'}).then((r) => arguments[0](r.status))",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(status, 401, "the server refuses a change without the token");
    wait_js(
        c,
        "jobs, a chart and decisions",
        "return document.querySelectorAll('#jobs tbody tr').length > 0
            && document.querySelector('#chart canvas') !== null
            && document.querySelectorAll('#decisions tbody tr').length > 0",
    )
    .await;
    screenshot(c, "read-only.png").await;

    // By keyboard: the skip link, then the token field; a wrong token is refused and said so.
    press(c, Key::Tab).await;
    let first = c.active_element().await.unwrap();
    assert_eq!(first.attr("class").await.unwrap().as_deref(), Some("skip"));
    press(c, Key::Tab).await;
    let field = c.active_element().await.unwrap();
    assert_eq!(field.attr("id").await.unwrap().as_deref(), Some("token"));
    field.send_keys("not-the-token").await.unwrap();
    press(c, Key::Enter).await;
    let activate_specon = "button[aria-label='Activate specon']";
    wait_js(
        c,
        "actions enabled by a token",
        &format!("return !document.querySelector(\"{activate_specon}\").disabled"),
    )
    .await;
    c.find(Locator::Css(activate_specon))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let refusal = wait_js(
        c,
        "the refusal",
        "const t = document.getElementById('error').textContent; return t.includes('401') ? t : null;",
    )
    .await;
    assert!(
        refusal.as_str().unwrap().contains("token is wrong"),
        "{refusal}"
    );
    assert_eq!(live.get("/v1/status").await.1["active"], "default");
    screenshot(c, "refused.png").await;

    // With the right token, typed into the field, specon becomes active; what the page
    // says is what the decisions show.
    let field = c.find(Locator::Id("token")).await.unwrap();
    field.send_keys(TOKEN).await.unwrap();
    field
        .send_keys(&char::from(Key::Enter).to_string())
        .await
        .unwrap();
    wait_js(
        c,
        "actions enabled by the token",
        &format!("return !document.querySelector(\"{activate_specon}\").disabled"),
    )
    .await;
    c.find(Locator::Css(activate_specon))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let applied = wait_js(
        c,
        "the activation",
        "const m = document.getElementById('feedback').textContent.match(/specon is active from round (\\d+)/);
         return m ? Number(m[1]) : null;",
    )
    .await
    .as_u64()
    .unwrap();
    live.wait_for_rounds_after(applied + 3).await;
    let (_, page) = live
        .get(&format!(
            "/v1/decisions?since={}&limit=1000",
            applied as i64 - 1
        ))
        .await;
    let decided: Vec<&Value> = page["decisions"].as_array().unwrap().iter().collect();
    assert!(decided.len() >= 3, "{page}");
    for record in decided {
        assert_eq!(record["policy"], "specon", "after the activation: {record}");
    }
    wait_js(
        c,
        "the header to name specon",
        "return document.getElementById('summary').textContent.includes('Active policy specon')",
    )
    .await;

    // Parameters: default's node score, typed into its field, is what the API lists.
    c.find(Locator::Id("params-policy"))
        .await
        .unwrap()
        .select_by_value("default")
        .await
        .unwrap();
    let scoring = c.find(Locator::Id("param-scoring")).await.unwrap();
    scoring.clear().await.unwrap();
    scoring.send_keys("most-allocated").await.unwrap();
    c.find(Locator::Css("#params-form button[type='submit']"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_js(
        c,
        "the parameters to be set",
        "return document.getElementById('feedback').textContent.includes(\"default's parameters are set\")",
    )
    .await;
    let (_, policies) = live.get("/v1/policies").await;
    let default = policies["policies"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "default")
        .unwrap();
    assert_eq!(
        default["settings"]["scoring"], "most-allocated",
        "{default}"
    );

    // A shadow experiment shows both arms and their agreement.
    c.find(Locator::Id("experiment-b"))
        .await
        .unwrap()
        .select_by_value("even")
        .await
        .unwrap();
    c.find(Locator::Css("#experiment-form button[type='submit']"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_js(
        c,
        "both arms of the shadow experiment, compared over five rounds",
        "const head = [...document.querySelectorAll('#arms thead th')].map((e) => e.textContent);
         const body = document.querySelector('#arms tbody').textContent;
         const compared = body.match(/in \\d+ of (\\d+) rounds/);
         return head.includes('Arm A: specon') && head.includes('Arm B: even') && compared && Number(compared[1]) >= 5;",
    )
    .await;
    let (_, experiment) = live.get("/v1/experiment").await;
    assert_eq!(experiment["mode"]["mode"], "shadow");

    // The queue heads the jobs table, and the jobs carry SpeCon's category.
    wait_js(
        c,
        "a queue above the running jobs, labelled by specon",
        "const rows = [...document.querySelectorAll('#jobs tbody tr')];
         return rows.length > 1 && rows[0].cells[1].textContent === 'waiting'
             && rows.some((r) => r.cells[7].textContent.includes('category='));",
    )
    .await;
    assert_eq!(experiment["policy_b"], "even");
    screenshot(c, "shadow.png").await;

    // The decisions filter by job and by policy.
    let (_, recent) = live.get("/v1/decisions?limit=50").await;
    let job = recent["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .flat_map(|d| d["accepted"].as_array().unwrap())
        .find(|a| a["op"] == "place")
        .map(|a| a["job"].as_str().unwrap().to_string())
        .expect("a recent placement");
    c.find(Locator::Id("filter-job"))
        .await
        .unwrap()
        .send_keys(&job)
        .await
        .unwrap();
    wait_js(
        c,
        "decisions about one job",
        &format!(
            "const rows = [...document.querySelectorAll('#decisions tbody tr')];
             return rows.length > 0 && rows.every((r) => r.textContent.includes('{job}'));"
        ),
    )
    .await;
    c.execute(
        "const f = document.getElementById('filter-job'); f.value = ''; f.dispatchEvent(new Event('input'));",
        vec![],
    )
    .await
    .unwrap();
    c.find(Locator::Id("filter-policy"))
        .await
        .unwrap()
        .select_by_value("even")
        .await
        .unwrap();
    wait_js(
        c,
        "decisions in which even took part",
        "const rows = [...document.querySelectorAll('#decisions tbody tr')];
         return rows.length > 0 && rows.every((r) => r.textContent.includes('shadow even'));",
    )
    .await;
    c.find(Locator::Id("filter-policy"))
        .await
        .unwrap()
        .select_by_value("")
        .await
        .unwrap();

    if let Some(axe) = &axe {
        let violations = accessibility_violations(c, axe).await;
        assert!(
            violations.is_empty(),
            "accessibility violations:\n{}",
            violations.join("\n")
        );
    }

    // A split experiment: each arm's jobs, waits and allocation side by side.
    c.find(Locator::Id("experiment-mode"))
        .await
        .unwrap()
        .select_by_value("split")
        .await
        .unwrap();
    c.find(Locator::Css("#experiment-form button[type='submit']"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_js(
        c,
        "both arms of the split with started jobs and their allocation",
        "const row = (name) => [...document.querySelectorAll('#arms tbody tr')]
           .find((r) => r.cells[0].textContent === name);
         const started = row('Started'), cpu = row('CPU allocated');
         return started && Number(started.cells[1].textContent) > 0 && Number(started.cells[2].textContent) > 0
             && /%$/.test(cpu.cells[1].textContent) && /%$/.test(cpu.cells[2].textContent);",
    )
    .await;
    let (_, experiment) = live.get("/v1/experiment").await;
    assert_eq!(experiment["mode"]["mode"], "split", "{experiment}");
    assert!(
        text_of(c, "#experiment-state")
            .await
            .starts_with("A split experiment runs: specon"),
        "the page says which experiment replaced the shadow one"
    );
    // Each job says its arm, and arm B's actions are listed in its rounds beside arm A's.
    wait_js(
        c,
        "jobs of both arms",
        "const arms = [...document.querySelectorAll('#jobs tbody tr')].map((r) => r.cells[6].textContent);
         return arms.includes('A') && arms.includes('B');",
    )
    .await;
    wait_js(
        c,
        "a decision of arm B",
        "return [...document.querySelectorAll('#decisions tbody li')]
           .some((e) => e.textContent.startsWith('B: '));",
    )
    .await;
    // SpeCon moves jobs, and each move says why.
    wait_js(
        c,
        "a migration with its purpose",
        "return [...document.querySelectorAll('#decisions tbody li')]
           .some((e) => /migrate \\S+ to \\S+ \\((reallocate|rebalance)\\)/.test(e.textContent));",
    )
    .await;
    // The chart marks the activation and both experiments' starts, in the order the
    // controller kept them.
    let marks: Vec<String> = live.get("/v1/utilisation").await.1["marks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["kind"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        marks,
        ["policy", "experiment-start", "experiment-start"],
        "specon activated (default's parameters do not swap specon), shadow then split"
    );
    let listed = wait_js(
        c,
        "the chart's marks",
        "const items = [...document.querySelectorAll('#chart-marks li')].map((e) => e.textContent);
         return items.length === 3 ? items : null;",
    )
    .await;
    let listed: Vec<String> = serde_json::from_value(listed).unwrap();
    assert!(
        listed[0].contains("specon decides (before: default)"),
        "{listed:?}"
    );
    assert!(
        listed[1].contains("shadow experiment starts: specon (A) against even (B)"),
        "{listed:?}"
    );
    assert!(
        listed[2].contains("split experiment starts: specon (A) against even (B)"),
        "{listed:?}"
    );
    screenshot(c, "split.png").await;
    let stop = c.find(Locator::Id("experiment-stop")).await.unwrap();
    stop.click().await.unwrap();
    wait_js(
        c,
        "the experiment to stop",
        "return document.getElementById('experiment-state').textContent === 'No experiment is running.'",
    )
    .await;
    assert_eq!(live.get("/v1/experiment").await.0, 404);
    assert!(text_of(c, "#feedback").await.contains("stopped after"));
}
