#!/usr/bin/env bash
# Assemble the deployable Functions app in dist/app/ (docs/functions-host.md):
#
#   dist/app/host.json
#   dist/app/<FunctionName>/function.json   one folder per functions/<FunctionName>/
#   dist/app/handler                        static x86_64 Linux binary (musl)
#   dist/app/.funcignore
#
# The binary is linked statically against musl so it runs on whatever Linux image the Functions
# host uses, whatever glibc that image has. It is always built for x86_64 Linux, whatever the
# machine building it:
#   x86_64 Linux        Debian's musl-gcc compiles the C parts (bundled SQLite, ring, mimalloc)
#                       and the toolchain's lld links; musl-tools is installed when missing;
#   arm64 Linux, macOS  zig compiles the C parts and links, through cargo-zigbuild: cargo installs
#                       it from crates.io and pip installs zig from PyPI (ziglang) when missing;
#   anything else       (Windows among them) it stops, saying so: build in WSL or on one of the
#                       above.
# The rustup target is added when missing.
#
# Usage: scripts/package.sh            (from anywhere; paths are relative to the repository)
# Env:   CARGO_TARGET_DIR              honoured, as cargo does
#        DIST                          output folder (default: <repo>/dist/app)
#        PACKAGE_CC                    musl-gcc or zig: the way above to use instead of the host's
set -euo pipefail

TARGET=x86_64-unknown-linux-musl
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIST="${DIST:-$ROOT/dist/app}"
TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
cd "$ROOT"

log() { printf 'package: %s\n' "$*"; }
die() {
    printf 'package: %s\n' "$*" >&2
    exit 1
}

HOST="$(rustc -vV | sed -n 's/^host: //p')"
case "$HOST" in
    x86_64-unknown-linux-*) WAY=musl-gcc ;;
    aarch64-unknown-linux-* | *-apple-darwin) WAY=zig ;;
    *) WAY=none ;;
esac
WAY=${PACKAGE_CC:-$WAY}
case "$WAY" in
    musl-gcc | zig) ;;
    none) die "cannot build the x86_64 Linux package on $HOST: build it on x86_64 Linux, arm64 Linux or macOS (on Windows, in WSL)" ;;
    *) die "PACKAGE_CC is $WAY: musl-gcc or zig" ;;
esac

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

if ! rustup target list --installed | grep -qx "$TARGET"; then
    log "installing the rustup target $TARGET"
    rustup target add "$TARGET"
fi

if [ "$WAY" = musl-gcc ]; then
    if ! command -v musl-gcc >/dev/null 2>&1; then
        command -v apt-get >/dev/null 2>&1 ||
            die "musl-gcc is missing and this is not Debian or Ubuntu: install musl's gcc wrapper (musl-tools), or run with PACKAGE_CC=zig"
        log "installing musl-tools (musl-gcc compiles the bundled C code for $TARGET)"
        # (waiting for dpkg's lock if another install is under way)
        as_root apt-get -o DPkg::Lock::Timeout=600 update -qq
        as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq musl-tools
    fi
    # The cc crate picks musl-gcc for this target on its own; naming it keeps the choice explicit
    # for build scripts that read these variables directly.
    export CC_x86_64_unknown_linux_musl="${CC_x86_64_unknown_linux_musl:-musl-gcc}"
    export AR_x86_64_unknown_linux_musl="${AR_x86_64_unknown_linux_musl:-ar}"
else
    # cargo-zigbuild sets zig up as the C compiler, archiver and linker for the target.
    if ! command -v cargo-zigbuild >/dev/null 2>&1; then
        log "installing cargo-zigbuild from crates.io (zig compiles and links for $TARGET)"
        cargo install --locked cargo-zigbuild
    fi
    # cargo-zigbuild runs `zig`, else `python3 -m ziglang`: PyPI's ziglang goes in a venv of its own.
    if ! command -v zig >/dev/null 2>&1 && ! python3 -c 'import ziglang' >/dev/null 2>&1; then
        ZIG_VENV="$TARGET_DIR/ziglang-venv"
        if [ ! -x "$ZIG_VENV/bin/python3" ] || ! "$ZIG_VENV/bin/python3" -c 'import ziglang' >/dev/null 2>&1; then
            log "installing zig from PyPI (ziglang) into $ZIG_VENV"
            python3 -m venv "$ZIG_VENV" || die "python3 -m venv failed: install Python 3 with venv, or zig itself"
            "$ZIG_VENV/bin/pip" install --quiet --disable-pip-version-check ziglang
        fi
        export PATH="$ZIG_VENV/bin:$PATH"
    fi
fi

RUSTFLAGS_TARGET="${CARGO_TARGET_X86_64_UNKNOWN_LINUX_MUSL_RUSTFLAGS:-}"
# Source paths in panic locations as the crate's own (`tokio-1.48.0/src/…`, `src/…`), not the
# build machine's: each file's path is kept once in the binary, for every file that can panic.
REGISTRY_SRC="${CARGO_HOME:-$HOME/.cargo}/registry/src"
for index in "$REGISTRY_SRC"/*/; do
    [ -d "$index" ] || continue
    RUSTFLAGS_TARGET+=" --remap-path-prefix=$index="
done
RUSTFLAGS_TARGET+=" --remap-path-prefix=$ROOT/="
if [ "$WAY" = musl-gcc ]; then
    # Linked by the toolchain's own lld (rustup ships it with rustc, as `gcc-ld/ld.lld` for a C
    # compiler driver) with identical code folding: functions whose machine code came out the
    # same (generic code instantiated for types of one layout, mostly) are kept once; and
    # relative relocations packed (RELR, which musl's static-PIE start-up applies): a static PIE
    # otherwise carries 24 bytes per pointer in its data. zig links with its own lld, so a zig
    # build leaves both out: its package may come out larger, and runs the same.
    GCC_LD="$(rustc --print sysroot)/lib/rustlib/$HOST/bin/gcc-ld"
    [ -x "$GCC_LD/ld.lld" ] || die "the toolchain's lld is missing ($GCC_LD/ld.lld)"
    RUSTFLAGS_TARGET+=" -C link-arg=-B$GCC_LD -C link-arg=-fuse-ld=lld -C link-arg=-Wl,--icf=all -C link-arg=-Wl,-z,pack-relative-relocs"
fi
# Unwind tables only where a panic can unwind. Rust code keeps a table for every function that
# may unwind (LLVM emits one whatever the flag says), so a panic still unwinds to the request's
# 500 or the follower's supervisor; a function that cannot unwind loses a table only a debugger
# or profiler would read. The C code (SQLite, ring, mimalloc) has none: a panic never unwinds
# through it (Rust's callbacks from C abort rather than unwind out of them).
RUSTFLAGS_TARGET+=" -C force-unwind-tables=no"
export CARGO_TARGET_X86_64_UNKNOWN_LINUX_MUSL_RUSTFLAGS="$RUSTFLAGS_TARGET"
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
BUILD=build
[ "$WAY" = zig ] && BUILD=zigbuild
log "building handler for $TARGET on $HOST with $WAY (profile dist)"
cargo "$BUILD" --profile dist --locked --target "$TARGET" -p blog --no-default-features \
    --features packaged --bin handler

BIN="$TARGET_DIR/$TARGET/dist/handler"
# What the Functions host runs: a 64-bit little-endian ELF executable for x86-64 (read from its
# header: the magic, class 2, data 1, e_type 2 or 3 (PIE), e_machine 0x3e).
set -- $(od -An -tx1 -N20 -v "$BIN" 2>/dev/null)
[ "$#" -eq 20 ] && [ "$1$2$3$4" = 7f454c46 ] && [ "$5$6" = 0201 ] &&
    { [ "${17}${18}" = 0200 ] || [ "${17}${18}" = 0300 ]; } && [ "${19}${20}" = 3e00 ] ||
    die "$BIN is not an x86-64 Linux executable (ELF header: ${*:-none})"

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
log "handler: x86-64 ELF executable, $(wc -c <"$DIST/handler" | tr -d ' ') bytes"
