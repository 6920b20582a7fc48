//! The experiment panel of a split that a settings file pins, read in Chromium against
//! `/v1/experiment`: each arm's counts, Kaplan-Meier median and restricted mean with
//! their intervals, B - A with its interval, and the warning of arms unbalanced beyond
//! chance; no button to stop what the API would refuse to stop, and the reason; the
//! chart's mark of the experiment's start; job names with a bidi override, markup and no
//! space for 180 bytes shown as text, in their rows, with the page never scrolling
//! sideways at 1280x800 or 1024x768.

use std::time::{Duration, Instant};

use fantoccini::{Client, Locator};
use serde_json::Value;

use super::browser::{PATIENCE, accessibility_violations, drive, screenshot_of, tools, wait_js};
use super::live_at;
use switchyard_controller::{PolicyDir, watch_policy_dir};

/// Jobs that queue on one small node, so the run ends (at `max_time`) with some
/// finished and some not. The prefix `skew1705` is one whose ids the hash at 0.5 sends
/// mostly to A, so the arms differ in size beyond chance.
const WORKLOAD: &str = r#"
seed: 3
simulator: {max_time: 400}
cluster:
  nodes:
    - {name: small, cpus: 4, memory_gib: 16}
templates:
  short: {work: 60, speed: 1.0, cpus: 1, max_cores: 1, memory_gib: 1, curve: none}
  long: {work: 100000, speed: 1.0, cpus: 1, max_cores: 1, memory_gib: 1, curve: none}
jobs:
  - {template: short, id: skew1705, count: 24, every: 10, start: 100}
  - {template: long, id: "evil\u202e<script>alert(1)</script>", at: 100}
  - {template: long, id: "a-job-whose-name-goes-on-and-on-and-on-and-on-and-on-and-on-and-on-and-on-and-on-and-on-and-on-and-on-and-on-and-on-and-on-and-on-and-on-and-on-and-on-and-on-without-a-space", at: 100}
"#;

/// What scrolls sideways: the page, or the policies or jobs table in its region, or a
/// row whose last column (Activate; the labels after the arm) ends past its region.
const OVERFLOWS: &str = "
    const over = [];
    const page = document.documentElement;
    if (page.scrollWidth !== page.clientWidth) over.push(`the page: ${page.scrollWidth} wide in ${page.clientWidth}`);
    for (const id of ['policies', 'jobs']) {
      const region = document.getElementById(id).parentElement;
      if (region.scrollWidth > region.clientWidth) over.push(`${id}: ${region.scrollWidth} wide in ${region.clientWidth}`);
      const right = region.getBoundingClientRect().right;
      for (const row of document.getElementById(id).rows) {
        const last = row.cells[row.cells.length - 1].getBoundingClientRect().right;
        if (last > right + 0.5) over.push(`${id}: a row ends at ${last}, past ${right}`);
      }
    }
    return over;";

const SETTINGS: &str = "experiment: {mode: split, policy_b: even, ratio: 0.5, assign: hash}\n";

/// A number of seconds (not negative) as the console writes it: rounded, with
/// thousands separators.
fn secs(t: f64) -> String {
    let digits = (t.round() as u64).to_string();
    let mut grouped = String::new();
    for (i, d) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            grouped.push(',');
        }
        grouped.push(d);
    }
    grouped
}

/// An estimate and its interval as the panel's cells write them; `None` as `missing`.
fn estimate(e: &Value, missing: &str) -> String {
    if e.is_null() {
        return missing.to_string();
    }
    let bound = |b: &Value| b.as_f64().map_or("open".to_string(), secs);
    format!(
        "{}\n95% CI {} to {}",
        secs(e["value"].as_f64().unwrap()),
        bound(&e["low"]),
        bound(&e["high"])
    )
}

/// The panel's rows, label then arm A's and arm B's cell, that `report` should show.
fn expected_rows(report: &Value) -> Vec<[String; 3]> {
    let split = &report["split"];
    let arms = split["arms"].as_array().unwrap();
    let horizon = split["difference"]["horizon"].as_f64().unwrap();
    let row =
        |label: &str, f: &dyn Fn(&Value) -> String| [label.to_string(), f(&arms[0]), f(&arms[1])];
    vec![
        row("Jobs counted", &|a| a["jobs"].to_string()),
        row("Started", &|a| a["started"].to_string()),
        row("Finished", &|a| a["completion"]["finished"].to_string()),
        row("Still waiting or running", &|a| {
            a["completion"]["unfinished"].to_string()
        }),
        row("Median completion, Kaplan-Meier (s)", &|a| {
            estimate(
                &a["completion"]["median"],
                "not reached: half or more unfinished",
            )
        }),
        row(
            &format!("Mean completion up to {} s, restricted (s)", secs(horizon)),
            &|a| estimate(&a["completion"]["restricted_mean"], "—"),
        ),
    ]
}

/// The panel's rows as the page shows them (each cell's rendered text).
async fn shown_rows(c: &Client) -> Vec<[String; 3]> {
    let rows = c
        .execute(
            "return [...document.querySelectorAll('#arms tbody tr')]
               .map((r) => [...r.cells].map((c) => c.innerText.trim()))",
            vec![],
        )
        .await
        .unwrap();
    serde_json::from_value::<Vec<Vec<String>>>(rows)
        .unwrap()
        .into_iter()
        .filter_map(|r| <[String; 3]>::try_from(r).ok())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_panel_of_a_pinned_split_matches_the_api_and_hostile_names_stay_in_their_columns() {
    let Some(tools) = tools() else { return };
    let live = live_at(WORKLOAD, 40.0).await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("settings.yaml"), SETTINGS).unwrap();
    let (controller, path) = (live.controller.clone(), dir.path().to_path_buf());
    let handle = tokio::runtime::Handle::current();
    // The watcher's first scan starts the file's experiment, blocking on the runtime.
    let watcher = tokio::task::spawn_blocking(move || {
        watch_policy_dir(PolicyDir::new(&path, controller, handle).unwrap()).unwrap()
    })
    .await
    .unwrap();
    let status = live
        .wait_for("/v1/status", |s| s["experiment_running"] == true)
        .await;
    assert_eq!(
        status["owned_by_settings"]["experiment"], true,
        "the status says the settings file owns the experiment: {status}"
    );
    let (base, axe) = (live.url("/"), tools.axe.clone());
    let failure = drive(&tools, move |client| scenario(client, base, axe)).await;
    drop(watcher);
    live.stop().await;
    if let Some(failure) = failure {
        std::panic::resume_unwind(failure);
    }
}

async fn scenario(c: Client, base: String, axe: Option<String>) {
    let c = &c;
    let api = |path: &str| {
        let url = format!("{}{}", base.trim_end_matches('/'), path);
        async move {
            reqwest::get(url)
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap()
        }
    };
    c.set_window_size(1280, 800).await.unwrap();
    c.goto(&base).await.unwrap();
    // The run stops deciding at its time limit, so the figures stand still to compare.
    let started = Instant::now();
    while api("/v1/status").await["ended"] != "time-limit" {
        assert!(
            started.elapsed() < PATIENCE,
            "the run never reached its time limit"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let report = api("/v1/experiment").await;
    let imbalance = &report["split"]["imbalance"];
    assert!(
        imbalance["jobs"] == 26 && imbalance["unbalanced"] == true,
        "the fixture's names hash mostly to A, beyond chance: {report}"
    );
    let arms = report["split"]["arms"].as_array().unwrap();
    assert!(
        arms.iter()
            .all(|a| a["completion"]["unfinished"].as_u64().unwrap() > 0),
        "both arms have unfinished jobs, so the figures are censored: {report}"
    );

    let expected = expected_rows(&report);
    let started = Instant::now();
    loop {
        let shown = shown_rows(c).await;
        if expected.iter().all(|row| shown.contains(row)) {
            let labels: Vec<&str> = shown.iter().map(|r| r[0].as_str()).collect();
            assert!(
                !labels.iter().any(|l| l.starts_with("Mean completion (s)")),
                "no mean over finished jobs alone: {labels:?}"
            );
            break;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "the panel shows {shown:#?}\nwhere /v1/experiment says {expected:#?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let difference = &report["split"]["difference"];
    let b_minus_a = &difference["b_minus_a"];
    let signed = |v: f64| match (v.abs().round() > 0.0, v > 0.0) {
        (true, true) => format!("+{}", secs(v)),
        (true, false) => format!("−{}", secs(-v)),
        (false, _) => secs(v.abs()),
    };
    let bound = |b: &Value| b.as_f64().map_or("open".to_string(), signed);
    let said = wait_js(
        c,
        "the difference",
        "return document.getElementById('arm-difference').textContent || null",
    )
    .await;
    assert_eq!(
        said.as_str().unwrap(),
        format!(
            "B − A, mean completion up to {} s: {} s (95% CI {} to {} s); {}",
            secs(difference["horizon"].as_f64().unwrap()),
            signed(b_minus_a["value"].as_f64().unwrap()),
            bound(&b_minus_a["low"]),
            bound(&b_minus_a["high"]),
            if difference["significant"] == true {
                format!(
                    "B is {} beyond chance (the interval excludes 0).",
                    if b_minus_a["value"].as_f64().unwrap() < 0.0 {
                        "faster"
                    } else {
                        "slower"
                    }
                )
            } else {
                "not significant (the interval includes 0).".to_string()
            }
        )
    );
    let warning = wait_js(
        c,
        "the imbalance warning",
        "return document.getElementById('imbalance').textContent || null",
    )
    .await;
    assert!(
        warning.as_str().unwrap().starts_with(&format!(
            "Unbalanced arms: B has {} of 26 jobs where the ratio expects {:.1}",
            imbalance["jobs_b"],
            imbalance["expected_b"].as_f64().unwrap()
        )),
        "{warning}"
    );

    // The settings file owns the experiment: no form to start or stop one, and why.
    let pinned = c
        .execute(
            "const stop = document.getElementById('experiment-stop');
             return [stop.offsetParent === null, document.getElementById('experiment-owned').textContent];",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(pinned[0], true, "no Stop button is shown: {pinned}");
    let why = pinned[1].as_str().unwrap();
    assert!(
        why.contains("settings.yaml") && why.contains("409"),
        "{why}"
    );

    // The chart marks the start of the experiment, and its list says which.
    wait_js(
        c,
        "the experiment's mark",
        "return [...document.querySelectorAll('#chart-marks li')]
           .some((e) => e.textContent.includes('split experiment starts: default (A) against even (B)'));",
    )
    .await;

    // Hostile names are text in their own rows, with the override escaped, in the arm
    // the API gives them.
    let listed = api("/v1/jobs?limit=500").await;
    let arm_of = |start: &str| {
        let job = listed["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|j| j["id"].as_str().unwrap().starts_with(start))
            .unwrap_or_else(|| panic!("no job {start} in {listed}"));
        job["arm"].as_str().unwrap().to_uppercase()
    };
    let expected = serde_json::json!([
        arm_of("evil\u{202e}<script>"),
        arm_of("a-job-whose-name"),
        2,
        false
    ]);
    let jobs = wait_js(
        c,
        "the hostile jobs' rows",
        "const rows = [...document.querySelectorAll('#jobs tbody tr')];
         const arm = (start) => rows.find((r) => r.cells[0].textContent.startsWith(start))?.cells[6].textContent;
         const evil = arm('evil\\\\u{202e}<script>alert(1)</script>'), long = arm('a-job-whose-name');
         return evil && long ? [evil, long, document.scripts.length, document.body.innerText.includes('\\u202e')] : null;",
    )
    .await;
    assert_eq!(jobs, expected, "{jobs}");
    screenshot_of(c, "experiment-section", "pinned-split.png").await;

    // Nothing scrolls sideways ([`OVERFLOWS`]).
    for (width, height) in [(1280, 800), (1024, 768)] {
        c.set_window_size(width, height).await.unwrap();
        wait_js(
            c,
            &format!("a {width} px wide window"),
            &format!("return window.innerWidth === {width}"),
        )
        .await;
        // The chart follows its box a frame later: a moment's overflow is not the layout.
        let started = Instant::now();
        loop {
            let overflows = c.execute(OVERFLOWS, vec![]).await.unwrap();
            if overflows == serde_json::json!([]) {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "at {width}x{height}: {overflows}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    // The running jobs, the hostile names among them, for the screenshot.
    c.find(Locator::Id("jobs-phase"))
        .await
        .unwrap()
        .select_by_value("running")
        .await
        .unwrap();
    wait_js(
        c,
        "the running jobs",
        "return [...document.querySelectorAll('#jobs tbody tr')].some((r) => r.cells[0].textContent.startsWith('a-job-whose-name'))",
    )
    .await;
    assert_eq!(
        c.execute(OVERFLOWS, vec![]).await.unwrap(),
        serde_json::json!([])
    );
    screenshot_of(c, "jobs-section", "narrow-jobs.png").await;

    if let Some(axe) = &axe {
        let violations = accessibility_violations(c, axe).await;
        assert!(
            violations.is_empty(),
            "accessibility violations:\n{}",
            violations.join("\n")
        );
    }
}
