//! The bench's modules import downward only: no cycle among its modules at any depth, from the
//! top-level ones down to single files, so each can be read knowing only the ones below it;
//! `main` (the crate root) is the one place that knows them all. The imports are read as the
//! library's layering test reads the library, by the same code.

#[path = "../../tests/api/layers/check.rs"]
mod check;

use std::path::PathBuf;

#[test]
fn the_bench_modules_import_downward_only() {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src");
    let imports = check::Crate::read(&src, "main.rs").imports();
    let top = imports.at_depth(1);
    assert!(
        top.contains_key("runner") && top["runner"].contains("measure"),
        "{top:?}"
    );
    if let Some(c) = imports.first_cycle() {
        panic!("an import cycle:\n{c}");
    }
    // Only the crate root assembles the run: no module names it (a shared item lives in a
    // module of its own).
    for (module, names) in &imports.edges {
        assert!(
            !names.contains(""),
            "`{module}` imports from the crate root"
        );
    }
}
