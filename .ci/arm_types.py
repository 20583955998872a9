"""Check every resource in Bicep files against Azure's published definition of its type.

For each `resource` declaration, its type and API version name a model in the Azure management
SDK for Python (generated from the same REST API specifications Azure Resource Manager serves),
pinned in .ci/bicep-check.sh. Every property the template sets is looked up in that model: a
property the model does not have, a read-only one, or a literal value outside the model's enum
for that property fails the check. Values reached through variables, conditionals, union() and
concat() are followed; a parameter with @allowed values is checked with each of them; anything
computed at deployment time (references, interpolations, other functions) is not a literal and
is left alone.

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
}

# Keys of a resource declaration that are Bicep's, not the resource body's.
BICEP_KEYS = {"parent", "scope", "dependsOn", "name"}
# Read-only in the models, yet what a template names a resource by.
TOP_LEVEL_NAMING = {"name", "id", "type"}


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
    def __init__(self) -> None:
        self.parser = BicepParser()
        self.failures: list[str] = []
        self.models: dict[tuple[str, str], Model] = {}

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
            if value in scope["variables"]:
                return self.candidates(scope["variables"][value].get("value"), scope, depth + 1)
            if value in scope["parameters"]:
                for deco in scope["parameters"][value].get("decorators") or []:
                    if deco.get("type") == "allowed":
                        return list(deco.get("argument") or [])
                return []
            if value in scope["symbols"]:
                return []
        return [value]

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
        enum_cls = model.enum_of(attr)
        if enum_cls is not None and isinstance(value, str):
            allowed = [member.value for member in enum_cls]
            if value not in allowed and value.lower() not in [str(a).lower() for a in allowed]:
                self.fail(where, f"{value!r} is not one of {allowed}")

    # --- files --------------------------------------------------------------------------------

    def check_file(self, path: Path) -> int:
        doc = self.parser.parse(file_path=path)
        scope = {
            "variables": doc.get("variables") or {},
            "parameters": doc.get("parameters") or {},
            "symbols": set(doc.get("resources") or {}) | set(doc.get("modules") or {}),
        }
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
            config = resource.get("config") or {}
            local = dict(scope, symbols=set(scope["symbols"]))
            # `[for x in xs: {...}]` and `if (cond) {...}` wrap the body one level down.
            while isinstance(config, dict) and "config" in config and ("loop_type" in config or "condition" in config):
                loop = config.get("loop_type") or {}
                detail = loop.get("detail") or {}
                for name in (detail.get("item_name"), detail.get("index_name")):
                    if name:
                        local["symbols"].add(name)
                # Over a variable's array: the loop item takes each element's shape.
                array = detail.get("array_name")
                item = detail.get("item_name")
                if item and isinstance(array, str) and array in scope["variables"]:
                    elements = [
                        e
                        for c in self.candidates(array, scope)
                        for e in (c if isinstance(c, list) else [c])
                    ]
                    local["loops"] = dict(local.get("loops", {}), **{item: elements})
                config = config["config"]
            body = {k: v for k, v in config.items() if k not in BICEP_KEYS}
            self.check_object(body, model.tree, model, (), where, local)
            count += 1
        return count


def main(argv: Iterable[str]) -> int:
    files = [Path(a) for a in argv] or sorted(Path("infra").rglob("*.bicep"))
    checker = Checker()
    total = 0
    for path in files:
        total += checker.check_file(path)
    for failure in checker.failures:
        print(f"FAILED {failure}", file=sys.stderr)
    if checker.failures:
        print(f"arm-types: {len(checker.failures)} problem(s) in {len(files)} file(s)", file=sys.stderr)
        return 1
    print(f"arm-types: {total} resources in {len(files)} files match their published definitions")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
