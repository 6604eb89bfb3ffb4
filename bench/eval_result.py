"""The result file of an evaluation run (bench/run_*_eval.sh): the fields every benchmark writes
(benchmark, device, commit, date, config, figures, anchor), the commit from $DSINFER_COMMIT or git, the
CPU's model name as the device unless the run names its GPU."""

import datetime
import json
import os
import subprocess


def write(path, benchmark, config, figures, anchor, device=None):
    commit = os.environ.get("DSINFER_COMMIT") or subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip() or "unknown"
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
               "unknown")
    device = device or f"cpu: {cpu} ({os.cpu_count()} threads)"
    result = {"benchmark": benchmark, "device": device, "commit": commit,
              "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
              "config": config, "figures": figures, "anchor": anchor}
    json.dump(result, open(path, "w"), indent=2)
    print(json.dumps(figures, indent=1))
