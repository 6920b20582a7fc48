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

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use proc_macro2::{Spacing, TokenStream, TokenTree};
use syn::visit::{self, Visit};

/// Cycles that exist today, each with the issue that removes it. A cycle found is
/// allowed when every module on it is in one entry of its crate. An entry no cycle
/// needs any more fails the test too, so the list shrinks as the issues land and a new
/// cycle among the same modules cannot hide behind a stale entry.
const KNOWN_CYCLES: &[KnownCycle] = &[
    // The API state in `api.rs`, which every route module uses.
    KnownCycle {
        krate: "switchyard-controller",
        modules: &[
            "api",
            "api::cluster",
            "api::experiment",
            "api::observe",
            "api::policies",
        ],
        issue: 40,
    },
    // The live controller's types in `live.rs`, which its driver uses.
    KnownCycle {
        krate: "switchyard-controller",
        modules: &["live", "live::driver"],
        issue: 40,
    },
    // The figure type in `plot.rs`, which its figures use.
    KnownCycle {
        krate: "switchyard",
        modules: &["plot", "plot::figures"],
        issue: 40,
    },
    // The registry client in `client.rs`, which its pull and push modules extend
    // (`super::Client`) while `client.rs` re-exports what they return.
    KnownCycle {
        krate: "switchyard-registry",
        modules: &["client", "client::pull", "client::push"],
        issue: 40,
    },
    // `observe` and the modules around it, each naming accessors the other holds
    // (`node_of`, `job_id`, `holds_resources`).
    KnownCycle {
        krate: "switchyard-kube",
        modules: &["act", "changes", "charges", "observe", "pod_index"],
        issue: 36,
    },
];

/// Modules of one crate allowed to reach one another until an issue removes the cycle.
struct KnownCycle {
    /// The crate, as [`workspace_crates`] labels it.
    krate: &'static str,
    /// Every module that may be on the cycle (`crate` is the root).
    modules: &'static [&'static str],
    /// The issue that removes the cycle.
    issue: u32,
}

/// Reads a file's text; `None` when there is no such file.
type Read<'a> = &'a dyn Fn(&Path) -> Option<String>;

/// Index of a module in [`Graph::modules`].
type ModId = usize;

/// A path a module names, where it names it.
#[derive(Clone, Debug)]
struct Named {
    segments: Vec<String>,
    line: usize,
}

impl Named {
    /// The path as written.
    fn text(&self) -> String {
        self.segments.join("::")
    }
}

/// One module: what it declares, imports and names.
#[derive(Debug, Default)]
struct Module {
    /// Its path from the crate root; `crate` for the root.
    name: String,
    parent: Option<ModId>,
    /// The file its source is in (an inline module's is its parent's).
    file: PathBuf,
    children: BTreeMap<String, ModId>,
    /// Names of the items it defines, submodules apart.
    items: BTreeSet<String>,
    /// Names it imports, each with the path it imports.
    imports: BTreeMap<String, Vec<String>>,
    /// Paths of its glob imports (`use a::b::*` is `a::b`).
    globs: Vec<Vec<String>>,
    /// A macro writes some of its items, whose names this reading does not know.
    opaque: bool,
    /// Every path it names.
    named: Vec<Named>,
}

/// What a name or a path leads to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Found {
    /// The module itself.
    Module(ModId),
    /// An item defined in the module (or a name the reading does not know there).
    Item(ModId),
}

impl Found {
    /// The module the name or path leads into.
    fn module(self) -> ModId {
        match self {
            Found::Module(m) | Found::Item(m) => m,
        }
    }
}

/// Imports deeper than this are a loop of re-exports (rustc refuses those).
const MAX_DEPTH: usize = 32;

/// The modules of one crate and the edges between them.
#[derive(Debug, Default)]
struct Graph {
    modules: Vec<Module>,
    /// `from → to`, with the first path that makes the edge.
    edges: BTreeMap<(ModId, ModId), Named>,
}

impl Graph {
    /// Reads the crate whose root file is `root` and everything its modules declare.
    fn read(root: &Path, read: Read) -> Result<Graph, String> {
        let mut graph = Graph::default();
        graph.modules.push(Module {
            name: "crate".into(),
            file: root.to_path_buf(),
            ..Module::default()
        });
        let dir = root.parent().unwrap_or(Path::new(""));
        graph.read_file(0, root, dir, read)?;
        graph.link();
        Ok(graph)
    }

    /// Parses `file` as the source of module `id`, whose submodules' files are in `dir`.
    fn read_file(&mut self, id: ModId, file: &Path, dir: &Path, read: Read) -> Result<(), String> {
        let text = read(file).ok_or_else(|| format!("cannot read {}", file.display()))?;
        let parsed =
            syn::parse_file(&text).map_err(|e| format!("cannot parse {}: {e}", file.display()))?;
        self.add_items(id, &parsed.items, file, dir, read)
    }

    fn add_items(
        &mut self,
        id: ModId,
        items: &[syn::Item],
        file: &Path,
        dir: &Path,
        read: Read,
    ) -> Result<(), String> {
        for item in items {
            match item {
                syn::Item::Mod(m) => self.add_module(id, m, file, dir, read)?,
                syn::Item::Use(u) if u.leading_colon.is_none() => {
                    let mut leaves = Vec::new();
                    flatten(&u.tree, &mut Vec::new(), &mut leaves);
                    self.add_leaves(id, leaves);
                }
                _ => {
                    if let Some(name) = defined_name(item) {
                        self.modules[id].items.insert(name);
                    }
                    if let syn::Item::Macro(m) = item
                        && m.ident.is_none()
                    {
                        self.modules[id].opaque = true;
                    }
                    let mut collect = Collect::default();
                    collect.visit_item(item);
                    self.add_leaves(id, collect.leaves);
                    self.modules[id].named.extend(collect.named);
                }
            }
        }
        Ok(())
    }

    /// Imports of `leaves` (block-scoped ones included: they resolve alike) and their
    /// paths, named by module `id`.
    fn add_leaves(&mut self, id: ModId, leaves: Vec<Leaf>) {
        let module = &mut self.modules[id];
        for leaf in leaves {
            match &leaf.binds {
                Binds::Name(name) => {
                    module
                        .imports
                        .entry(name.clone())
                        .or_insert_with(|| leaf.named.segments.clone());
                }
                Binds::Glob => module.globs.push(leaf.named.segments.clone()),
                Binds::Nothing => {}
            }
            module.named.push(leaf.named);
        }
    }

    /// Adds the submodule `m` of module `parent`, declared in `file`.
    fn add_module(
        &mut self,
        parent: ModId,
        m: &syn::ItemMod,
        file: &Path,
        dir: &Path,
        read: Read,
    ) -> Result<(), String> {
        let name = m.ident.to_string();
        let id = self.modules.len();
        let full = match parent {
            0 => name.clone(),
            _ => format!("{}::{name}", self.modules[parent].name),
        };
        self.modules.push(Module {
            name: full,
            parent: Some(parent),
            file: file.to_path_buf(),
            ..Module::default()
        });
        self.modules[parent].children.insert(name.clone(), id);
        let explicit = path_attribute(&m.attrs);
        if let Some((_, items)) = &m.content {
            // An inline module's submodules live in a folder of its name.
            let inner = explicit.map_or_else(|| dir.join(&name), |p| dir.join(p));
            return self.add_items(id, items, file, &inner, read);
        }
        let candidates = match &explicit {
            Some(p) => vec![file.parent().unwrap_or(Path::new("")).join(p)],
            None => vec![
                dir.join(format!("{name}.rs")),
                dir.join(&name).join("mod.rs"),
            ],
        };
        let Some(found) = candidates.iter().find(|c| read(c).is_some()) else {
            return Err(format!(
                "module `{}` declared in {} has no file (looked for {})",
                self.modules[id].name,
                file.display(),
                candidates
                    .iter()
                    .map(|c| c.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        };
        self.modules[id].file = found.clone();
        // `a.rs` keeps its submodules in `a/`; `a/mod.rs` and a `#[path]` file beside them.
        let mod_rs = found.file_name().is_some_and(|f| f == "mod.rs") || explicit.is_some();
        let inner = match mod_rs {
            true => found.parent().unwrap_or(Path::new("")).to_path_buf(),
            false => dir.join(&name),
        };
        self.read_file(id, found, &inner, read)
    }

    /// The edges: every path each module names, resolved.
    fn link(&mut self) {
        let mut edges = BTreeMap::new();
        for (from, module) in self.modules.iter().enumerate() {
            for named in &module.named {
                if let Some(found) = self.resolve(from, &named.segments, 0) {
                    let to = found.module();
                    if to != from {
                        edges.entry((from, to)).or_insert_with(|| named.clone());
                    }
                }
            }
        }
        self.edges = edges;
    }

    /// What `path`, named in module `at`, leads to; `None` when it leaves the crate or
    /// starts with a name not in scope as a module or import (a local, a type).
    fn resolve(&self, at: ModId, path: &[String], depth: usize) -> Option<Found> {
        let (first, rest) = path.split_first()?;
        let mut current = match first.as_str() {
            "crate" => 0,
            "self" => at,
            "super" => self.modules[at].parent?,
            name => match self.lookup(at, name, true, depth + 1)? {
                Found::Module(m) => m,
                item => return Some(item),
            },
        };
        for segment in rest {
            if segment == "super" {
                current = self.modules[current].parent?;
                continue;
            }
            match self.lookup(current, segment, false, depth + 1) {
                Some(Found::Module(m)) => current = m,
                Some(item) => return Some(item),
                // Something the module holds that this reading does not see.
                None => return Some(Found::Item(current)),
            }
        }
        Some(Found::Module(current))
    }

    /// What `name` is in module `at`: a submodule, an import followed to what it
    /// imports, an item, or what a glob import brings. `first`: the name starts a path,
    /// where an unknown name is a local or another crate's, not an item of `at`.
    fn lookup(&self, at: ModId, name: &str, first: bool, depth: usize) -> Option<Found> {
        if depth > MAX_DEPTH {
            return None;
        }
        let module = &self.modules[at];
        if let Some(&child) = module.children.get(name) {
            return Some(Found::Module(child));
        }
        if let Some(path) = module.imports.get(name) {
            // `use serde;` imports another crate under its own name.
            if path.len() > 1 || path[0] != name {
                return self.resolve(at, path, depth + 1);
            }
            return None;
        }
        if module.items.contains(name) {
            return Some(Found::Item(at));
        }
        let mut unknown_sources = BTreeSet::new();
        for glob in &module.globs {
            match self.resolve(at, glob, depth + 1) {
                Some(Found::Module(source)) => {
                    if let Some(found) = self.lookup(source, name, true, depth + 1) {
                        return Some(found);
                    }
                    if self.modules[source].opaque {
                        unknown_sources.insert(source);
                    }
                }
                // A glob of an enum's variants, or of a module a macro writes.
                Some(Found::Item(source)) => {
                    unknown_sources.insert(source);
                }
                None => {}
            }
        }
        match (first, unknown_sources.len()) {
            (false, 1) => unknown_sources.pop_first().map(Found::Item),
            _ => None,
        }
    }

    /// Groups of two or more modules that reach one another (Tarjan's strongly connected
    /// components), each sorted by module index.
    fn components(&self) -> Vec<Vec<ModId>> {
        struct Tarjan<'g> {
            next: &'g BTreeMap<ModId, Vec<ModId>>,
            index: Vec<Option<usize>>,
            low: Vec<usize>,
            on_stack: Vec<bool>,
            stack: Vec<ModId>,
            counter: usize,
            out: Vec<Vec<ModId>>,
        }
        impl Tarjan<'_> {
            fn visit(&mut self, v: ModId) {
                self.index[v] = Some(self.counter);
                self.low[v] = self.counter;
                self.counter += 1;
                self.stack.push(v);
                self.on_stack[v] = true;
                for &w in self.next.get(&v).into_iter().flatten() {
                    match self.index[w] {
                        None => {
                            self.visit(w);
                            self.low[v] = self.low[v].min(self.low[w]);
                        }
                        Some(i) if self.on_stack[w] => self.low[v] = self.low[v].min(i),
                        Some(_) => {}
                    }
                }
                if Some(self.low[v]) == self.index[v] {
                    let mut component = Vec::new();
                    while let Some(w) = self.stack.pop() {
                        self.on_stack[w] = false;
                        component.push(w);
                        if w == v {
                            break;
                        }
                    }
                    if component.len() > 1 {
                        component.sort_unstable();
                        self.out.push(component);
                    }
                }
            }
        }
        let next = self.successors();
        let n = self.modules.len();
        let mut tarjan = Tarjan {
            next: &next,
            index: vec![None; n],
            low: vec![0; n],
            on_stack: vec![false; n],
            stack: Vec::new(),
            counter: 0,
            out: Vec::new(),
        };
        for v in 0..n {
            if tarjan.index[v].is_none() {
                tarjan.visit(v);
            }
        }
        tarjan.out.sort();
        tarjan.out
    }

    /// Where each module's edges lead.
    fn successors(&self) -> BTreeMap<ModId, Vec<ModId>> {
        let mut next: BTreeMap<ModId, Vec<ModId>> = BTreeMap::new();
        for &(from, to) in self.edges.keys() {
            next.entry(from).or_default().push(to);
        }
        next
    }

    /// Shortest cycles inside `component` that together pass through all its modules.
    fn cycles_through(&self, component: &[ModId]) -> Vec<Vec<ModId>> {
        let next = self.successors();
        let inside: BTreeSet<ModId> = component.iter().copied().collect();
        let mut covered = BTreeSet::new();
        let mut cycles = Vec::new();
        for &start in component {
            if covered.contains(&start) {
                continue;
            }
            // Breadth first from `start` back to it, inside the component.
            let mut came_from: BTreeMap<ModId, ModId> = BTreeMap::new();
            let mut queue = VecDeque::from([start]);
            'search: while let Some(v) = queue.pop_front() {
                for &w in next.get(&v).into_iter().flatten() {
                    if !inside.contains(&w) || came_from.contains_key(&w) {
                        continue;
                    }
                    came_from.insert(w, v);
                    if w == start {
                        break 'search;
                    }
                    queue.push_back(w);
                }
            }
            let mut cycle = vec![start];
            let mut v = came_from[&start];
            while v != start {
                cycle.push(v);
                v = came_from[&v];
            }
            cycle.push(start);
            cycle.reverse();
            covered.extend(cycle.iter().copied());
            cycles.push(cycle);
        }
        cycles
    }

    /// The modules of `component` by name, and its cycles with the path of each step.
    fn describe(&self, component: &[ModId], shown_from: &Path) -> String {
        let names: Vec<&str> = component
            .iter()
            .map(|&m| self.modules[m].name.as_str())
            .collect();
        let mut text = format!("{} reach one another:\n", names.join(", "));
        for cycle in self.cycles_through(component) {
            let route: Vec<&str> = cycle
                .iter()
                .map(|&m| self.modules[m].name.as_str())
                .collect();
            let _ = writeln!(text, "    {}", route.join(" → "));
            for step in cycle.windows(2) {
                let named = &self.edges[&(step[0], step[1])];
                let file = &self.modules[step[0]].file;
                let file = file.strip_prefix(shown_from).unwrap_or(file);
                let _ = writeln!(
                    text,
                    "        {} → {}: {}:{} `{}`",
                    self.modules[step[0]].name,
                    self.modules[step[1]].name,
                    file.display(),
                    named.line,
                    named.text()
                );
            }
        }
        text
    }
}

/// A name a `use` declaration binds.
#[derive(Debug)]
enum Binds {
    Name(String),
    Glob,
    /// `use a::Trait as _;`
    Nothing,
}

/// One leaf of a `use` tree: the path it names and what it binds.
#[derive(Debug)]
struct Leaf {
    named: Named,
    binds: Binds,
}

/// The leaves of a `use` tree under `prefix`.
fn flatten(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<Leaf>) {
    let leaf = |prefix: &[String], last: &syn::Ident, binds: Binds| {
        let mut segments = prefix.to_vec();
        if last != "self" {
            segments.push(last.to_string());
        }
        Leaf {
            named: Named {
                segments,
                line: last.span().start().line,
            },
            binds,
        }
    };
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            flatten(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => {
            // `use a::b::{self}` binds `b`.
            let bound = match n.ident == "self" {
                true => prefix.last().cloned().unwrap_or_default(),
                false => n.ident.to_string(),
            };
            out.push(leaf(prefix, &n.ident, Binds::Name(bound)));
        }
        syn::UseTree::Rename(r) => {
            let binds = match r.rename == "_" {
                true => Binds::Nothing,
                false => Binds::Name(r.rename.to_string()),
            };
            out.push(leaf(prefix, &r.ident, binds));
        }
        syn::UseTree::Glob(g) => out.push(Leaf {
            named: Named {
                segments: prefix.clone(),
                line: g.star_token.span.start().line,
            },
            binds: Binds::Glob,
        }),
        syn::UseTree::Group(g) => {
            for tree in &g.items {
                flatten(tree, prefix, out);
            }
        }
    }
}

/// The name an item defines in its module's namespace, submodules and imports apart.
fn defined_name(item: &syn::Item) -> Option<String> {
    let ident = match item {
        syn::Item::Const(i) => &i.ident,
        syn::Item::Enum(i) => &i.ident,
        syn::Item::ExternCrate(i) => i.rename.as_ref().map_or(&i.ident, |(_, r)| r),
        syn::Item::Fn(i) => &i.sig.ident,
        syn::Item::Static(i) => &i.ident,
        syn::Item::Struct(i) => &i.ident,
        syn::Item::Trait(i) => &i.ident,
        syn::Item::TraitAlias(i) => &i.ident,
        syn::Item::Type(i) => &i.ident,
        syn::Item::Union(i) => &i.ident,
        _ => return None,
    };
    Some(ident.to_string())
}

/// The value of a `#[path = "..."]` attribute.
fn path_attribute(attrs: &[syn::Attribute]) -> Option<String> {
    attrs.iter().find_map(|attr| match &attr.meta {
        syn::Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    })
}

/// Collects the paths one item names and the `use` declarations inside it.
#[derive(Default)]
struct Collect {
    named: Vec<Named>,
    leaves: Vec<Leaf>,
}

impl<'ast> Visit<'ast> for Collect {
    fn visit_path(&mut self, path: &'ast syn::Path) {
        if path.leading_colon.is_none() && path.segments.len() > 1 {
            self.named.push(Named {
                segments: path.segments.iter().map(|s| s.ident.to_string()).collect(),
                line: path.segments[0].ident.span().start().line,
            });
        }
        visit::visit_path(self, path);
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        if u.leading_colon.is_none() {
            flatten(&u.tree, &mut Vec::new(), &mut self.leaves);
        }
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.visit_path(&mac.path);
        scan_tokens(mac.tokens.clone(), &mut self.named);
    }

    // Doc links and other attributes name nothing the code depends on.
    fn visit_attribute(&mut self, _: &'ast syn::Attribute) {}

    // `pub(crate)`, `pub(super)`: who may see an item, not what it uses.
    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {}

    // A module inside a function body: too rare here to place in the tree.
    fn visit_item_mod(&mut self, _: &'ast syn::ItemMod) {}
}

/// The paths in a macro's tokens: runs `name::name...` not preceded by `::`.
fn scan_tokens(tokens: TokenStream, out: &mut Vec<Named>) {
    let trees: Vec<TokenTree> = tokens.into_iter().collect();
    let is_path_sep = |at: usize| {
        matches!((trees.get(at), trees.get(at + 1)),
            (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)))
                if a.as_char() == ':' && a.spacing() == Spacing::Joint && b.as_char() == ':')
    };
    let mut at = 0;
    while at < trees.len() {
        match &trees[at] {
            TokenTree::Group(group) => {
                scan_tokens(group.stream(), out);
                at += 1;
            }
            TokenTree::Ident(first) => {
                let after_sep = at >= 2 && is_path_sep(at - 2);
                let mut segments = vec![first.to_string()];
                let mut end = at + 1;
                while is_path_sep(end)
                    && let Some(TokenTree::Ident(next)) = trees.get(end + 2)
                {
                    segments.push(next.to_string());
                    end += 3;
                }
                if segments.len() > 1 && !after_sep {
                    out.push(Named {
                        segments,
                        line: first.span().start().line,
                    });
                }
                at = end;
            }
            _ => at += 1,
        }
    }
}

/// The workspace's root folder and every library and binary of its members: a label
/// (the package's name, and ` (bin <name>)` for a binary) and its root file.
fn workspace_crates() -> (PathBuf, Vec<(String, PathBuf)>) {
    // `floors.rs` beside this file asks cargo the same way; the call is written again here
    // so that this check moves to any crate's tests as one file.
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = Command::new(cargo)
        .args(["metadata", "--no-deps", "--format-version", "1"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(
        output.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let meta: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("cargo metadata prints JSON");
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
