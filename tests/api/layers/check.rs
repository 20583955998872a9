//! The import graph of a crate, read from its source with `syn`, and the cycles in it. Every file
//! is a module (`src/projection/posts.rs` is `projection::posts`, the crate root `lib.rs` or
//! `main.rs` is ``), and a module imports another when its code names something there: in a
//! `use` (`crate::`, `super::`, `self::`, a child module, or a name an earlier `use` bound), in a
//! path in its code, or in a macro's tokens. A name is followed through the `use`s that
//! re-export it (`crate::AppState` names `api`, where the root's `pub use api::AppState` takes
//! it), so an import is charged to the module that defines what it names. A module's `pub use`
//! of its own descendants' items is no import of its own: it only shows them. Items under
//! `#[cfg(test)]` (unit tests) are left out. Used by the library's layering test and the
//! bench's (`bench/tests/layers.rs`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// Who imports whom, with a path that shows each import (`from -> to: the path`).
#[derive(Debug, Default)]
pub struct Imports {
    pub edges: BTreeMap<String, BTreeSet<String>>,
    pub why: BTreeMap<(String, String), String>,
    /// Each function a module names in one of its ancestors (`super::run`, with the module
    /// and the path naming it): a submodule may use its parent's types, constants and
    /// re-exports, never call up into its functions (a driver inside a unit).
    pub parent_functions: BTreeSet<(String, String)>,
}

/// What one file says: its child modules, its `use`s, the paths its code names, and the
/// functions it defines at its top level.
#[derive(Default)]
struct Parsed {
    children: BTreeSet<String>,
    functions: BTreeSet<String>,
    /// (the name bound, or none for a glob; the path; whether `pub`).
    uses: Vec<(Option<String>, Vec<String>, bool)>,
    paths: Vec<Vec<String>>,
}

fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && matches!(&a.meta, syn::Meta::List(l) if l.tokens.to_string() == "test")
    })
}

impl<'a> Visit<'a> for Parsed {
    fn visit_item(&mut self, i: &'a syn::Item) {
        let attrs = match i {
            syn::Item::Mod(m) => &m.attrs,
            syn::Item::Use(u) => &u.attrs,
            syn::Item::Fn(f) => &f.attrs,
            syn::Item::Impl(x) => &x.attrs,
            syn::Item::Struct(x) => &x.attrs,
            syn::Item::Enum(x) => &x.attrs,
            syn::Item::Const(x) => &x.attrs,
            syn::Item::Static(x) => &x.attrs,
            syn::Item::Trait(x) => &x.attrs,
            syn::Item::Type(x) => &x.attrs,
            syn::Item::Macro(x) => &x.attrs,
            _ => return syn::visit::visit_item(self, i),
        };
        if !is_test_only(attrs) {
            syn::visit::visit_item(self, i);
        }
    }

    /// `pub(super)` names no import.
    fn visit_visibility(&mut self, _: &'a syn::Visibility) {}

    fn visit_item_mod(&mut self, m: &'a syn::ItemMod) {
        if m.content.is_none() {
            self.children.insert(m.ident.to_string());
        }
        syn::visit::visit_item_mod(self, m);
    }

    fn visit_item_use(&mut self, u: &'a syn::ItemUse) {
        let public = !matches!(u.vis, syn::Visibility::Inherited);
        let mut out = Vec::new();
        use_tree(&u.tree, Vec::new(), &mut out);
        self.uses
            .extend(out.into_iter().map(|(name, path)| (name, path, public)));
    }

    fn visit_path(&mut self, p: &'a syn::Path) {
        self.paths
            .push(p.segments.iter().map(|s| s.ident.to_string()).collect());
        syn::visit::visit_path(self, p);
    }

    fn visit_macro(&mut self, m: &'a syn::Macro) {
        syn::visit::visit_macro(self, m);
        macro_paths(m.tokens.clone(), &mut self.paths);
    }
}

/// Each leaf of a `use` tree: the name it binds (none for a glob) and its full path.
fn use_tree(t: &syn::UseTree, prefix: Vec<String>, out: &mut Vec<(Option<String>, Vec<String>)>) {
    let with = |s: String| {
        let mut p = prefix.clone();
        p.push(s);
        p
    };
    match t {
        syn::UseTree::Path(p) => use_tree(&p.tree, with(p.ident.to_string()), out),
        syn::UseTree::Name(n) if n.ident == "self" => {
            out.push((prefix.last().cloned(), prefix.clone()))
        }
        syn::UseTree::Name(n) => out.push((Some(n.ident.to_string()), with(n.ident.to_string()))),
        syn::UseTree::Rename(r) if r.ident == "self" => {
            out.push((Some(r.rename.to_string()), prefix.clone()))
        }
        syn::UseTree::Rename(r) => {
            out.push((Some(r.rename.to_string()), with(r.ident.to_string())))
        }
        syn::UseTree::Glob(_) => out.push((None, prefix.clone())),
        syn::UseTree::Group(g) => {
            for t in &g.items {
                use_tree(t, prefix.clone(), out);
            }
        }
    }
}

/// The paths in a macro's tokens (`a::b::c`, `$crate::x`), which `syn` leaves unparsed.
fn macro_paths(tokens: proc_macro2::TokenStream, out: &mut Vec<Vec<String>>) {
    use proc_macro2::TokenTree;
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    let mut i = 0;
    while i < tokens.len() {
        match &tokens[i] {
            TokenTree::Group(g) => macro_paths(g.stream(), out),
            TokenTree::Ident(id) => {
                let dollar =
                    i > 0 && matches!(&tokens[i - 1], TokenTree::Punct(p) if p.as_char() == '$');
                let mut path = vec![if dollar {
                    "crate".to_string()
                } else {
                    id.to_string()
                }];
                while i + 3 < tokens.len() + 1
                    && matches!(tokens.get(i + 1), Some(TokenTree::Punct(p)) if p.as_char() == ':')
                    && matches!(tokens.get(i + 2), Some(TokenTree::Punct(p)) if p.as_char() == ':')
                {
                    match tokens.get(i + 3) {
                        Some(TokenTree::Ident(next)) => {
                            path.push(next.to_string());
                            i += 3;
                        }
                        _ => break,
                    }
                }
                if path.len() > 1 {
                    out.push(path);
                }
            }
            _ => {}
        }
        i += 1;
    }
}

/// Every `.rs` file under `dir`.
pub fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn split(module: &str) -> Vec<String> {
    if module.is_empty() {
        Vec::new()
    } else {
        module.split("::").map(String::from).collect()
    }
}

/// The crate under `src`: every file parsed.
pub struct Crate {
    modules: BTreeMap<String, Parsed>,
    /// Per module, each name its `use`s bind, as a path from the crate root.
    aliases: BTreeMap<String, BTreeMap<String, Vec<String>>>,
}

impl Crate {
    /// The crate whose root is `src/<root>` (`lib.rs` or `main.rs`; the other, if any, is
    /// another crate).
    pub fn read(src: &Path, root: &str) -> Crate {
        let mut files = Vec::new();
        rust_files(src, &mut files);
        let other = if root == "lib.rs" {
            "main.rs"
        } else {
            "lib.rs"
        };
        files.retain(|f| *f != src.join(other));
        let mut modules = BTreeMap::new();
        for file in files {
            let rel = file.strip_prefix(src).unwrap().with_extension("");
            let parts: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            let module = if parts == ["lib"] || parts == ["main"] {
                String::new()
            } else {
                parts.join("::")
            };
            let text = std::fs::read_to_string(&file).unwrap();
            let ast = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            let mut parsed = Parsed::default();
            parsed.visit_file(&ast);
            for item in &ast.items {
                if let syn::Item::Fn(f) = item {
                    if !is_test_only(&f.attrs) {
                        parsed.functions.insert(f.sig.ident.to_string());
                    }
                }
            }
            modules.insert(module, parsed);
        }
        // Only what the crate declares (a file behind `#[cfg(test)] mod x;` is a unit test's).
        let mut reachable = BTreeSet::from([String::new()]);
        let mut todo = vec![String::new()];
        while let Some(m) = todo.pop() {
            for child in modules
                .get(&m)
                .map(|p: &Parsed| p.children.clone())
                .unwrap_or_default()
            {
                let c = if m.is_empty() {
                    child
                } else {
                    format!("{m}::{child}")
                };
                if reachable.insert(c.clone()) {
                    todo.push(c);
                }
            }
        }
        modules.retain(|m, _| reachable.contains(m));
        let mut krate = Crate {
            modules,
            aliases: BTreeMap::new(),
        };
        // Twice, so that a `use` naming what another `use` bound resolves whatever their order.
        for _ in 0..2 {
            let mut aliases = BTreeMap::new();
            for (module, parsed) in &krate.modules {
                let mut bound = BTreeMap::new();
                for (name, path, _) in &parsed.uses {
                    if let (Some(name), Some(abs)) = (name, krate.absolute(module, path)) {
                        bound.insert(name.clone(), abs);
                    }
                }
                aliases.insert(module.clone(), bound);
            }
            krate.aliases = aliases;
        }
        krate
    }

    /// `path`, as named in `module`, from the crate root; none for another crate's.
    fn absolute(&self, module: &str, path: &[String]) -> Option<Vec<String>> {
        let first = path.first()?;
        let mut base = split(module);
        let rest = match first.as_str() {
            "crate" => {
                base.clear();
                &path[1..]
            }
            "self" => &path[1..],
            "super" => {
                let ups = path.iter().take_while(|s| *s == "super").count();
                for _ in 0..ups {
                    base.pop()?;
                }
                &path[ups..]
            }
            _ if self.modules.get(module)?.children.contains(first) => path,
            _ => {
                let alias = self.aliases.get(module)?.get(first)?;
                let mut abs = alias.clone();
                abs.extend(path[1..].iter().cloned());
                return Some(abs);
            }
        };
        base.extend(rest.iter().cloned());
        Some(base)
    }

    /// The module that defines what `abs` names: its longest module prefix, followed through
    /// the `use`s that bind the next name there.
    fn landing(&self, abs: &[String], depth: usize) -> String {
        let mut at: Vec<String> = Vec::new();
        for (i, seg) in abs.iter().enumerate() {
            let mut next = at.clone();
            next.push(seg.clone());
            if self.modules.contains_key(&next.join("::")) {
                at = next;
                continue;
            }
            if depth < 16 {
                if let Some(target) = self.aliases.get(&at.join("::")).and_then(|a| a.get(seg)) {
                    if *target != next {
                        let mut t = target.clone();
                        t.extend(abs[i + 1..].iter().cloned());
                        return self.landing(&t, depth + 1);
                    }
                }
            }
            break;
        }
        at.join("::")
    }

    /// Every module's imports of the others.
    pub fn imports(&self) -> Imports {
        let mut out = Imports::default();
        for (module, parsed) in &self.modules {
            out.edges.entry(module.clone()).or_default();
            let within = |to: &str| module.is_empty() || to.starts_with(&format!("{module}::"));
            let mut named: Vec<(&Vec<String>, bool)> = Vec::new();
            for (_, path, public) in &parsed.uses {
                named.push((path, *public));
            }
            for path in &parsed.paths {
                named.push((path, false));
            }
            for (path, public) in named {
                let Some(abs) = self.absolute(module, path) else {
                    continue;
                };
                let to = self.landing(&abs, 0);
                let ancestor = to.is_empty() || module.starts_with(&format!("{to}::"));
                if ancestor && to != *module {
                    let name = abs.get(split(&to).len());
                    if name.is_some_and(|n| self.modules[&to].functions.contains(n)) {
                        out.parent_functions
                            .insert((module.clone(), path.join("::")));
                    }
                }
                if to == *module || (public && within(&to)) {
                    continue;
                }
                out.edges.get_mut(module).unwrap().insert(to.clone());
                out.why
                    .entry((module.clone(), to))
                    .or_insert_with(|| path.join("::"));
            }
        }
        out
    }
}

impl Imports {
    /// The same graph with each module taken as its ancestor `depth` levels down (`a::b::c` as
    /// `a` at depth 1), leaving out an import within one of them and one between a module and
    /// its own ancestor: a module's file is the namespace its submodules share, so it may use
    /// them and they the types it defines (`super::Report`; that they call none of its functions
    /// is [`Imports::parent_functions`]). What is checked is everything else:
    /// submodules of one module among themselves (`projection::posts` and
    /// `projection::cascade`), and whole subtrees among each other.
    pub fn at_depth(&self, depth: usize) -> BTreeMap<String, BTreeSet<String>> {
        let cut = |m: &str| {
            split(m)
                .into_iter()
                .take(depth)
                .collect::<Vec<_>>()
                .join("::")
        };
        let ancestry = |a: &str, b: &str| {
            a.is_empty()
                || b.is_empty()
                || b.starts_with(&format!("{a}::"))
                || a.starts_with(&format!("{b}::"))
        };
        let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (from, tos) in &self.edges {
            let f = cut(from);
            let set = g.entry(f.clone()).or_default();
            for to in tos {
                let t = cut(to);
                if t != f && !ancestry(&f, &t) {
                    set.insert(t);
                }
            }
        }
        g
    }

    /// The deepest module's depth.
    pub fn depth(&self) -> usize {
        self.edges.keys().map(|m| split(m).len()).max().unwrap_or(0)
    }

    /// A cycle at any depth, the whole files' included, each import shown with a path that
    /// makes it; none when the modules import downward only.
    pub fn first_cycle(&self) -> Option<String> {
        for depth in 1..=self.depth() {
            if let Some(c) = cycle(&self.at_depth(depth)) {
                let shown: Vec<String> = c
                    .windows(2)
                    .map(|w| {
                        let example = self
                            .why
                            .iter()
                            .find(|((f, t), _)| {
                                self.at_depth_name(f, depth) == w[0]
                                    && self.at_depth_name(t, depth) == w[1]
                            })
                            .map(|((f, _), p)| format!(" (in `{f}`: `{p}`)"))
                            .unwrap_or_default();
                        format!("`{}` -> `{}`{example}", w[0], w[1])
                    })
                    .collect();
                return Some(shown.join("\n"));
            }
        }
        None
    }

    fn at_depth_name(&self, m: &str, depth: usize) -> String {
        split(m)
            .into_iter()
            .take(depth)
            .collect::<Vec<_>>()
            .join("::")
    }
}

/// A cycle in `graph`, if there is one (depth-first search).
pub fn cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|n| n == node) {
            let mut c = path[i..].to_vec();
            c.push(node.to_string());
            return Some(c);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(c) = visit(next, graph, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|n| visit(n, graph, &mut Vec::new(), &mut done))
}
