//! Optional tools: programs some tests need that a newcomer's machine may lack (Chromium
//! and chromedriver, axe-core, componentize-py, Node.js and componentize-js, ...). A
//! test asks for its tool with [`optional_tool`]; a missing or incomplete tool makes the
//! test skip with one line saying what to install, unless CI sets the tool's
//! `SWITCHYARD_REQUIRE_*` variable, under which it fails. This module finds and reports;
//! it must not install anything.

use std::io::Write as _;
use std::path::PathBuf;

/// An optional tool: what the tests need it for, what installs it, and the variable
/// under which CI requires it.
#[derive(Clone, Copy, Debug)]
pub struct Tool {
    /// What it is, as a sentence's subject: `Chromium and chromedriver`.
    pub name: &'static str,
    /// What installs it: `apt-get install chromium chromium-driver`.
    pub install: &'static str,
    /// The variable that makes its absence a failure: `SWITCHYARD_REQUIRE_CHROMIUM`.
    pub required_by: &'static str,
}

impl Tool {
    /// Whether CI asks for this tool: its variable is set, non-empty and not `0`.
    pub fn is_required(&self) -> bool {
        std::env::var(self.required_by).is_ok_and(|v| !v.is_empty() && v != "0")
    }
}

/// `found`, or, when it is `Err(missing)` (what is missing or incomplete): a failure
/// when [`Tool::is_required`], else `None` after one line on the terminal saying that
/// `what` is skipped, what is missing and what installs it.
pub fn optional_tool<T>(tool: Tool, what: &str, found: Result<T, String>) -> Option<T> {
    match found {
        Ok(found) => Some(found),
        Err(missing) => {
            assert!(
                !tool.is_required(),
                "{}=1 but {missing} (install: {})",
                tool.required_by,
                tool.install
            );
            say(&format!(
                "SKIPPED {what}: {missing}; install {} ({}), or set {} to fail instead",
                tool.name, tool.install, tool.required_by
            ));
            None
        }
    }
}

/// Says `note` on the terminal even while the test harness captures output:
/// `eprintln!` is captured and shown only for a failing test, and a skip that nobody
/// sees looks like a pass.
pub fn say(note: &str) {
    let _ = writeln!(std::io::stderr(), "\n  note: {note}");
}

/// The executable named by the variable `var` when it is set, else the first `name` on
/// the `PATH`; `Err` says which is missing.
pub fn executable(var: &str, name: &str) -> Result<PathBuf, String> {
    match std::env::var_os(var) {
        Some(path) => Ok(PathBuf::from(path)),
        None => on_path(name).map_err(|missing| format!("{missing} (or name one with {var})")),
    }
}

/// The first `name` on the `PATH`; `Err` says it is missing.
pub fn on_path(name: &str) -> Result<PathBuf, String> {
    std::env::var_os("PATH")
        .and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join(name))
                .find(|path| path.is_file())
        })
        .ok_or_else(|| format!("no `{name}` on the PATH"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOOL: Tool = Tool {
        name: "a tool no machine has",
        install: "nothing",
        required_by: "SWITCHYARD_REQUIRE_NOTHING_AT_ALL",
    };

    #[test]
    fn a_missing_tool_skips_unless_required() {
        let found: Result<(), String> = Err("no `nothing`".into());
        assert_eq!(optional_tool(TOOL, "this test", found), None);
        assert_eq!(optional_tool(TOOL, "this test", Ok(3)), Some(3));
    }

    #[test]
    fn an_executable_not_on_the_path_is_missing_and_says_so() {
        let missing = executable(
            "SWITCHYARD_TEST_NO_SUCH_VARIABLE",
            "switchyard-no-such-program",
        )
        .unwrap_err();
        assert!(missing.contains("switchyard-no-such-program"), "{missing}");
        assert!(executable("SWITCHYARD_TEST_NO_SUCH_VARIABLE", "sh").is_ok());
    }
}
