#!/usr/bin/env bash
# Packaging check (docs/functions-host.md): run scripts/package.sh, then check
# what it produced:
#   1. dist/app/host.json is the repository's host.json;
#   2. dist/app/<FunctionName>/function.json exists, identical, for every functions/<FunctionName>/,
#      and dist/app holds no other function folder;
#   3. dist/app/handler is an executable, statically linked x86-64 ELF (no dynamic loader, no
#      shared libraries), so it runs on whatever image the Functions host uses, with its symbols
#      stripped;
#   4. the packaged handler starts as the host starts it (FUNCTIONS_CUSTOMHANDLER_PORT) and
#      answers the readiness probe at /, and forwarded requests under /api as Easy Auth (its
#      default there) has it: an anonymous write is refused, a principal's write is taken;
#   5. its HTTPS client works without aws-lc (the package's TLS is rustls on ring, installed at
#      run time; a client built without a provider installed would panic): standalone with
#      BLOG_AUTH=jwt and an issuer at https://127.0.0.1, a bearer token makes it fetch the
#      issuer's keys, and what arrives there is a TLS ClientHello; the handler goes on answering,
#      with nothing on stderr.
#
# Run from anywhere: bash .ci/package-check.sh   (needs root or sudo the first time, to install
# musl-tools; see scripts/package.sh). Builds for x86_64-unknown-linux-musl with the `dist`
# profile (LTO, one codegen unit; see Cargo.toml).
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
ROOT=$CI_ROOT
cd "$ROOT"
DIST="$ROOT/dist/app"

passed=0
failed=0
ok() { passed=$((passed + 1)); printf 'package-check: ok   %s\n' "$*"; }
fail() { failed=$((failed + 1)); printf 'package-check: FAIL %s\n' "$*"; }

DIST="$DIST" bash scripts/package.sh

# 1. host.json
if cmp -s host.json "$DIST/host.json"; then ok "host.json"; else fail "dist/app/host.json differs from host.json or is missing"; fi

# 2. one folder per function, nothing else
expected=()
for dir in functions/*/; do
    name=$(basename "$dir")
    expected+=("$name")
    if cmp -s "$dir/function.json" "$DIST/$name/function.json"; then
        ok "$name/function.json"
    else
        fail "dist/app/$name/function.json differs from functions/$name/function.json or is missing"
    fi
done
if [ "${#expected[@]}" -eq 0 ]; then fail "no functions under functions/"; fi
for dir in "$DIST"/*/; do
    [ -d "$dir" ] || continue
    name=$(basename "$dir")
    if [[ ! " ${expected[*]} " == *" $name "* ]]; then fail "dist/app/$name is not a function of functions/"; fi
done

# 3. a static x86-64 executable
BIN="$DIST/handler"
if [ -x "$BIN" ]; then ok "handler is executable"; else fail "dist/app/handler is missing or not executable"; fi
desc=$(file -b "$BIN" 2>/dev/null || true)
if [[ "$desc" == *"ELF 64-bit"* && "$desc" == *"x86-64"* && ( "$desc" == *"statically linked"* || "$desc" == *"static-pie linked"* ) ]]; then
    ok "handler is a static x86-64 ELF ($desc)"
else
    fail "handler is not a static x86-64 ELF: $desc"
fi
# Symbols stripped (the `dist` profile's `strip = true`; a profile override naming the root
# package silently turns it into stripping debug information only).
if [[ "$desc" == *", stripped"* ]]; then ok "handler is stripped"; else fail "handler is not stripped: $desc"; fi
# ldd exits non-zero for a binary without dynamic dependencies; its message is what counts.
linkage=$(ldd "$BIN" 2>&1 || true)
if [[ "$linkage" == *"not a dynamic executable"* || "$linkage" == *"statically linked"* ]]; then
    ok "ldd: no shared libraries"
else
    fail "ldd lists dynamic dependencies: $linkage"
fi

# 4. the packaged handler starts as the host starts it
if [ -x "$BIN" ]; then
    work=$(mktemp -d "${TMPDIR:-/tmp}/package-check.XXXXXX")
    port=$(free_port)
    env -i FUNCTIONS_CUSTOMHANDLER_PORT="$port" BLOG_STORE=embedded BLOG_DB_PATH="$work/blog.db" \
        "$BIN" >"$work/stdout" 2>"$work/stderr" &
    pid=$!
    ready=no
    for _ in $(seq 1 100); do
        if curl -fsS "http://127.0.0.1:$port/" >/dev/null 2>&1; then ready=yes; break; fi
        sleep 0.1
    done
    if [ "$ready" = yes ]; then ok "the packaged handler answers the probe at /"; else fail "the packaged handler never answered at /"; fi
    # Under the host identity defaults to Easy Auth: an anonymous write is refused, and one
    # carrying the principal headers App Service authentication sets acts as that principal.
    status=$(curl -s -o /dev/null -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
        -d '{"username":"package-check"}' "http://127.0.0.1:$port/api/users" || true)
    if [ "$status" = 401 ]; then ok "an anonymous POST /api/users answers 401"; else fail "an anonymous POST /api/users answered $status"; fi
    principal=$(printf '{"auth_typ":"aad","claims":[{"typ":"oid","val":"package-check"}]}' | base64 -w0)
    status=$(curl -s -o /dev/null -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
        -H 'X-MS-CLIENT-PRINCIPAL-IDP: aad' -H 'X-MS-CLIENT-PRINCIPAL-ID: package-check' \
        -H "X-MS-CLIENT-PRINCIPAL: $principal" \
        -d '{"username":"package-check"}' "http://127.0.0.1:$port/api/users" || true)
    if [ "$status" = 201 ]; then ok "POST /api/users as an Easy Auth principal answers 201"; else fail "POST /api/users as an Easy Auth principal answered $status"; fi
    # The search runs on SQLite's FTS5, which the package's SQLite build must keep.
    status=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/api/search?q=package" || true)
    if [ "$status" = 200 ]; then ok "GET /api/search answers 200"; else fail "GET /api/search answered $status"; fi
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    if [ -s "$work/stderr" ]; then fail "the handler wrote to stderr: $(head -c 500 "$work/stderr")"; else ok "nothing on stderr"; fi
    rm -rf "$work"
fi

# 5. the HTTPS client speaks TLS (see the top)
if [ -x "$BIN" ]; then
    work=$(mktemp -d "${TMPDIR:-/tmp}/package-check.XXXXXX")
    port=$(free_port)
    issuer_port=$(free_port)
    # A listener in place of the issuer: it records the first bytes a client sends, then closes.
    python3 .ci/first_bytes.py "$issuer_port" "$work/hello" &
    listener=$!
    for _ in $(seq 1 100); do [ -e "$work/hello.listening" ] && break; sleep 0.05; done
    env -i PORT="$port" BLOG_STORE=embedded BLOG_DB_PATH="$work/blog.db" BLOG_AUTH=jwt \
        BLOG_AUTH_ISSUER="https://127.0.0.1:$issuer_port/" BLOG_AUTH_AUDIENCE=api://package-check \
        "$BIN" >"$work/stdout" 2>"$work/stderr" &
    pid=$!
    for _ in $(seq 1 100); do
        if curl -fsS "http://127.0.0.1:$port/" >/dev/null 2>&1; then break; fi
        sleep 0.1
    done
    # A token of the right shape (RS256, a key id): checking it needs the issuer's keys.
    token="$(printf '{"alg":"RS256","kid":"k"}' | base64 -w0 | tr '+/' '-_' | tr -d '=').$(printf '{"sub":"x"}' | base64 -w0 | tr '+/' '-_' | tr -d '=').AAAA"
    status=$(curl -s -o /dev/null -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
        -H "Authorization: Bearer $token" -d '{"username":"package-check"}' \
        "http://127.0.0.1:$port/api/users" || true)
    wait "$listener" 2>/dev/null || true
    hello=$(cat "$work/hello" 2>/dev/null || true)
    # A TLS record of type handshake (0x16), version 3.x, whose message is a ClientHello (0x01).
    if [[ "$hello" == 1603??????01 ]]; then
        ok "the packaged handler's HTTPS client sends a TLS ClientHello (POST answered $status)"
    else
        fail "no TLS ClientHello reached the issuer (got '$hello'; POST answered $status)"
    fi
    if curl -fsS "http://127.0.0.1:$port/" >/dev/null 2>&1; then ok "the handler still answers after that"; else fail "the handler stopped answering"; fi
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    if [ -s "$work/stderr" ]; then fail "the handler wrote to stderr: $(head -c 500 "$work/stderr")"; else ok "nothing on stderr"; fi
    rm -rf "$work"
fi

echo "package-check: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
