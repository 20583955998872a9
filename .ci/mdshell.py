"""The shell blocks of the Markdown pages, as the docs checks read them.

One parser for `.ci/front_door.py` (the README's first block) and `.ci/docs_check.py` (every
walk-through of the README and `docs/`), so that both read a page the same way.

A shell block is a fenced block marked sh, bash, shell or console, its fences at the start of a
line. The last non-blank line before its opening fence may be a mark for the docs check:

    <!-- docs-check: skip (needs an Azure subscription) -->   not run; the reason is required
    <!-- docs-check: service stopped -->                      run with the service stopped

A command's expected HTTP status is written at the end of its (last) line as `# → 201`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SHELL_LANGS = ("sh", "bash", "shell", "console")
FENCE = re.compile(r"^```\s*([\w-]*)\s*$")
MARK = re.compile(r"^<!--\s*docs-check:\s*(.*?)\s*-->\s*$")
SKIP = re.compile(r"^skip\s*\((.+)\)$")
STATUS = re.compile(r"#.*?→\s*([1-5]\d\d)\b")


@dataclass
class Block:
    """One shell block: its lines, where it starts (1-based, the opening fence) and its mark."""

    line: int
    lines: list[str]
    mark: str | None
    # The text just before the block (up to its mark), for the visible note a skip needs.
    lead: str

    @property
    def skip_reason(self) -> str | None:
        if self.mark is None:
            return None
        match = SKIP.match(self.mark)
        return match.group(1) if match else None

    @property
    def service_stopped(self) -> bool:
        return self.mark == "service stopped"


def shell_blocks(markdown: str) -> list[Block]:
    """Every shell block of a page, in order."""
    lines = markdown.splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        lang = opening.group(1)
        end = i + 1
        while end < len(lines) and not lines[end].startswith("```"):
            end += 1
        if lang in SHELL_LANGS:
            before = [n for n in range(i) if lines[n].strip()]
            mark = None
            lead_end = i
            if before and (m := MARK.match(lines[before[-1]].strip())):
                mark = m.group(1)
                lead_end = before[-1]
            lead = "\n".join(lines[max(0, lead_end - 4) : lead_end])
            blocks.append(Block(line=i + 1, lines=lines[i + 1 : end], mark=mark, lead=lead))
        i = end + 1
    return blocks


def first_shell_block(markdown: str) -> list[str]:
    """The lines of a page's first shell block."""
    blocks = shell_blocks(markdown)
    if not blocks:
        raise SystemExit("README.md has no shell block")
    return blocks[0].lines


def commands(block: list[str]) -> list[tuple[str, str]]:
    """(command, its comment) per line that has a command; comment-only lines extend the
    previous command's comment."""
    out: list[tuple[str, str]] = []
    for line in block:
        code, _, comment = line.partition("#")
        code = code.strip().removeprefix("$ ").strip()
        if code:
            out.append((code, comment.strip()))
        elif out and comment:
            out[-1] = (out[-1][0], out[-1][1] + " " + comment.strip())
    return out


def expected_status(code_lines: list[str]) -> str | None:
    """The status a command's text states (`# → 201` on one of its lines that holds code)."""
    for line in code_lines:
        if line.lstrip().startswith("#"):
            continue
        if match := STATUS.search(line):
            return match.group(1)
    return None
