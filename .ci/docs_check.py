"""The docs, run as a reader types them.

Reads the shell blocks of README.md and of every page under docs/ (with `mdshell.py`, as the
front door reads the README) and runs each page's blocks in order, in one bash shell per page,
against a `handler` it starts on 127.0.0.1 at a free port with a fresh embedded store in a
temporary working directory. It fails when a command exits non-zero or when an HTTP answer
contradicts the status the text states next to the command (`# → 201` at the end of its line).

- A command that calls curl must state the status it expects.
- The commands run as written, except that `localhost:7071` becomes the started handler's
  address and `./target/release/handler` the handler under test.
- A block marked `<!-- docs-check: skip (reason) -->` is not run; the text just before the mark
  must tell the reader so ("not run in CI"). A block marked
  `<!-- docs-check: service stopped -->` runs with the handler stopped, which is started again
  after it on the same data.
- The README's first block is the front door's (`.ci/front_door.py` runs it) and is left out.

Usage: python3 .ci/docs_check.py [PAGE.md ...]     (default: README.md, then docs/*.md)
Environment: HANDLER=<path> tests that binary (e.g. dist/app/handler); otherwise
`cargo build --release --bin handler` builds target/release/handler.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

from mdshell import Block, expected_status, shell_blocks

ROOT = Path(__file__).resolve().parent.parent
# Every page's walk-through together takes seconds; this only stops a hung command.
PAGE_TIME_LIMIT_S = 300
# What the commands and the handler inherit; nothing else (no BLOG_*, COSMOS*, PORT, or a token
# left in the caller's shell).
KEPT_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "USER", "TMPDIR", "TERM")

PRELUDE = r"""
set -o pipefail
__fail() { echo "docs-check: $*" >&2; exit 1; }
__start() {
  env -i "${__ENV[@]}" PORT="$__PORT" BLOG_BIND=127.0.0.1 BLOG_STORE=embedded RUST_LOG=warn \
    "$__HANDLER" >>"$__LOG" 2>&1 &
  __PID=$!
  for _ in $(seq 1 300); do
    command curl -s -o /dev/null "http://127.0.0.1:$__PORT/api/feed" && return 0
    kill -0 "$__PID" 2>/dev/null || __fail "the handler exited at start; its log: $(tail -n 20 "$__LOG")"
    sleep 0.2
  done
  __fail "the handler did not answer in 60 s"
}
__stop() { kill -INT "$__PID"; wait "$__PID" || true; }
trap '[ -n "${__PID:-}" ] && kill "$__PID" 2>/dev/null' EXIT
# Every curl reports its status on a side channel; the check reads the last one of a command.
curl() { command curl "$@" -w '%{stderr}@@status %{http_code}\n' 2>>"$__ST"; }
__check() {  # rc, expected status or "", where
  grep -v '^@@status ' "$__ST" >&2 || true
  [ "$1" -eq 0 ] || __fail "$3: exited with $1"
  if [ -n "$2" ]; then
    local got
    got=$(sed -n 's/^@@status //p' "$__ST" | tail -n 1)
    [ "$got" = "$2" ] || __fail "$3: answered ${got:-nothing}; the text says $2"
  fi
  : >"$__ST"
}
"""


def chunks(lines: list[str]) -> list[tuple[int, list[str]]]:
    """The block's commands: (offset of the first line, lines), split where bash sees a
    complete command (so continuation lines and multi-line constructs stay together)."""
    out: list[tuple[int, list[str]]] = []
    pending: list[str] = []
    start = 0
    for n, line in enumerate(lines):
        if not pending:
            start = n
        pending.append(line)
        text = "\n".join(pending)
        if line.rstrip().endswith("\\"):
            continue
        if subprocess.run(["bash", "-n"], input=text, text=True, capture_output=True).returncode == 0:
            out.append((start, pending))
            pending = []
    if pending:
        out.append((start, pending))
    return out


def has_code(lines: list[str]) -> bool:
    return any(line.strip() and not line.lstrip().startswith("#") for line in lines)


def script_for(page: str, blocks: list[Block], port: int, handler: Path) -> str:
    body: list[str] = []
    for block in blocks:
        if block.service_stopped:
            body.append("__stop")
        for offset, lines in chunks(block.lines):
            where = f"{page}:{block.line + 1 + offset}"
            if not has_code(lines):
                continue
            code = "\n".join(lines)
            status = expected_status(lines)
            if status is None and re.search(r"\bcurl\b", code):
                raise SystemExit(f"docs-check: {where}: a curl without the status it answers (`# → 200`)")
            code = code.replace("localhost:7071", f"127.0.0.1:{port}")
            code = code.replace("./target/release/handler", shlex.quote(str(handler)))
            body.append(f"{code}\n__check $? {shlex.quote(status or '')} {shlex.quote(where)}")
        if block.service_stopped:
            body.append("__start")
    return PRELUDE + "__start\n" + "\n".join(body) + "\n"


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def handler_path() -> Path:
    if os.environ.get("HANDLER"):
        return Path(os.environ["HANDLER"]).resolve()
    subprocess.run(["cargo", "build", "--release", "--bin", "handler"], cwd=ROOT, check=True)
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    return (target / "release" / "handler").resolve()


def runnable(page: Path) -> list[Block]:
    name = str(page.relative_to(ROOT))
    blocks = shell_blocks(page.read_text())
    if name == "README.md":
        blocks = blocks[1:]  # the front door's
    out = []
    for block in blocks:
        where = f"{name}:{block.line}"
        if block.mark is not None and block.skip_reason is None and not block.service_stopped:
            raise SystemExit(f"docs-check: {where}: unknown mark {block.mark!r}")
        if block.skip_reason is not None:
            if "not run in CI" not in " ".join(block.lead.split()):
                raise SystemExit(f"docs-check: {where}: skipped ({block.skip_reason}) without telling the reader (\"not run in CI\")")
            print(f"docs-check: {where}: skipped ({block.skip_reason})", flush=True)
            continue
        out.append(block)
    return out


def check_page(page: Path, handler: Path) -> None:
    name = str(page.relative_to(ROOT))
    blocks = runnable(page)
    if not blocks:
        return
    with tempfile.TemporaryDirectory(prefix="docs-check.") as work:
        port = free_port()
        script = script_for(name, blocks, port, handler)
        env = {k: os.environ[k] for k in KEPT_ENV if k in os.environ}
        env_args = " ".join(shlex.quote(f"{k}={v}") for k, v in env.items())
        header = (
            f"__ENV=({env_args})\n__PORT={port}\n__HANDLER={shlex.quote(str(handler))}\n"
            f"__LOG={shlex.quote(work + '/handler.log')}\n__ST={shlex.quote(work + '/status')}\n: >\"$__ST\"\n"
        )
        (Path(work) / "check.sh").write_text(header + script)
        run_dir = Path(work) / "reader"
        run_dir.mkdir()
        print(f"docs-check: {name}: {len(blocks)} blocks", flush=True)
        try:
            result = subprocess.run(
                ["bash", "--noprofile", "--norc", str(Path(work) / "check.sh")],
                cwd=run_dir, env=env, timeout=PAGE_TIME_LIMIT_S,
                stdout=subprocess.DEVNULL if os.environ.get("DOCS_CHECK_QUIET") else None,
            )
        except subprocess.TimeoutExpired:
            raise SystemExit(f"docs-check: {name}: did not finish in {PAGE_TIME_LIMIT_S} s")
        if result.returncode != 0:
            log = (Path(work) / "handler.log").read_text(errors="replace").splitlines()[-20:]
            print("\n".join(["docs-check: the handler's log:"] + log), file=sys.stderr)
            raise SystemExit(f"docs-check: {name}: failed")
        print(f"docs-check: {name}: OK", flush=True)


def main() -> None:
    pages = [Path(p).resolve() for p in sys.argv[1:]] or [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    handler = handler_path()
    if not handler.is_file():
        raise SystemExit(f"docs-check: no handler at {handler}")
    for page in pages:
        check_page(page, handler)
    print("docs-check: every walk-through ran as written")


if __name__ == "__main__":
    main()
