"""scripts/package.sh picks its way to the x86_64 Linux package by the building machine, and checks
what it built without `file`.

The script runs against stand-ins for rustc, rustup and cargo (cargo writes a chosen ELF header
where the build leaves the binary), on a PATH holding the system's tools less `file`, so no
build runs: x86_64 Linux builds with musl-gcc and the toolchain's lld, arm64 Linux and macOS with
cargo-zigbuild (installed from crates.io when missing), and a Windows toolchain is told where to
build; a binary that is not an x86-64 ELF executable fails the script. Run by .ci/bicep-check.sh
(python .ci/test_package.py).
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET = "x86_64-unknown-linux-musl"


def elf_header(machine: int, e_type: int = 3) -> bytes:
    """The first 64 bytes of a little-endian 64-bit ELF file for `machine`."""
    ident = b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8)
    return ident + struct.pack("<HHI", e_type, machine, 1) + bytes(64 - 16 - 8)


def stub(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)


def system_tools(into: Path) -> Path:
    """A folder of links to the system's tools, less `file` and the ones the stand-ins replace."""
    system = into / "system"
    system.mkdir()
    for directory in ("/usr/local/bin", "/usr/bin", "/bin"):
        if not os.path.isdir(directory):
            continue
        for entry in os.listdir(directory):
            link = system / entry
            if entry in REPLACED or link.exists():
                continue
            source = os.path.join(directory, entry)
            if os.access(source, os.X_OK) and not os.path.isdir(source):
                link.symlink_to(source)
    return system


REPLACED = {"rustc", "rustup", "cargo", "cargo-zigbuild", "zig", "musl-gcc", "file", "apt-get", "sudo"}
SYSTEM_DIR = tempfile.TemporaryDirectory()
SYSTEM = system_tools(Path(SYSTEM_DIR.name))


def run(host: str, machine: int = 0x3E, have_zigbuild: bool = True, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """Runs package.sh as on `host`; returns its exit code, its output and cargo's calls."""
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        stubs = tmp_path / "stubs"
        stubs.mkdir()
        sysroot = tmp_path / "sysroot"
        lld = sysroot / "lib/rustlib" / host / "bin/gcc-ld/ld.lld"
        lld.parent.mkdir(parents=True)
        lld.write_text("#!/bin/sh\n")
        lld.chmod(0o755)
        target_dir = tmp_path / "target"
        header = tmp_path / "header"
        header.write_bytes(elf_header(machine))
        calls = tmp_path / "cargo-calls"
        stub(stubs, "rustc", f'case "$1" in -vV) echo "host: {host}" ;; --print) echo "{sysroot}" ;; esac\n')
        stub(stubs, "rustup", f'[ "$1 $2" = "target list" ] && echo {TARGET}\nexit 0\n')
        stub(stubs, "cargo",
             f'echo "$* CC=${{CC_x86_64_unknown_linux_musl:-}} RUSTFLAGS=${{CARGO_TARGET_X86_64_UNKNOWN_LINUX_MUSL_RUSTFLAGS:-}}" >>"{calls}"\n'
             'case "$1" in build|zigbuild)\n'
             f'  mkdir -p "{target_dir}/{TARGET}/dist" && cp "{header}" "{target_dir}/{TARGET}/dist/handler" ;;\n'
             f'  install) printf "#!/bin/sh\\n" >"{stubs}/cargo-zigbuild"; chmod +x "{stubs}/cargo-zigbuild" ;;\n'
             "esac\n")
        stub(stubs, "musl-gcc", "exit 0\n")
        stub(stubs, "zig", "exit 0\n")
        if have_zigbuild:
            stub(stubs, "cargo-zigbuild", "exit 0\n")
        full_env = {
            "PATH": f"{stubs}:{SYSTEM}",
            "HOME": str(tmp_path),
            "CARGO_HOME": str(tmp_path / "cargo-home"),
            "CARGO_TARGET_DIR": str(target_dir),
            "DIST": str(tmp_path / "dist/app"),
            **(env or {}),
        }
        done = subprocess.run(["bash", str(ROOT / "scripts/package.sh")], env=full_env, capture_output=True, text=True, timeout=60)
        cargo_calls = calls.read_text() if calls.exists() else ""
        return done.returncode, done.stdout + done.stderr, cargo_calls


def main() -> int:
    problems: list[str] = []

    def expect(ok: bool, what: str, output: str, calls: str) -> None:
        if not ok:
            problems.append(f"{what}\n--- package.sh output ---\n{output}\n--- cargo calls ---\n{calls}")

    rc, out, calls = run("x86_64-unknown-linux-gnu")
    expect(rc == 0 and calls.startswith("build ") and "CC=musl-gcc" in calls and "-fuse-ld=lld" in calls,
           "x86_64 Linux must build with cargo build, musl-gcc and the toolchain's lld, with no `file`", out, calls)
    expect("x86-64" in out, "package.sh must say what it checked the binary is", out, calls)

    for host in ("aarch64-unknown-linux-gnu", "aarch64-apple-darwin", "x86_64-apple-darwin"):
        rc, out, calls = run(host)
        expect(rc == 0 and calls.startswith("zigbuild ") and f"--target {TARGET}" in calls
               and "CC=musl-gcc" not in calls and "-fuse-ld=lld" not in calls,
               f"{host} must build the x86_64 package with cargo zigbuild (no musl-gcc, no host lld)", out, calls)

    rc, out, calls = run("aarch64-unknown-linux-gnu", have_zigbuild=False)
    expect(rc == 0 and "install --locked cargo-zigbuild" in calls and "zigbuild " in calls,
           "a machine without cargo-zigbuild must install it from crates.io", out, calls)

    rc, out, calls = run("x86_64-pc-windows-msvc")
    expect(rc != 0 and "WSL" in out and not calls, "a Windows toolchain must be told where to build, before building", out, calls)

    rc, out, calls = run("x86_64-unknown-linux-gnu", machine=0xB7)
    expect(rc != 0 and "not an x86-64 Linux executable" in out, "an arm64 binary must fail the script", out, calls)

    rc, out, calls = run("x86_64-unknown-linux-gnu", env={"PACKAGE_CC": "zig"})
    expect(rc == 0 and calls.startswith("zigbuild "), "PACKAGE_CC=zig must build with cargo zigbuild on x86_64 too", out, calls)

    for problem in problems:
        print(f"test_package FAILED: {problem}", file=sys.stderr)
    if problems:
        return 1
    print("test_package: package.sh builds the x86_64 package with musl-gcc on x86_64 Linux and with cargo-zigbuild on arm64 Linux and macOS (installing it when missing), refuses Windows saying where to build, and checks the binary's ELF header without `file`")
    return 0


if __name__ == "__main__":
    sys.exit(main())
