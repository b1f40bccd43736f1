"""P1 (ingest) of several relays in one run: `relay api` of other venvs (`--before`, given once or more) and of
this venv, each on an embedded Redis of its own with no worker (as `bench/run.py`'s P1), taking turns within
each round; wrk with 32 connections and a unique eventId per request, the same script as run.py's.

    .venv/bin/python bench/p1_ab.py --before /old/.venv --before /older/.venv --rounds 3

Prints each rate as it is measured, then the medians (notifications/s) and the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run  # bench/run.py, beside this file

from relay.runtime.embedded import EmbeddedRedis


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--before", type=Path, action="append", required=True, help="another relay's venv (its bin/relay is run)"
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=10)
    args = parser.parse_args()
    arms = {f"before{i + 1 if i else ''}": venv.resolve() / "bin" for i, venv in enumerate(args.before)}
    arms["after"] = run.BIN
    print(f"load average before: {os.getloadavg()}", flush=True)
    procs = run.Procs()
    tmp = Path(tempfile.mkdtemp(prefix="relay-p1-ab-"))
    rates: dict[str, list[float]] = {arm: [] for arm in arms}
    template = run.payload("EVT", run.FAST_KIND, 3).decode().replace('"eventId": "EVT"', '"eventId": "@@"')
    prefix, _, rest = template.partition("@@")
    script = tmp / "post.lua"

    def fresh_script() -> Path:  # a new run id each time: no eventId repeats (a duplicate is cheaper)
        values = {"run": uuid.uuid4().hex[:8], "prefix": run.lua_string(prefix), "suffix": run.lua_string(rest)}
        script.write_text(run.WRK_SCRIPT % {**values, "token": run.TOKEN})
        return script

    redises = []
    try:
        sink = run.Sink(procs)
        ports = {}
        for arm, bin_dir in arms.items():
            redis = EmbeddedRedis(tmp / f"{arm}-redis", run.FSYNC["policy"]).start()
            redises.append(redis)
            port = ports[arm] = run.free_port()
            config = run.relay_config(tmp / arm, port, sink, redis.url)
            procs.start([str(bin_dir / "relay"), "api", "--config", str(config)], cwd=tmp)
            health = f"http://127.0.0.1:{port}/healthz"
            run.wait_until(lambda url=health: run.http("GET", url)[0] == 200, 30, arm)  # type: ignore[misc]
            run.wrk_run(port, 1, 16, fresh_script())  # warm-up
        for r in range(args.rounds):
            print(f"round {r + 1}", flush=True)
            for arm, port in ports.items():
                rate, _, errors = run.wrk_run(port, args.seconds, 32, fresh_script())
                rates[arm].append(rate)
                print(f"   {arm}: {rate:.0f}/s ({errors} non-2xx)", flush=True)
    finally:
        procs.stop_all()
        for redis in redises:
            redis.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps({"median": {a: statistics.median(v) for a, v in rates.items()}, "runs": rates}, indent=1))
    print(f"load average after: {os.getloadavg()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
