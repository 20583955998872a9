//! Build step: the OpenAPI document the handler serves (`docs/openapi.json`) goes into the binary
//! gzip-compressed, as `$OUT_DIR/openapi.json.gz`; `src/api/openapi.rs` decompresses it once, on
//! the first request for it.

use std::io::Write as _;
use std::path::PathBuf;

fn main() {
    let source = "docs/openapi.json";
    println!("cargo::rerun-if-changed={source}");
    let text = std::fs::read(source).expect("docs/openapi.json is readable");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(&text).expect("compressing into memory");
    let compressed = gz.finish().expect("compressing into memory");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    std::fs::write(out.join("openapi.json.gz"), compressed).expect("OUT_DIR is writable");
}
