//! `docs/ARCHITECTURE.md` is the map of the code: its layout table names every source file by
//! its path, so a newcomer finds where each part lives, and a file added without a line there,
//! or a line naming a file that is gone, fails here.
//! Each file also stays small enough to read as one thing ([`MAX_CODE_LINES`]).

use std::path::{Path, PathBuf};

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// A row of the layout table: what its first column names (paths from the repository root), the
/// directories among them (`src/x/`, and `src/x/` for `src/x.rs`, whose submodules live there)
/// and the `.rs` files the whole row names, each as written.
struct Row {
    first: Vec<String>,
    dirs: Vec<String>,
    files: Vec<String>,
}

fn rows(layout: &str) -> Vec<Row> {
    let quoted = |cell: &str| -> Vec<String> {
        cell.split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_string)
            .collect()
    };
    layout
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            let cells: Vec<&str> = l.trim_start_matches('|').splitn(2, " | ").collect();
            let first = quoted(cells[0]);
            let dirs = first
                .iter()
                .filter_map(|p| {
                    p.strip_suffix(".rs")
                        .map(|stem| format!("{stem}/"))
                        .or_else(|| p.ends_with('/').then(|| p.clone()))
                })
                .collect();
            let files = first
                .iter()
                .cloned()
                .chain(cells.get(1).map(|c| quoted(c)).unwrap_or_default())
                .filter(|n| n.ends_with(".rs"))
                .collect();
            Row { first, dirs, files }
        })
        .collect()
}

/// The paths (from the repository root) of the files the layout table names, and the names in it
/// that are no file: a row's file is its path as written when that names a file, its path from
/// one of the row's directories, or the file of its first column it is the name of (`conduit.rs`
/// in the row of `src/api/conduit.rs`).
fn named(root: &Path, layout: &str) -> (Vec<String>, Vec<String>) {
    let mut found = Vec::new();
    let mut stale = Vec::new();
    for row in rows(layout) {
        for file in &row.files {
            let own = row
                .first
                .iter()
                .filter(|p| p.ends_with(&format!("/{file}")));
            let paths: Vec<String> = std::iter::once(file.clone())
                .chain(row.dirs.iter().map(|d| format!("{d}{file}")))
                .chain(own.cloned())
                .filter(|p| root.join(p).is_file())
                .collect();
            if paths.is_empty() {
                stale.push(file.clone());
            }
            found.extend(paths);
        }
    }
    (found, stale)
}

/// The source files the layout table does not name by their path (see [`named`]), and the
/// names in it that are no file: a file is found by where it is, not by a name that up to four
/// files share (`tags.rs`).
fn unmapped(root: &Path, layout: &str) -> (Vec<String>, Vec<String>) {
    let mut files = Vec::new();
    sources(&root.join("src"), &mut files);
    let (named, stale) = named(root, layout);
    let mut missing: Vec<String> = files
        .iter()
        .map(|f| f.strip_prefix(root).unwrap().display().to_string())
        .filter(|path| !named.contains(path))
        .collect();
    missing.sort();
    (missing, stale)
}

fn layout(page: &str) -> &str {
    page.split("\n## Layout\n")
        .nth(1)
        .expect("ARCHITECTURE.md has a Layout section")
        .split("\n## ")
        .next()
        .unwrap()
}

#[test]
fn the_layout_table_names_every_source_file() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let page = std::fs::read_to_string(root.join("docs/ARCHITECTURE.md")).unwrap();
    let (missing, stale) = unmapped(root, layout(&page));
    assert!(
        missing.is_empty(),
        "docs/ARCHITECTURE.md's layout table does not name: {missing:?}"
    );
    assert!(
        stale.is_empty(),
        "docs/ARCHITECTURE.md's layout table names files that are not there: {stale:?}"
    );
}

#[test]
fn a_file_the_table_does_not_name_is_found() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let page = std::fs::read_to_string(root.join("docs/ARCHITECTURE.md")).unwrap();
    let without = layout(&page).replace("telemetry.rs", "logging");
    assert_eq!(unmapped(root, &without).0, ["src/telemetry.rs"]);
    // A file whose name another row names is still unnamed: `src/domain/tags.rs` is found by
    // its path, not by `tags.rs` in the rows of `src/api/` or `src/projection/`.
    let without = layout(&page).replace(
        "what a tag may be and where tags' copies live (`tags.rs`)",
        "",
    );
    assert_eq!(unmapped(root, &without).0, ["src/domain/tags.rs"]);
}

/// The most lines of code a source file holds before its unit tests: past that, a file does
/// more than one thing, and is split along what its parts do.
const MAX_CODE_LINES: usize = 500;

/// Files allowed over [`MAX_CODE_LINES`]: none. (The planted-file test below shows that a file
/// named here would be let through, so that the list is seen to work when one is ever needed.)
const LONG_FILES_BEING_SPLIT: [&str; 0] = [];

/// The lines of `text` before its unit-test module (`#[cfg(test)]` then `mod …`), all of them
/// when it has none.
fn code_lines(text: &str) -> usize {
    let lines: Vec<&str> = text.lines().collect();
    lines
        .windows(2)
        .position(|w| w[0].trim_end() == "#[cfg(test)]" && w[1].starts_with("mod "))
        .unwrap_or(lines.len())
}

/// The source files under `root`'s `src/`, and the bench's (`bench/src/`, `bench/bare/src/`),
/// with more than [`MAX_CODE_LINES`] lines of code, with their count, but for those in `except`
/// (paths from `root`).
fn too_long(root: &Path, except: &[&str]) -> Vec<String> {
    let mut files = Vec::new();
    for dir in ["src", "bench/src", "bench/bare/src"] {
        if root.join(dir).is_dir() {
            sources(&root.join(dir), &mut files);
        }
    }
    let mut long: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let path = f.strip_prefix(root).unwrap().display().to_string();
            let n = code_lines(&std::fs::read_to_string(f).unwrap());
            (n > MAX_CODE_LINES && !except.contains(&path.as_str()))
                .then(|| format!("{path}: {n} lines"))
        })
        .collect();
    long.sort();
    long
}

#[test]
fn no_source_file_holds_more_than_500_lines_of_code() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let long = too_long(root, &LONG_FILES_BEING_SPLIT);
    assert!(
        long.is_empty(),
        "split these along what their parts do (unit tests do not count): {long:?}"
    );
}

/// A planted file one line of code over is found; one at the limit, or over it only with its
/// unit tests, is not.
#[test]
fn a_file_with_too_many_lines_of_code_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("m")).unwrap();
    let code = |n: usize| "fn f() {}\n".repeat(n);
    let tests = "#[cfg(test)]\nmod tests {\n}\n".to_string() + &code(200);
    std::fs::write(src.join("m/over.rs"), code(MAX_CODE_LINES + 1) + &tests).unwrap();
    std::fs::write(src.join("at.rs"), code(MAX_CODE_LINES) + &tests).unwrap();
    std::fs::write(src.join("untested.rs"), code(MAX_CODE_LINES)).unwrap();
    std::fs::write(src.join("excused.rs"), code(MAX_CODE_LINES + 1)).unwrap();
    let bench = dir.path().join("bench/src");
    std::fs::create_dir_all(&bench).unwrap();
    std::fs::write(bench.join("main.rs"), code(MAX_CODE_LINES + 1)).unwrap();
    assert_eq!(
        too_long(dir.path(), &["src/excused.rs"]),
        [
            format!("bench/src/main.rs: {} lines", MAX_CODE_LINES + 1),
            format!("src/m/over.rs: {} lines", MAX_CODE_LINES + 1),
        ]
    );
}

/// The one module of the move of timeline items from `users` to `timelines`, deleted in 0.2.0
/// (`docs/deploy.md`, "Upgrading an existing deployment"), and its parent, which names it.
const MOVE_MODULE: [&str; 2] = [
    "src/projection/upgrade/timelines.rs",
    "src/projection/upgrade.rs",
];

/// The store's layout record (`store::LAYOUT_ID`, defined in `store::layout`), which a new store
/// writes saying that nothing is left to move: the store is below the projections, so the
/// module cannot hold it.
const LAYOUT_RECORD: [&str; 4] = [
    "src/store.rs",
    "src/store/layout.rs",
    "src/store/embedded.rs",
    "src/store/cosmos/bootstrap.rs",
];

/// Names only the move has: the layout record and its field (which the files of
/// [`LAYOUT_RECORD`] name too), and the move's former homes (which no file names).
const RECORD_NAMES: [&str; 3] = ["LAYOUT_ID", "TIMELINES_MOVED", "timelinesMoved"];
const OLD_NAMES: [&str; 3] = ["timelines_moved", "relocation", "TimelinePlace"];

/// What holds the code to the move's one module, under `root`: the lines (`path:line: text`)
/// of other source files that name the move but through the module (a name of [`OLD_NAMES`],
/// one of [`RECORD_NAMES`] outside the layout record, or a `use` of names out of the
/// module, after which a call would not say where it goes), and the files naming the module
/// (`upgrade::timelines`), the sites its deletion touches.
fn move_outside_its_module(root: &Path) -> (Vec<String>, Vec<String>) {
    let mut files = Vec::new();
    sources(&root.join("src"), &mut files);
    let mut wrong = Vec::new();
    let mut sites = Vec::new();
    for file in files {
        let path = file.strip_prefix(root).unwrap().display().to_string();
        if MOVE_MODULE.contains(&path.as_str()) {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        let mut in_use = false;
        for (n, line) in text.lines().enumerate() {
            let code = line.trim_start();
            in_use |= code.starts_with("use ") || code.starts_with("pub use ");
            let record = RECORD_NAMES.iter().any(|m| line.contains(m));
            let old = OLD_NAMES.iter().any(|m| line.contains(m));
            let imported = in_use && line.contains("upgrade::timelines::");
            if (record && !LAYOUT_RECORD.contains(&path.as_str())) || old || imported {
                wrong.push(format!("{path}:{}: {}", n + 1, code));
            }
            in_use &= !line.contains(';');
            if line.contains("upgrade::timelines") && !sites.contains(&path) {
                sites.push(path.clone());
            }
        }
    }
    sites.sort();
    (wrong, sites)
}

/// The files `docs/ARCHITECTURE.md` lists as naming the move's module: those quoted in its
/// paragraph that starts `**Deleting the timelines move.**`.
fn listed_move_sites(page: &str) -> Vec<String> {
    let paragraph = page
        .split("\n\n")
        .find(|p| p.starts_with("**Deleting the timelines move.**"))
        .expect("docs/ARCHITECTURE.md says what deleting the timelines move takes");
    let mut listed: Vec<String> = paragraph
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|q| q.starts_with("src/") && q.ends_with(".rs"))
        .filter(|q| !MOVE_MODULE.contains(q))
        .map(str::to_string)
        .collect();
    listed.sort();
    listed.dedup();
    listed
}

/// Everything that exists only for the timelines move goes through its one module: deleting it
/// is deleting the module and the calls in the files the architecture page lists, each a
/// path `upgrade::timelines::…`.
#[test]
fn the_timelines_move_is_reached_only_through_its_module() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (wrong, sites) = move_outside_its_module(root);
    assert!(
        wrong.is_empty(),
        "the timelines move named outside `upgrade::timelines`:\n{}",
        wrong.join("\n")
    );
    let page = std::fs::read_to_string(root.join("docs/ARCHITECTURE.md")).unwrap();
    let listed = listed_move_sites(&page);
    let unlisted: Vec<&String> = sites.iter().filter(|s| !listed.contains(s)).collect();
    let stale: Vec<&String> = listed.iter().filter(|l| !sites.contains(l)).collect();
    assert!(
        unlisted.is_empty() && stale.is_empty(),
        "docs/ARCHITECTURE.md's list of the move's sites lacks {unlisted:?}, and names {stale:?}, \
         which do not name `upgrade::timelines`"
    );
}

/// A planted reference to the move outside its module is found: an old name (even in the
/// store), the layout record's field (outside the store), a `use` of names out of the module (on one line or several); a call
/// spelling the module's path is not, and is a site.
#[test]
fn a_reference_to_the_move_outside_its_module_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let plant = |path: &str, text: &str| {
        let file = dir.path().join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, text).unwrap();
    };
    plant(
        MOVE_MODULE[0],
        "pub fn moving() -> bool { true } // timelinesMoved\n",
    );
    plant(
        "src/store.rs",
        "pub const TIMELINES_MOVED: &str = \"timelinesMoved\";\n",
    );
    plant(
        "src/a.rs",
        "fn f() -> bool { crate::projection::upgrade::timelines::moving() }\n",
    );
    let (wrong, sites) = move_outside_its_module(dir.path());
    assert!(wrong.is_empty(), "{wrong:?}");
    assert_eq!(sites, ["src/a.rs"]);
    for (planted, text) in [
        (
            "src/store/embedded.rs",
            "fn moved(l: &Value) -> bool { timelines_moved(l) }\n",
        ),
        (
            "src/b.rs",
            "fn f(l: &Value) -> bool { crate::store::timelines_moved(l) }\n",
        ),
        ("src/c.rs", "const F: &str = \"timelinesMoved\";\n"),
        (
            "src/d.rs",
            "use crate::projection::upgrade::timelines::moving;\n",
        ),
        (
            "src/e.rs",
            "use crate::projection::{\n    over_limit,\n    upgrade::timelines::moving,\n};\n",
        ),
    ] {
        plant(planted, text);
        let (wrong, _) = move_outside_its_module(dir.path());
        assert!(
            wrong.len() == 1 && wrong[0].starts_with(planted),
            "{planted}: {wrong:?}"
        );
        std::fs::remove_file(dir.path().join(planted)).unwrap();
        assert!(move_outside_its_module(dir.path()).0.is_empty());
    }
}
