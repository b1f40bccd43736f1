"""templates/README.md: its copy command, run as written, copies the shipped template it names."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_copy_command_copies_the_shipped_template(tmp_path: Path) -> None:
    readme = (ROOT / "templates" / "README.md").read_text()
    block = re.search(r"\n    (mkdir -p .*?)\n\n", readme, re.S)
    assert block is not None
    command = block.group(1).replace("\n    ", "\n")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    copied = tmp_path / "templates" / "access-control-request-failed" / "system-owner.html.j2"
    shipped = ROOT / "relay" / "core" / "builtin_templates" / "access-control-request-failed" / "system-owner.html.j2"
    assert copied.read_text() == shipped.read_text()
