"""The README's front door, run as the README writes it.

Reads the first shell block of README.md (the commands a newcomer types first) and runs each
command in it from the repository root:

- a command that serves (`cargo run ...`) is started, must answer `GET /api/feed` with 200 and
  serve the web page at `/` to a browser's `Accept`, at the address the block's comments name,
  and is then stopped;
- any other command must exit 0.

Usage: python3 .ci/front_door.py serve   # only the serving commands
       python3 .ci/front_door.py rest    # only the others (e.g. `cargo test`)
       python3 .ci/front_door.py         # all of them, in the README's order

Nothing here names the commands: change the README and this runs the new ones. The Markdown is
read by `mdshell.py`, as `.ci/docs_check.py` reads it.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from mdshell import commands, first_shell_block

ROOT = Path(__file__).resolve().parent.parent
# A first build of the release binary on a fresh 2-core machine takes minutes.
SERVE_START_LIMIT_S = 1200
BROWSER_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"


def serves(command: str) -> bool:
    return re.match(r"cargo run\b", command) is not None


def origin_of(comment: str) -> str:
    match = re.search(r"(https?://[\w.\-]+:\d+)", comment)
    if not match:
        raise SystemExit(f"the README names no address for the serving command ({comment!r})")
    return match.group(1)


def get(url: str, accept: str) -> tuple[int, str, str]:
    request = urllib.request.Request(url, headers={"Accept": accept})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.headers.get("Content-Type", ""), response.read(65536).decode("utf-8", "replace")
    except urllib.error.HTTPError as error:
        return error.code, error.headers.get("Content-Type", ""), ""


def check_serving(command: str, comment: str) -> None:
    origin = origin_of(comment)
    print(f"front door: {command}  (expecting {origin}/api/feed and {origin}/)", flush=True)
    process = subprocess.Popen(command, shell=True, cwd=ROOT, start_new_session=True)
    try:
        deadline = time.monotonic() + SERVE_START_LIMIT_S
        while True:
            if process.poll() is not None:
                raise SystemExit(f"front door: `{command}` exited with {process.returncode} before serving")
            try:
                status, content_type, _ = get(f"{origin}/api/feed", "application/json")
                if status == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit(f"front door: `{command}` did not answer {origin}/api/feed in time")
            time.sleep(1)
        if "json" not in content_type:
            raise SystemExit(f"front door: /api/feed answered {content_type!r}, not JSON")
        status, content_type, body = get(f"{origin}/", BROWSER_ACCEPT)
        if status != 200 or "text/html" not in content_type or "<html" not in body.lower():
            raise SystemExit(f"front door: / answered {status} {content_type!r} to a browser, not the page")
        print(f"front door: {origin}/api/feed 200, {origin}/ serves the page", flush=True)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGINT)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def main() -> None:
    which = sys.argv[1] if len(sys.argv) > 1 else "all"
    if which not in ("all", "serve", "rest"):
        raise SystemExit(__doc__)
    found = commands(first_shell_block((ROOT / "README.md").read_text()))
    if not any(serves(c) for c, _ in found):
        raise SystemExit("front door: the README's first block has no command that serves")
    for command, comment in found:
        if serves(command) and which in ("all", "serve"):
            check_serving(command, comment)
        elif not serves(command) and which in ("all", "rest"):
            print(f"front door: {command}", flush=True)
            code = subprocess.call(command, shell=True, cwd=ROOT)
            if code != 0:
                raise SystemExit(f"front door: `{command}` exited with {code}")


if __name__ == "__main__":
    main()
