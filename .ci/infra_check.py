"""Offline checks of the deployment definition beside the Bicep templates.

Run by .ci/bicep-check.sh (in its venv, from the repository root):

  * infra/main.parameters.json names only parameters infra/main.bicep declares, gives each a
    value, and every `${VAR}` in it is one azd sets itself or one docs/deploy.md tells the user
    to set (`azd env set VAR ...`);
  * azure.yaml has the shape azd reads: a name azd accepts, one Functions service built by a
    hook with `language: custom`, its `dist` folder, and hooks whose scripts exist;
  * the postprovision hook writes a local.settings.json the Functions host can read, from the
    outputs main.bicep declares.
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
    used = set(re.findall(r"\b(COSMOS_ENDPOINT|COSMOS_DATABASE|AUTH_ISSUER|AUTH_AUDIENCE)\b", script))
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
        }
        for key, value in expected.items():
            if values.get(key) != value:
                out.add("scripts/postprovision.sh", f"{key} is {values.get(key)!r}, not {value!r}")
    print("checked scripts/postprovision.sh: writes local.settings.json from the outputs")


def main() -> int:
    root = Path.cwd()
    parser = BicepParser()
    out = Failures()
    check_parameters(root, parser, out)
    doc = check_azure_yaml(root, out)
    check_service_tag(root, doc, out)
    check_postprovision(root, parser, out)
    for item in out.items:
        print(f"FAILED {item}", file=sys.stderr)
    return 1 if out.items else 0


if __name__ == "__main__":
    sys.exit(main())
