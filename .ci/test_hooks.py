"""The azd hooks that talk to Azure Resource Manager, run against a stand-in for it.

scripts/preprovision.sh (registers Microsoft.App when private networking is on) and
scripts/predeploy.sh (waits for the app's storage role on a first deploy) run as azd runs them,
with a fake `azd` on PATH that hands out a token as the oldest azd azure.yaml allows does (only
with `--output json`) and AZURE_ARM_ENDPOINT pointing at a local HTTP
server answering as Resource Manager does. Run by .ci/bicep-check.sh (python .ci/test_hooks.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SUB = "00000000-1111-2222-3333-444444444444"
TOKEN = "fake-arm-token"


class Arm:
    """A stand-in for Resource Manager: the Microsoft.App provider and the role assignments at a
    storage account, each request recorded."""

    def __init__(self) -> None:
        self.state = "NotRegistered"
        self.register_status = 200
        self.registering_polls = 2  # GETs answering Registering before Registered
        self.roles_status = 200
        self.role_created: list[str] = []
        self.requests: list[tuple[str, str, str]] = []
        arm = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def answer(self, status: int, body: object) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def handle_any(self, method: str) -> None:
                arm.requests.append((method, self.path, self.headers.get("Authorization", "")))
                if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                    return self.answer(401, {"error": {"code": "InvalidAuthenticationToken", "message": "no token"}})
                provider = f"/subscriptions/{SUB}/providers/Microsoft.App"
                if method == "GET" and self.path.startswith(provider + "?"):
                    if arm.state == "Registering":
                        arm.registering_polls -= 1
                        if arm.registering_polls < 0:
                            arm.state = "Registered"
                    return self.answer(200, {"namespace": "Microsoft.App", "registrationState": arm.state})
                if method == "POST" and self.path.startswith(provider + "/register?"):
                    if arm.register_status != 200:
                        return self.answer(arm.register_status, {"error": {"code": "AuthorizationFailed", "message": "does not have authorization to perform action 'Microsoft.App/register/action'"}})
                    arm.state = "Registering"
                    return self.answer(200, {"namespace": "Microsoft.App", "registrationState": "Registering"})
                if method == "GET" and "/providers/Microsoft.Authorization/roleAssignments?" in self.path:
                    if arm.roles_status != 200:
                        return self.answer(arm.roles_status, {"error": {"code": "Failed"}})
                    values = [
                        {"properties": {"roleDefinitionId": "x", "principalId": "p", "scope": "s", "createdOn": c}}
                        for c in arm.role_created
                    ]
                    return self.answer(200, {"value": values})
                return self.answer(404, {"error": {"code": "NotFound"}})

            def do_GET(self) -> None:
                self.handle_any("GET")

            def do_POST(self) -> None:
                self.handle_any("POST")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def run_hook(script: str, arm: Arm, env: dict[str, str], bin_dir: Path) -> tuple[int, str, float]:
    full_env = {
        "PATH": f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "HOME": os.environ.get("HOME", "/tmp"),
        "AZURE_ARM_ENDPOINT": arm.url,
        **env,
    }
    start = time.monotonic()
    run = subprocess.run(["bash", str(ROOT / "scripts" / script)], env=full_env, capture_output=True, text=True, timeout=120)
    return run.returncode, run.stdout + run.stderr, time.monotonic() - start


def iso(delta_s: float) -> str:
    return (datetime.now(timezone.utc) + timedelta(seconds=delta_s)).strftime("%Y-%m-%dT%H:%M:%S.%f0Z")


def main() -> int:
    problems: list[str] = []

    def expect(ok: bool, what: str, output: str) -> None:
        if not ok:
            problems.append(f"{what}\n--- hook output ---\n{output}")

    with tempfile.TemporaryDirectory() as tmp:
        bin_dir = Path(tmp)
        fake_azd = bin_dir / "azd"
        # The oldest azd azure.yaml allows (1.20.0): `azd auth token` answers only with
        # `--output json`, as {"token": ..., "expiresOn": ...}; without it, it fails.
        fake_azd.write_text(
            "#!/bin/sh\n"
            '[ "$1 $2" = "auth token" ] || exit 1\n'
            'case " $* " in\n'
            '  *" --output json "*|*" -o json "*|*" --output=json "*) ;;\n'
            '  *) echo "ERROR: this command requires --output json" >&2; exit 1 ;;\n'
            "esac\n"
            f'printf \'{{\\n  "token": "{TOKEN}",\\n  "expiresOn": "2030-01-01T00:00:00Z"\\n}}\\n\'\n'
        )
        fake_azd.chmod(0o755)
        no_az = bin_dir / "az"
        no_az.write_text("#!/bin/sh\nexit 1\n")
        no_az.chmod(0o755)
        fast = {"PROVIDER_POLL_SECONDS": "0.1", "PROVIDER_WAIT_SECONDS": "20", "AZURE_SUBSCRIPTION_ID": SUB}

        # preprovision: private networking off does nothing at all.
        arm = Arm()
        rc, out, _ = run_hook("preprovision.sh", arm, {"AZURE_SUBSCRIPTION_ID": SUB}, bin_dir)
        expect(rc == 0 and not arm.requests, "preprovision without VNET_ENABLED must succeed without calling Azure", out)
        arm.close()

        # VNET_ENABLED as azd reads booleans (Go's strconv.ParseBool): every true spelling checks
        # the provider, every false one does nothing, anything else stops before calling Azure.
        for value in ("1", "t", "T", "TRUE", "true", "True"):
            arm = Arm()
            arm.state = "Registered"
            rc, out, _ = run_hook("preprovision.sh", arm, {"VNET_ENABLED": value, **fast}, bin_dir)
            expect(rc == 0 and any(r[0] == "GET" for r in arm.requests),
                   f"preprovision must check Microsoft.App with VNET_ENABLED={value} (azd deploys the network)", out)
            arm.close()
        for value in ("0", "f", "F", "FALSE", "false", "False", ""):
            arm = Arm()
            rc, out, _ = run_hook("preprovision.sh", arm, {"VNET_ENABLED": value, **fast}, bin_dir)
            expect(rc == 0 and not arm.requests, f"preprovision must do nothing with VNET_ENABLED={value!r}", out)
            arm.close()
        for value in ("yes", "on", "tRuE"):
            arm = Arm()
            rc, out, _ = run_hook("preprovision.sh", arm, {"VNET_ENABLED": value, **fast}, bin_dir)
            expect(rc != 0 and not arm.requests and "neither true nor false" in out,
                   f"preprovision must stop on VNET_ENABLED={value}, which is neither true nor false", out)
            arm.close()

        # Not registered: registers, waits for Registered, succeeds.
        arm = Arm()
        rc, out, _ = run_hook("preprovision.sh", arm, {"VNET_ENABLED": "true", **fast}, bin_dir)
        posts = [r for r in arm.requests if r[0] == "POST"]
        expect(rc == 0 and arm.state == "Registered" and len(posts) == 1 and "Microsoft.App is registered" in out,
               "preprovision must register Microsoft.App and wait until it is registered", out)
        arm.close()

        # Already registered: no registration call.
        arm = Arm()
        arm.state = "Registered"
        rc, out, _ = run_hook("preprovision.sh", arm, {"VNET_ENABLED": "true", **fast}, bin_dir)
        expect(rc == 0 and not [r for r in arm.requests if r[0] == "POST"], "preprovision must not register a registered provider", out)
        arm.close()

        # Registration refused: stops, saying what to run.
        arm = Arm()
        arm.register_status = 403
        rc, out, _ = run_hook("preprovision.sh", arm, {"VNET_ENABLED": "true", **fast}, bin_dir)
        expect(rc != 0 and "az provider register --namespace Microsoft.App" in out and "HTTP 403" in out and "VNET_ENABLED false" in out,
               "preprovision must stop with the command to run when registering is refused", out)
        arm.close()

        # Never registered in time: stops, saying to try again.
        arm = Arm()
        arm.registering_polls = 10**6
        rc, out, _ = run_hook("preprovision.sh", arm, {"VNET_ENABLED": "true", **fast, "PROVIDER_WAIT_SECONDS": "1"}, bin_dir)
        expect(rc != 0 and "still Registering" in out, "preprovision must give up after its wait, saying so", out)
        arm.close()

        storage = {"AZURE_SUBSCRIPTION_ID": SUB, "AZURE_RESOURCE_GROUP": "rg-blog", "AZURE_STORAGE_ACCOUNT_NAME": "stblogx"}

        # predeploy: a role assigned a moment ago is waited for, until it is ROLE_SETTLE_SECONDS old.
        arm = Arm()
        arm.role_created = [iso(-3600), iso(0)]
        rc, out, took = run_hook("predeploy.sh", arm, {**storage, "ROLE_SETTLE_SECONDS": "4"}, bin_dir)
        expect(rc == 0 and took >= 2 and "waiting" in out, f"predeploy must wait for a fresh role assignment (took {took:.1f} s)", out)
        arm.close()

        # Old assignments: no wait.
        arm = Arm()
        arm.role_created = [iso(-3600), iso(-900)]
        rc, out, took = run_hook("predeploy.sh", arm, {**storage, "ROLE_SETTLE_SECONDS": "600"}, bin_dir)
        expect(rc == 0 and took < 5 and "waiting" not in out, "predeploy must not wait for an old role assignment", out)
        arm.close()

        # Cannot read them: the deploy goes on, and the reader learns what a 403 means.
        arm = Arm()
        arm.roles_status = 403
        rc, out, took = run_hook("predeploy.sh", arm, storage, bin_dir)
        expect(rc == 0 and "run azd deploy again" in out, "predeploy must let the deploy go on, naming the fix for a 403", out)
        arm.close()

    for problem in problems:
        print(f"test_hooks FAILED: {problem}", file=sys.stderr)
    if problems:
        return 1
    print("test_hooks: with the oldest allowed azd's token answer, preprovision registers Microsoft.App only with private networking (VNET_ENABLED read as azd reads booleans), waits for it, and stops with the fix when refused or too slow; predeploy waits for a fresh storage role assignment, not an old one, and lets the deploy go on when it cannot tell")
    return 0


if __name__ == "__main__":
    sys.exit(main())
