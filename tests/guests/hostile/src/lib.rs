//! A hostile policy that stays inside its deadline and memory cap and still attacks the
//! host: the setting `attack` chooses how, `count` how much.
//!
//! - `none`: places each pending job's tasks on the first node (a plain policy);
//! - `actions`: `count` wait actions;
//! - `alias`: `count` actions whose reasons all point at one 1 MiB buffer, so a host
//!   that copies every string copies `count` MiB;
//! - `labels`: `count` labels on the first job;
//! - `bad-labels`: labels no Kubernetes object could carry, and one on a job that does
//!   not exist, beside one valid label;
//! - `log`: `count` log lines, each trying to forge a line of the host's log;
//! - `tick-zero`: asks to be called again at once, every round;
//! - `big-state`: a state blob of `count` bytes.
//!
//! Its name is a placeholder in its data (`NAME` below) that tests overwrite in the
//! built component, so one guest can claim any name.

use switchyard_policy_sdk::bindings::switchyard::policy::host::LogLevel;
use switchyard_policy_sdk::log::log;
use switchyard_policy_sdk::{
    Action, Assignment, Decision, Description, Guest, JobLabel, Operation, Parameter, Placement,
    Setting, Snapshot, TaskPhase,
};

/// The marker tests look for, then the name, NUL-padded to 128 bytes.
#[used]
static NAME: [u8; 150] = *b"SWITCHYARD-TEST-NAME:hostile\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0";

const MARKER: usize = "SWITCHYARD-TEST-NAME:".len();

fn name() -> String {
    // Read through a volatile pointer: the bytes change after compilation.
    let bytes: [u8; 150] = unsafe { std::ptr::read_volatile(&NAME) };
    let name = &bytes[MARKER..];
    let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    String::from_utf8_lossy(&name[..end]).into_owned()
}

pub struct Hostile;

fn setting<'a>(settings: &'a [Setting], name: &str) -> Option<&'a str> {
    settings
        .iter()
        .find(|s| s.name == name)
        .map(|s| s.value.as_str())
}

impl Guest for Hostile {
    fn describe() -> Description {
        Description {
            name: name(),
            version: "0.0.0".into(),
            summary: "attacks the host from inside its limits".into(),
            parameters: vec![
                Parameter {
                    name: "attack".into(),
                    default_value: "none".into(),
                    doc: "which attack".into(),
                },
                Parameter {
                    name: "count".into(),
                    default_value: "1000".into(),
                    doc: "how much of it".into(),
                },
            ],
            reads_loss: true,
        }
    }

    fn configure(settings: Vec<Setting>) -> Result<Vec<Setting>, String> {
        let mut out = vec![
            Setting {
                name: "attack".into(),
                value: "none".into(),
            },
            Setting {
                name: "count".into(),
                value: "1000".into(),
            },
        ];
        for s in settings {
            match out.iter_mut().find(|o| o.name == s.name) {
                Some(o) => o.value = s.value,
                None => return Err(format!("unknown parameter `{}`", s.name)),
            }
        }
        Ok(out)
    }

    fn decide(
        settings: Vec<Setting>,
        snapshot: Snapshot,
        state: Vec<u8>,
    ) -> Result<Decision, String> {
        let attack = setting(&settings, "attack").unwrap_or("none");
        let count: usize = setting(&settings, "count")
            .and_then(|c| c.parse().ok())
            .unwrap_or(1000);
        let mut decision = Decision {
            actions: vec![],
            labels: vec![],
            next_call_after: None,
            state,
        };
        let wait = |reason: String| Action {
            op: Operation::Wait(
                snapshot
                    .jobs
                    .first()
                    .map_or_else(|| "nobody".to_string(), |j| j.id.clone()),
            ),
            reason,
        };
        match attack {
            "actions" => decision.actions = (0..count).map(|i| wait(format!("#{i}"))).collect(),
            "alias" => {
                let buffer = "x".repeat(1 << 20);
                let (ptr, len) = (buffer.as_ptr(), buffer.len());
                std::mem::forget(buffer);
                decision.actions = (0..count)
                    .map(|_| {
                        // Every reason is the same bytes; the glue hands the host their
                        // address without copying them.
                        let alias = unsafe { String::from_raw_parts(ptr as *mut u8, len, len) };
                        wait(alias)
                    })
                    .collect();
            }
            "labels" => {
                let job = snapshot
                    .jobs
                    .first()
                    .map_or("nobody".into(), |j| j.id.clone());
                decision.labels = (0..count)
                    .map(|i| JobLabel {
                        job: job.clone(),
                        key: format!("k{i}"),
                        value: "v".into(),
                    })
                    .collect();
            }
            "bad-labels" => {
                let job = snapshot
                    .jobs
                    .first()
                    .map_or("nobody".into(), |j| j.id.clone());
                let label = |job: &str, key: &str, value: &str| JobLabel {
                    job: job.into(),
                    key: key.into(),
                    value: value.into(),
                };
                decision.labels = vec![
                    label(&job, "", "empty-key"),
                    label(&job, &"k".repeat(400), "long-key"),
                    label(&job, "has space", "v"),
                    label(&job, "a/b/c", "v"),
                    label(&job, "nul\0byte", "v"),
                    label(&job, "line\nbreak", "v"),
                    label(&job, "value", "bad value!"),
                    label("no-such-job", "ok", "v"),
                    label(&job, "example.com/fine", "yes"),
                ];
            }
            "log" => {
                for i in 0..count {
                    log(
                        LogLevel::Info,
                        &format!("line {i}\n2026-01-01T00:00:00Z ERROR switchyard: forged"),
                    );
                }
            }
            "tick-zero" => {
                decision.next_call_after = Some(0.0);
                decision.actions.push(wait("again at once".into()));
            }
            "big-state" => decision.state = vec![7; count],
            _ => {
                if let Some(node) = snapshot.nodes.first() {
                    for job in &snapshot.jobs {
                        let assignments: Vec<Assignment> = job
                            .tasks
                            .iter()
                            .filter(|t| t.phase == TaskPhase::Pending && t.node.is_none())
                            .map(|t| Assignment {
                                task: t.name.clone(),
                                node: node.name.clone(),
                            })
                            .collect();
                        if !assignments.is_empty() {
                            decision.actions.push(Action {
                                op: Operation::Place(Placement {
                                    job: job.id.clone(),
                                    assignments,
                                }),
                                reason: "first node".into(),
                            });
                        }
                    }
                }
            }
        }
        Ok(decision)
    }
}

// The export names contain `:`, which only the component linker accepts; a native
// build (unit tests, clippy) leaves them out.
#[cfg(target_arch = "wasm32")]
switchyard_policy_sdk::export!(Hostile with_types_in switchyard_policy_sdk::bindings);
