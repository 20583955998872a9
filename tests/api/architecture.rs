//! `docs/ARCHITECTURE.md` is the map of the code: its layout table names every source file, so
//! a newcomer finds where each part lives, and a file added without a line there fails here.
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

/// The source files whose name the layout table does not mention (by file name, `x.rs`, or by
/// path from the crate root).
fn unmapped(root: &Path, layout: &str) -> Vec<String> {
    let mut files = Vec::new();
    sources(&root.join("src"), &mut files);
    let mut missing: Vec<String> = files
        .iter()
        .filter(|f| {
            let name = f.file_name().unwrap().to_string_lossy();
            !layout.contains(name.as_ref())
        })
        .map(|f| f.strip_prefix(root).unwrap().display().to_string())
        .collect();
    missing.sort();
    missing
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
    let missing = unmapped(root, layout(&page));
    assert!(
        missing.is_empty(),
        "docs/ARCHITECTURE.md's layout table does not name: {missing:?}"
    );
}

#[test]
fn a_file_the_table_does_not_name_is_found() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let page = std::fs::read_to_string(root.join("docs/ARCHITECTURE.md")).unwrap();
    let without = layout(&page).replace("telemetry.rs", "logging");
    assert_eq!(unmapped(root, &without), ["src/telemetry.rs"]);
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

/// The source files under `root`'s `src/` with more than [`MAX_CODE_LINES`] lines of code, with
/// their count, but for those in `except` (paths from `root`).
fn too_long(root: &Path, except: &[&str]) -> Vec<String> {
    let mut files = Vec::new();
    sources(&root.join("src"), &mut files);
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
    assert_eq!(
        too_long(dir.path(), &["src/excused.rs"]),
        [format!("src/m/over.rs: {} lines", MAX_CODE_LINES + 1)]
    );
}
