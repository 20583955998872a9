//! `docs/ARCHITECTURE.md` is the map of the code: its layout table names every source file, so
//! a newcomer finds where each part lives, and a file added without a line there fails here.

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
