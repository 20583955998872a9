"""The type check can fail: templates with known mistakes must be reported, and only those.

Run by .ci/bicep-check.sh before the check itself (python .ci/test_arm_types.py); exits non-zero
with the difference when the checker misses a mistake or reports one that is not there.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from arm_types import Checker  # noqa: E402

GOOD = """
param location string = resourceGroup().location

@allowed([
  'Hot'
  'Cool'
])
param tier string = 'Hot'

var tls = 'TLS1_2'

resource storage 'Microsoft.Storage/storageAccounts@2024-01-01' = {
  name: 'stexample'
  location: location
  kind: 'StorageV2'
  sku: {
    name: 'Standard_LRS'
  }
  properties: {
    accessTier: tier
    minimumTlsVersion: tls
    allowSharedKeyAccess: false
  }
}

resource site 'Microsoft.Web/sites@2024-04-01' = {
  name: 'func-example'
  location: location
  kind: 'functionapp,linux'
  properties: {
    httpsOnly: true
    siteConfig: {
      minTlsVersion: '1.2'
      appSettings: [
        {
          name: 'A'
          value: 'b'
        }
      ]
    }
  }
}
"""

# One misspelt property (httpsOnyl) and one value outside its enum (TLS1_4), each hidden one
# step away from the resource body: in a conditional and in a variable.
BAD = (
    GOOD.replace("var tls = 'TLS1_2'", "var tls = true ? 'TLS1_2' : 'TLS1_4'")
    .replace("    httpsOnly: true\n", "    httpsOnyl: true\n")
)

UNKNOWN_VERSION = GOOD.replace("Microsoft.Web/sites@2024-04-01", "Microsoft.Web/sites@2019-01-01")


def failures_of(text: str) -> list[str]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.bicep"
        path.write_text(text)
        checker = Checker()
        checker.check_file(path)
        return [f.split(": ", 1)[0].split(":", 1)[1] + ": " + f.split(": ", 1)[1] for f in checker.failures]


def main() -> int:
    problems = []
    good = failures_of(GOOD)
    if good:
        problems.append(f"a correct template was reported: {good}")
    bad = failures_of(BAD)
    expected = [
        "storage.properties.minimumTlsVersion: 'TLS1_4' is not one of ['TLS1_0', 'TLS1_1', 'TLS1_2', 'TLS1_3']",
        "site.properties.httpsOnyl: no property 'httpsOnyl' in Site",
    ]
    if sorted(bad) != sorted(expected):
        problems.append(f"the misspelt property and the invalid enum value: expected {expected}, got {bad}")
    unknown = failures_of(UNKNOWN_VERSION)
    if len(unknown) != 1 or "Microsoft.Web/sites@2019-01-01" not in unknown[0]:
        problems.append(f"an API version without a published definition: got {unknown}")
    for problem in problems:
        print(f"test_arm_types FAILED: {problem}", file=sys.stderr)
    if problems:
        return 1
    print("test_arm_types: the checker reports a misspelt property, an invalid enum value and an unknown API version, and nothing in a correct template")
    return 0


if __name__ == "__main__":
    sys.exit(main())
