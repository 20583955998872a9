"""The type check can fail: templates with known mistakes must be reported, and only those.

Run by .ci/bicep-check.sh before the check itself (python .ci/test_arm_types.py); exits non-zero
with the difference when the checker misses a mistake or reports one that is not there.

Two parts: small templates with a misspelt property, an invalid enum value and an unknown API
version; then a copy of infra/ with one mistake at a time, one per class of mistake the checker
claims to catch (MUTATIONS), each of which must be reported where it was made, while the
unchanged copy reports nothing.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from arm_types import Checker  # noqa: E402
from pycep import BicepParser  # noqa: E402

PARSER = BicepParser()

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
        checker = Checker(PARSER)
        checker.check_file(path)
        return [f.split(": ", 1)[0].split(":", 1)[1] + ": " + f.split(": ", 1)[1] for f in checker.failures]


ROOT = Path(__file__).resolve().parent.parent

# (class of mistake, file under infra/, text there, the mistake, where the report must point,
# what it must say). The text must be in the file as it is: a template change that removes it
# fails this test until the mutation is updated, so no class silently goes unproven.
MUTATIONS: list[tuple[str, str, str, str, str, str]] = [
    ("a parameter default outside the enum it feeds (the runtime name)",
     "modules/functionapp.bicep", "param runtimeName string = 'custom'", "param runtimeName string = 'custum'",
     "site.properties.functionAppConfig.runtime.name", "'custum' is not one of"),
    ("a parameter default of the wrong type",
     "modules/functionapp.bicep", "param runtimeVersion string = '1.0'", "param runtimeVersion string = 1",
     "param runtimeVersion", "not of the parameter's type string"),
    ("a parameter default outside @allowed",
     "main.bicep", "param cosmosBackupMode string = 'Periodic'", "param cosmosBackupMode string = 'Periodical'",
     "param cosmosBackupMode", "@allowed"),
    ("an Azure RBAC role id that is no built-in role",
     "modules/storage.bicep", "b7e6dc6d-f1e8-4753-8033-0f276bb0955b", "b7e6dc6d-f1e8-4753-8033-0f276bb0955c",
     "hostRoles.properties.roleDefinitionId", "is not an Azure built-in role"),
    ("an Azure RBAC role id in a variable that is no built-in role",
     "modules/monitoring.bicep", "3913510d-42f4-4e42-8a64-420c390055eb", "3913510d-42f4-4e42-8a64-420c390055ec",
     "metricsPublisher.properties.roleDefinitionId", "is not an Azure built-in role"),
    ("a Cosmos DB data-plane role id that is no built-in role",
     "modules/cosmos.bicep", "'00000000-0000-0000-0000-000000000002'", "'00000000-0000-0000-0000-000000000003'",
     "dataContributors.properties.roleDefinitionId", "is not a Cosmos DB built-in data-plane role"),
    ("a misspelt module parameter",
     "resources.bicep", "    deploymentContainerUrl: storage.outputs.deploymentContainerUrl",
     "    deploymentContainerURL: storage.outputs.deploymentContainerUrl",
     "functionApp.params.deploymentContainerURL", "no parameter 'deploymentContainerURL' in functionapp.bicep"),
    ("a required module parameter not passed",
     "resources.bicep", "    cosmosEndpoint: cosmos.outputs.endpoint\n", "",
     "functionApp.params", "the required parameter 'cosmosEndpoint'"),
    ("a module parameter of the wrong type",
     "resources.bicep", "    privateNetworking: vnetEnabled\n  }\n}\n\nmodule cosmos",
     "    privateNetworking: 'true'\n  }\n}\n\nmodule cosmos",
     "storage.params.privateNetworking", "not of the parameter's type bool"),
    ("a misspelt module output reference",
     "resources.bicep", "cosmos.outputs.endpoint\n", "cosmos.outputs.endpont\n",
     "cosmos.outputs.endpont", "no output 'endpont' in cosmos.bicep"),
    ("a misspelt module output reference in an interpolation",
     "resources.bicep", "${functionApp.outputs.defaultHostName}", "${functionApp.outputs.defaultHostname}",
     "functionApp.outputs.defaultHostname", "(it declares 'defaultHostName')"),
    ("a string where the definition takes a boolean",
     "modules/storage.bicep", "allowSharedKeyAccess: false", "allowSharedKeyAccess: 'false'",
     "storage.properties.allowSharedKeyAccess", "expects bool"),
    ("a string where the definition takes an integer",
     "modules/cosmos.bicep", "failoverPriority: 0", "failoverPriority: '0'",
     "account.properties.locations[0].failoverPriority", "expects int"),
    ("a required property left out",
     "modules/storage.bicep", "    principalId: hostPrincipalId\n", "",
     "hostRoles.properties.principalId", "required by RoleAssignmentCreateParameters, missing"),
    ("a constant set to another value",
     "modules/cosmos.bicep", "databaseAccountOfferType: 'Standard'", "databaseAccountOfferType: 'Serverless'",
     "account.properties.databaseAccountOfferType", "the only value"),
    ("a subnet delegation Flex Consumption cannot integrate through",
     "modules/network.bicep", "serviceName: 'Microsoft.App/environments'", "serviceName: 'Microsoft.Web/serverFarms'",
     "vnet.properties.subnets[0].properties.delegations[0].properties.serviceName", "is not a subnet delegation"),
    ("a private endpoint group id the service does not have",
     "modules/network.bicep", "groupId: 'Sql'", "groupId: 'sql'",
     "privateEndpoints.properties.privateLinkServiceConnections[0].properties.groupIds[0]", "(spelt 'Sql')"),
    ("a metric alert on a metric the namespace does not have",
     "modules/alerts.bicep", "metricName: 'TotalRequests'", "metricName: 'TotalRequest'",
     "throttling.properties.criteria.allOf[0].metricName", "is not a metric of Microsoft.DocumentDB/databaseAccounts"),
    ("a workbook tile on a metric the namespace does not have",
     "modules/workbook.bicep", "Requests-TotalRequestUnits", "Requests-TotalRUs",
     "var notebook.", "'TotalRUs' is not a metric"),
    ("a site kind App Service does not know",
     "modules/functionapp.bicep", "kind: 'functionapp,linux'", "kind: 'functionapp,linux,flex'",
     "site.kind", "is not a site kind"),
    ("a plan SKU that does not exist",
     "modules/functionapp.bicep", "name: 'FC1'", "name: 'FC2'",
     "plan.sku.name", "is not a plan SKU"),
    ("a plan tier that is not its SKU's",
     "modules/functionapp.bicep", "tier: 'FlexConsumption'", "tier: 'Dynamic'",
     "plan.sku.tier", "is not the tier of SKU 'FC1'"),
]


def infra_failures(mutation: tuple[str, str, str, str, str, str] | None, cache: dict) -> list[str]:
    """The checker's reports on a copy of infra/, with one mistake made (or none). Files left
    unchanged reuse their first parse."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "infra"
        shutil.copytree(ROOT / "infra", copy)
        changed = None
        if mutation is not None:
            _, rel, original, mistake, _, _ = mutation
            target = copy / rel
            text = target.read_text()
            if original not in text:
                return [f"the mutation's text is no longer in infra/{rel}: {original!r}"]
            target.write_text(text.replace(original, mistake, 1))
            changed = target.resolve()
        checker = Checker(PARSER)
        for path in copy.rglob("*.bicep"):
            rel_path = path.relative_to(copy)
            if path.resolve() != changed and rel_path in cache:
                checker.docs[path.resolve()] = cache[rel_path]
        checker.check_project(sorted(copy.rglob("*.bicep")))
        if mutation is None:
            for path, doc in checker.docs.items():
                cache[path.relative_to(copy.resolve())] = doc
        prefix = str(copy.resolve()) + "/"
        return [f.replace(prefix, "") for f in checker.failures]


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
    cache: dict = {}
    clean = infra_failures(None, cache)
    if clean:
        problems.append(f"infra/ as it is was reported: {clean}")
    for mutation in MUTATIONS:
        what, rel, _, _, where, says = mutation
        found = infra_failures(mutation, cache)
        if not any(where in f and says in f for f in found):
            problems.append(f"{what} ({rel}) was not reported at {where!r} with {says!r}; reports: {found}")
    for problem in problems:
        print(f"test_arm_types FAILED: {problem}", file=sys.stderr)
    if problems:
        return 1
    print(
        "test_arm_types: the checker reports a misspelt property, an invalid enum value and an unknown API version, "
        f"nothing in a correct template or in infra/, and each of {len(MUTATIONS)} mistakes made in a copy of infra/: "
        + "; ".join(m[0] for m in MUTATIONS)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
