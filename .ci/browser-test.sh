#!/usr/bin/env bash
# The web client in real headless Chromium: installs Debian's chromium and chromium-driver and
# Selenium (pinned), starts on 127.0.0.1, each over a temporary embedded
# store, a `handler` with BLOG_AUTH=none, one with BLOG_AUTH=jwt signing in through a local
# OpenID Connect issuer (tests/browser/oidc_issuer.py) and one with BLOG_AUTH=local (accounts of
# its own), and runs tests/browser/browser_test.py against the three.
# Screenshots go to target/ci-screenshots/.
# Bounded: the test itself is given 5 minutes.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$CI_ROOT"

echo "-- chromium + chromium-driver (Debian)"
ci_apt_install chromium chromium-driver

work=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT

echo "-- selenium (pinned: .ci/requirements/browser.txt)"
venv=$(ci_venv browser)

wait_for() {
    for _ in $(seq 1 100); do
        if curl -s -o /dev/null "$1"; then return 0; fi
        sleep 0.1
    done
    echo "nothing answers at $1"
    return 1
}

echo "-- handler (BLOG_AUTH=none), one with BLOG_AUTH=jwt and a local issuer, one with BLOG_AUTH=local"
target_dir=${CARGO_TARGET_DIR:-target}
# HANDLER=<path> tests an already built handler (CI passes the packaged one); else a debug build.
if [ -z "${HANDLER:-}" ]; then
    cargo build --bin handler
    HANDLER="$target_dir/debug/handler"
fi
port=$(free_port)
# The test seeds 23 posts by script on top of what it clicks, all from one address: more than
# the per-caller write limit lets a person make in a minute, so the limit is off here.
BLOG_DB_PATH="$work/none.db" BLOG_BIND=127.0.0.1 PORT="$port" BLOG_AUTH=none RUST_LOG=warn \
    BLOG_WRITES_PER_MINUTE=0 "$HANDLER" >"$work/handler.log" 2>&1 &
pids+=($!)
issuer_port=$(free_port)
"$venv/bin/python" tests/browser/oidc_issuer.py "$issuer_port" blog-web-test api://blog-test \
    >"$work/issuer.log" 2>&1 &
pids+=($!)
jwt_port=$(free_port)
BLOG_DB_PATH="$work/jwt.db" BLOG_BIND=127.0.0.1 PORT="$jwt_port" RUST_LOG=warn \
    BLOG_AUTH=jwt BLOG_AUTH_ISSUER="http://127.0.0.1:$issuer_port" \
    BLOG_AUTH_AUDIENCE=api://blog-test BLOG_AUTH_CLIENT_ID=blog-web-test \
    BLOG_AUTH_SCOPES="openid api://blog-test/access" \
    "$HANDLER" >"$work/handler-jwt.log" 2>&1 &
pids+=($!)
local_port=$(free_port)
BLOG_DB_PATH="$work/local.db" BLOG_BIND=127.0.0.1 PORT="$local_port" RUST_LOG=warn \
    BLOG_AUTH=local "$HANDLER" >"$work/handler-local.log" 2>&1 &
pids+=($!)
wait_for "http://127.0.0.1:$port/"
wait_for "http://127.0.0.1:$local_port/"
wait_for "http://127.0.0.1:$issuer_port/jwks"
wait_for "http://127.0.0.1:$jwt_port/"

echo "-- browser test"
out="$target_dir/ci-screenshots"
rm -rf "$out"
mkdir -p "$work/profile"
if ! PROFILE_DIR="$work/profile" JWT_BASE="http://127.0.0.1:$jwt_port" \
    LOCAL_BASE="http://127.0.0.1:$local_port" timeout 300 \
    "$venv/bin/python" tests/browser/browser_test.py "http://127.0.0.1:$port" "$out"; then
    for log in handler handler-jwt handler-local issuer; do echo "--- $log log"; cat "$work/$log.log"; done
    exit 1
fi
