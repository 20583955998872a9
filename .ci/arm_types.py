"""Check Bicep files against Azure's published definitions of their resource types, and against
what the platform and the Bicep compiler accept beyond those definitions.

For each `resource` declaration, its type and API version name a model in the Azure management
SDK for Python (generated from the same REST API specifications Azure Resource Manager serves),
pinned in .ci/requirements/arm-types.txt. Every property the template sets is looked up in that
model. The check fails on:

- a property the model does not have, or a read-only one;
- a literal value outside the model's enum for that property, or of the wrong primitive type (a
  string where the model takes a boolean, a number where it takes a string...);
- a required property left out, or a constant (such as Cosmos DB's `databaseAccountOfferType`)
  set to another value;
- a role definition id that is not a built-in role: Azure RBAC role assignments against
  azure_constants.AZURE_BUILT_IN_ROLES, Cosmos DB data-plane role assignments against
  azure_constants.COSMOS_DATA_PLANE_ROLES (pinned lists, their sources named there);
- a string the definitions leave free but the platform constrains (azure_constants): a subnet
  delegation's service name, private endpoint group ids, metric names (metric alerts and the
  workbook's metric tiles), a site's kind, a plan's SKU name and tier;
- what the Bicep compiler would refuse between files: a module parameter the module does not
  declare, a required module parameter not passed, a value of the wrong type or outside the
  parameter's @allowed list, and a reference to a module output the module does not declare;
- a parameter's default value of the wrong type or outside its @allowed list.

Values reached through variables, conditionals, union() and concat(), loops over variables and
parameters are followed: a parameter stands for its @allowed values, else for its default and
the literal values its callers pass (each module sees what main.bicep and resources.bicep give
it); anything computed at deployment time (references, interpolations, other functions) is not a
literal and is left alone.

A type or API version with no model here fails too: add the SDK package that defines it, or pick
an API version the pinned SDK carries.

Usage (from the repository root, in the venv bicep-check.sh builds):
    python .ci/arm_types.py [file.bicep ...]     (default: every .bicep under infra/)
"""

from __future__ import annotations

import enum
import importlib
import inspect
import re
import sys
from pathlib import Path
from typing import Any, Iterable

from pycep import BicepParser

from azure_constants import (
    AZURE_BUILT_IN_ROLES,
    COSMOS_DATA_PLANE_ROLES,
    METRICS,
    PLAN_SKUS,
    PRIVATE_LINK_GROUP_IDS,
    SITE_KINDS,
    SUBNET_DELEGATIONS,
)

# type -> (models module with {v} for the API version as a package name, model class).
# A module path without {v} is a single-API package: its API version must match exactly.
MODELS: dict[str, tuple[str, str]] = {
    "Microsoft.Resources/resourceGroups": ("azure.mgmt.resource.resources.{v}.models", "ResourceGroup"),
    "Microsoft.ManagedIdentity/userAssignedIdentities": ("azure.mgmt.msi.{v}.models", "Identity"),
    "Microsoft.Authorization/roleAssignments": ("azure.mgmt.authorization.{v}.models", "RoleAssignmentCreateParameters"),
    "Microsoft.Web/serverfarms": ("azure.mgmt.web.{v}.models", "AppServicePlan"),
    "Microsoft.Web/sites": ("azure.mgmt.web.{v}.models", "Site"),
    "Microsoft.Web/sites/basicPublishingCredentialsPolicies": ("azure.mgmt.web.{v}.models", "CsmPublishingCredentialsPoliciesEntity"),
    "Microsoft.Storage/storageAccounts": ("azure.mgmt.storage.{v}.models", "StorageAccountCreateParameters"),
    "Microsoft.Storage/storageAccounts/blobServices": ("azure.mgmt.storage.{v}.models", "BlobServiceProperties"),
    "Microsoft.Storage/storageAccounts/blobServices/containers": ("azure.mgmt.storage.{v}.models", "BlobContainer"),
    "Microsoft.DocumentDB/databaseAccounts": ("azure.mgmt.cosmosdb.models", "DatabaseAccountCreateUpdateParameters"),
    "Microsoft.DocumentDB/databaseAccounts/sqlDatabases": ("azure.mgmt.cosmosdb.models", "SqlDatabaseCreateUpdateParameters"),
    "Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers": ("azure.mgmt.cosmosdb.models", "SqlContainerCreateUpdateParameters"),
    "Microsoft.DocumentDB/databaseAccounts/sqlRoleAssignments": ("azure.mgmt.cosmosdb.models", "SqlRoleAssignmentCreateUpdateParameters"),
    "Microsoft.OperationalInsights/workspaces": ("azure.mgmt.loganalytics.models", "Workspace"),
    "Microsoft.Insights/components": ("azure.mgmt.applicationinsights.{v}.models", "ApplicationInsightsComponent"),
    "Microsoft.Insights/workbooks": ("azure.mgmt.applicationinsights.{v}.models", "Workbook"),
    "Microsoft.Insights/actionGroups": ("azure.mgmt.monitor.{v}.models", "ActionGroupResource"),
    "Microsoft.Insights/metricAlerts": ("azure.mgmt.monitor.{v}.models", "MetricAlertResource"),
    "Microsoft.Insights/scheduledQueryRules": ("azure.mgmt.monitor.{v}.models", "ScheduledQueryRuleResource"),
    "Microsoft.Network/virtualNetworks": ("azure.mgmt.network.models", "VirtualNetwork"),
    "Microsoft.Network/virtualNetworks/subnets": ("azure.mgmt.network.models", "Subnet"),
    "Microsoft.Network/privateEndpoints": ("azure.mgmt.network.models", "PrivateEndpoint"),
    "Microsoft.Network/privateEndpoints/privateDnsZoneGroups": ("azure.mgmt.network.models", "PrivateDnsZoneGroup"),
    "Microsoft.Network/privateDnsZones": ("azure.mgmt.privatedns.models", "PrivateZone"),
    "Microsoft.Network/privateDnsZones/virtualNetworkLinks": ("azure.mgmt.privatedns.models", "VirtualNetworkLink"),
    "Microsoft.SignalRService/webPubSub": ("azure.mgmt.webpubsub.models", "WebPubSubResource"),
}

# Keys of a resource declaration that are Bicep's, not the resource body's.
BICEP_KEYS = {"parent", "scope", "dependsOn", "name"}
# Read-only in the models, yet what a template names a resource by.
TOP_LEVEL_NAMING = {"name", "id", "type"}

# The Python type a literal of each model primitive has in pycep's parse.
PRIMITIVES: dict[str, tuple[type, ...]] = {
    "str": (str,),
    "duration": (str,),
    "iso-8601": (str,),
    "date": (str,),
    "bool": (bool,),
    "int": (int,),
    "long": (int,),
    "float": (int, float),
}
# The same for Bicep parameter types.
PARAM_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "int": (int,),
    "bool": (bool,),
    "object": (dict,),
    "array": (list,),
}

# Strings the definitions leave free and the platform constrains: (resource type, JSON path with
# [] for "each element", the accepted values, what they are).
PLATFORM_STRINGS: list[tuple[str, str, dict, str]] = [
    ("Microsoft.Network/virtualNetworks", "properties.subnets[].properties.delegations[].properties.serviceName", SUBNET_DELEGATIONS, "subnet delegation"),
    ("Microsoft.Network/virtualNetworks/subnets", "properties.delegations[].properties.serviceName", SUBNET_DELEGATIONS, "subnet delegation"),
    ("Microsoft.Network/privateEndpoints", "properties.privateLinkServiceConnections[].properties.groupIds[]", PRIVATE_LINK_GROUP_IDS, "private endpoint group id"),
    ("Microsoft.Network/privateEndpoints", "properties.manualPrivateLinkServiceConnections[].properties.groupIds[]", PRIVATE_LINK_GROUP_IDS, "private endpoint group id"),
    ("Microsoft.Web/sites", "kind", SITE_KINDS, "site kind"),
    ("Microsoft.Web/serverfarms", "sku.name", PLAN_SKUS, "plan SKU"),
]

GUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
# `mod.outputs.x`, `mod[i].outputs.x`, `mod.outputs['x']`, `mod!.outputs.x`, `mod?.outputs.x`
OUTPUT_REF = re.compile(r"\b([A-Za-z_]\w*)(?:\[[^\]]*\])?[!?]?\.outputs(?:\.([A-Za-z_]\w*)|\[\s*'([^']*)'\s*\])")


def without_comments(text: str) -> str:
    """Bicep source with `//` and `/* */` comments blanked (not inside '...' strings)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if c == "'":
            j = i + 1
            while j < n and text[j] != "'":
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1])
            i = j + 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i)
            i = n if j < 0 else j + 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def split_key(key: str) -> list[str]:
    """`properties.siteConfig` -> [properties, siteConfig]; `odata\\.type` stays one segment."""
    return [part.replace("\\.", ".") for part in re.split(r"(?<!\\)\.", key)]


class Model:
    """One SDK model class seen as the JSON object it serializes to."""

    def __init__(self, cls: type, module: Any) -> None:
        self.cls = cls
        self.module = module
        self.name = cls.__name__
        # JSON path segments -> nested dict; a leaf is (python attribute, type string).
        self.tree: dict[str, Any] = {}
        self.open = False  # additional properties allowed
        readonly = {
            attr for attr, rule in getattr(cls, "_validation", {}).items() if rule.get("readonly")
        }
        self.readonly_paths: set[tuple[str, ...]] = set()
        # JSON paths the definition requires, and constants: path -> the one value allowed.
        self.required_paths: list[tuple[str, ...]] = []
        self.constants: dict[tuple[str, ...], Any] = {}
        validation = getattr(cls, "_validation", {})
        for attr, spec in getattr(cls, "_attribute_map", {}).items():
            if spec["key"] == "":
                self.open = True
                continue
            path = split_key(spec["key"])
            node = self.tree
            for seg in path[:-1]:
                node = node.setdefault(seg, {})
                if not isinstance(node, dict):
                    break
            else:
                node[path[-1]] = (attr, spec["type"])
            if attr in readonly:
                self.readonly_paths.add(tuple(path))
            rule = validation.get(attr, {})
            if rule.get("required") and not rule.get("readonly"):
                self.required_paths.append(tuple(path))
            if rule.get("constant"):
                self.constants[tuple(path)] = getattr(cls, attr, None)
        self.discriminator: tuple[str, dict[str, str]] | None = None
        subtypes = getattr(cls, "_subtype_map", None)
        if subtypes:
            attr, mapping = next(iter(subtypes.items()))
            key = cls._attribute_map[attr]["key"]
            self.discriminator = (split_key(key)[-1], mapping)

    def enum_of(self, attr: str) -> type[enum.Enum] | None:
        """The enum an attribute's values come from, per the model's constructor annotations."""
        try:
            annotation = inspect.signature(self.cls.__init__).parameters[attr].annotation
        except (KeyError, ValueError, TypeError):
            return None
        for name in re.findall(r"_models\.(\w+)", str(annotation)):
            candidate = getattr(self.module, name, None)
            if isinstance(candidate, type) and issubclass(candidate, enum.Enum):
                return candidate
        return None


class Checker:
    def __init__(self, parser: BicepParser | None = None) -> None:
        # Building the parser takes seconds; the tests share one.
        self.parser = parser or BicepParser()
        self.failures: list[str] = []
        self.models: dict[tuple[str, str], Model] = {}
        # Literal values callers pass to a file's parameters: (file, parameter) -> values.
        self.passed: dict[tuple[Path, str], list[Any]] = {}
        self.docs: dict[Path, dict] = {}

    # --- where the models come from -------------------------------------------------------

    def module_for(self, rtype: str, api_version: str) -> tuple[Any, str] | None:
        entry = next((v for k, v in MODELS.items() if k.lower() == rtype.lower()), None)
        if entry is None:
            return None
        module_path, cls_name = entry
        if "{v}" in module_path:
            package = "v" + api_version.replace("-", "_")
            try:
                return importlib.import_module(module_path.format(v=package)), cls_name
            except ImportError:
                return None
        module = importlib.import_module(module_path)
        root = importlib.import_module(module_path.rsplit(".models", 1)[0])
        version = getattr(root, "__api_version__", None) or self.default_api_version(root)
        if version != api_version:
            return None
        return module, cls_name

    @staticmethod
    def default_api_version(root: Any) -> str | None:
        """The one API version a single-API package calls: the one its client configuration
        names, else the one its operations send most often."""
        folder = Path(root.__file__).parent
        pattern = re.compile(r'"(\d{4}-\d{2}-\d{2}(?:-preview)?)"')
        for files in (["_configuration.py"], sorted(p.name for p in (folder / "operations").glob("*.py"))):
            seen: dict[str, int] = {}
            for name in files:
                path = folder / name if name == "_configuration.py" else folder / "operations" / name
                if path.is_file():
                    for version in pattern.findall(path.read_text()):
                        seen[version] = seen.get(version, 0) + 1
            if seen:
                return max(seen, key=seen.get)
        return None

    def model(self, module: Any, cls_name: str) -> Model:
        key = (module.__name__, cls_name)
        if key not in self.models:
            self.models[key] = Model(getattr(module, cls_name), module)
        return self.models[key]

    # --- the template's values ------------------------------------------------------------

    def candidates(self, value: Any, scope: dict, depth: int = 0) -> list[Any]:
        """The literal shapes a template value can take: conditionals give both branches,
        variables their values, parameters their @allowed values; computed values none."""
        if depth > 20:
            return []
        if isinstance(value, dict) and "operator" in value and len(value) == 1:
            op = value["operator"]
            operands = op.get("operands", {})
            if op.get("type") == "conditional":
                return self.candidates(operands.get("true_value"), scope, depth + 1) + self.candidates(
                    operands.get("false_value"), scope, depth + 1
                )
            # pycep binds `a == 'x' ? b : c` as `a == ('x' ? b : c)`: the branches are still the
            # values the expression can take.
            if op.get("type") == "property_accessor":
                # `c.name` inside `[for c in containers: ...]`: each element's property.
                owner, field = operands.get("operand_1"), operands.get("operand_2")
                items = scope.get("loops", {}).get(owner) if isinstance(owner, str) else None
                if items is None or not isinstance(field, str):
                    return []
                out = []
                for item in items:
                    if isinstance(item, dict) and field in item:
                        out += self.candidates(item[field], scope, depth + 1)
                return out
            out: list[Any] = []
            for operand in operands.values():
                if isinstance(operand, dict) and operand.get("operator", {}).get("type") == "conditional":
                    inner = operand["operator"]["operands"]
                    out += self.candidates(inner.get("true_value"), scope, depth + 1)
                    out += self.candidates(inner.get("false_value"), scope, depth + 1)
            return out
        if isinstance(value, dict) and "function" in value and len(value) == 1:
            fn = value["function"]
            if fn.get("type") in ("union", "concat"):
                out = []
                for arg in (fn.get("parameters") or {}).values():
                    out += self.candidates(arg, scope, depth + 1)
                return out
            return []
        if isinstance(value, str):
            if "${" in value:
                return []
            if value in scope.get("loops", {}):
                out = []
                for item in scope["loops"][value]:
                    out += self.candidates(item, scope, depth + 1)
                return out
            if value in scope.get("locals", set()):
                return []
            if value in scope["variables"]:
                return self.candidates(scope["variables"][value].get("value"), scope, depth + 1)
            if value in scope["parameters"]:
                return self.parameter_values(value, scope, depth)
            if value in scope["symbols"]:
                return []
        return [value]

    def parameter_values(self, name: str, scope: dict, depth: int = 0) -> list[Any]:
        """What a parameter can be: its @allowed values; else its default and whatever literal
        values its callers pass."""
        decl = scope["parameters"][name]
        for deco in decl.get("decorators") or []:
            if deco.get("type") == "allowed":
                return list(deco.get("argument") or [])
        out: list[Any] = []
        if decl.get("default") is not None:
            out += self.candidates(decl["default"], scope, depth + 1)
        out += self.passed.get((scope.get("file"), name), [])
        return out

    def literal(self, value: Any, scope: dict, depth: int = 0) -> list[Any]:
        """The fully literal values an expression can take (lists and objects resolved inside
        too); none when any part of it is computed at deployment time."""
        if depth > 20:
            return []
        out: list[Any] = []
        for c in self.candidates(value, scope, depth + 1):
            if isinstance(c, list):
                items = [self.literal(item, scope, depth + 1) for item in c]
                if all(len(i) == 1 for i in items):
                    out.append([i[0] for i in items])
            elif isinstance(c, dict):
                fields = {k: self.literal(v, scope, depth + 1) for k, v in c.items()}
                if all(len(v) == 1 for v in fields.values()):
                    out.append({k: v[0] for k, v in fields.items()})
            else:
                out.append(c)
        return out

    # --- walking ----------------------------------------------------------------------------

    def fail(self, where: str, message: str) -> None:
        failure = f"{where}: {message}"
        if failure not in self.failures:
            self.failures.append(failure)

    def check_object(self, obj: dict, node: dict, model: Model, path: tuple[str, ...], where: str, scope: dict) -> None:
        # Bicep quotes keys that are not identifiers ('odata.type'); the definitions do not.
        obj = {k.strip("'") if isinstance(k, str) else k: v for k, v in obj.items()}
        if model.discriminator and path == ():
            key, mapping = model.discriminator
            for kind in self.candidates(obj.get(key), scope):
                if isinstance(kind, str) and kind not in mapping:
                    self.fail(f"{where}.{key}", f"{kind!r} is not one of {sorted(mapping)}")
                    return
                sub = mapping.get(kind) if isinstance(kind, str) else None
                if sub and sub != model.name:
                    submodel = self.model(model.module, sub)
                    self.check_object(obj, submodel.tree, submodel, (), where, scope)
                    return
        if path == ():
            self.check_required(obj, model, where, scope)
        for key, value in obj.items():
            if not isinstance(key, str):
                continue
            key_name = key
            here = f"{where}.{key_name}"
            if key_name not in node:
                if model.open and path == ():
                    continue
                near = [k for k in node if k.lower() == key_name.lower()]
                hint = f" (the definition spells it {near[0]!r})" if near else ""
                self.fail(here, f"no property {key_name!r} in {model.name}{hint}")
                continue
            child = node[key_name]
            full = path + (key_name,)
            if full in model.readonly_paths and not (len(full) == 1 and key_name in TOP_LEVEL_NAMING):
                self.fail(here, f"{key_name!r} is read-only in {model.name}")
            for candidate in self.candidates(value, scope):
                if isinstance(child, dict):
                    if isinstance(candidate, dict):
                        self.check_object(candidate, child, model, full, here, scope)
                    else:
                        self.fail(here, f"expects an object, got {candidate!r}")
                else:
                    attr, type_name = child
                    self.check_value(candidate, type_name, model, attr, here, scope)

    def check_required(self, obj: dict, model: Model, where: str, scope: dict) -> None:
        """Required properties present; constants set to their one value."""
        for path in model.required_paths:
            if where == scope.get("resource_where") and path[0] in BICEP_KEYS:
                continue  # the resource's `name` is Bicep's, not the body's
            node: Any = obj
            for i, seg in enumerate(path):
                if not isinstance(node, dict):
                    break  # computed: cannot tell
                node = {k.strip("'") if isinstance(k, str) else k: v for k, v in node.items()}
                if seg not in node:
                    self.fail(f"{where}.{'.'.join(path)}", f"required by {model.name}, missing")
                    break
                if i < len(path) - 1:
                    shapes = [c for c in self.candidates(node[seg], scope) if isinstance(c, dict)]
                    node = shapes[0] if len(shapes) == 1 else None
        for path, constant in model.constants.items():
            node = obj
            for seg in path[:-1]:
                node = node.get(seg) if isinstance(node, dict) else None
            if isinstance(node, dict) and path[-1] in node:
                for value in self.candidates(node[path[-1]], scope):
                    if value != constant:
                        self.fail(f"{where}.{'.'.join(path)}", f"{value!r} is not {constant!r}, the only value {model.name} takes")

    def check_value(self, value: Any, type_name: str, model: Model, attr: str, where: str, scope: dict) -> None:
        if type_name.startswith("[") and type_name.endswith("]"):
            if isinstance(value, list):
                inner = type_name[1:-1]
                for i, item in enumerate(value):
                    for candidate in self.candidates(item, scope):
                        self.check_value(candidate, inner, model, attr, f"{where}[{i}]", scope)
            elif value is not None:
                self.fail(where, f"expects an array, got {value!r}")
            return
        if type_name.startswith("{") and type_name.endswith("}"):
            inner = type_name[1:-1]
            if isinstance(value, dict):
                for key, item in value.items():
                    for candidate in self.candidates(item, scope):
                        self.check_value(candidate, inner, model, attr, f"{where}[{key}]", scope)
            return
        target = getattr(model.module, type_name, None)
        if isinstance(target, type) and hasattr(target, "_attribute_map"):
            if isinstance(value, dict):
                sub = self.model(model.module, type_name)
                self.check_object(value, sub.tree, sub, (), where, scope)
            elif value is not None:
                self.fail(where, f"expects an object ({type_name}), got {value!r}")
            return
        expected = PRIMITIVES.get(type_name)
        if expected is not None and value is not None:
            if not isinstance(value, expected) or (isinstance(value, bool) and bool not in expected):
                self.fail(where, f"expects {type_name}, got {value!r}")
                return
        enum_cls = model.enum_of(attr)
        if enum_cls is not None and isinstance(value, str):
            allowed = [member.value for member in enum_cls]
            if value not in allowed and value.lower() not in [str(a).lower() for a in allowed]:
                self.fail(where, f"{value!r} is not one of {allowed}")

    # --- files --------------------------------------------------------------------------------

    def parse(self, path: Path) -> dict:
        path = path.resolve()
        if path not in self.docs:
            self.docs[path] = self.parser.parse(file_path=path)
        return self.docs[path]

    def scope_of(self, path: Path) -> dict:
        doc = self.parse(path)
        return {
            "file": path.resolve(),
            "variables": doc.get("variables") or {},
            "parameters": doc.get("parameters") or {},
            "symbols": set(doc.get("resources") or {}) | set(doc.get("modules") or {}),
        }

    @staticmethod
    def unwrap(config: Any, scope: dict, candidates: Any = None) -> tuple[dict, dict]:
        """The body of a declaration under its `[for ...]` and `if (...)` wrappers, and the scope
        its loop variables add to."""
        local = dict(scope, symbols=set(scope["symbols"]), locals=set(scope.get("locals", set())))
        while isinstance(config, dict) and "config" in config and ("loop_type" in config or "condition" in config):
            loop = config.get("loop_type") or {}
            detail = loop.get("detail") or {}
            item, index = detail.get("item_name"), detail.get("index_name")
            if index:
                local["locals"].add(index)
            array = detail.get("array_name")
            if item and candidates is not None and isinstance(array, str):
                # Over a variable's or a parameter's array: the item takes each element's shape.
                elements = [e for c in candidates(array, scope) for e in (c if isinstance(c, list) else [c])]
                local["loops"] = dict(local.get("loops", {}), **{item: elements})
            elif item:
                local["locals"].add(item)
            config = config["config"]
        return (config if isinstance(config, dict) else {}), local

    def module_files(self, path: Path) -> list[tuple[str, Path, dict]]:
        """The local modules a file calls: (symbol, file, declaration)."""
        out = []
        for symbol, module in (self.parse(path).get("modules") or {}).items():
            rel = (module.get("detail") or {}).get("path")
            if module.get("type") == "local" and rel:
                out.append((symbol, (path.parent / rel).resolve(), module))
        return out

    def check_project(self, files: list[Path]) -> int:
        """Every file, callers before the modules they call, so that each module's parameters
        carry what its callers pass."""
        files = [f.resolve() for f in files]
        called = {callee for f in files for _, callee, _ in self.module_files(f)}
        order: list[Path] = []

        def visit(f: Path, seen: tuple[Path, ...] = ()) -> None:
            if f in seen:
                return
            for _, callee, _ in self.module_files(f):
                if callee.is_file():
                    visit(callee, seen + (f,))
            if f not in order:
                order.append(f)

        for f in files:
            if f not in called:
                visit(f)
        order.reverse()  # callers first
        order += [f for f in files if f not in order]
        total = 0
        for f in order:
            self.check_modules(f)
        for f in order:
            if f in files:
                total += self.check_file(f)
        return total

    def check_modules(self, path: Path) -> None:
        """Each module call against the module's parameters and outputs (what the Bicep compiler
        checks across files); records the values passed for the module's own check."""
        scope = self.scope_of(path)
        text = without_comments(path.read_text())
        modules = {symbol: callee for symbol, callee, _ in self.module_files(path)}
        for symbol, callee, module in self.module_files(path):
            where = f"{path}:{symbol}"
            if not callee.is_file():
                self.fail(where, f"no module file {callee}")
                continue
            declared = self.parse(callee).get("parameters") or {}
            callee_scope = self.scope_of(callee)
            body, local = self.unwrap(module.get("config"), scope, self.candidates)
            params = body.get("params") or {}
            if not isinstance(params, dict):
                continue
            for name, value in params.items():
                if name not in declared:
                    near = [p for p in declared if p.lower() == name.lower()]
                    hint = f" (it declares {near[0]!r})" if near else ""
                    self.fail(f"{where}.params.{name}", f"no parameter {name!r} in {callee.name}{hint}")
                    continue
                values = self.literal(value, local)
                self.check_parameter_values(f"{where}.params.{name}", declared[name], values, callee_scope)
                self.passed.setdefault((callee, name), []).extend(values)
            for name, decl in declared.items():
                if decl.get("default") is None and name not in params:
                    self.fail(f"{where}.params", f"the required parameter {name!r} of {callee.name} is not passed")
        for match in OUTPUT_REF.finditer(text):
            symbol, output = match.group(1), match.group(2) or match.group(3)
            if symbol in modules and modules[symbol].is_file():
                outputs = self.parse(modules[symbol]).get("outputs") or {}
                if output not in outputs:
                    near = [o for o in outputs if o.lower() == output.lower()]
                    hint = f" (it declares {near[0]!r})" if near else ""
                    self.fail(f"{path}:{symbol}.outputs.{output}", f"no output {output!r} in {modules[symbol].name}{hint}")
        for name, decl in scope["parameters"].items():
            if decl.get("default") is not None:
                values = self.literal(decl["default"], scope)
                self.check_parameter_values(f"{path}:param {name}", decl, values, scope, default=True)

    def check_parameter_values(self, where: str, decl: dict, values: list[Any], scope: dict, default: bool = False) -> None:
        expected = PARAM_TYPES.get(decl.get("type"))
        allowed = next((d.get("argument") for d in decl.get("decorators") or [] if d.get("type") == "allowed"), None)
        what = "default" if default else "value"
        for value in values:
            if value is None:
                continue
            if expected and (not isinstance(value, expected) or (isinstance(value, bool) and bool not in expected)):
                self.fail(where, f"the {what} {value!r} is not of the parameter's type {decl.get('type')}")
            elif allowed is not None and value not in allowed:
                self.fail(where, f"the {what} {value!r} is not one of the parameter's @allowed values {allowed}")

    def check_file(self, path: Path) -> int:
        doc = self.parse(path)
        scope = self.scope_of(path)
        count = 0
        for symbol, resource in (doc.get("resources") or {}).items():
            where = f"{path}:{symbol}"
            rtype, api = resource.get("type", ""), resource.get("api_version", "")
            if resource.get("existing"):
                continue
            found = self.module_for(rtype, api)
            if found is None:
                self.fail(where, f"no published definition of {rtype}@{api} in the pinned SDK packages")
                continue
            module, cls_name = found
            model = self.model(module, cls_name)
            config, local = self.unwrap(resource.get("config") or {}, scope, self.candidates)
            body = {k: v for k, v in config.items() if k not in BICEP_KEYS}
            local["resource_where"] = where
            self.check_object(body, model.tree, model, (), where, local)
            self.check_roles(rtype, body, where, local)
            self.check_platform_strings(rtype, body, where, local)
            count += 1
        self.check_workbook_metrics(path, scope)
        return count

    # --- what the platform accepts beyond the definitions --------------------------------------

    def values_at(self, value: Any, segments: list[str], where: str, scope: dict) -> Iterable[tuple[str, Any]]:
        """(where, literal) for each value a JSON path reaches, through variables and loops."""
        for c in self.candidates(value, scope):
            if not segments:
                yield where, c
                continue
            seg, rest = segments[0], segments[1:]
            if seg == "[]":
                if isinstance(c, list):
                    for i, item in enumerate(c):
                        yield from self.values_at(item, rest, f"{where}[{i}]", scope)
            elif isinstance(c, dict):
                c = {k.strip("'") if isinstance(k, str) else k: v for k, v in c.items()}
                if seg in c:
                    yield from self.values_at(c[seg], rest, f"{where}.{seg}", scope)

    @staticmethod
    def path_segments(path: str) -> list[str]:
        return [seg for part in path.split(".") for seg in re.split(r"(\[\])", part) if seg]

    def check_platform_strings(self, rtype: str, body: dict, where: str, scope: dict) -> None:
        for ctype, path, accepted, what in PLATFORM_STRINGS:
            if ctype.lower() != rtype.lower():
                continue
            for here, value in self.values_at(body, self.path_segments(path), where, scope):
                if isinstance(value, str) and value not in accepted:
                    near = [a for a in accepted if a.lower() == value.lower()]
                    hint = f" (spelt {near[0]!r})" if near else ""
                    self.fail(here, f"{value!r} is not a {what} Azure accepts here{hint}; see .ci/azure_constants.py")
        if rtype.lower() == "microsoft.web/serverfarms":
            for here, sku in self.values_at(body, ["sku"], where, scope):
                if not isinstance(sku, dict):
                    continue
                for name in self.candidates(sku.get("name"), scope):
                    for tier in self.candidates(sku.get("tier"), scope) if "tier" in sku else []:
                        if name in PLAN_SKUS and isinstance(tier, str) and tier != PLAN_SKUS[name]:
                            self.fail(f"{here}.tier", f"{tier!r} is not the tier of SKU {name!r} ({PLAN_SKUS[name]!r})")
        if rtype.lower() == "microsoft.insights/metricalerts":
            for here, criterion in self.values_at(body, self.path_segments("properties.criteria.allOf[]"), where, scope):
                if not isinstance(criterion, dict):
                    continue
                for namespace in self.candidates(criterion.get("metricNamespace"), scope):
                    for name in self.candidates(criterion.get("metricName"), scope):
                        self.check_metric(f"{here}.metricName", namespace, name)

    def check_metric(self, where: str, namespace: Any, name: Any) -> None:
        if not isinstance(namespace, str) or not isinstance(name, str):
            return
        known = METRICS.get(namespace.lower())
        if known is None:
            self.fail(where, f"no pinned metric list for namespace {namespace!r}; add it to .ci/azure_constants.py from its supported-metrics page")
        elif name not in known:
            near = [k for k in known if k.lower() == name.lower()]
            hint = f" (spelt {near[0]!r})" if near else ""
            self.fail(where, f"{name!r} is not a metric of {namespace}{hint}")

    def check_workbook_metrics(self, path: Path, scope: dict) -> None:
        """Workbook metric tiles (`{namespace, metric: '<namespace>-<category>-<metric>'}`) in the
        file's variables name real metrics of their namespace."""

        def walk(value: Any, where: str) -> None:
            if isinstance(value, dict):
                ns, metric = value.get("namespace"), value.get("metric")
                if isinstance(ns, str) and isinstance(metric, str) and "${" not in metric:
                    if not metric.lower().startswith(ns.lower() + "-") or metric.count("-") < 2:
                        self.fail(f"{where}.metric", f"{metric!r} is not '<namespace>-<category>-<metric>' for {ns!r}")
                    else:
                        self.check_metric(f"{where}.metric", ns, metric.rsplit("-", 1)[1])
                for k, v in value.items():
                    walk(v, f"{where}.{k}")
            elif isinstance(value, list):
                for i, v in enumerate(value):
                    walk(v, f"{where}[{i}]")

        def expand(value: Any) -> Any:
            # union(a, {...}) keeps both objects' fields; walk every argument.
            if isinstance(value, dict) and "function" in value and len(value) == 1:
                return [expand(a) for a in (value["function"].get("parameters") or {}).values()]
            if isinstance(value, dict):
                return {k: expand(v) for k, v in value.items()}
            if isinstance(value, list):
                return [expand(v) for v in value]
            return value

        for name, var in scope["variables"].items():
            walk(expand(var.get("value")), f"{path}:var {name}")

    def check_roles(self, rtype: str, body: dict, where: str, scope: dict) -> None:
        """Role assignments name built-in roles (pinned lists, azure_constants.py)."""
        props = body.get("properties")
        if not isinstance(props, dict) or "roleDefinitionId" not in props:
            return
        here = f"{where}.properties.roleDefinitionId"
        value = props["roleDefinitionId"]
        if rtype.lower() == "microsoft.authorization/roleassignments":
            roles, kind, segment = AZURE_BUILT_IN_ROLES, "an Azure built-in role", "roleDefinitions"
        elif rtype.lower() == "microsoft.documentdb/databaseaccounts/sqlroleassignments":
            roles, kind, segment = COSMOS_DATA_PLANE_ROLES, "a Cosmos DB built-in data-plane role", "sqlRoleDefinitions"
        else:
            return
        ids: list[Any] = []
        for c in [value] + self.candidates(value, scope):
            if isinstance(c, dict) and "function" in c:
                fn = c["function"]
                params = fn.get("parameters") or {}
                if fn.get("type", "").endswith("resource_id") and params.get("resource_type") == f"Microsoft.Authorization/{segment}":
                    names = [v for k, v in params.items() if k.startswith("resource_name") and v is not None]
                    if names:
                        ids += self.candidates(names[-1], scope)
            elif isinstance(c, str):
                m = re.search(rf"/{segment}/(?:\$\{{([A-Za-z_]\w*)\}}|([0-9a-fA-F-]{{36}}))$", c)
                if m and m.group(1):
                    ids += self.candidates(m.group(1), scope)
                elif m:
                    ids.append(m.group(2))
        for role in ids:
            if isinstance(role, str) and GUID.match(role) and role.lower() not in roles:
                self.fail(here, f"{role!r} is not {kind} (.ci/azure_constants.py)")
            elif isinstance(role, str) and not GUID.match(role):
                self.fail(here, f"{role!r} is not a role definition id")


def main(argv: Iterable[str]) -> int:
    files = [Path(a) for a in argv] or sorted(Path("infra").rglob("*.bicep"))
    checker = Checker()
    total = checker.check_project(files)
    for failure in checker.failures:
        print(f"FAILED {failure}", file=sys.stderr)
    if checker.failures:
        print(f"arm-types: {len(checker.failures)} problem(s) in {len(files)} file(s)", file=sys.stderr)
        return 1
    print(f"arm-types: {total} resources in {len(files)} files match their published definitions")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
