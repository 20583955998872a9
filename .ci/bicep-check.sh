#!/usr/bin/env bash
# Offline checks of the Azure infrastructure under infra/ (no Bicep compiler needed):
#   1. .ci/bicep_parse.py: every .bicep file parses with pycep (the grammar checkov uses);
#   2. .ci/infra_check.py: infra/main.parameters.json names only declared parameters and only
#      `${VAR}`s azd sets or docs/deploy.md documents; azure.yaml has the shape azd reads, the azd
#      version with `language: custom` and the hooks a first `azd up` needs; the postprovision
#      hook writes a valid local.settings.json from main.bicep's outputs; `location` takes only
#      Flex Consumption regions; the deployed app requires the documented write scope; the lag
#      tile and alert read only the trigger functions' logs; docs/deploy.md's links lead
#      somewhere; Cosmos DB backups are not geo-redundant in a region without a pair; the
#      templates match the code (.ci/infra_code_check.py against infra/expected.json, which the
#      code generates: containers, app settings, role assignments, value ranges, the runtime,
#      the outputs the hooks read) (.ci/test_infra_check.py first breaks each rule once); and
#      the hooks that call Azure Resource Manager (scripts/preprovision.sh,
#      scripts/predeploy.sh) behave against a stand-in for it (.ci/test_hooks.py); the
#      prepackage hook (scripts/package.sh) picks its
#      way to the x86_64 package on each kind of machine and checks the binary without `file`
#      (.ci/test_package.py, against stand-ins for the Rust tools);
#   3. .ci/arm_types.py: every resource's property names, enum values, primitive types, required
#      properties and constants match the Azure management SDK's model of its type at its API
#      version; role assignments name built-in roles and platform-constrained strings (subnet
#      delegation, private endpoint group ids, metric names, site kind, plan SKU) take values
#      Azure accepts (pinned lists in .ci/azure_constants.py, sources named there); module
#      parameters, module output references and parameter defaults are what Bicep accepts.
#      .ci/test_arm_types.py first shows it reports each class of mistake, made one at a time
#      in a copy of infra/;
#   4. checkov's Bicep checks all pass. A justified exception is allowed only as an
#      inline `#checkov:skip=<ID>:<reason>` comment inside the resource in the Bicep file.
#
# Run from the repository root: bash .ci/bicep-check.sh
# The tools (.ci/requirements/checkov.txt, arm-types.txt) live in venvs under target/ci-venvs/.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
ROOT=$CI_ROOT
cd "$ROOT"

if [ ! -d infra ]; then
  echo "bicep-check: no infra/ directory in $ROOT" >&2
  exit 1
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/bicep-check.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# Two venvs (.ci/requirements/checkov.txt, arm-types.txt), installed at once: downloading is
# most of this script's time.
ci_venv checkov >"$WORK/checkov.venv" &
checkov_pip=$!
ci_venv arm-types >"$WORK/types.venv" &
types_pip=$!
wait "$checkov_pip"
wait "$types_pip"
CHECKOV=$(cat "$WORK/checkov.venv")
TYPES=$(cat "$WORK/types.venv")
PY="$CHECKOV/bin/python"

echo "bicep-check: checkov $("$PY" -c 'from checkov.version import version; print(version)'), pycep-parser $("$PY" -c 'import importlib.metadata as m; print(m.version("pycep-parser"))')"

# 1. Parse every .bicep file.
"$TYPES/bin/python" .ci/bicep_parse.py

# 2. The parameters file, azure.yaml, the azd tags, the hooks, the region guard, the write
#    scope, the lag queries and the deploy page's links; first proof that each rule can fail.
"$TYPES/bin/python" .ci/test_infra_check.py
"$TYPES/bin/python" .ci/infra_check.py
"$TYPES/bin/python" .ci/test_hooks.py
"$TYPES/bin/python" .ci/test_package.py

# 3. Every resource's properties and enum values against Azure's published definitions of its
#    type and API version; first proof that the check can fail.
"$TYPES/bin/python" .ci/test_arm_types.py
"$TYPES/bin/python" .ci/arm_types.py

# 4. checkov. Its JSON report is read to fail on failed checks, parsing errors, or a
#    scan that found nothing; the readable report is printed when something is wrong.
set +e
"$CHECKOV/bin/checkov" -d infra --framework bicep --compact --skip-download -o json >"$WORK/checkov.json" 2>"$WORK/checkov.err"
rc=$?
set -e

if ! "$CHECKOV/bin/python" .ci/checkov_report.py "$WORK/checkov.json" "$rc"
then
  echo "bicep-check: checkov failed; readable report:" >&2
  cat "$WORK/checkov.err" >&2 || true
  "$CHECKOV/bin/checkov" -d infra --framework bicep --quiet --compact --skip-download >&2 || true
  exit 1
fi

echo "bicep-check: OK"
