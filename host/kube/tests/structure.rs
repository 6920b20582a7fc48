//! The crate's shape, read from its sources: no file over 700 lines, and no import cycle
//! between its modules (a module's `use crate::...` names the modules it depends on; a
//! child module counts as part of its parent, and `crate::Error` and the crate's
//! constants, in `lib.rs`, are below every module). Plain accessors live in `pods`, the
//! leaf the others share, which is what keeps the graph acyclic.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const MAX_LINES: usize = 700;

fn sources() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut found = Vec::new();
    let mut dirs = vec![root];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("the crate's sources") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

/// The top-level module a source file belongs to (`act/place.rs` is part of `act`).
fn module_of(path: &Path) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let relative = path.strip_prefix(&root).expect("under src");
    let first = relative.components().next().expect("a component");
    first
        .as_os_str()
        .to_string_lossy()
        .trim_end_matches(".rs")
        .to_string()
}

/// The top-level modules `source` names in `use crate::...` (and `crate::x::` paths).
fn dependencies(source: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = source;
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        let mut names = Vec::new();
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            names.extend(group[..end].split(',').map(str::trim));
        } else {
            names.push(rest);
        }
        for name in names {
            let word: String = name
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            let is_module = name[word.len()..].starts_with("::")
                || word.chars().next().is_some_and(|c| c.is_ascii_lowercase());
            if !word.is_empty() && is_module && word != "self" {
                out.insert(word);
            }
        }
    }
    out
}

#[test]
fn no_source_file_is_over_seven_hundred_lines() {
    let long: Vec<String> = sources()
        .iter()
        .filter_map(|path| {
            let lines = std::fs::read_to_string(path).ok()?.lines().count();
            (lines > MAX_LINES).then(|| format!("{} ({lines} lines)", path.display()))
        })
        .collect();
    assert!(long.is_empty(), "split these: {long:#?}");
}

#[test]
fn the_modules_import_one_another_without_a_cycle() {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for path in sources() {
        let module = module_of(&path);
        if module == "lib" {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("readable");
        // Unit tests may reach anywhere, and doc links are not imports.
        let code: String = text
            .split("#[cfg(test)]")
            .next()
            .unwrap_or_default()
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        let deps = graph.entry(module.clone()).or_default();
        deps.extend(dependencies(&code).into_iter().filter(|d| *d != module));
    }
    let modules: BTreeSet<String> = graph.keys().cloned().collect();
    for deps in graph.values_mut() {
        deps.retain(|d| modules.contains(d));
    }
    // Depth-first search for a back edge.
    fn visit(
        module: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|m| m == module) {
            let mut cycle = path[at..].to_vec();
            cycle.push(module.to_string());
            return Some(cycle);
        }
        if done.contains(module) {
            return None;
        }
        path.push(module.to_string());
        for dep in &graph[module] {
            if let Some(cycle) = visit(dep, graph, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(module.to_string());
        None
    }
    let mut done = BTreeSet::new();
    for module in graph.keys() {
        if let Some(cycle) = visit(module, &graph, &mut Vec::new(), &mut done) {
            panic!("import cycle: {}", cycle.join(" -> "));
        }
    }
    assert!(
        graph["pods"].iter().all(|d| d == "crd" || d == "quantity"),
        "pods is the leaf: {:?}",
        graph["pods"]
    );
}

#[test]
fn the_dependency_reader_finds_grouped_and_single_imports() {
    let deps = dependencies(
        "use crate::pods::{node_of, task_of};\nuse crate::{Error, JOB_LABEL, template};\nlet x = crate::act::rfc3339(t);",
    );
    assert_eq!(
        deps,
        ["act", "pods", "template"]
            .into_iter()
            .map(String::from)
            .collect()
    );
}
