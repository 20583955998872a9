#!/usr/bin/env bash
# A client generated from the served OpenAPI document, as docs/api.md ("Use it from a client")
# tells a reader to generate one, with the generator's own validation on:
#   1. validates the kept document (docs/openapi.json, the one a deployment with a token serves);
#   2. starts a release `handler` on 127.0.0.1 (embedded store in a temporary directory,
#      BLOG_AUTH=none) and generates a TypeScript client from the document it serves at
#      /api/openapi.json, into target/openapi-client/ (nothing is written to the repository root:
#      the generator runs from a temporary directory).
# A document OpenAPI Generator refuses fails this, as it would fail a reader.
#
# Run from anywhere: bash .ci/openapi-client.sh
# The generator (.ci/requirements/openapi-client.txt) lives in a venv under target/ci-venvs/; it
# is a Java program, so a Java runtime is installed (Debian's) when `java` is missing.
# HANDLER=<path> tests an already built handler.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
ROOT=$CI_ROOT
cd "$ROOT"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/openapi-client.XXXXXX")
HANDLER_PID=
cleanup() {
  if [ -n "$HANDLER_PID" ]; then kill "$HANDLER_PID" 2>/dev/null || true; wait "$HANDLER_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

command -v java >/dev/null 2>&1 || ci_apt_install default-jre-headless
VENV=$(ci_venv openapi-client)
GENERATOR="$VENV/bin/openapi-generator-cli"


# 1. The kept document.
(cd "$WORK" && "$GENERATOR" validate -i "$ROOT/docs/openapi.json")

# 2. The served one, through a generation with validation on (the default).
ci_start_handler "$WORK"
for _ in $(seq 1 300); do
  curl -sf -o "$WORK/openapi.json" "$BASE/api/openapi.json" && break
  kill -0 "$HANDLER_PID" 2>/dev/null || { echo "openapi-client: the handler exited:" >&2; cat "$WORK/handler.log" >&2; exit 1; }
  sleep 0.2
done
[ -s "$WORK/openapi.json" ] || { echo "openapi-client: $BASE/api/openapi.json did not answer" >&2; exit 1; }

OUT="${CARGO_TARGET_DIR:-$ROOT/target}/openapi-client"
rm -rf "$OUT"
(cd "$WORK" && "$GENERATOR" generate -i "$BASE/api/openapi.json" -g typescript-fetch -o "$OUT" >"$WORK/generate.log" 2>&1) || {
  cat "$WORK/generate.log" >&2
  echo "openapi-client: OpenAPI Generator refused the served document" >&2
  exit 1
}
# The client has a method per operation: spot-check two of them by name.
for method in createPost listComments; do
  grep -rq "async $method(" "$OUT/apis" || { echo "openapi-client: the client has no $method()" >&2; exit 1; }
done
echo "openapi-client: OK ($(find "$OUT" -name '*.ts' | wc -l) TypeScript files in ${OUT#"$ROOT"/})"
