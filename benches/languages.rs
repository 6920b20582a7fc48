//! least-loaded in Python (`examples/python-policy`, on the Python SDK) and in JavaScript
//! (`examples/js-policy`, on the JavaScript SDK) beside the same policy in Rust
//! (`tests/guests/least-loaded`, on the Rust SDK), all three components on a kept
//! instance, in one run: what a policy author gives up by writing Python or JavaScript.
//!
//! All three say they read no loss series, as least-loaded's examples do, so the host
//! sends them none. Each is also measured as `<lang>-reading-loss`: the same policy
//! built to say it reads loss (a subclass with `reads_loss = True` in Python,
//! `readsLoss = true` in JavaScript, the Rust twin's flag set), which is what a policy
//! that reads loss pays for the same rounds.
//!
//! `cargo bench -p switchyard-runtime --bench languages`; componentize-py builds the
//! Python component first (`COMPONENTIZE_PY`, or `componentize-py` on the `PATH`), and
//! the JavaScript SDK's build script the JavaScript one (`npm ci` in `sdk/js` installs
//! componentize-js; `node` on the `PATH`). The figures and their reading are in
//! `docs/performance.md`.
//!
//! The cluster is the decision bench's synthetic one at 1,000 nodes: 5,000 running
//! two-task jobs (10,000 tasks) with 20 loss samples each. Groups, per language:
//! - `languages/loss/<lang>`: the steady state of a controller: every job reported one
//!   new loss sample since the previous round (5,000 loss updates), nothing else moved;
//! - `languages/churn/<lang>`: the same, and the job that arrived in the previous round
//!   started on a node, the oldest job finished and a new one arrived, so the policy has
//!   a job to place and the delta carries jobs and nodes as well as loss;
//! - `languages/reset/<lang>`: a fresh instance given the whole snapshot (the first call,
//!   and every call after a failure).
//!
//! The `-reading-loss` variants run `loss` and `reset` only: `churn` adds the same jobs
//! and nodes to either.

#[path = "support/synthetic.rs"]
mod synthetic;

use std::hint::black_box;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use switchyard_core::{JobPhase, LossSample, Settings, Snapshot, TaskPhase};
use switchyard_runtime::{PolicyModule, Runtime, RuntimeOptions, SandboxLimits, Session};

const NODES: usize = 1_000;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A module beside the app that exports its policy saying it reads loss series.
struct ReadingLossApp(PathBuf);

impl ReadingLossApp {
    fn write(folder: &str, file: &str, text: &str) -> Self {
        let path = repo().join(folder).join(file);
        std::fs::write(&path, text).expect("the reading-loss module is written");
        Self(path)
    }
}

impl Drop for ReadingLossApp {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Builds the Python example into a component with componentize-py, from this
/// checkout's SDK source; with `reads_loss`, a subclass saying it reads loss series.
fn python_component(reads_loss: bool) -> Vec<u8> {
    let tool = std::env::var("COMPONENTIZE_PY").unwrap_or_else(|_| "componentize-py".into());
    let id = std::process::id();
    let wasm = std::env::temp_dir().join(format!("switchyard-languages-{id}.wasm"));
    let module = format!("languages_bench_reading_loss_{id}");
    let _wrapper = reads_loss.then(|| {
        ReadingLossApp::write(
            "examples/python-policy",
            &format!("{module}.py"),
            "from app import LeastLoaded\n\
             from switchyard_policy import export\n\n\
             class ReadingLoss(LeastLoaded):\n    reads_loss = True\n\n\
             IncrementalScheduler = export(ReadingLoss())\n",
        )
    });
    let app = if reads_loss { module.as_str() } else { "app" };
    let status = Command::new(&tool)
        .current_dir(repo().join("examples/python-policy"))
        .env_remove("VIRTUAL_ENV")
        .args([
            "-q",
            "-w",
            "switchyard:policy/incremental-policy@0.3.0",
            "componentize",
        ])
        .args(["-p", ".", "-p", "../../sdk/python/src", app, "-o"])
        .arg(&wasm)
        .status()
        .unwrap_or_else(|e| panic!("cannot run {tool} (set COMPONENTIZE_PY): {e}"));
    assert!(
        status.success(),
        "componentize-py failed to build the Python example"
    );
    let bytes = std::fs::read(&wasm).expect("the built component");
    let _ = std::fs::remove_file(&wasm);
    bytes
}

/// Builds the JavaScript example into a component with the JavaScript SDK's build script
/// (componentize-js), from this checkout's SDK source; with `reads_loss`, a subclass
/// saying it reads loss series.
fn javascript_component(reads_loss: bool) -> Vec<u8> {
    let id = std::process::id();
    let wasm = std::env::temp_dir().join(format!("switchyard-languages-js-{id}.wasm"));
    let module = format!("languages-bench-reading-loss-{id}.js");
    let _wrapper = reads_loss.then(|| {
        ReadingLossApp::write(
            "examples/js-policy",
            &module,
            "import { exportPolicy } from '../../sdk/js/src/index.js';\n\
             import { LeastLoaded } from './app.js';\n\n\
             class ReadingLoss extends LeastLoaded {\n  readsLoss = true;\n}\n\n\
             export const incrementalScheduler = exportPolicy(new ReadingLoss());\n",
        )
    });
    let app = if reads_loss {
        module.as_str()
    } else {
        "app.js"
    };
    let status = Command::new("node")
        .current_dir(repo().join("examples/js-policy"))
        .args(["../../sdk/js/bin/build.js", app, "-o"])
        .arg(&wasm)
        .status()
        .unwrap_or_else(|e| panic!("cannot run node: {e}"));
    assert!(
        status.success(),
        "the JavaScript SDK's build failed (npm ci in sdk/js installs componentize-js)"
    );
    let bytes = std::fs::read(&wasm).expect("the built component");
    let _ = std::fs::remove_file(&wasm);
    bytes
}

/// Room for the reset rows (a fresh Python or JavaScript instance takes the whole cluster); the
/// rows report whether a round fits the controller's defaults as well.
fn runtime() -> Runtime {
    Runtime::new(RuntimeOptions {
        limits: SandboxLimits {
            deadline: Duration::from_secs(30),
            memory_bytes: 1 << 30,
            ..SandboxLimits::default()
        },
        ..RuntimeOptions::default()
    })
    .expect("runtime")
}

/// Every job with a loss series reported one new sample (the oldest leaves the window).
fn report_loss(snapshot: &mut Snapshot) {
    for job in &mut snapshot.jobs {
        if let Some(last) = job.loss.last().copied() {
            let job = Arc::make_mut(job);
            let next = LossSample {
                time: last.time,
                step: last.step + 100,
                value: last.value * 0.999,
            };
            job.loss = job.loss[1..].iter().copied().chain([next]).collect();
        }
    }
}

/// A round with churn: loss as in [`report_loss`], the waiting job (if any) starts on
/// node `serial mod NODES`, the oldest job finishes, and job `serial` arrives.
fn churn(snapshot: &mut Snapshot, serial: &mut usize) {
    report_loss(snapshot);
    *serial += 1;
    let at = *serial % snapshot.nodes.len();
    let host = snapshot.nodes[at].name.clone();
    let mut taken = switchyard_core::Resources::default();
    for job in snapshot
        .jobs
        .iter_mut()
        .filter(|j| j.phase == JobPhase::Waiting)
    {
        let job = Arc::make_mut(job);
        job.phase = JobPhase::Running;
        job.start_time = Some(snapshot.time);
        for task in std::sync::Arc::make_mut(&mut job.tasks).iter_mut() {
            task.node = Some(host.clone());
            task.phase = TaskPhase::Running;
            taken = taken.plus(&task.requests);
        }
    }
    let gone = snapshot.jobs.remove(0);
    let node = Arc::make_mut(&mut snapshot.nodes[at]);
    node.requested = node.requested.plus(&taken);
    for task in gone.tasks.iter() {
        if let Some(was) = snapshot
            .nodes
            .iter_mut()
            .find(|n| Some(&n.name) == task.node.as_ref())
        {
            let was = Arc::make_mut(was);
            was.requested = was.requested.saturating_minus(&task.requests);
        }
    }
    snapshot
        .jobs
        .push(synthetic::waiting_job(100_000 + *serial).into());
}

/// Kept-instance rounds of `module`, each on the snapshot `step` makes of the last.
fn bench_kept(
    c: &mut Criterion,
    group: &str,
    lang: &str,
    module: &PolicyModule,
    step: impl Fn(&mut Snapshot, &mut usize),
) {
    let session = Session::default();
    let decide = |s: &Snapshot| {
        module
            .decide_in(&session, &Settings::default(), s, &[], 1)
            .unwrap_or_else(|e| panic!("{lang} decides: {e}"))
    };
    let current = std::cell::RefCell::new((synthetic::cluster(NODES, 0, synthetic::NOW), 0));
    decide(&current.borrow().0);
    c.bench_function(&format!("languages/{group}/{lang}"), |b| {
        b.iter_batched(
            || {
                let (s, serial) = &mut *current.borrow_mut();
                step(s, serial);
                s.clone()
            },
            |s| black_box(decide(&s)),
            BatchSize::LargeInput,
        )
    });
}

fn languages(c: &mut Criterion) {
    let runtime = runtime();
    let components = [
        ("python", python_component(false)),
        ("python-reading-loss", python_component(true)),
        ("javascript", javascript_component(false)),
        ("javascript-reading-loss", javascript_component(true)),
        (
            "rust",
            switchyard_test_support::guest_reading_loss("least-loaded", false),
        ),
        (
            "rust-reading-loss",
            switchyard_test_support::guest_reading_loss("least-loaded", true),
        ),
    ];
    let whole = synthetic::cluster(NODES, 2, synthetic::NOW);
    for (lang, bytes) in &components {
        let (lang, reads_loss) = (*lang, lang.ends_with("-reading-loss"));
        let module = &runtime.load(bytes, lang).expect("the policy loads");
        assert_eq!(module.description().reads_loss, reads_loss, "{lang}");
        // Both decide the same on the same cluster: the same job, on the same nodes.
        let decision = module
            .decide(&Settings::default(), &whole, &[], 1)
            .expect("decides");
        eprintln!(
            "languages/{lang}: {:?}",
            decision
                .actions
                .iter()
                .map(|a| format!("{:?}", a.op))
                .collect::<Vec<_>>()
        );
        let defaults = Runtime::new(RuntimeOptions::default()).expect("runtime");
        let fits = match defaults.load(bytes, lang).expect("loads").decide(
            &Settings::default(),
            &whole,
            &[],
            1,
        ) {
            Ok(_) => "fits the default sandbox (100 ms, 64 MiB)".to_string(),
            Err(e) => format!("does not fit the default sandbox: {e}"),
        };
        eprintln!("languages/reset/{lang}: {fits}");
        bench_kept(c, "loss", lang, module, |s, _| report_loss(s));
        if !reads_loss {
            bench_kept(c, "churn", lang, module, churn);
        }
        c.bench_function(&format!("languages/reset/{lang}"), |b| {
            b.iter(|| {
                black_box(
                    module
                        .decide(&Settings::default(), &whole, &[], 1)
                        .expect("decides"),
                )
            })
        });
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(Duration::from_secs(10));
    targets = languages
}
criterion_main!(benches);
