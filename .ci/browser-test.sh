#!/usr/bin/env bash
# The web client in real headless Chromium: installs Debian's chromium and chromium-driver and
# Selenium (pinned, in a throw-away venv), starts `handler` on 127.0.0.1 over a temporary
# embedded store, and runs .ci/browser_test.py. Screenshots go to target/ci-screenshots/.
# Bounded: the test itself is given 5 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
echo "-- chromium + chromium-driver (Debian)"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    chromium chromium-driver >/dev/null

work=$(mktemp -d)
handler_pid=""
cleanup() {
    if [ -n "$handler_pid" ]; then kill "$handler_pid" 2>/dev/null || true; wait "$handler_pid" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

echo "-- selenium (pinned, throw-away venv)"
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q --disable-pip-version-check -r .ci/browser-requirements.txt

echo "-- handler"
cargo build --bin handler
target_dir=${CARGO_TARGET_DIR:-target}
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
BLOG_DB_PATH="$work/blog.db" BLOG_BIND=127.0.0.1 PORT="$port" BLOG_AUTH=none RUST_LOG=warn \
    "$target_dir/debug/handler" >"$work/handler.log" 2>&1 &
handler_pid=$!
for _ in $(seq 1 100); do
    if curl -sf "http://127.0.0.1:$port/" >/dev/null; then break; fi
    sleep 0.1
done

echo "-- browser test"
out="$target_dir/ci-screenshots"
rm -rf "$out"
mkdir -p "$work/profile"
if ! PROFILE_DIR="$work/profile" timeout 300 "$work/venv/bin/python" .ci/browser_test.py \
    "http://127.0.0.1:$port" "$out"; then
    echo "browser test failed; handler log:"
    cat "$work/handler.log"
    exit 1
fi
