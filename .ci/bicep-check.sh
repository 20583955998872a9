#!/usr/bin/env bash
# Offline checks of the Azure infrastructure under infra/ (no Bicep compiler needed):
#   1. every .bicep file parses with pycep (the Bicep grammar checkov itself uses);
#   2. .ci/infra_check.py: infra/main.parameters.json names only declared parameters and only
#      `${VAR}`s azd sets or docs/deploy.md documents; azure.yaml has the shape azd reads; the
#      postprovision hook writes a valid local.settings.json from main.bicep's outputs;
#   3. .ci/arm_types.py: every resource's property names and enum values match the Azure
#      management SDK's model of its type at its API version (.ci/test_arm_types.py first shows
#      it reports a misspelt property and an invalid enum value);
#   4. checkov's Bicep checks all pass. A justified exception is allowed only as an
#      inline `#checkov:skip=<ID>:<reason>` comment inside the resource in the Bicep file.
#
# Run from the repository root: bash .ci/bicep-check.sh
# The tools are installed with pip into a throw-away venv (a mktemp dir, removed on
# exit). Set BICEP_CHECK_VENV=<dir> to keep and reuse venvs instead (<dir> and <dir>.types).
set -euo pipefail

CHECKOV_VERSION=3.3.30
PYCEP_VERSION=0.5.1
LARK_VERSION=1.3.1
PYYAML_VERSION=6.0.2
# The Azure management SDK packages whose models define each resource type at the API versions
# infra/ uses (.ci/arm_types.py maps type@version to a model; a version none of these carries
# fails the check). Single-API packages (cosmosdb, loganalytics, network, privatedns) are pinned
# at the release whose one API version the templates use.
AZURE_SDKS=(
  azure-mgmt-resource==23.2.0        # resourceGroups 2022-09-01
  azure-mgmt-msi==7.0.0              # userAssignedIdentities 2023-01-31
  azure-mgmt-authorization==4.0.0    # roleAssignments 2022-04-01
  azure-mgmt-web==8.0.0              # serverfarms, sites 2024-04-01
  azure-mgmt-storage==22.1.0         # storageAccounts 2024-01-01
  azure-mgmt-cosmosdb==9.7.0         # databaseAccounts 2024-11-15
  azure-mgmt-loganalytics==13.1.1    # workspaces 2025-07-01
  azure-mgmt-applicationinsights==4.1.0  # components 2020-02-02, workbooks 2023-06-01
  azure-mgmt-monitor==6.0.2          # actionGroups 2023-01-01, metricAlerts 2018-03-01, scheduledQueryRules 2022-08-01-preview
  azure-mgmt-network==28.1.0         # virtualNetworks, privateEndpoints 2024-05-01
  azure-mgmt-privatedns==1.2.0       # privateDnsZones 2024-06-01
)

PYTHON=${PYTHON:-python3}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

if [ ! -d infra ]; then
  echo "bicep-check: no infra/ directory in $ROOT" >&2
  exit 1
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/bicep-check.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

VENV=${BICEP_CHECK_VENV:-$WORK/venv}
# A second venv for the SDK models (and pycep, PyYAML): both installs run at once, since
# downloading is most of this script's time.
TYPES_VENV=$VENV.types

make_venv() {
  "$PYTHON" -m venv "$1"
}

for venv in "$VENV" "$TYPES_VENV"; do
  if [ ! -x "$venv/bin/python" ]; then
    if ! make_venv "$venv" 2>"$WORK/venv.err"; then
      # Debian's system Python ships venv/ensurepip in a separate package.
      if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "bicep-check: python venv unavailable; installing python3-venv" >&2
        apt-get install -y -q python3-venv >/dev/null || { apt-get update -q >/dev/null && apt-get install -y -q python3-venv >/dev/null; }
        rm -rf "$venv"
        make_venv "$venv"
      else
        cat "$WORK/venv.err" >&2
        exit 1
      fi
    fi
  fi
done

PY="$VENV/bin/python"
TPY="$TYPES_VENV/bin/python"
PIP_FLAGS=(--quiet --disable-pip-version-check)
"$PY" -m pip install "${PIP_FLAGS[@]}" \
  "checkov==$CHECKOV_VERSION" "pycep-parser==$PYCEP_VERSION" "lark==$LARK_VERSION" >"$WORK/pip.log" 2>&1 &
checkov_pip=$!
"$TPY" -m pip install "${PIP_FLAGS[@]}" \
  "pycep-parser==$PYCEP_VERSION" "lark==$LARK_VERSION" "PyYAML==$PYYAML_VERSION" "${AZURE_SDKS[@]}" >"$WORK/pip-types.log" 2>&1 &
types_pip=$!
for job in "$checkov_pip" "$types_pip"; do
  if ! wait "$job"; then
    cat "$WORK/pip.log" "$WORK/pip-types.log" >&2
    echo "bicep-check: pip install failed" >&2
    exit 1
  fi
done

echo "bicep-check: checkov $("$PY" -c 'from checkov.version import version; print(version)'), pycep-parser $("$PY" -c 'import importlib.metadata as m; print(m.version("pycep-parser"))')"

# 1. Parse every .bicep file.
"$PY" - <<'PY'
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
PY

# 2. The parameters file, azure.yaml, the azd tags and the postprovision hook.
"$TPY" .ci/infra_check.py

# 3. Every resource's properties and enum values against Azure's published definitions of its
#    type and API version; first proof that the check can fail.
"$TPY" .ci/test_arm_types.py
"$TPY" .ci/arm_types.py

# 4. checkov. Its JSON report is read to fail on failed checks, parsing errors, or a
#    scan that found nothing; the readable report is printed when something is wrong.
set +e
"$VENV/bin/checkov" -d infra --framework bicep --compact --skip-download -o json >"$WORK/checkov.json" 2>"$WORK/checkov.err"
rc=$?
set -e

if ! "$PY" - "$WORK/checkov.json" "$rc" <<'PY'
import json
import sys

path, rc = sys.argv[1], int(sys.argv[2])
try:
    data = json.load(open(path))
except ValueError:
    print("bicep-check: checkov produced no JSON report", file=sys.stderr)
    sys.exit(1)
reports = data if isinstance(data, list) else [data]
bad = rc != 0
total = {"passed": 0, "failed": 0, "skipped": 0, "parsing_errors": 0, "resource_count": 0}
for report in reports:
    summary = report.get("summary", {})
    for key in total:
        total[key] += int(summary.get(key, 0) or 0)
    results = report.get("results", {})
    for check in results.get("failed_checks", []):
        print(f"FAILED {check.get('check_id')} {check.get('resource')} "
              f"{check.get('file_path')}:{check.get('file_line_range')} {check.get('check_name')}")
    for check in results.get("skipped_checks", []):
        reason = (check.get("check_result") or {}).get("suppress_comment", "")
        print(f"skipped {check.get('check_id')} {check.get('resource')}: {reason}")
print("checkov: " + ", ".join(f"{k}={v}" for k, v in total.items()) + f", exit={rc}")
if total["failed"] or total["parsing_errors"] or total["resource_count"] == 0:
    bad = True
sys.exit(1 if bad else 0)
PY
then
  echo "bicep-check: checkov failed; readable report:" >&2
  cat "$WORK/checkov.err" >&2 || true
  "$VENV/bin/checkov" -d infra --framework bicep --quiet --compact --skip-download >&2 || true
  exit 1
fi

echo "bicep-check: OK"
