//! The bench's modules import downward only: no cycle among its top-level modules (a module's
//! files under `src/<module>/` count as the module), so each can be read knowing only the ones
//! below it; `main` (the crate root) is the one place that knows them all. Read from the source:
//! every `crate::<module>` a module's code names (comments and its unit tests aside), as the
//! library's own layering test reads the library.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Graph = BTreeMap<String, BTreeSet<String>>;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// What each top-level module of `src` names of the others.
fn imports(src: &Path) -> Graph {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut graph = Graph::new();
    for file in files {
        let rel = file.strip_prefix(src).unwrap();
        let first = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy();
        let module = first.trim_end_matches(".rs").to_string();
        if module == "main" {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        let code = text.split("#[cfg(test)]\nmod tests").next().unwrap();
        let names = graph.entry(module.clone()).or_default();
        for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
            names.extend(named_modules(line).into_iter().filter(|m| *m != module));
        }
    }
    graph
}

/// The modules a line names: `crate::x` and each `x` of `use crate::{x, y::z}`; an item of the
/// crate root (`crate::Scratch`) names `main`.
fn named_modules(line: &str) -> Vec<String> {
    let ident = |s: &str| -> String {
        let name: String = s
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if name.starts_with(|c: char| c.is_ascii_uppercase()) {
            "main".to_string()
        } else {
            name
        }
    };
    let mut out = Vec::new();
    for (i, _) in line.match_indices("crate::") {
        let rest = &line[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let group = group.split('}').next().unwrap_or_default();
            out.extend(group.split(',').map(|p| ident(p.trim())));
        } else {
            out.push(ident(rest));
        }
    }
    out.retain(|m| !m.is_empty());
    out
}

/// A cycle in `graph`, if there is one (depth-first search).
fn cycle(graph: &Graph) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &Graph,
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

#[test]
fn the_bench_modules_import_downward_only() {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = imports(&src);
    assert!(
        graph.contains_key("runner") && graph["runner"].contains("measure"),
        "{graph:?}"
    );
    if let Some(c) = cycle(&graph) {
        panic!(
            "an import cycle: {}\n(all imports: {graph:#?})",
            c.join(" -> ")
        );
    }
    // Only the crate root assembles the run: no module names it (a shared item lives in a
    // module of its own).
    for (module, names) in &graph {
        assert!(
            !names.contains("main"),
            "`{module}` imports from the crate root"
        );
    }
}

#[test]
fn a_cycle_is_found() {
    let mut g = Graph::new();
    g.entry("a".into()).or_default().insert("b".into());
    g.entry("b".into()).or_default().insert("c".into());
    assert_eq!(cycle(&g), None);
    g.entry("c".into()).or_default().insert("a".into());
    assert_eq!(cycle(&g).unwrap(), ["a", "b", "c", "a"]);
    assert_eq!(
        named_modules("use crate::{report, runner::Bench}; crate::Scratch::new(x)"),
        ["report", "runner", "main"]
    );
}
