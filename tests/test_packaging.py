"""The distribution: a name of its own on the package index (`relay` there is an unrelated project), one
version (relay.__version__, read by pyproject and by `relay --version`), every dependency bounded within a
major version."""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
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
    # `pip install relay...` would fetch the unrelated project of that name, and relay-notify is not on the
    # index yet: every install line is of this checkout or of a wheel built from it.
    assert not re.search(r"pip install (-\S+ )*'?relay", text)
    readme = (ROOT / "README.md").read_text()
    for line in (
        "pip install -e .",
        "pip install -e '.[otel]'",
        "pip wheel --no-deps -w dist .",
        "not on the package index",
    ):
        assert line in readme, line


def test_the_licence_is_apache_2_with_spdx_metadata_and_no_developer_tools_are_published() -> None:
    project = PYPROJECT["project"]
    assert project["license"] == "Apache-2.0" and project["license-files"] == ["LICENSE"]
    assert "Apache License" in (ROOT / "LICENSE").read_text() and "Version 2.0" in (ROOT / "LICENSE").read_text()
    assert "urls" not in project  # none until the project has a public address: no made-up one
    assert set(project["optional-dependencies"]) == {"otel"}
    tools = (ROOT / "requirements-test.txt").read_text()
    for tool in ("pytest", "ruff", "mypy", "playwright", "schemathesis", "standardwebhooks"):
        assert tool in tools and not any(n.startswith(tool) for n in project["dependencies"]), tool


def test_a_clean_tree_builds_a_wheel_and_sdist_with_no_warning(tmp_path: Path) -> None:
    # What a fresh clone holds for the build (the git-tracked files of the distribution), built offline with the
    # setuptools installed beside the tests: setuptools warns of deprecated metadata on stderr, not as an error.
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / "relay", tmp_path / "relay", ignore=shutil.ignore_patterns("__pycache__"))
    built = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(tmp_path / "dist"), str(tmp_path)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": ""},
        timeout=120,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    output = built.stdout + built.stderr
    assert not re.search(r"(?i)deprecat|warning", output), [
        line for line in output.splitlines() if re.search(r"(?i)deprecat|warning", line)
    ]
    names = sorted(p.name for p in (tmp_path / "dist").iterdir())
    assert names == [f"relay_notify-{relay.__version__}-py3-none-any.whl", f"relay_notify-{relay.__version__}.tar.gz"]
    with zipfile.ZipFile(tmp_path / "dist" / names[0]) as wheel:
        meta = wheel.read(f"relay_notify-{relay.__version__}.dist-info/METADATA").decode()
        assert "License-Expression: Apache-2.0" in meta and "Requires-Dist: pytest" not in meta
        assert f"relay_notify-{relay.__version__}.dist-info/licenses/LICENSE" in wheel.namelist()
