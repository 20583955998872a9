//! The library's modules import downward only: no cycle among its modules at any depth, from
//! the top-level ones (`api`, `store`, …) down to single files (`projection::posts::gather`), so each can
//! be read knowing only the ones below it, and `app` (the composition root) is the one place that
//! knows them all. How imports are read (through `use`s, paths, macros and re-exports such as
//! `crate::AppState`) is in `check`, which the bench's layering test shares.

mod check;

use std::path::{Path, PathBuf};

use check::{cycle, rust_files, Crate};

#[test]
fn the_modules_import_downward_only() {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src");
    let imports = Crate::read(&src, "lib.rs").imports();
    let top = imports.at_depth(1);
    assert!(
        top.contains_key("api") && top["api"].contains("store"),
        "{top:?}"
    );
    assert!(
        imports.edges["projection::posts::gather"].contains("domain"),
        "submodules are read: {:?}",
        imports.edges
    );
    if let Some(c) = imports.first_cycle() {
        panic!("an import cycle:\n{c}");
    }
    // Only the composition root puts the API, the Functions triggers and the web client together.
    for (module, names) in &top {
        if module != "app" && module != "startup" {
            assert!(
                !(names.contains("functions") && names.contains("web")),
                "`{module}` assembles the application; only `app` should"
            );
        }
    }
}

/// The crate's doc (`src/lib.rs`) lists the modules bottom up, a bullet per layer: each imports
/// only from its own layer or those listed before it, and every module is listed. The doc is
/// the one copy of the order; this holds the code to it (`functions` naming the API's state
/// through `crate::AppState` is caught here).
#[test]
fn each_module_imports_only_from_its_layer_or_below_as_the_crate_doc_lists() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("src/lib.rs")).unwrap();
    let mut layers: Vec<Vec<String>> = Vec::new();
    for line in doc.lines().map_while(|l| l.strip_prefix("//!")) {
        if line.starts_with(" - ") {
            layers.push(Vec::new());
        } else if !line.starts_with("   ") {
            continue;
        }
        if let Some(layer) = layers.last_mut() {
            for part in line.split("[`").skip(1) {
                let name = part.split("`]").next().unwrap_or_default();
                if !name.contains("::") {
                    layer.push(name.to_string());
                }
            }
        }
    }
    let rank = |m: &str| layers.iter().position(|l| l.iter().any(|n| n == m));
    let imports = Crate::read(&root.join("src"), "lib.rs").imports();
    let mut wrong = Vec::new();
    for (from, tos) in imports.at_depth(1).iter().filter(|(m, _)| !m.is_empty()) {
        let Some(r) = rank(from) else {
            wrong.push(format!("`{from}` is not listed in the crate doc"));
            continue;
        };
        for to in tos {
            if rank(to).is_none_or(|t| t > r) {
                let why = imports
                    .why
                    .iter()
                    .find(|((f, t), _)| {
                        f.split("::").next() == Some(from) && t.split("::").next() == Some(to)
                    })
                    .map(|((f, _), p)| format!("in `{f}`: `{p}`"))
                    .unwrap_or_default();
                wrong.push(format!("`{from}` imports `{to}`, listed after it ({why})"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{}\n(layers: {layers:?})",
        wrong.join("\n")
    );
}

/// A submodule uses its parent's (and every ancestor's) types and constants, never its
/// functions, in every module of the crate: a part calling back up into what contains it (a
/// projection unit scheduling its own work through the lane, a route reaching into the API's
/// file for a helper) hides a dependency the import graph, which leaves out imports between a
/// module and its ancestors, does not show. Helpers the children share live in a named leaf
/// submodule (`api::answer`, `store::keys`), which the children import as a sibling.
#[test]
fn no_module_calls_a_function_of_its_ancestors() {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src");
    let imports = Crate::read(&src, "lib.rs").imports();
    let calls: Vec<String> = imports
        .parent_functions
        .iter()
        .map(|(m, p)| format!("`{m}` calls `{p}`"))
        .collect();
    assert!(
        calls.is_empty(),
        "{} calls up:\n{}",
        calls.len(),
        calls.join("\n")
    );
}

/// The check above finds a child calling its parent's function, whether through `super::`, a
/// `use` or `crate::`, and lets the parent's types and constants through.
#[test]
fn a_planted_call_up_into_a_parent_is_found() {
    let m = "mod a; pub struct Report; pub const PAGE: u32 = 1; pub fn run() { a::go(); }";
    let calls = |a: &str| {
        let dir = planted(&[("lib.rs", "mod m;"), ("m.rs", m), ("m/a.rs", a)]);
        Crate::read(dir.path(), "lib.rs").imports().parent_functions
    };
    let types = "pub fn go() -> super::Report { let _ = super::PAGE; super::Report }";
    assert!(calls(types).is_empty());
    for up in [
        "pub fn go() { super::run(); }",
        "use super::run; pub fn go() { run(); }",
        "pub fn go() { crate::m::run(); }",
    ] {
        let found = calls(up);
        assert!(
            found.iter().any(|(m, p)| m == "m::a" && p.ends_with("run")),
            "{up}: {found:?}"
        );
    }
}

/// A small crate written to a temporary directory, one file per `(path, text)`.
fn planted(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let file = dir.path().join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, text).unwrap();
    }
    dir
}

fn cycle_in(files: &[(&str, &str)]) -> Option<String> {
    let dir = planted(files);
    Crate::read(dir.path(), "lib.rs").imports().first_cycle()
}

/// The checker finds what it is for: a cycle through a re-export of the crate root (as
/// `crate::AppState` is), one between files of one module (as `projection::posts` and
/// `projection::cascade` could make), one through `super::`; and nothing once the edge closing
/// each is gone, nor in comments, strings or unit tests.
#[test]
fn a_planted_cycle_is_found() {
    let mut g = std::collections::BTreeMap::<String, std::collections::BTreeSet<String>>::new();
    g.entry("a".into()).or_default().insert("b".into());
    g.entry("b".into()).or_default().insert("c".into());
    assert_eq!(cycle(&g), None);
    g.entry("c".into()).or_default().insert("a".into());
    assert_eq!(cycle(&g).unwrap(), ["a", "b", "c", "a"]);

    let lib = "pub mod api; pub mod functions; pub use api::State;";
    let api = "pub struct State; pub fn routes() { crate::functions::run(); }";
    // Through the root's re-export: `functions` names `api`'s `State`.
    let through_root = "pub fn run() {} pub fn handle(_: crate::State) {}";
    let found = cycle_in(&[
        ("lib.rs", lib),
        ("api.rs", api),
        ("functions.rs", through_root),
    ]);
    assert!(
        found
            .as_deref()
            .is_some_and(|c| c.contains("`functions` -> `api`")),
        "{found:?}"
    );
    let clean = "pub fn run() {} // crate::State\n#[cfg(test)]\nmod tests { use crate::State; }";
    assert_eq!(
        cycle_in(&[("lib.rs", lib), ("api.rs", api), ("functions.rs", clean)]),
        None
    );

    // Between two files of one module, invisible from the top.
    let p = "mod plan; mod gather; pub fn project() { plan::plan(); }";
    let plan = "use super::gather::Facts; pub fn plan() {} pub fn str_field() {}";
    let gather =
        "pub struct Facts; fn read() { let _ = \"crate::p::plan\"; super::plan::str_field(); }";
    let found = cycle_in(&[
        ("lib.rs", "mod p;"),
        ("p.rs", p),
        ("p/plan.rs", plan),
        ("p/gather.rs", gather),
    ]);
    assert!(
        found
            .as_deref()
            .is_some_and(|c| c.contains("`p::plan` -> `p::gather`")),
        "{found:?}"
    );
    let gather_alone = "pub struct Facts; fn read() { let _ = \"crate::p::plan\"; }";
    assert_eq!(
        cycle_in(&[
            ("lib.rs", "mod p;"),
            ("p.rs", p),
            ("p/plan.rs", plan),
            ("p/gather.rs", gather_alone)
        ]),
        None
    );

    // Through a parent's re-export of one submodule's item to another submodule; a submodule
    // using its parent's own items, which the parent's code uses in turn, is the idiom of a
    // module file shared by its submodules, not a cycle.
    let m = "mod a; mod b; pub use b::Step; pub struct Report; pub fn run() { a::go(); }";
    let a =
        "pub fn go() -> super::Step { super::Step } pub fn report() -> super::Report { todo!() }";
    let b = "pub struct Step; pub fn back() { super::a::go(); }";
    let found = cycle_in(&[
        ("lib.rs", "mod m;"),
        ("m.rs", m),
        ("m/a.rs", a),
        ("m/b.rs", b),
    ]);
    assert!(
        found
            .as_deref()
            .is_some_and(|c| c.contains("`m::a` -> `m::b`")),
        "{found:?}"
    );
    let b_alone = "pub struct Step;";
    assert_eq!(
        cycle_in(&[
            ("lib.rs", "mod m;"),
            ("m.rs", m),
            ("m/a.rs", a),
            ("m/b.rs", b_alone)
        ]),
        None
    );
}

/// One module-file style throughout, the sibling one: a module with children is `x.rs` beside a
/// directory `x/`, never `x/mod.rs`, so a file's name always says which module it is.
#[test]
fn modules_with_children_are_files_beside_their_directory() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in ["src", "tests", "bench/src", "bench/tests", "bench/bare/src"] {
        if root.join(dir).is_dir() {
            rust_files(&root.join(dir), &mut files);
        }
    }
    let mod_rs: Vec<_> = files
        .iter()
        .filter(|f| f.file_name().is_some_and(|n| n == "mod.rs"))
        .map(|f| f.strip_prefix(root).unwrap().display().to_string())
        .collect();
    assert!(
        mod_rs.is_empty(),
        "move each to `<dir>.rs` beside its directory: {mod_rs:?}"
    );
}
