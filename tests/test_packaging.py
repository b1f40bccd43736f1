"""The distribution: a name of its own on the package index (`relay` there is an unrelated project), one
version (relay.__version__, read by pyproject and by `relay --version`), every dependency bounded within a
major version."""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

import pytest

import relay
from relay.cli.main import main

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
DIST = "relay-notify"


def test_the_distribution_is_relay_notify_and_its_version_is_relays() -> None:
    project = PYPROJECT["project"]
    assert project["name"] == DIST
    assert "version" not in project and "version" in project["dynamic"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "relay.__version__"}
    assert importlib.metadata.version(DIST) == relay.__version__


def test_relay_version_prints_it(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"relay {relay.__version__}"


def test_every_dependency_is_bounded_within_a_major_version() -> None:
    project = PYPROJECT["project"]
    needs = project["dependencies"] + project["optional-dependencies"]["otel"]
    for need in needs:
        bounds = re.search(r">=(\d+)[^,]*,\s*<(\d+)", need)
        assert bounds is not None or need.startswith("tzdata"), need
        assert bounds is None or int(bounds.group(2)) == int(bounds.group(1)) + 1, need


def test_the_install_lines_install_this_project() -> None:
    text = "\n".join(p.read_text() for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))])
    # `pip install relay...` would fetch the unrelated project of that name.
    assert not re.search(r"pip install (-\S+ )*'?relay(\[|\b(?!-notify))", text)
    readme = (ROOT / "README.md").read_text()
    for line in ("pip install -e .", "pip install -e '.[otel]'", f"pip install {DIST}", f"pip install '{DIST}[otel]'"):
        assert line in readme, line
