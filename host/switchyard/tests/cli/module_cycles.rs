//! No crate of the workspace has an import cycle among its modules.
//!
//! Every library and binary of every workspace member (the host crates, the policies and
//! their SDK, the test guests) is read from its `src/` with a Rust parser, and its modules
//! make a graph. Module `a` has an edge to module `b` when `a` names `b` or one of `b`'s
//! items with a path that starts with `crate`, `super`, `self`, one of `a`'s submodules
//! or a name `a` imports:
//!
//! - in a `use` declaration (a root that re-exports `session::Session` uses `session`), or
//!   as a path of two or more segments anywhere in code: types, expressions, patterns,
//!   trait bounds, macro names;
//! - inside a macro invocation's tokens, read as runs of `name::name` (so
//!   `assert_eq!(crate::b::f(), x)` and `$crate::b::f` in a `macro_rules!` body count).
//!
//! The edge goes to the deepest module the path reaches, and a name that module only
//! imports (`pub use`, glob or not) is followed to the module that defines it:
//! `crate::Snapshot`, which `lib.rs` re-exports from `bindings`, is an edge to `bindings`,
//! so a `lib.rs` that only indexes its modules closes no cycle. A name found nowhere (an
//! item a macro writes, a local) counts as the module where the reading stopped, except
//! that a name reached through a glob import of a module whose items a macro writes (the
//! `wit_bindgen::generate!` output) is taken to come from there when no other glob can
//! supply it.
//!
//! Not edges: declaring a submodule (`mod b;`), doc comments and other attributes (a doc
//! link to `crate::b` makes no dependency), visibilities (`pub(crate)`, `pub(super)`),
//! paths that leave the crate. An inline module is a module of its own: a
//! `#[cfg(test)] mod tests` that names its parent and `crate::testing` closes no cycle
//! through a parent that never names it. A parent and its submodule are two modules like
//! any other: a parent that re-exports or calls its submodule while the submodule uses
//! the parent's own items (`super::Error`) is a cycle, the shape of a `lib.rs` that does
//! the work its modules reach back for, where an index would re-export alone.
//!
//! The test names every group of modules that reach one another, with cycles through all
//! of them, each step with the file, line and path that makes it. [`KNOWN_CYCLES`] holds
//! the cycles open issues remove; any other cycle fails, and so does an entry there that
//! no cycle needs any more.

mod graph;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use graph::Graph;

/// Cycles that exist today, each with the issue that removes it. A cycle found is
/// allowed when every module on it is in one entry of its crate. An entry no cycle
/// needs any more fails the test too, so the list shrinks as the issues land and a new
/// cycle among the same modules cannot hide behind a stale entry.
const KNOWN_CYCLES: &[KnownCycle] = &[];

/// Modules of one crate allowed to reach one another until an issue removes the cycle.
struct KnownCycle {
    /// The crate, as [`workspace_crates`] labels it.
    krate: &'static str,
    /// Every module that may be on the cycle (`crate` is the root).
    modules: &'static [&'static str],
    /// The issue that removes the cycle.
    issue: u32,
}

/// The workspace's root folder and every library and binary of its members: a label
/// (the package's name, and ` (bin <name>)` for a binary) and its root file.
fn workspace_crates() -> (PathBuf, Vec<(String, PathBuf)>) {
    let meta = crate::cargo_metadata(&["--no-deps"]);
    let root = PathBuf::from(meta["workspace_root"].as_str().expect("a workspace root"));
    let mut crates = Vec::new();
    for package in meta["packages"].as_array().expect("packages") {
        let name = package["name"].as_str().expect("a package name");
        for target in package["targets"].as_array().expect("targets") {
            let kinds: Vec<&str> = target["kind"]
                .as_array()
                .expect("target kinds")
                .iter()
                .filter_map(|k| k.as_str())
                .collect();
            let label = if kinds.contains(&"bin") {
                format!(
                    "{name} (bin {})",
                    target["name"].as_str().expect("a target name")
                )
            } else if kinds
                .iter()
                .any(|k| ["lib", "rlib", "cdylib", "dylib", "staticlib", "proc-macro"].contains(k))
            {
                name.to_string()
            } else {
                // Tests, benches, examples and build scripts live outside `src/`.
                continue;
            };
            let file = PathBuf::from(target["src_path"].as_str().expect("a src_path"));
            crates.push((label, file));
        }
    }
    crates.sort();
    (root, crates)
}

#[test]
fn no_crate_of_the_workspace_has_an_import_cycle_but_the_known_ones() {
    let (root, crates) = workspace_crates();
    assert!(
        crates
            .iter()
            .any(|(label, _)| label == "switchyard-policy-sdk"),
        "the workspace's crates were found: {crates:?}"
    );
    let read = |path: &Path| std::fs::read_to_string(path).ok();
    let mut failures = String::new();
    let mut needed = BTreeSet::new();
    for (label, file) in &crates {
        let graph = Graph::read(file, &read).unwrap_or_else(|e| panic!("{label}: {e}"));
        for component in graph.components() {
            let names: BTreeSet<&str> = component
                .iter()
                .map(|&m| graph.modules[m].name.as_str())
                .collect();
            let known = KNOWN_CYCLES
                .iter()
                .position(|k| k.krate == label && names.iter().all(|n| k.modules.contains(n)));
            match known {
                Some(k) => {
                    needed.insert(k);
                }
                None => {
                    let _ = write!(failures, "{label}: {}", graph.describe(&component, &root));
                }
            }
        }
    }
    for (k, known) in KNOWN_CYCLES.iter().enumerate() {
        if !needed.contains(&k) {
            let _ = writeln!(
                failures,
                "{}: no cycle found lies within the known one of issue {} ({}): remove or \
                 shrink it in KNOWN_CYCLES",
                known.krate,
                known.issue,
                known.modules.join(", ")
            );
        }
    }
    assert!(failures.is_empty(), "import cycles:\n{failures}");
}

/// The graph of a crate of in-memory `files` (`lib.rs` the root).
fn graph_of(files: &[(&str, &str)]) -> Graph {
    let files: BTreeMap<PathBuf, String> = files
        .iter()
        .map(|(path, text)| (PathBuf::from(path), text.to_string()))
        .collect();
    Graph::read(Path::new("lib.rs"), &|p| files.get(p).cloned()).unwrap()
}

/// The groups of modules that reach one another in a crate of in-memory `files`, by
/// name.
fn cycles_in(files: &[(&str, &str)]) -> Vec<Vec<String>> {
    let graph = graph_of(files);
    graph
        .components()
        .iter()
        .map(|c| c.iter().map(|&m| graph.modules[m].name.clone()).collect())
        .collect()
}

#[test]
fn modules_that_name_one_another_through_crate_super_and_imports_are_a_cycle() {
    let files = [
        ("lib.rs", "mod a; mod b; mod c; mod d;"),
        ("a.rs", "pub fn f() { crate::b::g() }"),
        ("b.rs", "use crate::c::h;\npub fn g() { h() }"),
        ("c.rs", "pub fn h() { super::a::f() }"),
        ("d.rs", "pub fn k() { crate::a::f() }"),
    ];
    assert_eq!(cycles_in(&files), [["a", "b", "c"]]);
    let graph = graph_of(&files);
    let said = graph.describe(&graph.components()[0], Path::new(""));
    assert!(said.contains("a → b → c → a"), "{said}");
    assert!(said.contains("b → c: b.rs:1 `crate::c::h`"), "{said}");
}

#[test]
fn a_name_the_root_re_exports_is_an_edge_to_the_module_that_defines_it() {
    // The root only indexes: `a` and `b` name each other's items through it.
    let through_root = [
        ("lib.rs", "mod a; mod b; pub use a::A; pub use b::*;"),
        ("a.rs", "pub struct A; pub fn f() -> crate::B { crate::B }"),
        ("b.rs", "pub struct B;"),
    ];
    assert!(cycles_in(&through_root).is_empty());
    let mut both = through_root;
    both[2].1 = "pub struct B; pub fn g(_: crate::A) {}";
    assert_eq!(cycles_in(&both), [["a", "b"]]);
    // A root that does the work its submodule reaches back for is on the cycle.
    let working_root = [
        (
            "lib.rs",
            "mod session; pub struct Runtime; pub fn open() -> session::Session { todo!() }",
        ),
        ("session.rs", "pub struct Session(crate::Runtime);"),
    ];
    assert_eq!(cycles_in(&working_root), [["crate", "session"]]);
    // A name a glob brings from a module whose items a macro writes is that module's.
    let generated = [
        (
            "lib.rs",
            "mod bindings { wit_bindgen::generate!({}); }\nmod a;\npub use bindings::types::*;\npub fn g() { a::f() }",
        ),
        ("a.rs", "pub fn f() -> crate::Job { todo!() }"),
    ];
    assert!(cycles_in(&generated).is_empty());
}

#[test]
fn a_test_module_naming_its_parent_and_the_test_helpers_closes_no_cycle() {
    let files = [
        ("lib.rs", "mod a; mod testing;"),
        (
            "a.rs",
            "pub fn f() {}\n#[cfg(test)]\nmod tests { use super::*; use crate::testing::t; }",
        ),
        ("testing.rs", "pub fn t() { crate::a::f() }"),
    ];
    assert!(cycles_in(&files).is_empty());
    // The same names in the parent itself are a cycle.
    let mut parent = files;
    parent[1].1 = "pub fn f() { crate::testing::t() }";
    assert_eq!(cycles_in(&parent), [["a", "testing"]]);
}

#[test]
fn paths_in_macros_count_and_doc_links_and_visibilities_do_not() {
    let files = [
        ("lib.rs", "mod a; mod b;"),
        (
            "a.rs",
            "pub fn f() -> i32 { assert_eq!(crate::b::g(), 1); 1 }",
        ),
        (
            "b.rs",
            "/// Unlike [`crate::a::f`].\npub fn g() -> i32 { 1 }",
        ),
    ];
    assert!(cycles_in(&files).is_empty());
    let mut in_macro = files;
    in_macro[2].1 = "pub fn g() -> i32 { 1 }\nfn h() { println!(\"{}\", super::a::f()) }";
    assert_eq!(cycles_in(&in_macro), [["a", "b"]]);
    // Visible up to `a` is no use of `a`.
    let visibility = [
        ("lib.rs", "mod a;"),
        ("a.rs", "mod inner; pub fn f() { inner::g() }"),
        ("a/inner.rs", "pub(in crate::a) fn g() {}"),
    ];
    assert!(cycles_in(&visibility).is_empty());
}
