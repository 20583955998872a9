"""The templates against the code: what infra/ deploys is what the handler and its bindings use.

The code's side is infra/expected.json, generated from the code's own definitions and held in
step with it by tests/api/functions/deployment.rs (so this needs no Rust build):

  * containers: every container the store defines is deployed with its name, partition key,
    indexed paths, full-text policy (language and paths) and full-text indexes, and time to live;
    nothing else is deployed; the account has the full-text capability in every throughput mode
    when a container searches full text;
  * app settings: each one the code needs is set unconditionally, with what it must hold (a fixed
    value, or the deployment's endpoint, database or identity client id, wired from the right
    module output); each one the bindings and the host read is set; every name set is one the
    code, a binding or the host reads; none that Flex Consumption refuses is set, nor a site
    property it refuses;
  * role assignments: exactly the (principal, scope, role) set the app and the deployer need;
  * values: parameter defaults inside their own @minValue/@maxValue/@minLength/@maxLength; the
    Flex Consumption runtime a pair the platform offers;
  * hooks: every deployment output a hook reads is one main.bicep declares, and predeploy's
    default wait is the ten minutes a role assignment can take.

Called by .ci/infra_check.py; .ci/test_infra_check.py makes each class fail.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any, Callable

from pycep import BicepParser

sys.path.insert(0, str(Path(__file__).resolve().parent))
from azure_constants import AZURE_BUILT_IN_ROLES  # noqa: E402

Report = Callable[[str, str], None]

# Cosmos DB data-plane built-in roles (sqlRoleDefinitions of every account).
COSMOS_DATA_ROLES = {
    "00000000-0000-0000-0000-000000000001": "Cosmos DB Built-in Data Reader",
    "00000000-0000-0000-0000-000000000002": "Cosmos DB Built-in Data Contributor",
}
STORAGE = "Microsoft.Storage/storageAccounts"
INSIGHTS = "Microsoft.Insights/components"
COSMOS = "Microsoft.DocumentDB/databaseAccounts"
WEBPUBSUB = "Microsoft.SignalRService/webPubSub"

# (principal, scope, role) the deployment must assign, and nothing else. "app": the Function App's
# user-assigned identity; "deployer": the developer azd signs in as (principalId).
EXPECTED_ROLES: dict[tuple[str, str, str], str] = {
    # The host keeps its leases, keys and the deployment package in blobs (Owner: the package
    # container is read with the identity), and uses queues and tables (identity-based
    # AzureWebJobsStorage).
    ("app", STORAGE, "b7e6dc6d-f1e8-4753-8033-0f276bb0955b"): "Storage Blob Data Owner",
    ("app", STORAGE, "974c5e8b-45b9-4653-ba55-5f855dd0fb88"): "Storage Queue Data Contributor",
    ("app", STORAGE, "0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3"): "Storage Table Data Contributor",
    # Application Insights ingestion with Entra auth (local auth is off).
    ("app", INSIGHTS, "3913510d-42f4-4e42-8a64-420c390055eb"): "Monitoring Metrics Publisher",
    # The handler writes every container and the trigger writes its leases: the whole account.
    ("app", COSMOS, "00000000-0000-0000-0000-000000000002"): "Cosmos DB Built-in Data Contributor",
    ("deployer", COSMOS, "00000000-0000-0000-0000-000000000002"): "Cosmos DB Built-in Data Contributor",
    # Live updates: sending to groups and client tokens over the data-plane REST API.
    ("app", WEBPUBSUB, "12cf5a90-567b-43ae-8102-96cf46c7d9b4"): "Web PubSub Service Owner",
}

# Settings the Functions host itself reads for this deployment: its storage with the
# user-assigned identity, and Application Insights with Entra authentication.
HOST_READS = {
    "AzureWebJobsStorage__accountName",
    "AzureWebJobsStorage__credential",
    "AzureWebJobsStorage__clientId",
    "APPLICATIONINSIGHTS_CONNECTION_STRING",
    "APPLICATIONINSIGHTS_AUTHENTICATION_STRING",
}
# App settings and site properties Flex Consumption refuses: its runtime, package, content share
# and scale come from functionAppConfig, and the plan carries `reserved`. Sources: "Flex
# Consumption plan hosting" (learn.microsoft.com/azure/azure-functions/flex-consumption-plan,
# deprecated properties and settings) and the Azure CLI's migration to Flex Consumption
# (azure-cli, appservice custom.py), which drops these settings from a migrated app.
FLEX_REFUSED_SETTINGS = {
    "FUNCTIONS_EXTENSION_VERSION",
    "FUNCTIONS_WORKER_RUNTIME",
    "FUNCTIONS_WORKER_RUNTIME_VERSION",
    "FUNCTIONS_MAX_HTTP_CONCURRENCY",
    "FUNCTIONS_WORKER_PROCESS_COUNT",
    "FUNCTIONS_WORKER_DYNAMIC_CONCURRENCY_ENABLED",
    "SCM_DO_BUILD_DURING_DEPLOYMENT",
    "WEBSITE_DNS_SERVER",
    "WEBSITE_MAX_DYNAMIC_APPLICATION_SCALE_OUT",
    "WEBSITE_NODE_DEFAULT_VERSION",
    "WEBSITE_RUN_FROM_PACKAGE",
    "WEBSITE_SKIP_CONTENTSHARE_VALIDATION",
    "WEBSITE_VNET_ROUTE_ALL",
    "AzureWebJobsDashboard",
}
FLEX_REFUSED_PREFIXES = ("WEBSITE_CONTENT",)
FLEX_REFUSED_SITE_CONFIG = {
    "linuxFxVersion", "windowsFxVersion", "ftpsState", "alwaysOn", "javaVersion",
    "netFrameworkVersion", "powerShellVersion", "use32BitWorkerProcess", "functionAppScaleLimit",
    "preWarmedInstanceCount",
}
FLEX_REFUSED_SITE_PROPERTIES = {"reserved", "isReserved", "isXenon", "containerSize"}
# Flex Consumption runtimes and their versions (az functionapp list-flexconsumption-runtimes;
# Flex Consumption plan docs): a custom handler runs as custom 1.0.
FLEX_RUNTIME_VERSIONS = {"custom": {"1.0"}}

# What an app setting's `from` names, and the module output resources.bicep must pass for it.
FROM_WIRING = {
    "cosmosEndpoint": "cosmos.outputs.endpoint",
    "cosmosDatabaseName": "cosmos.outputs.databaseName",
    "identityClientId": "identity.outputs.clientId",
}
# A role assignment takes up to 10 minutes to take effect (Azure Storage, "Assign an Azure role
# for access to blob data"): predeploy's default wait.
ROLE_SETTLE_MIN_SECONDS = 600

# Set by azd for every hook, whatever the templates output.
AZD_SETS = {"AZURE_ENV_NAME", "AZURE_LOCATION", "AZURE_SUBSCRIPTION_ID", "AZURE_PRINCIPAL_ID", "AZURE_PRINCIPAL_TYPE", "AZURE_RESOURCE_GROUP", "AZURE_TENANT_ID"}
HOOK_SCRIPTS = ("scripts/preprovision.sh", "scripts/postprovision.sh", "scripts/predeploy.sh", "scripts/arm.sh")
SHELL_VARIABLES = {"BASH_SOURCE", "SECONDS", "HOME", "PATH", "TMPDIR", "CARGO_HOME"}


class Bicep:
    """Parsed files, by path relative to the root."""

    def __init__(self, root: Path, parser: BicepParser) -> None:
        self.root = root
        self.parser = parser
        self.files: dict[str, dict] = {}

    def __call__(self, rel: str) -> dict:
        if rel not in self.files:
            self.files[rel] = self.parser.parse(file_path=self.root / rel)
        return self.files[rel]


def body(resource: dict) -> dict:
    """A resource's own properties, inside a loop or not."""
    config = resource.get("config") or {}
    return config.get("config", config) if "loop_type" in config else config


def loop(resource: dict) -> tuple[str, str] | None:
    detail = ((resource.get("config") or {}).get("loop_type") or {}).get("detail") or {}
    return (detail["item_name"], detail["array_name"]) if "item_name" in detail else None


def resolve(value: Any, variables: dict, bound: dict | None = None, depth: int = 0) -> Any:
    """`value` with the variables it names (and the loop item `bound` holds) put in, as far as
    they are plain values; expressions stay as pycep gives them."""
    if depth > 20:
        return value
    bound = bound or {}
    if isinstance(value, str):
        if value in bound:
            return bound[value]
        if value in variables:
            return resolve(variables[value]["value"], variables, bound, depth + 1)
        return value
    if isinstance(value, list):
        return [resolve(v, variables, bound, depth + 1) for v in value]
    if isinstance(value, dict):
        op = value.get("operator")
        if isinstance(op, dict) and op.get("type") == "property_accessor":
            base = resolve(op["operands"]["operand_1"], variables, bound, depth + 1)
            field = op["operands"]["operand_2"]
            if isinstance(base, dict) and isinstance(field, str) and field in base:
                return base[field]
            return value
        if isinstance(op, dict) and op.get("type") == "minus" and "integer_value" in op.get("operands", {}):
            return -op["operands"]["integer_value"]
        return {k: resolve(v, variables, bound, depth + 1) for k, v in value.items()}
    return value


def dotted(value: Any) -> str | None:
    """`identity.outputs.clientId` for pycep's nested property accessors."""
    if isinstance(value, str):
        return value
    op = value.get("operator") if isinstance(value, dict) else None
    if isinstance(op, dict) and op.get("type") == "property_accessor":
        left, right = dotted(op["operands"]["operand_1"]), dotted(op["operands"]["operand_2"])
        return f"{left}.{right}" if left and right else None
    return None


def paths(items: Any) -> list[str]:
    return [i.get("path") for i in items or [] if isinstance(i, dict)]


def check_containers(expected: dict, bicep: Bicep, report: Report) -> None:
    rel = "infra/modules/cosmos.bicep"
    doc = bicep(rel)
    variables = doc.get("variables") or {}
    resource = next((r for r in (doc.get("resources") or {}).values() if r.get("type") == "Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers"), None)
    if resource is None:
        report(rel, "deploys no Cosmos DB container")
        return
    item = loop(resource)
    items = resolve(item[1], variables) if item else [None]
    deployed: dict[str, dict] = {}
    for element in items if isinstance(items, list) else []:
        props = resolve(body(resource).get("properties", {}).get("resource", {}), variables, {item[0]: element} if item else {})
        name = props.get("id")
        if isinstance(name, str):
            deployed[name] = props
    wanted = {c["id"]: c for c in expected["containers"]}
    for name in sorted(set(wanted) - set(deployed)):
        report(rel, f"the code uses the container {name!r}, which is not deployed (deployed: {sorted(deployed)})")
    for name in sorted(set(deployed) - set(wanted)):
        report(rel, f"deploys the container {name!r}, which the code does not use (it uses {sorted(wanted)})")
    any_full_text = False
    for name in sorted(set(wanted) & set(deployed)):
        code, got = wanted[name], deployed[name]
        where = f"container {name!r}"
        if (got.get("partitionKey") or {}).get("paths") != code["partitionKey"]["paths"]:
            report(rel, f"{where}: partition key {(got.get('partitionKey') or {}).get('paths')}, the code's is {code['partitionKey']['paths']}")
        ttl = got.get("defaultTtl")
        if ttl == 0:
            report(rel, f"{where}: defaultTtl 0, which Cosmos DB refuses (-1: on, no default expiry; n > 0: seconds)")
        if ttl != code.get("defaultTtl"):
            report(rel, f"{where}: defaultTtl {ttl!r}, the code's is {code.get('defaultTtl')!r} (items expire only when they carry a ttl)")
        policy = got.get("fullTextPolicy") if isinstance(got.get("fullTextPolicy"), dict) else {}
        code_policy = code.get("fullTextPolicy") or {}
        got_paths, code_paths = paths(policy.get("fullTextPaths")), paths(code_policy.get("fullTextPaths"))
        if sorted(got_paths) != sorted(code_paths):
            report(rel, f"{where}: full-text paths {got_paths}, the code searches {code_paths}")
        if code_paths and policy.get("defaultLanguage") != code_policy.get("defaultLanguage"):
            report(rel, f"{where}: full-text language {policy.get('defaultLanguage')!r}, the code's is {code_policy.get('defaultLanguage')!r}")
        indexing = got.get("indexingPolicy") if isinstance(got.get("indexingPolicy"), dict) else {}
        code_indexing = code.get("indexingPolicy") or {}
        got_indexes = paths(indexing.get("fullTextIndexes"))
        for path in got_indexes:
            if path not in got_paths:
                report(rel, f"{where}: full-text index {path!r} has no path in the full-text policy")
        if sorted(got_indexes) != sorted(paths(code_indexing.get("fullTextIndexes"))):
            report(rel, f"{where}: full-text indexes {got_indexes}, the code's are {paths(code_indexing.get('fullTextIndexes'))}")
        if code_indexing.get("includedPaths") is not None and sorted(paths(indexing.get("includedPaths"))) != sorted(paths(code_indexing["includedPaths"])):
            report(rel, f"{where}: indexed paths {sorted(paths(indexing.get('includedPaths')))}, the code's queries use {sorted(paths(code_indexing['includedPaths']))}")
        any_full_text |= bool(code_paths)
    if any_full_text:
        account = next((r for r in (doc.get("resources") or {}).values() if r.get("type") == COSMOS), None)
        capabilities = body(account or {}).get("properties", {}).get("capabilities")
        op = capabilities.get("operator") if isinstance(capabilities, dict) else None
        branches = [op["operands"]["true_value"], op["operands"]["false_value"]] if isinstance(op, dict) and op.get("type") == "conditional" else [capabilities]
        for branch in branches:
            names = [c.get("name") for c in branch or [] if isinstance(c, dict)]
            if "EnableNoSQLFullTextSearch" not in names:
                report(rel, f"the account's capabilities {names} lack EnableNoSQLFullTextSearch, which full-text search needs")


def app_settings(bicep: Bicep) -> tuple[list[dict], list[dict]]:
    """The Function App's settings: those always set, and every one set in some case."""
    doc = bicep("infra/modules/functionapp.bicep")
    variables = doc.get("variables") or {}
    site = next((r for r in (doc.get("resources") or {}).values() if r.get("type") == "Microsoft.Web/sites"), {})
    expr = (body(site).get("properties") or {}).get("siteConfig", {}).get("appSettings")

    def walk(value: Any, always: bool) -> tuple[list[dict], list[dict]]:
        if isinstance(value, str) and value in variables:
            return walk(variables[value]["value"], always)
        if isinstance(value, list):
            settings = [v for v in value if isinstance(v, dict) and "name" in v]
            return (settings if always else []), settings
        if isinstance(value, dict):
            fn, op = value.get("function"), value.get("operator")
            if isinstance(fn, dict) and fn.get("type") in ("concat", "union"):
                parts = [walk(v, always) for v in fn["parameters"].values()]
            elif isinstance(op, dict) and op.get("type") == "conditional":
                parts = [walk(op["operands"]["true_value"], False), walk(op["operands"]["false_value"], False)]
            else:
                parts = []
            return [s for p in parts for s in p[0]], [s for p in parts for s in p[1]]
        return [], []

    return walk(expr, True)


def binding_needs(root: Path) -> tuple[set[str], set[str]]:
    """Settings the function bindings read: identity-based Cosmos DB connections, %NAME% values."""
    connections, names = set(), set()
    for path in sorted((root / "functions").glob("*/function.json")):
        for binding in json.loads(path.read_text()).get("bindings") or []:
            if binding.get("connection"):
                connections.add(binding["connection"])
            for value in binding.values():
                if isinstance(value, str):
                    names.update(re.findall(r"%([A-Za-z0-9_]+)%", value))
    return connections, names


def check_settings(root: Path, expected: dict, bicep: Bicep, report: Report) -> None:
    rel = "infra/modules/functionapp.bicep"
    always, every = app_settings(bicep)
    always_by = {s["name"]: s.get("value") for s in always}
    set_names = {s["name"] for s in every}
    wiring = ((bicep("infra/resources.bicep").get("modules") or {}).get("functionApp") or {}).get("config", {}).get("params", {})
    for setting in expected["appSettings"]:
        name = setting["name"]
        if name not in always_by:
            report(rel, f"the code reads {name}, which the app settings do not always set")
            continue
        got = always_by[name]
        if "value" in setting and got != setting["value"]:
            report(rel, f"{name} is {got!r}; the code needs {setting['value']!r}")
        if "from" in setting:
            if got != setting["from"]:
                report(rel, f"{name} is {dotted(got) or got!r}; it must hold {setting['from']} ({FROM_WIRING.get(setting['from'], '?')})")
            passed = dotted(wiring.get(setting["from"]))
            if passed != FROM_WIRING.get(setting["from"]):
                report("infra/resources.bicep", f"the function app's {setting['from']} is {passed!r}, not {FROM_WIRING.get(setting['from'])}")
    connections, referenced = binding_needs(root)
    binding_reads = set(referenced)
    for connection in connections:
        binding_reads |= {connection, f"{connection}__accountEndpoint", f"{connection}__credential", f"{connection}__clientId"}
        if connection not in always_by and f"{connection}__accountEndpoint" not in always_by:
            report(rel, f"the bindings connect through {connection}, but neither {connection} nor {connection}__accountEndpoint is set")
        if always_by.get(f"{connection}__credential") != "managedidentity" or always_by.get(f"{connection}__clientId") != "identityClientId":
            report(rel, f"the bindings' {connection} connection must use the user-assigned identity: {connection}__credential managedidentity and {connection}__clientId its client id")
    for name in sorted(referenced - set(always_by)):
        report(rel, f"a binding reads %{name}%, which the app settings do not always set")
    for name in ("AzureWebJobsStorage__accountName", "AzureWebJobsStorage__credential", "AzureWebJobsStorage__clientId"):
        if name not in always_by:
            report(rel, f"the host reads {name} (identity-based storage), which is not set")
    known = set(expected["reads"]) | binding_reads | HOST_READS
    for name in sorted(set_names):
        if name in FLEX_REFUSED_SETTINGS or name.startswith(FLEX_REFUSED_PREFIXES):
            report(rel, f"sets {name}, which Flex Consumption refuses (functionAppConfig carries runtime, package and scale)")
        elif name not in known:
            report(rel, f"sets {name}, which neither the code, the bindings nor the host reads")
    site = next((r for r in (bicep(rel).get("resources") or {}).values() if r.get("type") == "Microsoft.Web/sites"), {})
    properties = body(site).get("properties") or {}
    for key in sorted(FLEX_REFUSED_SITE_PROPERTIES & set(properties)):
        report(rel, f"the site sets {key}, which Flex Consumption refuses (the plan carries reserved)")
    for key in sorted(FLEX_REFUSED_SITE_CONFIG & set(properties.get("siteConfig") or {})):
        report(rel, f"siteConfig sets {key}, which Flex Consumption refuses")


def param_value(bicep: Bicep, rel: str, name: str, passed: dict) -> Any:
    """A module parameter's value: what the caller passes, else its default."""
    if name in passed:
        return passed[name]
    return ((bicep(rel).get("parameters") or {}).get(name) or {}).get("default")


def check_runtime(bicep: Bicep, report: Report) -> None:
    rel = "infra/modules/functionapp.bicep"
    doc = bicep(rel)
    config = resolve((doc.get("variables") or {}).get("flexAppConfig", {}).get("value", {}), doc.get("variables") or {})
    runtime = config.get("runtime") or {}
    passed = ((bicep("infra/resources.bicep").get("modules") or {}).get("functionApp") or {}).get("config", {}).get("params", {})
    name = param_value(bicep, rel, runtime.get("name"), passed) if runtime.get("name") in (doc.get("parameters") or {}) else runtime.get("name")
    version = param_value(bicep, rel, runtime.get("version"), passed) if runtime.get("version") in (doc.get("parameters") or {}) else runtime.get("version")
    if str(version) not in FLEX_RUNTIME_VERSIONS.get(str(name), set()):
        report(rel, f"Flex Consumption runtime {name} {version}: the platform offers {name} {sorted(FLEX_RUNTIME_VERSIONS.get(str(name), set())) or 'no version'} ({FLEX_RUNTIME_VERSIONS})")


def check_ranges(root: Path, bicep: Bicep, report: Report) -> None:
    for path in sorted((root / "infra").rglob("*.bicep")):
        rel = str(path.relative_to(root))
        for name, spec in (bicep(rel).get("parameters") or {}).items():
            default = (spec or {}).get("default")
            bounds = {d.get("type"): d.get("argument") for d in (spec or {}).get("decorators") or []}
            if isinstance(default, bool) or default is None:
                continue
            if isinstance(default, int):
                if bounds.get("min_value") is not None and default < bounds["min_value"]:
                    report(rel, f"param {name} defaults to {default}, below its own @minValue({bounds['min_value']})")
                if bounds.get("max_value") is not None and default > bounds["max_value"]:
                    report(rel, f"param {name} defaults to {default}, above its own @maxValue({bounds['max_value']})")
            if isinstance(default, str) and "${" not in default:
                if bounds.get("min_length") is not None and len(default) < bounds["min_length"]:
                    report(rel, f"param {name} defaults to {default!r}, shorter than its own @minLength({bounds['min_length']})")
                if bounds.get("max_length") is not None and len(default) > bounds["max_length"]:
                    report(rel, f"param {name} defaults to {default!r}, longer than its own @maxLength({bounds['max_length']})")


def principals(value: Any, variables: dict) -> set[str]:
    """Who a principal id expression of resources.bicep names."""
    if isinstance(value, list):
        return set().union(*(principals(v, variables) for v in value)) if value else set()
    name = dotted(value)
    if name == "identity.outputs.principalId":
        return {"app"}
    if name == "principalId":
        return {"deployer"}
    if isinstance(value, str) and value in variables:
        return principals(variables[value]["value"], variables)
    if isinstance(value, dict):
        fn, op = value.get("function"), value.get("operator")
        if isinstance(fn, dict) and fn.get("type") in ("concat", "union"):
            return set().union(*(principals(v, variables) for v in fn["parameters"].values()))
        if isinstance(op, dict) and op.get("type") == "conditional":
            return principals(op["operands"]["true_value"], variables) | principals(op["operands"]["false_value"], variables)
    return {f"? {name or value}"}


def role_assignments(bicep: Bicep) -> set[tuple[str, str, str]]:
    top = bicep("infra/resources.bicep")
    top_vars = top.get("variables") or {}
    found: set[tuple[str, str, str]] = set()
    for module in (top.get("modules") or {}).values():
        rel = "infra/" + module["detail"]["path"]
        # A conditional module (`= if (...)`) holds its body one level down.
        config = module["config"]
        passed = (config.get("config", config) if "condition" in config else config).get("params", {})
        doc = bicep(rel)
        variables, resources = doc.get("variables") or {}, doc.get("resources") or {}
        for resource in resources.values():
            kind = resource.get("type")
            if kind not in ("Microsoft.Authorization/roleAssignments", "Microsoft.DocumentDB/databaseAccounts/sqlRoleAssignments"):
                continue
            props = body(resource).get("properties") or {}
            item = loop(resource)

            def each(expr: Any) -> list[Any]:
                """The values `expr` takes: the loop's array when it is the loop item."""
                if item and expr == item[0]:
                    array = item[1]
                    if array in variables:
                        return list(variables[array]["value"])
                    return [passed.get(array, array)]
                return [expr]

            # The role: a variable holding the id, through subscriptionResourceId() or a path.
            role_expr = props.get("roleDefinitionId")
            if isinstance(role_expr, dict) and "function" in role_expr:
                role_names = each(role_expr["function"]["parameters"].get("resource_name_1"))
            else:
                role_names = re.findall(r"\$\{(\w+)\}$", str(role_expr)) or [role_expr]
            roles = [variables[r]["value"] if isinstance(r, str) and r in variables else str(r) for r in role_names]
            # The scope: the resource a role assignment is an extension of, or a data-plane scope.
            if kind == "Microsoft.Authorization/roleAssignments":
                symbol = body(resource).get("scope")
                scope = (resources.get(symbol) or {}).get("type", f"? {symbol}") if symbol else "the resource group"
            else:
                scope_expr = props.get("scope")
                owner = dotted(scope_expr)
                scope = (resources.get(owner.split(".")[0]) or {}).get("type", f"? {owner}") if owner and owner.endswith(".id") else f"{scope_expr} (not the account)"
            # The principal: a module parameter, traced to what resources.bicep passes.
            who: set[str] = set()
            for expr in each(props.get("principalId")):
                who |= principals(passed.get(expr, expr) if isinstance(expr, str) else expr, top_vars)
            for w in who:
                for role in roles:
                    found.add((w, scope, role))
    return found


def role_name(role: str) -> str:
    return COSMOS_DATA_ROLES.get(role) or AZURE_BUILT_IN_ROLES.get(role) or role


def check_roles(bicep: Bicep, report: Report) -> None:
    found = role_assignments(bicep)
    for principal, scope, role in sorted(set(EXPECTED_ROLES) - found):
        report("infra", f"the {principal} needs {role_name(role)} on the {scope}, which no role assignment gives")
    for principal, scope, role in sorted(found - set(EXPECTED_ROLES)):
        report("infra", f"assigns {role_name(role)} to the {principal} on {scope}, which is not one the app needs ({len(EXPECTED_ROLES)} are: .ci/infra_code_check.py EXPECTED_ROLES)")


def check_hooks(root: Path, bicep: Bicep, report: Report) -> None:
    outputs = set(bicep("infra/main.bicep").get("outputs") or {})
    codes = {}
    for rel in HOOK_SCRIPTS:
        text = (root / rel).read_text()
        codes[rel] = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    # The hooks share what they assign with scripts/arm.sh, which they source.
    everything = "\n".join(codes.values())
    assigned = set(re.findall(r"(?:^|[\s;(!])(?:local\s+|export\s+)?([A-Z][A-Z0-9_]*)=", everything, flags=re.M))
    assigned |= set(re.findall(r"\bfor\s+([A-Z][A-Z0-9_]*)\s+in\b", everything))
    for rel, code in codes.items():
        knobs = set(re.findall(r"\$\{([A-Z][A-Z0-9_]*):?-[^}]", code))
        used = set(re.findall(r"\$\{?([A-Z][A-Z0-9_]*)", code))
        used |= {n for group in re.findall(r"\bfor\s+\w+\s+in\s+([A-Z0-9_ ]+);", code) for n in group.split()}
        for name in sorted(used - assigned - knobs - SHELL_VARIABLES - AZD_SETS):
            if name not in outputs:
                report(rel, f"reads {name}, which is neither a main.bicep output nor set by azd")
    text = (root / "scripts/predeploy.sh").read_text()
    m = re.search(r"\$\{ROLE_SETTLE_SECONDS:-(\d+)\}", text)
    if not m or int(m.group(1)) < ROLE_SETTLE_MIN_SECONDS:
        report("scripts/predeploy.sh", f"the default wait for the storage role is {m.group(1) if m else 'not set'} s: a role assignment takes up to {ROLE_SETTLE_MIN_SECONDS} s")


def run(root: Path, parser: BicepParser, report: Report) -> None:
    expected_path = root / "infra/expected.json"
    try:
        expected = json.loads(expected_path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        report("infra/expected.json", f"not readable ({exc}): generate it with UPDATE_INFRA_EXPECTED=1 cargo test --test api deployment")
        return
    bicep = Bicep(root, parser)
    check_containers(expected, bicep, report)
    check_settings(root, expected, bicep, report)
    check_runtime(bicep, report)
    check_ranges(root, bicep, report)
    check_roles(bicep, report)
    check_hooks(root, bicep, report)
    print(f"checked infra/ against the code (infra/expected.json): {len(expected['containers'])} containers, {len(expected['appSettings'])} app settings, {len(EXPECTED_ROLES)} role assignments")
