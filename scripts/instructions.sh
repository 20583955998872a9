#!/usr/bin/env bash
# Instructions per request of the two hottest reads, Q2 (`GET /api/posts/{id}`) and Q6
# (`GET /api/feed`), counted by valgrind's callgrind: a figure that does not move with the load of
# the machine, so two builds can be compared where requests per second cannot (docs/performance.md,
# "The read path against its earlier self").
#
# Usage: scripts/instructions.sh <handler binary> [port]
#
# Starts the handler under callgrind on a fresh embedded store in a scratch directory, writes one
# user and 20 posts, then for each read sends 200 requests to warm up and counts the next 1,000, on
# one keep-alive connection. Needs valgrind, curl and python3. Under valgrind the processor's SHA
# extensions are hidden, so the entity tag's SHA-256 is counted as computed in software.
set -euo pipefail
handler=$(realpath "${1:?usage: scripts/instructions.sh <handler binary> [port]}")
port=${2:-8299}
dir=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$dir"' EXIT
env -i PATH="$PATH" PORT="$port" BLOG_STORE=embedded BLOG_DB_PATH="$dir/blog.db" \
    BLOG_WRITES_PER_MINUTE=0 \
    valgrind --tool=callgrind --callgrind-out-file="$dir/cg.out" "$handler" >"$dir/log" 2>&1 &
pid=$!
for _ in $(seq 600); do curl -sf "http://127.0.0.1:$port/" >/dev/null && break; sleep 0.2; done
id_of() { python3 -c 'import sys, json; print(json.load(sys.stdin)["id"])'; }
post() { curl -sf -XPOST -H 'content-type: application/json' "http://127.0.0.1:$port$1" -d "$2"; }
user=$(post /api/users '{"username":"counted"}' | id_of)
content=$(python3 -c 'print("Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 6)')
for i in $(seq 0 19); do
    last=$(post /api/posts "{\"userId\":\"$user\",\"title\":\"Post number $i\",\"content\":\"$content\"}" | id_of)
done
sleep 5 # the change feed carries the posts to the feed
requests() {
    python3 - "$port" "$1" "$2" <<'PY'
import http.client, sys
port, path, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
c = http.client.HTTPConnection("127.0.0.1", port)
for _ in range(n):
    c.request("GET", path)
    r = c.getresponse()
    r.read()
    assert r.status == 200, (path, r.status)
PY
}
counted=1000
for read in "Q2 /api/posts/$last" "Q6 /api/feed?limit=20"; do
    set -- $read
    requests "$2" 200
    callgrind_control -z "$pid" >/dev/null 2>&1
    requests "$2" "$counted"
    callgrind_control -d "$pid" >/dev/null 2>&1
    sleep 1
    out=$(ls -t "$dir"/cg.out.* | head -1)
    total=$(awk '/^(summary|totals):/ {print $2; exit}' "$out")
    rm -f "$out"
    echo "$1 $((total / counted)) instructions per request"
done
