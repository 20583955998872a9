#!/usr/bin/env bash
# Assemble the deployable Functions app in dist/app/ (docs/functions-host.md):
#
#   dist/app/host.json
#   dist/app/<FunctionName>/function.json   one folder per functions/<FunctionName>/
#   dist/app/handler                        static x86_64 Linux binary (musl)
#   dist/app/.funcignore
#
# The binary is linked statically against musl so it runs on whatever Linux image the Functions
# host uses, whatever glibc that image has. Missing build tools (the rustup target, Debian's
# musl-tools for the C parts: bundled SQLite, ring and mimalloc) are installed on the way.
#
# Usage: scripts/package.sh            (from anywhere; paths are relative to the repository)
# Env:   CARGO_TARGET_DIR              honoured, as cargo does
#        DIST                          output folder (default: <repo>/dist/app)
set -euo pipefail

TARGET=x86_64-unknown-linux-musl
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIST="${DIST:-$ROOT/dist/app}"
cd "$ROOT"

log() { printf 'package: %s\n' "$*"; }

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

if ! rustup target list --installed | grep -qx "$TARGET"; then
    log "installing the rustup target $TARGET"
    rustup target add "$TARGET"
fi

if ! command -v musl-gcc >/dev/null 2>&1; then
    log "installing musl-tools (musl-gcc compiles the bundled C code for $TARGET)"
    # (waiting for dpkg's lock if another install is under way)
    as_root apt-get -o DPkg::Lock::Timeout=600 update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq musl-tools
fi

# The cc crate picks musl-gcc for this target on its own; naming it keeps the choice explicit
# for build scripts that read these variables directly.
export CC_x86_64_unknown_linux_musl="${CC_x86_64_unknown_linux_musl:-musl-gcc}"
export AR_x86_64_unknown_linux_musl="${AR_x86_64_unknown_linux_musl:-ar}"

# Relative relocations packed (RELR, which musl's static-PIE start-up applies): a static PIE
# otherwise carries 24 bytes per pointer in its data.
export CARGO_TARGET_X86_64_UNKNOWN_LINUX_MUSL_RUSTFLAGS="${CARGO_TARGET_X86_64_UNKNOWN_LINUX_MUSL_RUSTFLAGS:-} -C link-arg=-Wl,-z,pack-relative-relocs"
# Source paths in panic locations as the crate's own (`tokio-1.48.0/src/…`, `src/…`), not the
# build machine's: each file's path is kept once in the binary, for every file that can panic.
REGISTRY_SRC="${CARGO_HOME:-$HOME/.cargo}/registry/src"
for index in "$REGISTRY_SRC"/*/; do
    [ -d "$index" ] || continue
    CARGO_TARGET_X86_64_UNKNOWN_LINUX_MUSL_RUSTFLAGS+=" --remap-path-prefix=$index="
done
CARGO_TARGET_X86_64_UNKNOWN_LINUX_MUSL_RUSTFLAGS+=" --remap-path-prefix=$ROOT/="
# Linked by the toolchain's own lld (rustup ships it with rustc, as `gcc-ld/ld.lld` for a C
# compiler driver) with identical code folding: functions whose machine code came out the same
# (generic code instantiated for types of one layout, mostly) are kept once.
HOST="$(rustc -vV | sed -n 's/^host: //p')"
GCC_LD="$(rustc --print sysroot)/lib/rustlib/$HOST/bin/gcc-ld"
if [ ! -x "$GCC_LD/ld.lld" ]; then
    echo "package: the toolchain's lld is missing ($GCC_LD/ld.lld)" >&2
    exit 1
fi
CARGO_TARGET_X86_64_UNKNOWN_LINUX_MUSL_RUSTFLAGS+=" -C link-arg=-B$GCC_LD -C link-arg=-fuse-ld=lld -C link-arg=-Wl,--icf=all"
# Unwind tables only where a panic can unwind. Rust code keeps a table for every function that
# may unwind (LLVM emits one whatever the flag says), so a panic still unwinds to the request's
# 500 or the follower's supervisor; a function that cannot unwind loses a table only a debugger
# or profiler would read. The C code (SQLite, ring, mimalloc) has none: a panic never unwinds
# through it (Rust's callbacks from C abort rather than unwind out of them).
CARGO_TARGET_X86_64_UNKNOWN_LINUX_MUSL_RUSTFLAGS+=" -C force-unwind-tables=no"
export CFLAGS_x86_64_unknown_linux_musl="${CFLAGS_x86_64_unknown_linux_musl:-} -fno-asynchronous-unwind-tables -fno-unwind-tables"
# The bundled SQLite without the extensions and interfaces the store never uses (FTS3, R-tree,
# dbstat, soundex, loadable extensions, the column metadata functions, the planner's STAT4
# histograms, which only ANALYZE fills, shared cache, deprecated functions). FTS5 stays: the
# search of posts runs on it.
export LIBSQLITE3_FLAGS="${LIBSQLITE3_FLAGS:-} -USQLITE_ENABLE_FTS3 -USQLITE_ENABLE_FTS3_PARENTHESIS -USQLITE_ENABLE_RTREE -USQLITE_ENABLE_DBSTAT_VTAB -USQLITE_SOUNDEX -USQLITE_ENABLE_LOAD_EXTENSION -DSQLITE_OMIT_LOAD_EXTENSION -USQLITE_ENABLE_COLUMN_METADATA -USQLITE_ENABLE_STAT4 -DSQLITE_OMIT_SHARED_CACHE -DSQLITE_OMIT_DEPRECATED"

# The `dist` profile (Cargo.toml): LTO, one codegen unit, stripped; dependencies off the request
# path optimized for size. Only the `blog` package: cargo unifies the features of the packages one
# build selects, so without `-p` the bench's (axum's defaults, tracing-subscriber's env-filter)
# would reach the package. Its feature `packaged`, in place of the default `debug-logs`, leaves out
# the log calls below `info` (Cargo.toml says why).
log "building handler for $TARGET (profile dist)"
cargo build --profile dist --locked --target "$TARGET" -p blog --no-default-features \
    --features packaged --bin handler

TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
BIN="$TARGET_DIR/$TARGET/dist/handler"

# Start from an empty folder so a function removed from functions/ is not deployed stale.
rm -rf "$DIST"
mkdir -p "$DIST"
cp host.json "$DIST/host.json"
cp .funcignore "$DIST/.funcignore"
for dir in functions/*/; do
    name="$(basename "$dir")"
    mkdir -p "$DIST/$name"
    cp "$dir/function.json" "$DIST/$name/function.json"
done
install -m 0755 "$BIN" "$DIST/handler"

log "wrote $DIST:"
(cd "$DIST" && find . -type f | LC_ALL=C sort | sed 's/^/  /')
file "$DIST/handler" | sed 's/^/package: /'
