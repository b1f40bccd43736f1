"""P2's light-load p50 of the relay installed in this interpreter's venv, beside the stack floor, for an A/B of two
versions on one machine in one hour (run it with each version's own venv, one after the other):

    /path/to/old/.venv/bin/python bench/p2_ab.py 3
    .venv/bin/python bench/p2_ab.py 3

Prints {"relay": [p50 ms per round], "floor": [...]}.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run  # bench/run.py, beside this file


def main() -> int:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    procs = run.Procs()
    tmp = Path(tempfile.mkdtemp(prefix="relay-p2-ab-"))
    found: dict[str, list[float]] = {"relay": [], "floor": []}
    try:
        sink = run.Sink(procs)
        for r in range(rounds):
            with run.relay_serve(procs, tmp / f"relay-{r}", sink) as (port, _):
                found["relay"].append(run.light_load(run.latency, port, sink)[0])
            with run.stack_floor(procs, tmp / f"floor-{r}", sink) as port:
                found["floor"].append(run.light_load(run.latency, port, sink)[0])
    finally:
        procs.stop_all()
    print(json.dumps(found))
    return 0


if __name__ == "__main__":
    sys.exit(main())
