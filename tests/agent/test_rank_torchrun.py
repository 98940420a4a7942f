#!/usr/bin/env python3
"""Rank identity against a launcher nobody here wrote: PyTorch's own torchrun
(torch.distributed.run, with Debian's python3 and its torch) starts four workers of progs/rank_job
(--no_python) under `gpumemprof run` without -o. torchrun sets each worker's environment itself
(torch/distributed/elastic/agent/server/local_elastic_agent.py, _start_workers: LOCAL_RANK,
RANK, WORLD_SIZE ...), so the trace names (gpumemprof.HOST.rank0.zst .. rank3.zst) and the
headers' rank, local rank and world size (4) check that the agent reads what torchrun really
sets; `convert --chrome --chrome-torch-compat` of rank 3 then carries Kineto's
"distributedInfo": {"rank": 3, "world_size": 4} (as torch/profiler/profiler.py writes it). Exit 77 (skipped) without a python3 that has torch.distributed.run.

Debian's torch 1.13 passes None for --redirects/--tee when they are not given, which its own
to_map() does not accept; the wrapper hands it Std.NONE (what the option's default means) and
runs torchrun's main() otherwise unchanged."""
import json
import os
import socket
import subprocess
import sys

import agentlib as L

PY = "/usr/bin/python3"
WRAPPER = r'''
import sys
import torch.distributed.elastic.multiprocessing as m
import torch.distributed.elastic.multiprocessing.api as a
orig = a.to_map
def to_map(v, n):
    return orig(a.Std.NONE if v is None else v, n)
a.to_map = to_map
m.to_map = to_map
from torch.distributed.run import main
sys.argv[0] = "torchrun"
main()
'''


def main():
    c = L.setup()
    probe = subprocess.run([PY, "-c", "import torch.distributed.run"], capture_output=True)
    if probe.returncode != 0:
        print("skipped: %s has no torch.distributed.run" % PY)
        sys.exit(77)
    prog = L.prog(c, "rank_job")
    host = socket.gethostname().replace("/", "_")
    d = os.path.join(c.tmp, "torchrun")
    os.makedirs(d, exist_ok=True)
    wrapper = os.path.join(d, "torchrun.py")
    with open(wrapper, "w") as f:
        f.write(WRAPPER)
    env = dict(c.env)
    for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID",
              "PMI_RANK"):
        env.pop(k, None)
    rc, out, err = L.gmp_run(c, ["--stacks", "none"],
                             [PY, wrapper, "--standalone", "--nproc_per_node", "4",
                              "--no_python", prog, "2"], env=env, cwd=d, timeout=120)
    L.eq(rc, 0, "torchrun's status (%s)" % err.strip()[-2000:])
    want = ["gpumemprof.%s.rank%d.zst" % (host, r) for r in range(4)]
    L.eq(sorted(f for f in os.listdir(d) if f.endswith(".zst")), want,
         "one trace per torchrun worker, named by host and rank")
    for r, name in enumerate(want):
        if not os.path.exists(os.path.join(d, name)):
            continue
        h = L.dump(c, os.path.join(d, name)).header
        L.eq((h["rank"], h["local_rank"], h["world_size"], h["rank_var"]), (r, r, 4, "RANK"),
             "%s: the rank identity torchrun set" % name)
    chrome = os.path.join(d, "rank3.chrome.json")
    rc, out, err = L.run([c.gmp, "convert", os.path.join(d, want[3]), "--chrome", chrome,
                          "--chrome-torch-compat"], c.env)
    L.eq(rc, 0, "convert rank 3 (%s)" % err.strip())
    if rc == 0:
        with open(chrome) as f:
            L.eq(json.load(f).get("distributedInfo"), {"rank": 3, "world_size": 4},
                 "Kineto's distributedInfo")
    L.cleanup(c)
    L.finish("rank_torchrun")


if __name__ == "__main__":
    main()
