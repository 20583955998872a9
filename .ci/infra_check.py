"""Offline checks of the deployment definition beside the Bicep templates.

Run by .ci/bicep-check.sh (in its venv, from the repository root):

  * infra/main.parameters.json names only parameters infra/main.bicep declares, gives each a
    value, and every `${VAR}` in it is one azd sets itself or one docs/deploy.md tells the user
    to set (`azd env set VAR ...`);
  * azure.yaml has the shape azd reads: a name azd accepts, one Functions service built by a
    hook with `language: custom`, its `dist` folder, and hooks whose scripts exist;
  * the postprovision hook writes a local.settings.json the Functions host can read, from the
    outputs main.bicep declares;
  * a first `azd up` on a new subscription meets nothing the templates leave to chance: azure.yaml
    asks for the azd version that has `language: custom` and docs/deploy.md names its alpha
    switch; the hooks that register Microsoft.App (private networking) and wait for the app's
    storage role are wired; `location` only takes Flex Consumption regions, with azd's location
    metadata;
  * the deployed app takes only API access tokens: with an app registration it sets
    BLOG_AUTH_WRITE_SCOPE to a scope the registration of docs/identity.md defines;
  * Cosmos DB's periodic backup storage redundancy is one every allowed region takes: not Geo
    where the region has no paired region;
  * the templates match the code (.ci/infra_code_check.py, against infra/expected.json);
  * the change-feed lag tile and alert read only the trigger functions' own log lines
    (Function.<name>.User), not the handler's stdout the host also forwards to `traces`.

.ci/test_infra_check.py makes each of these fail once.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml
from pycep import BicepParser

sys.path.insert(0, str(Path(__file__).resolve().parent))
from azure_constants import FLEX_CONSUMPTION_REGIONS, NONPAIRED_REGIONS  # noqa: E402
import infra_code_check  # noqa: E402

# azd's first release with `language: custom` (Azure/azure-dev #5771, in azure-dev-cli_1.20.0).
AZD_MIN_VERSION = (1, 20, 0)

# Set by azd for every provision (the environment's name, region, subscription and the signed-in
# principal); anything else a parameters file reads must be documented for the user to set.
AZD_PROVIDED = {
    "AZURE_ENV_NAME",
    "AZURE_LOCATION",
    "AZURE_SUBSCRIPTION_ID",
    "AZURE_PRINCIPAL_ID",
    "AZURE_PRINCIPAL_TYPE",
    "AZURE_RESOURCE_GROUP",
}

# `${NAME}` or `${NAME=default}` as azd substitutes them.
PLACEHOLDER = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:=[^}]*)?\}")

HOOK_EVENTS = {
    f"{when}{what}"
    for when in ("pre", "post")
    for what in ("provision", "deploy", "up", "down", "package", "restore", "build", "refresh")
}
HOOK_KEYS = {"shell", "run", "continueOnError", "interactive", "windows", "posix", "secrets"}
# azd's language names (its schema's examples plus `custom`, the language of a project azd does
# not build itself).
LANGUAGES = {
    "dotnet", "csharp", "fsharp", "py", "python", "js", "ts", "java", "go", "golang", "docker",
    "custom",
}
HOSTS = {"appservice", "containerapp", "function", "springapp", "staticwebapp", "aks"}


class Failures:
    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, where: str, message: str) -> None:
        self.items.append(f"{where}: {message}")


def check_parameters(root: Path, parser: BicepParser, out: Failures) -> None:
    main = root / "infra/main.bicep"
    params_file = root / "infra/main.parameters.json"
    declared = parser.parse(file_path=main).get("parameters") or {}
    try:
        doc = json.loads(params_file.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        out.add(str(params_file), f"not readable JSON: {exc}")
        return
    given = doc.get("parameters")
    if not isinstance(given, dict):
        out.add(str(params_file), "no 'parameters' object")
        return
    for name in sorted(set(given) - set(declared)):
        out.add(str(params_file), f"sets {name!r}, which main.bicep does not declare")
    for name, entry in given.items():
        if not isinstance(entry, dict) or not ({"value", "reference"} & set(entry)):
            out.add(str(params_file), f"parameter {name!r} needs a 'value' (or 'reference')")
    for name, spec in declared.items():
        has_default = (spec or {}).get("default") is not None
        if not has_default and name not in given:
            out.add(str(params_file), f"required parameter {name!r} of main.bicep is not given")

    deploy_doc = root / "docs/deploy.md"
    documented = deploy_doc.read_text() if deploy_doc.is_file() else ""
    for var in sorted(set(PLACEHOLDER.findall(params_file.read_text()))):
        if var in AZD_PROVIDED:
            continue
        if not re.search(rf"azd env set {re.escape(var)}\b", documented):
            out.add(
                str(params_file),
                f"${{{var}}} is neither set by azd nor documented in docs/deploy.md "
                f"(as `azd env set {var} ...`)",
            )
    print(f"checked {params_file.relative_to(root)}: {len(given)} parameters")


def check_hook(where: str, hook: object, root: Path, out: Failures) -> None:
    if not isinstance(hook, dict):
        out.add(where, "a hook is a mapping with `run`")
        return
    for key in set(hook) - HOOK_KEYS:
        out.add(where, f"unknown hook key {key!r}")
    for platform in ("windows", "posix"):
        if platform in hook:
            check_hook(f"{where}.{platform}", hook[platform], root, out)
    run = hook.get("run")
    if run is None and not ({"windows", "posix"} & set(hook)):
        out.add(where, "no `run`")
        return
    if run is not None:
        if hook.get("shell") not in ("sh", "pwsh"):
            out.add(where, "`shell` must be sh or pwsh")
        for word in str(run).split():
            if word.startswith("scripts/") and not (root / word).is_file():
                out.add(where, f"runs {word}, which does not exist")


def check_azure_yaml(root: Path, out: Failures) -> dict:
    path = root / "azure.yaml"
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        out.add(str(path), f"not readable YAML: {exc}")
        return {}
    if not isinstance(doc, dict):
        out.add("azure.yaml", "not a mapping")
        return {}
    name = doc.get("name", "")
    if not (isinstance(name, str) and len(name) >= 2 and re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", name)):
        out.add("azure.yaml", f"name {name!r}: lowercase letters, digits and hyphens, at least 2")
    infra = doc.get("infra") or {}
    infra_path = root / infra.get("path", "infra") / f"{infra.get('module', 'main')}.bicep"
    if infra.get("provider", "bicep") != "bicep" or not infra_path.is_file():
        out.add("azure.yaml", f"infra must be Bicep at {infra_path.relative_to(root)}")
    services = doc.get("services")
    if not isinstance(services, dict) or len(services) != 1:
        out.add("azure.yaml", "exactly one service, the Function App")
        return doc
    for svc_name, svc in services.items():
        where = f"azure.yaml services.{svc_name}"
        if svc.get("host") not in HOSTS:
            out.add(where, f"host {svc.get('host')!r} is not one azd knows")
        if svc.get("host") != "function":
            out.add(where, "host must be `function`")
        if svc.get("language") not in LANGUAGES:
            out.add(where, f"language {svc.get('language')!r} is not one azd knows")
        if svc.get("language") != "custom":
            out.add(where, "language must be `custom`: azd cannot build Rust, the hook does")
        project = root / svc.get("project", ".")
        if not project.is_dir():
            out.add(where, f"project {svc.get('project')!r} is not a folder")
        if svc.get("dist") != "dist/app":
            out.add(where, "dist must be dist/app, the folder scripts/package.sh writes")
        if svc.get("remoteBuild") is not False:
            out.add(where, "remoteBuild must be false: the package is built here, not by Oryx")
        hooks = svc.get("hooks") or {}
        for event, hook in hooks.items():
            if event not in HOOK_EVENTS:
                out.add(where, f"unknown hook event {event!r}")
            check_hook(f"{where}.hooks.{event}", hook, root, out)
        if "scripts/package.sh" not in str((hooks.get("prepackage") or {}).get("run", "")):
            out.add(where, "the prepackage hook must run scripts/package.sh")
    for event, hook in (doc.get("hooks") or {}).items():
        if event not in HOOK_EVENTS:
            out.add("azure.yaml hooks", f"unknown hook event {event!r}")
        check_hook(f"azure.yaml hooks.{event}", hook, root, out)
    print(f"checked azure.yaml: service {', '.join(services)}")
    return doc


def check_service_tag(root: Path, doc: dict, out: Failures) -> None:
    """azd finds the app by its azd-service-name tag; the resource group carries azd-env-name."""
    text = "\n".join(p.read_text() for p in sorted((root / "infra").rglob("*.bicep")))
    for svc_name in (doc.get("services") or {}):
        if not re.search(rf"'azd-service-name':\s*serviceName", text) or not re.search(
            rf"param serviceName string = '{re.escape(svc_name)}'", text
        ):
            out.add("infra", f"no Function App tagged azd-service-name = {svc_name!r}")
    if "'azd-env-name': environmentName" not in (root / "infra/main.bicep").read_text():
        out.add("infra/main.bicep", "the resource group needs the azd-env-name tag")


def check_postprovision(root: Path, parser: BicepParser, out: Failures) -> None:
    outputs = set(parser.parse(file_path=root / "infra/main.bicep").get("outputs") or {})
    script = (root / "scripts/postprovision.sh").read_text()
    used = set(re.findall(r"\b(COSMOS_ENDPOINT|COSMOS_DATABASE|AUTH_ISSUER|AUTH_AUDIENCE|AUTH_WRITE_SCOPE)\b", script))
    for name in sorted(used - outputs):
        out.add("scripts/postprovision.sh", f"reads {name}, which main.bicep does not output")
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / "local.settings.json"
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "COSMOS_ENDPOINT": "https://cosmos-blog-x.documents.azure.com:443/",
            "COSMOS_DATABASE": "blog",
            "AUTH_ISSUER": "https://login.microsoftonline.com/tenant/v2.0",
            "AUTH_AUDIENCE": 'aud"ience',
            "AUTH_WRITE_SCOPE": "Blog.Write",
            "LOCAL_SETTINGS": str(target),
        }
        run = subprocess.run(
            ["bash", str(root / "scripts/postprovision.sh")], env=env, capture_output=True, text=True
        )
        if run.returncode != 0:
            out.add("scripts/postprovision.sh", f"failed: {run.stderr.strip()}")
            return
        values = json.loads(target.read_text()).get("Values", {})
        expected = {
            "FUNCTIONS_WORKER_RUNTIME": "custom",
            "BLOG_STORE": "cosmos",
            "COSMOS__accountEndpoint": env["COSMOS_ENDPOINT"],
            "COSMOS_DATABASE": "blog",
            "BLOG_AUTH": "jwt",
            "BLOG_AUTH_ISSUER": env["AUTH_ISSUER"],
            "BLOG_AUTH_AUDIENCE": env["AUTH_AUDIENCE"],
            "BLOG_AUTH_WRITE_SCOPE": env["AUTH_WRITE_SCOPE"],
        }
        for key, value in expected.items():
            if values.get(key) != value:
                out.add("scripts/postprovision.sh", f"{key} is {values.get(key)!r}, not {value!r}")
    print("checked scripts/postprovision.sh: writes local.settings.json from the outputs")


def check_first_up(root: Path, parser: BicepParser, doc: dict, out: Failures) -> None:
    """What a first `azd up` on a new subscription needs beyond the templates' shape."""
    required = str((doc.get("requiredVersions") or {}).get("azd", ""))
    m = re.fullmatch(r"\s*>=?\s*(\d+)\.(\d+)\.(\d+)\s*", required)
    if not m or tuple(int(g) for g in m.groups()) < AZD_MIN_VERSION:
        out.add("azure.yaml", f"requiredVersions.azd must be '>= {'.'.join(map(str, AZD_MIN_VERSION))}' or later, the first azd with language custom; it is {required!r}")
    deploy_doc = (root / "docs/deploy.md").read_text()
    for needed in ("azd config set alpha.language.custom on", "AZD_ALPHA_ENABLE_LANGUAGE_CUSTOM=true"):
        if needed not in deploy_doc:
            out.add("docs/deploy.md", f"must tell the reader to enable azd's alpha feature ({needed!r})")
    hooks = doc.get("hooks") or {}
    if "scripts/preprovision.sh" not in str((hooks.get("preprovision") or {}).get("run", "")):
        out.add("azure.yaml hooks", "preprovision must run scripts/preprovision.sh (registers Microsoft.App for private networking)")
    for svc_name, svc in (doc.get("services") or {}).items():
        run = str(((svc.get("hooks") or {}).get("predeploy") or {}).get("run", ""))
        if "scripts/predeploy.sh" not in run:
            out.add(f"azure.yaml services.{svc_name}", "predeploy must run scripts/predeploy.sh (waits for the app's storage role)")

    location = (parser.parse(file_path=root / "infra/main.bicep").get("parameters") or {}).get("location") or {}
    decorators = location.get("decorators") or []
    allowed = next((d.get("argument") for d in decorators if d.get("type") == "allowed"), None)
    metadata = next((d.get("argument") for d in decorators if d.get("type") == "metadata"), None) or {}
    if not allowed:
        out.add("infra/main.bicep", "param location needs an @allowed list of Flex Consumption regions")
    else:
        for region in sorted(set(allowed) - FLEX_CONSUMPTION_REGIONS):
            out.add("infra/main.bicep", f"location allows {region!r}, which is not a Flex Consumption region (.ci/azure_constants.py)")
    if (metadata.get("azd") or {}).get("type") != "location":
        out.add("infra/main.bicep", "param location needs @metadata({azd: {type: 'location'}}) so azd offers only the allowed regions")


def check_write_scope(root: Path, parser: BicepParser, out: Failures) -> None:
    """With an app registration, the deployed app requires the registration's write scope."""
    app = root / "infra/modules/functionapp.bicep"
    text = app.read_text()
    if not re.search(r"name: 'BLOG_AUTH_WRITE_SCOPE'\s*\n\s*value: authWriteScope", text):
        out.add(str(app.relative_to(root)), "the jwt app settings must set BLOG_AUTH_WRITE_SCOPE to authWriteScope")
    defaults = set()
    for rel in ("infra/main.bicep", "infra/resources.bicep", "infra/modules/functionapp.bicep"):
        param = (parser.parse(file_path=root / rel).get("parameters") or {}).get("authWriteScope") or {}
        defaults.add(param.get("default"))
    identity = (root / "docs/identity.md").read_text()
    defined = set(re.findall(r'\\"value\\":\\"([^"\\]+)\\",\\"type\\":\\"User\\"', identity))
    for default in sorted(map(str, defaults)):
        if default not in defined:
            out.add("infra", f"authWriteScope defaults to {default!r}, which the app registration of docs/identity.md does not define (it defines {sorted(defined)})")


def allowed_locations(root: Path, parser: BicepParser) -> list[str]:
    location = (parser.parse(file_path=root / "infra/main.bicep").get("parameters") or {}).get("location") or {}
    decorators = location.get("decorators") or []
    return next((d.get("argument") for d in decorators if d.get("type") == "allowed"), None) or []


def bicep_string_list(text: str, name: str) -> list[str] | None:
    m = re.search(rf"^var {re.escape(name)} = \[(.*?)^\]", text, flags=re.M | re.S)
    return re.findall(r"'([^']*)'", m.group(1)) if m else None


def check_backup_redundancy(root: Path, parser: BicepParser, out: Failures) -> None:
    """Periodic backups go to geo-redundant storage only where the region has a pair."""
    rel = "infra/modules/cosmos.bicep"
    text = (root / rel).read_text()
    m = re.search(r"backupStorageRedundancy:\s*(.+)", text)
    if not m:
        out.add(rel, "no backupStorageRedundancy: the periodic backup's redundancy must be chosen (a region without a pair has no default)")
        return
    expr = m.group(1).strip()
    literal = re.fullmatch(r"'(\w+)'", expr)
    mapped = re.fullmatch(r"contains\((\w+),\s*(?:toLower\(location\)|location)\)\s*\?\s*'(\w+)'\s*:\s*'(\w+)'", expr)
    if literal:
        def redundancy(region: str) -> str:
            return literal.group(1)
    elif mapped:
        listed = bicep_string_list(text, mapped.group(1))
        if listed is None:
            out.add(rel, f"backupStorageRedundancy reads {mapped.group(1)}, which is not a list of regions in the file")
            return

        def redundancy(region: str) -> str:
            return mapped.group(2) if region in listed else mapped.group(3)
    else:
        out.add(rel, f"backupStorageRedundancy {expr!r} is neither a value nor contains(<regions>, location) ? '<value>' : '<value>'")
        return
    for region in allowed_locations(root, parser):
        value = redundancy(region)
        if value not in ("Geo", "Local", "Zone"):
            out.add(rel, f"backupStorageRedundancy is {value!r} in {region!r}: Geo, Local or Zone")
        elif value == "Geo" and region in NONPAIRED_REGIONS:
            out.add(rel, f"backupStorageRedundancy is Geo in {region!r}, a region main.bicep allows that has no paired region: Cosmos DB takes only Local or Zone there (.ci/azure_constants.py NONPAIRED_REGIONS)")


def trigger_functions(root: Path) -> list[str]:
    names = []
    for path in sorted((root / "functions").glob("*/function.json")):
        bindings = json.loads(path.read_text()).get("bindings") or []
        if any(b.get("type") == "cosmosDBTrigger" for b in bindings):
            names.append(path.parent.name)
    return names


def check_lag_queries(root: Path, out: Failures) -> None:
    """The lag tile and alert read the trigger functions' log category only."""
    expected = {f"Function.{name}.User" for name in trigger_functions(root)}
    for rel in ("infra/modules/workbook.bicep", "infra/modules/alerts.bicep"):
        queries = [q for q in re.findall(r"query: '((?:[^'\\]|\\.)*)'", (root / rel).read_text()) if "lag_ms" in q]
        if not queries:
            out.add(rel, "no change-feed lag query")
        for query in queries:
            m = re.search(r"customDimensions\.Category\)?\s+in\s*\(([^)]*)\)", query)
            categories = set(re.findall(r'"([^"]+)"', m.group(1))) if m else set()
            if categories != expected:
                out.add(rel, f"the lag query must read only the categories {sorted(expected)} (the handler's stdout reaches traces as Host.Function.Console); it reads {sorted(categories) or 'every category'}")
            if 'contains "lag_ms="' not in query or re.search(r'\bhas\s+"lag_ms=', query):
                out.add(rel, 'the lag query must match `contains "lag_ms="` (`has` matches whole terms)')


def slug(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading."""
    text = re.sub(r"[`*_\[\]()]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def check_deploy_links(root: Path, out: Failures) -> None:
    """docs/deploy.md's links to other pages and sections lead somewhere, and the README sections
    it names exist."""
    page = root / "docs/deploy.md"
    text = page.read_text()
    anchors_of: dict[Path, set[str]] = {}

    def anchors(path: Path) -> set[str]:
        if path not in anchors_of:
            body = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
            anchors_of[path] = {slug(h) for h in re.findall(r"^#+\s+(.+)$", body, flags=re.M)}
        return anchors_of[path]

    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue
        file_part, _, anchor = target.partition("#")
        path = (page.parent / file_part).resolve() if file_part else page
        if not path.is_file():
            out.add("docs/deploy.md", f"links to {target}, which does not exist")
        elif anchor and anchor not in anchors(path):
            out.add("docs/deploy.md", f"links to {target}, which has no such section")
    readme = root / "README.md"
    for name in re.findall(r"README(?:'s|,)\s+\"([^\"]+)\"", text):
        if slug(name) not in anchors(readme):
            out.add("docs/deploy.md", f"names the README's section {name!r}, which the README does not have")


def run(root: Path, parser: BicepParser | None = None) -> list[str]:
    parser = parser or BicepParser()
    out = Failures()
    check_parameters(root, parser, out)
    doc = check_azure_yaml(root, out)
    check_service_tag(root, doc, out)
    check_postprovision(root, parser, out)
    check_first_up(root, parser, doc, out)
    check_write_scope(root, parser, out)
    check_backup_redundancy(root, parser, out)
    check_lag_queries(root, out)
    check_deploy_links(root, out)
    infra_code_check.run(root, parser, out.add)
    return out.items


def main() -> int:
    items = run(Path.cwd())
    for item in items:
        print(f"FAILED {item}", file=sys.stderr)
    return 1 if items else 0


if __name__ == "__main__":
    sys.exit(main())
