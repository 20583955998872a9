#!/usr/bin/env bash
# Conformance fuzzing: the API against its own OpenAPI document.
#   1. starts `handler` ($HANDLER, CI's packaged one; a release build when unset) on 127.0.0.1
#      (embedded store in a temporary directory, BLOG_AUTH=none);
#   2. checks the document it serves at /api/openapi.json is valid OpenAPI 3.1
#      (openapi-spec-validator);
#   3. runs Schemathesis with that document: every check (enabled in .ci/schemathesis.toml, not
#      with `--checks all`, which would override the per-operation exceptions there), every
#      phase (examples, coverage, fuzzing, stateful), bounded in examples per operation and in
#      time. Any failure fails.
#      .ci/schemathesis.toml lists the few answers that depend on stored state, with reasons.
#
# Run from anywhere: bash .ci/schemathesis.sh
# The tools (.ci/requirements/schemathesis.txt) live in a venv under target/ci-venvs/.
# HANDLER=<path> tests an already built handler, ST_MAX_EXAMPLES / ST_MAX_TIME fuzz more.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$CI_ROOT"
ROOT=$CI_ROOT

MAX_EXAMPLES=${ST_MAX_EXAMPLES:-40}
# Seconds for the whole Schemathesis run; a hard `timeout` stops a hung run a bit later.
MAX_TIME=${ST_MAX_TIME:-240}

WORK=$(mktemp -d "${TMPDIR:-/tmp}/schemathesis.XXXXXX")
HANDLER_PID=
cleanup() {
  if [ -n "$HANDLER_PID" ]; then kill "$HANDLER_PID" 2>/dev/null || true; wait "$HANDLER_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

VENV=$(ci_venv schemathesis)

# The fuzzer writes from one address far faster than a person: the per-caller write limit is off.
ci_start_handler "$WORK" BLOG_WRITES_PER_MINUTE=0

# 2. Wait for the document, then validate it.
"$VENV/bin/python" "$ROOT/.ci/openapi_check.py" "$BASE/api/openapi.json" "$WORK/openapi.json"

# 3. Fuzz, from the temporary directory: Schemathesis keeps a cache in its working directory.
# One worker: with several, Schemathesis calls `ast.parse` from threads, and CPython 3.11's AST
# constructor can then fail with "SystemError: AST constructor recursion depth mismatch"
# (python/cpython#106905), which Schemathesis reports as a runtime error and a failed run.
cd "$WORK"
set +e
timeout --kill-after=30 $((MAX_TIME + 120)) "$VENV/bin/schemathesis" \
  --config-file "$ROOT/.ci/schemathesis.toml" run "$BASE/api/openapi.json" \
  --url "$BASE" \
  --phases examples,coverage,fuzzing,stateful \
  --max-examples "$MAX_EXAMPLES" \
  --max-time "$MAX_TIME" \
  --request-timeout 10 \
  --workers 1 \
  --seed "${ST_SEED:-20261122}" \
  --generation-database none \
  --report junit --report-dir "$WORK/report"
rc=$?
set -e
if [ $rc -ne 0 ]; then
  echo "schemathesis: failed (exit $rc); the handler's log:" >&2
  tail -n 50 "$WORK/handler.log" >&2 || true
  exit $rc
fi
if grep -qiE 'panicked|ERROR' "$WORK/handler.log"; then
  echo "schemathesis: the handler logged errors:" >&2
  grep -iE 'panicked|ERROR' "$WORK/handler.log" | head -n 20 >&2
  exit 1
fi
echo "schemathesis: OK"
