//! A policy that tries to act on the operator's terminal through every string it hands
//! the host: its summary and parameter doc, each action's reason, a label on every job
//! and a log line carry ESC sequences (a colour, an OSC window title), a carriage return
//! and an erase-line that would overwrite what was printed, newlines that would forge a
//! line, and a right-to-left override that would reorder it. It places pending tasks on
//! the first node, so its rounds do something and are recorded.

use switchyard_policy_sdk::bindings::switchyard::policy::host::LogLevel;
use switchyard_policy_sdk::log::log;
use switchyard_policy_sdk::{
    Action, Assignment, Decision, Description, Guest, JobLabel, Operation, Parameter, Placement,
    Setting, Snapshot, TaskPhase,
};

/// Every kind of hostile text at once: an OSC title, a colour, a carriage return with
/// an erase-line, a forged line and a bidi override.
const HOSTILE: &str =
    "ok\u{1b}]0;pwned\u{7}\u{1b}[31mred\r\u{1b}[2Kforged\nround 1 FAILED\u{202e}evil";

pub struct TerminalEscapes;

impl Guest for TerminalEscapes {
    fn describe() -> Description {
        Description {
            name: "terminal-escapes".into(),
            version: "0.0.0".into(),
            summary: format!("summary {HOSTILE}"),
            parameters: vec![Parameter {
                name: "unused".into(),
                default_value: "0".into(),
                doc: format!("doc {HOSTILE}"),
            }],
            reads_loss: false,
        }
    }

    fn configure(settings: Vec<Setting>) -> Result<Vec<Setting>, String> {
        let mut out = vec![Setting {
            name: "unused".into(),
            value: "0".into(),
        }];
        for s in settings {
            match s.name.as_str() {
                "unused" => out[0].value = s.value,
                other => return Err(format!("unknown parameter `{other}`")),
            }
        }
        Ok(out)
    }

    fn decide(
        _settings: Vec<Setting>,
        snapshot: Snapshot,
        state: Vec<u8>,
    ) -> Result<Decision, String> {
        log(LogLevel::Warn, &format!("log {HOSTILE}"));
        let mut decision = Decision {
            actions: vec![],
            labels: vec![],
            next_call_after: None,
            state,
        };
        let Some(node) = snapshot.nodes.first() else {
            return Ok(decision);
        };
        for job in &snapshot.jobs {
            decision.labels.push(JobLabel {
                job: job.id.clone(),
                key: "note".into(),
                value: format!("label {HOSTILE}"),
            });
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
                    reason: format!("reason {HOSTILE}"),
                });
            }
        }
        Ok(decision)
    }
}

// The export names contain `:`, which only the component linker accepts; a native
// build (unit tests, clippy) leaves them out.
#[cfg(target_arch = "wasm32")]
switchyard_policy_sdk::export!(TerminalEscapes with_types_in switchyard_policy_sdk::bindings);
