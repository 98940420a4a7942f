#!/usr/bin/env python3
"""Rank identity under `gpumemprof run` (docs/run.md, "Trace names and ranks"), on the simulated
device with progs/basic.c and the launchers' variables set by hand:
- without -o, a process whose environment names a rank writes gpumemprof.HOST.rankR.zst in the
  directory run started in; one that names none keeps gpumemprof.PID.zst;
- each launcher's variables (torchrun RANK/LOCAL_RANK/WORLD_SIZE, Open MPI OMPI_COMM_WORLD_*,
  Slurm SLURM_PROCID/SLURM_LOCALID/SLURM_NTASKS, PMI_RANK/PMI_SIZE) reach the trace header (rank,
  local_rank, world_size, rank_var), torchrun's first when srun's are set too, and never mixed
  (local rank and size of the launcher that named the rank);
- the header's wall-clock anchor is the time of the start (between the times the test read before
  and after the run);
- a rank's name that exists (a rerun) gives NAME.2.zst, not a lost trace; with --force the name is
  replaced; two processes of one rank in one run both get a file;
- %l expands to the local rank;
- `info FILE` says "rank 7 of 16 (local 3)" and its JSON has local_rank, world_size, rank_from;
  the report's process line says the same."""
import json
import os
import socket
import time

import agentlib as L

LAUNCHER_VARS = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
                 "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_SIZE", "SLURM_PROCID",
                 "SLURM_LOCALID", "SLURM_NTASKS", "PMI_RANK", "PMI_SIZE"]


def env_of(c, **kv):
    e = dict(c.env)
    for k in LAUNCHER_VARS:
        e.pop(k, None)
    e.update({k: str(v) for k, v in kv.items()})
    return e


def names(d, prefix="gpumemprof."):
    return sorted(f for f in os.listdir(d) if f.startswith(prefix) and f.endswith(".zst"))


def main():
    c = L.setup()
    basic = L.prog(c, "basic")
    host = socket.gethostname().replace("/", "_")
    d = os.path.join(c.tmp, "ranknames")
    os.makedirs(d, exist_ok=True)

    cases = [
        # (launcher variables, expected rank, local rank, world size, variable)
        (dict(RANK=5, LOCAL_RANK=1, WORLD_SIZE=8), 5, 1, 8, "RANK"),
        (dict(OMPI_COMM_WORLD_RANK=6, OMPI_COMM_WORLD_LOCAL_RANK=2, OMPI_COMM_WORLD_SIZE=12),
         6, 2, 12, "OMPI_COMM_WORLD_RANK"),
        (dict(SLURM_PROCID=7, SLURM_LOCALID=3, SLURM_NTASKS=16), 7, 3, 16, "SLURM_PROCID"),
        (dict(PMI_RANK=9, PMI_SIZE=10), 9, -1, 10, "PMI_RANK"),
        # torchrun under srun: the workers' RANK wins, srun's numbers are not mixed in
        (dict(RANK=11, WORLD_SIZE=32, SLURM_PROCID=0, SLURM_LOCALID=0, SLURM_NTASKS=4),
         11, -1, 32, "RANK"),
    ]
    for kv, rank, local, world, var in cases:
        before = time.time_ns()
        rc, out, err = L.gmp_run(c, [], [basic, "alloc", "1"], env=env_of(c, **kv), cwd=d)
        after = time.time_ns()
        L.eq(rc, 0, "%s: status (%s)" % (var, err.strip()))
        name = "gpumemprof.%s.rank%d.zst" % (host, rank)
        path = os.path.join(d, name)
        if not L.check(os.path.exists(path), "%s: %s written: %s" % (var, name, names(d))):
            continue
        L.check("gpumemprof: %s (pid" % path in err, "%s: the summary names it:\n%s" % (var, err))
        h = L.dump(c, path).header
        L.eq((h["rank"], h["local_rank"], h["world_size"], h["rank_var"]),
             (rank, local, world if world else 0, var), "%s: the header's rank identity" % var)
        L.check(before <= h["start_wall_ns"] <= after,
                "%s: wall-clock anchor %d within [%d, %d]" % (var, h["start_wall_ns"], before, after))
        L.eq(h["hostname"], socket.gethostname(), "%s: host in the header" % var)

    # no launcher: the pid name, as before
    rc, out, err = L.gmp_run(c, [], [basic, "alloc", "1"], env=env_of(c), cwd=d)
    pid_names = [f for f in names(d) if ".rank" not in f]
    L.eq(len(pid_names), 1, "no rank: one gpumemprof.PID.zst: %s" % names(d))
    if pid_names:
        t = L.dump(c, os.path.join(d, pid_names[0]))
        L.eq(pid_names[0], "gpumemprof.%d.zst" % t.header["pid"], "no rank: the pid name")
        L.eq((t.header["rank"], t.header["local_rank"], t.header["world_size"],
              t.header["rank_var"]), (-1, -1, 0, ""), "no rank: nothing in the header")

    # a rerun finds the rank's name taken: NAME.2.zst, nothing lost
    slurm = env_of(c, SLURM_PROCID=7, SLURM_LOCALID=3, SLURM_NTASKS=16)
    rc, out, err = L.gmp_run(c, [], [basic, "alloc", "2"], env=slurm, cwd=d)
    second = os.path.join(d, "gpumemprof.%s.rank7.2.zst" % host)
    L.check(os.path.exists(second), "rerun: NAME.2.zst: %s\n%s" % (names(d), err))
    L.check("not profiling" not in err, "rerun: nothing refused:\n" + err)
    if os.path.exists(second):
        L.eq(len(L.dump(c, second).of("alloc")), 2, "rerun: the new trace in NAME.2.zst")
    # --force: the name replaced (and no NAME.3.zst)
    rc, out, err = L.gmp_run(c, ["--force"], [basic, "alloc", "3"], env=slurm, cwd=d)
    first = os.path.join(d, "gpumemprof.%s.rank7.zst" % host)
    L.eq(len(L.dump(c, first).of("alloc")), 3, "--force: the rank's name holds the new trace")
    L.check(not os.path.exists(os.path.join(d, "gpumemprof.%s.rank7.3.zst" % host)),
            "--force: no NAME.3.zst: %s" % names(d))
    # two CUDA processes of one rank in one run (--force too): neither overwrites the other
    two = "%s alloc 1 >/dev/null & %s alloc 1 >/dev/null; wait" % (basic, basic)
    e = env_of(c, RANK=21, LOCAL_RANK=0, WORLD_SIZE=22)
    rc, out, err = L.gmp_run(c, ["--force"], ["sh", "-c", two], env=e, cwd=d)
    made = [f for f in names(d) if ".rank21." in f]
    L.eq(made, ["gpumemprof.%s.rank21.2.zst" % host, "gpumemprof.%s.rank21.zst" % host],
         "one rank, two processes: two traces")
    pids = {L.dump(c, os.path.join(d, f)).header["pid"] for f in made}
    L.eq(len(pids), len(made), "one rank, two processes: two pids")

    # %l: the local rank
    rc, out, err = L.gmp_run(c, ["-o", d + "/lr.%h.%r.%l.zst"], [basic, "alloc", "1"],
                             env=env_of(c, OMPI_COMM_WORLD_RANK=13,
                                        OMPI_COMM_WORLD_LOCAL_RANK=5, OMPI_COMM_WORLD_SIZE=14))
    L.eq(names(d, "lr."), ["lr.%s.13.5.zst" % host], "%l: the local rank")

    # info FILE and the report's process line
    slurm_trace = os.path.join(d, "gpumemprof.%s.rank7.zst" % host)
    rc, out, err = L.run([c.gmp, "info", slurm_trace], c.env)
    L.eq(rc, 0, "info FILE: status (%s)" % err.strip())
    L.check("rank 7 of 16 (local 3)" in out, "info FILE names the rank:\n" + out)
    rc, out, err = L.run([c.gmp, "info", "--json", slurm_trace], c.env)
    p = json.loads(out)["recordings"][0]["process"]
    L.eq((p["rank"], p["local_rank"], p["world_size"], p["rank_from"]), (7, 3, 16, "SLURM_PROCID"),
         "info --json: the rank identity")
    rc, out, err = L.run([c.gmp, "report", slurm_trace], c.env)
    L.check("rank 7 of 16 (local 3)" in out, "the report's process line:\n" + out[:2000])
    L.cleanup(c)
    L.finish("rank_names")


if __name__ == "__main__":
    main()
