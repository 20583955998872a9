"""The deployment-definition check can fail: each rule of .ci/infra_check.py that guards a first
`azd up` is broken once, in a copy of the files it reads, and must be reported; the files as they
are must report nothing.

Run by .ci/bicep-check.sh before the check itself (python .ci/test_infra_check.py).
"""

from __future__ import annotations

import contextlib
import copy
import io
import re
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import infra_check  # noqa: E402
from pycep import BicepParser  # noqa: E402



class CachingParser:
    """pycep's parser, remembering each text it parsed: a mistake changes one file, so every
    other file of its copy parses as it did before. Each answer is a fresh copy, so a check
    cannot change what the next one reads."""

    def __init__(self) -> None:
        self.parser = BicepParser()
        self.parsed: dict[str, dict] = {}

    def parse(self, file_path: Path) -> dict:
        text = Path(file_path).read_text()
        if text not in self.parsed:
            self.parsed[text] = self.parser.parse(file_path=Path(file_path))
        return copy.deepcopy(self.parsed[text])


PARSER = CachingParser()

ROOT = Path(__file__).resolve().parent.parent
COPIED = ["infra", "docs", "scripts", "functions", "azure.yaml", "README.md"]

# (what goes wrong, file, text there (or `re:` and a pattern), the mistake, what the report must
# say). The text must be in the file as it is, so no rule goes unproven when the files change.
MUTATIONS: list[tuple[str, str, str, str, str]] = [
    ("azure.yaml accepts an azd without language custom",
     "azure.yaml", 'azd: ">= 1.20.0"', 'azd: ">= 1.19.0"', "requiredVersions.azd"),
    ("the docs do not name azd's alpha switch",
     "docs/deploy.md", "azd config set alpha.language.custom on", "azd config set alpha.language.custom", "alpha.language.custom on"),
    ("the docs give the environment switch as `on`",
     "docs/deploy.md", "AZD_ALPHA_ENABLE_LANGUAGE_CUSTOM=true", "AZD_ALPHA_ENABLE_LANGUAGE_CUSTOM=on", "AZD_ALPHA_ENABLE_LANGUAGE_CUSTOM=true"),
    ("nothing registers Microsoft.App for private networking",
     "azure.yaml", "run: bash scripts/preprovision.sh", "run: bash scripts/postprovision.sh", "preprovision must run scripts/preprovision.sh"),
    ("nothing waits for the app's storage role",
     "azure.yaml", "run: bash scripts/predeploy.sh", "run: bash scripts/package.sh", "predeploy must run scripts/predeploy.sh"),
    ("location takes any region",
     "infra/main.bicep", "re:@allowed\\(\\[\\n  'australiaeast'[^\\]]*\\]\\)\\n", "", "needs an @allowed list"),
    ("location allows a region without Flex Consumption",
     "infra/main.bicep", "  'australiaeast'\n", "  'australiaeast'\n  'westindia'\n", "'westindia', which is not a Flex Consumption region"),
    ("azd is not told location is a region",
     "infra/main.bicep", "    type: 'location'", "    type: 'string'", "metadata({azd: {type: 'location'}})"),
    ("the deployed app sets no write scope",
     "infra/modules/functionapp.bicep", "    name: 'BLOG_AUTH_WRITE_SCOPE'", "    name: 'BLOG_AUTH_SCOPE'", "must set BLOG_AUTH_WRITE_SCOPE"),
    ("the write scope is one the documented registration does not define",
     "infra/modules/functionapp.bicep", "param authWriteScope string = 'Blog.Write'", "param authWriteScope string = 'Posts.Write'", "'Posts.Write', which the app registration"),
    ("the documented registration defines another scope",
     "docs/identity.md", '\\"value\\":\\"Blog.Write\\"', '\\"value\\":\\"Blog.Writer\\"', "does not define"),
    ("the lag alert reads the handler's stdout too",
     "infra/modules/alerts.bicep", 'traces | where tostring(customDimensions.Category) in ("Function.PostsChangeFeed.User", "Function.UsersChangeFeed.User", "Function.PostsTimeline.User", "Function.UsersTimeline.User") | ', "traces | ", "reads every category"),
    ("the lag tile misses a trigger",
     "infra/modules/workbook.bicep", '"Function.PostsChangeFeed.User", "Function.UsersChangeFeed.User"', '"Function.PostsChangeFeed.User"', "must read only the categories"),
    ("the lag tile matches terms with `has`",
     "infra/modules/workbook.bicep", 'message contains "lag_ms="', 'message has "lag_ms="', "`contains"),
    ("backups pinned to Geo in every region",
     "infra/modules/cosmos.bicep", "backupStorageRedundancy: contains(nonPairedRegions, toLower(location)) ? 'Local' : 'Geo'", "backupStorageRedundancy: 'Geo'", "Geo in 'italynorth'"),
    ("an allowed region without a pair missing from the backup map",
     "infra/modules/cosmos.bicep", "  'spaincentral'\n]", "]", "Geo in 'spaincentral'"),
    ("the backup map's two values swapped",
     "infra/modules/cosmos.bicep", "? 'Local' : 'Geo'", "? 'Geo' : 'Local'", "Geo in 'italynorth'"),
    # The templates against the code (.ci/infra_code_check.py, infra/expected.json).
    ("a full-text index path with no policy path",
     "infra/modules/cosmos.bicep", "        {\n          path: '/tags'\n        }\n      ]\n    }\n    indexingPolicy", "      ]\n    }\n    indexingPolicy", "full-text index '/tags' has no path in the full-text policy"),
    ("a misspelt full-text path",
     "infra/modules/cosmos.bicep", "path: '/title'", "path: '/titel'", "full-text paths ['/titel'"),
    ("the full-text capability dropped",
     "infra/modules/cosmos.bicep", "      {\n        name: 'EnableNoSQLFullTextSearch'\n      }\n    ] : [", "    ] : [", "lack EnableNoSQLFullTextSearch"),
    ("the full-text language not the code's",
     "infra/modules/cosmos.bicep", "defaultLanguage: 'en-US'\n      fullTextPaths: [\n        {", "defaultLanguage: 'de-DE'\n      fullTextPaths: [\n        {", "full-text language 'de-DE'"),
    ("a partition key differing from the code's",
     "infra/modules/cosmos.bicep", "partitionKey: '/postId'", "partitionKey: '/postID'", "partition key ['/postID']"),
    ("a container name differing from the code's",
     "infra/modules/cosmos.bicep", "name: 'timelines'", "name: 'timeline'", "the code uses the container 'timelines', which is not deployed"),
    ("the leases not partitioned on /id",
     "infra/modules/cosmos.bicep", "    fullTextPolicy: noFullText\n    partitionKey: '/id'", "    fullTextPolicy: noFullText\n    partitionKey: '/leaseId'", "container 'leases': partition key ['/leaseId']"),
    ("an index path the queries read dropped",
     "infra/modules/cosmos.bicep", "        {\n          path: '/refUserId/?'\n        }\n        {\n          path: '/postId/?'\n        }", "        {\n          path: '/postId/?'\n        }", "container 'users': indexed paths"),
    ("defaultTtl 0",
     "infra/modules/cosmos.bicep", "defaultTtl: -1", "defaultTtl: 0", "defaultTtl 0, which Cosmos DB refuses"),
    ("the data role scoped to one container",
     "infra/modules/cosmos.bicep", "    scope: account.id\n  }\n}]", "    scope: '${account.id}/dbs/${databaseName}/colls/posts'\n  }\n}]", "(not the account)"),
    ("a reader data role instead of contributor",
     "infra/modules/cosmos.bicep", "var dataContributorRoleDefinitionId = '00000000-0000-0000-0000-000000000002'", "var dataContributorRoleDefinitionId = '00000000-0000-0000-0000-000000000001'", "assigns Cosmos DB Built-in Data Reader to the app"),
    ("the monitoring role swapped",
     "infra/modules/monitoring.bicep", "var monitoringMetricsPublisherRoleId = '3913510d-42f4-4e42-8a64-420c390055eb'", "var monitoringMetricsPublisherRoleId = '43d0d8ad-25c7-4714-9337-8ba259a9fe05'", "the app needs Monitoring Metrics Publisher"),
    ("the blob role dropped",
     "infra/modules/storage.bicep", "  storageBlobDataOwnerRoleId\n  storageQueueDataContributorRoleId", "  storageQueueDataContributorRoleId", "the app needs Storage Blob Data Owner"),
    ("the host's roles given to the deployer",
     "infra/resources.bicep", "hostPrincipalId: identity.outputs.principalId", "hostPrincipalId: principalId", "assigns Storage Blob Data Owner to the deployer"),
    ("COSMOS_DATABASE renamed",
     "infra/modules/functionapp.bicep", "    name: 'COSMOS_DATABASE'", "    name: 'COSMOS_DATABASE_NAME'", "the code reads COSMOS_DATABASE"),
    ("COSMOS__accountEndpoint renamed",
     "infra/modules/functionapp.bicep", "    name: 'COSMOS__accountEndpoint'", "    name: 'COSMOS__endpoint'", "the code reads COSMOS__accountEndpoint"),
    ("BLOG_STORE renamed",
     "infra/modules/functionapp.bicep", "    name: 'BLOG_STORE'", "    name: 'BLOG_STORE_KIND'", "the code reads BLOG_STORE,"),
    ("COSMOS__clientId given the identity's resource id",
     "infra/modules/functionapp.bicep", "    name: 'COSMOS__clientId'\n    value: identityClientId", "    name: 'COSMOS__clientId'\n    value: identityId", "COSMOS__clientId is 'identityId'"),
    ("COSMOS__credential renamed",
     "infra/modules/functionapp.bicep", "    name: 'COSMOS__credential'", "    name: 'COSMOS__credentials'", "the code reads COSMOS__credential,"),
    ("the host storage's identity setting renamed",
     "infra/modules/functionapp.bicep", "    name: 'AzureWebJobsStorage__clientId'", "    name: 'AzureWebJobsStorage__clientID'", "the host reads AzureWebJobsStorage__clientId"),
    ("the app identity's client id wired from its principal id",
     "infra/resources.bicep", "identityClientId: identity.outputs.clientId", "identityClientId: identity.outputs.principalId", "identityClientId is 'identity.outputs.principalId'"),
    ("a binding reads a database setting the app does not set",
     "functions/PostsChangeFeed/function.json", '"%COSMOS_DATABASE%"', '"%COSMOS_DB%"', "a binding reads %COSMOS_DB%"),
    ("a binding connects through a prefix the app does not set",
     "functions/PostsChangeFeed/function.json", '"connection": "COSMOS"', '"connection": "CosmosDB"', "neither CosmosDB nor CosmosDB__accountEndpoint is set"),
    ("FUNCTIONS_WORKER_RUNTIME set",
     "infra/modules/functionapp.bicep", "var commonSettings = [\n", "var commonSettings = [\n  {\n    name: 'FUNCTIONS_WORKER_RUNTIME'\n    value: 'custom'\n  }\n", "sets FUNCTIONS_WORKER_RUNTIME, which Flex Consumption refuses"),
    ("WEBSITE_RUN_FROM_PACKAGE set",
     "infra/modules/functionapp.bicep", "var commonSettings = [\n", "var commonSettings = [\n  {\n    name: 'WEBSITE_RUN_FROM_PACKAGE'\n    value: '1'\n  }\n", "sets WEBSITE_RUN_FROM_PACKAGE, which Flex Consumption refuses"),
    ("WEBSITE_CONTENTSHARE set",
     "infra/modules/functionapp.bicep", "var commonSettings = [\n", "var commonSettings = [\n  {\n    name: 'WEBSITE_CONTENTSHARE'\n    value: name\n  }\n", "sets WEBSITE_CONTENTSHARE, which Flex Consumption refuses"),
    ("linuxFxVersion set",
     "infra/modules/functionapp.bicep", "      minTlsVersion: '1.2'\n", "      linuxFxVersion: 'custom|1.0'\n      minTlsVersion: '1.2'\n", "siteConfig sets linuxFxVersion"),
    ("ftpsState set",
     "infra/modules/functionapp.bicep", "      minTlsVersion: '1.2'\n", "      ftpsState: 'Disabled'\n      minTlsVersion: '1.2'\n", "siteConfig sets ftpsState"),
    ("the site's own reserved set",
     "infra/modules/functionapp.bicep", "    httpsOnly: true\n", "    reserved: true\n    httpsOnly: true\n", "the site sets reserved"),
    ("runtime version 2.0 for custom",
     "infra/modules/functionapp.bicep", "param runtimeVersion string = '1.0'", "param runtimeVersion string = '2.0'", "Flex Consumption runtime custom 2.0"),
    ("a default above its own @maxValue",
     "infra/main.bicep", "param maximumInstanceCount int = 100", "param maximumInstanceCount int = 1001", "defaults to 1001, above its own @maxValue(1000)"),
    ("a default below its own @minValue",
     "infra/main.bicep", "param changeFeedLagThresholdMs int = 60000", "param changeFeedLagThresholdMs int = 500", "defaults to 500, below its own @minValue(1000)"),
    ("an output a hook reads renamed",
     "infra/main.bicep", "output AZURE_STORAGE_ACCOUNT_NAME string", "output AZURE_STORAGE_ACCOUNT string", "reads AZURE_STORAGE_ACCOUNT_NAME, which is neither"),
    ("predeploy's default wait set to 0",
     "scripts/predeploy.sh", "${ROLE_SETTLE_SECONDS:-600}", "${ROLE_SETTLE_SECONDS:-0}", "the default wait for the storage role is 0 s"),
    ("docs/deploy.md names a README section that is gone",
     "docs/deploy.md", "(see [Run under the Functions host](functions-host.md) for Azurite", "(see the README's \"Run under the Functions host\" for Azurite", "the README does not have"),
    ("docs/deploy.md links to a section that is gone",
     "docs/deploy.md", "(operations.md#cosmos-db-backups)", "(operations.md#cosmos-backups)", "has no such section"),
    ("the postprovision hook drops the write scope",
     "scripts/postprovision.sh", '"BLOG_AUTH_WRITE_SCOPE": %s', '"BLOG_AUTH_WRITE": %s', "BLOG_AUTH_WRITE_SCOPE"),
]


def failures(mutation: tuple[str, str, str, str, str] | None) -> list[str]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for name in COPIED:
            source = ROOT / name
            if source.is_dir():
                shutil.copytree(source, root / name)
            else:
                shutil.copy2(source, root / name)
        if mutation is not None:
            _, rel, original, mistake, _ = mutation
            text = (root / rel).read_text()
            if original.startswith("re:"):
                changed, n = re.subn(original[3:], mistake, text, count=1)
            else:
                changed, n = text.replace(original, mistake, 1), text.count(original)
            if n == 0:
                return [f"the mutation's text is no longer in {rel}: {original!r}"]
            (root / rel).write_text(changed)
        with contextlib.redirect_stdout(io.StringIO()):
            return infra_check.run(root, PARSER)


def main() -> int:
    problems = []
    clean = failures(None)
    if clean:
        problems.append(f"the files as they are were reported: {clean}")
    for mutation in MUTATIONS:
        what, rel, _, _, says = mutation
        found = failures(mutation)
        if not any(says in f for f in found):
            problems.append(f"{what} ({rel}) was not reported with {says!r}; reports: {found}")
    for problem in problems:
        print(f"test_infra_check FAILED: {problem}", file=sys.stderr)
    if problems:
        return 1
    print(f"test_infra_check: nothing reported as it is, and each of {len(MUTATIONS)} mistakes reported: " + "; ".join(m[0] for m in MUTATIONS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
