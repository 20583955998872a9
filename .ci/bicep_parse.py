"""Every .bicep file under infra/ parses with pycep (the Bicep grammar checkov itself uses)."""

import sys
from pathlib import Path

from pycep import BicepParser

parser = BicepParser()
files = sorted(Path("infra").rglob("*.bicep"))
if not files:
    sys.exit("bicep-check: no .bicep files under infra/")

failed = 0
for path in files:
    try:
        doc = parser.parse(file_path=path)
    except Exception as exc:  # lark raises several exception types
        failed += 1
        print(f"PARSE ERROR {path}: {type(exc).__name__}: {exc}", file=sys.stderr)
        continue
    counts = {key: len(doc.get(key) or {}) for key in ("parameters", "resources", "modules", "outputs")}
    print(f"parsed {path}: " + ", ".join(f"{v} {k}" for k, v in counts.items()))
if failed:
    sys.exit(f"bicep-check: {failed} of {len(files)} Bicep files failed to parse")
if not Path("infra/main.bicep").is_file():
    sys.exit("bicep-check: infra/main.bicep is missing")
