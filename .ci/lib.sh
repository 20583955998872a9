# Shared by the .ci scripts (source it): one copy of how a tool's Python set-up is made, how a
# Debian package is installed and how a free loopback port is found.

CI_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# ci_apt_install PACKAGE...: install Debian packages that are missing (as root, or with sudo).
ci_apt_install() {
    local missing=() pkg sudo=""
    for pkg in "$@"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
    done
    [ "${#missing[@]}" -eq 0 ] && return 0
    [ "$(id -u)" = 0 ] || sudo=sudo
    echo "ci: installing ${missing[*]} (Debian)" >&2
    # One process at a time may hold dpkg's lock; scripts run in parallel wait for it.
    DEBIAN_FRONTEND=noninteractive $sudo apt-get -o DPkg::Lock::Timeout=600 install -y -qq \
        --no-install-recommends "${missing[@]}" >/dev/null 2>&1 || {
        $sudo apt-get -o DPkg::Lock::Timeout=600 update -qq >/dev/null
        DEBIAN_FRONTEND=noninteractive $sudo apt-get -o DPkg::Lock::Timeout=600 install -y -qq \
            --no-install-recommends "${missing[@]}" >/dev/null
    }
}

# ci_npm_install COMMAND PACKAGE@VERSION: install an npm package globally unless COMMAND is on
# the PATH already (the RealWorld suite's runner, the Bruno CLI, for `cargo test`).
ci_npm_install() {
    local command=$1 package=$2
    command -v "$command" >/dev/null 2>&1 && return 0
    echo "ci: installing $package (npm)" >&2
    npm install --global --no-fund --no-audit --loglevel=error "$package" >/dev/null
}

# ci_venv NAME: prints the path of a virtual environment holding exactly the pinned packages of
# .ci/requirements/NAME.txt, under target/ci-venvs/. Made once and reused while that file is
# unchanged, so a second local run does not install again; a fresh machine makes it.
ci_venv() {
    local name=$1
    local req="$CI_ROOT/.ci/requirements/$name.txt"
    local dir="${CARGO_TARGET_DIR:-$CI_ROOT/target}/ci-venvs/$name"
    local want
    want=$(sha256sum "$req" | cut -c1-16)
    if [ "$(cat "$dir/.requirements" 2>/dev/null)" != "$want" ]; then
        rm -rf "$dir"
        mkdir -p "$(dirname "$dir")"
        if ! python3 -m venv "$dir" >/dev/null 2>&1; then
            # Debian's system Python ships venv and ensurepip in a package of their own.
            rm -rf "$dir"
            ci_apt_install python3-venv
            python3 -m venv "$dir"
        fi
        "$dir/bin/pip" install --quiet --disable-pip-version-check -r "$req" >&2
        echo "$want" >"$dir/.requirements"
    fi
    echo "$dir"
}

# free_port: a TCP port on 127.0.0.1 that nothing listens on now.
free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# ci_start_handler WORK [NAME=VALUE...]: start $HANDLER (a release build when unset) on a free
# loopback port over a fresh embedded store in WORK, with BLOG_AUTH=none and the given settings;
# sets HANDLER_PID and BASE (its http://127.0.0.1:<port>) and logs to WORK/handler.log. The
# caller's exit trap stops it.
ci_start_handler() {
    local work=$1; shift
    if [ -z "${HANDLER:-}" ]; then
        cargo build --release --bin handler
        HANDLER="${CARGO_TARGET_DIR:-$CI_ROOT/target}/release/handler"
    fi
    HANDLER=$(cd "$(dirname "$HANDLER")" && pwd)/$(basename "$HANDLER")
    local port
    port=$(free_port)
    BASE="http://127.0.0.1:$port"
    env -u COSMOS -u COSMOS__accountEndpoint -u FUNCTIONS_CUSTOMHANDLER_PORT \
        PORT="$port" BLOG_BIND=127.0.0.1 BLOG_STORE=embedded BLOG_DB_PATH="$work/data/blog.db" \
        BLOG_AUTH=none RUST_LOG=warn "$@" "$HANDLER" >"$work/handler.log" 2>&1 &
    HANDLER_PID=$!
}
