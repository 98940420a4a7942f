"""gpumemprof.profile() on Debian's numba (a real CUDA client) on the simulated device, for
test_profile.py. Prints one JSON object: the package's results and, as the oracle, what the
simulated driver itself says it holds (numba's ctx.get_memory_info(), i.e. cuMemGetInfo: its
reserved bytes; numba asks cuMemAlloc for nbytes, numba/cuda/cudadrv/devicearray.py, and every
size here is a multiple of the driver's 256-byte alignment, so reserved == requested).
  profile_prog.py early   import gpumemprof before CUDA is initialized
  profile_prog.py late    numba initializes CUDA and allocates first, then import gpumemprof
  profile_prog.py spawn   import gpumemprof (armed, CUDA not initialized), then start a child that
                          allocates without importing it and one that imports it (mode child)
Lines marked SITE-x are looked up by the test (top sites at the peak)."""
import json
import sys
import threading

MODE = sys.argv[1]
MIB = 1 << 20
out = {"mode": MODE}

if MODE == "spawn":
    import subprocess

    import gpumemprof

    out["status0"] = gpumemprof.status().state
    code = ("import numpy as np; from numba import cuda; cuda.select_device(0); "
            "a = cuda.device_array(1 << 20, dtype=np.uint8); print('allocated')")
    p = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out["plain_child"] = [p.returncode, p.stdout.decode().split(), p.stderr.decode()]
    p = subprocess.run([sys.executable, __file__, "child"], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE)
    out["gpumemprof_child"] = [p.returncode, json.loads(p.stdout.decode() or "null"),
                               p.stderr.decode()]
    import numpy as np
    from numba import cuda

    cuda.select_device(0)
    with gpumemprof.profile("parent") as pp:
        a = cuda.device_array(MIB, dtype=np.uint8)
    out["parent"] = [gpumemprof.status().state, pp.result.peak_increase_bytes]
    print(json.dumps(out))
    sys.exit(0)

if MODE == "child":
    import gpumemprof

    import numpy as np
    from numba import cuda

    cuda.select_device(0)
    with gpumemprof.profile("child") as pc:
        a = cuda.device_array(2 * MIB, dtype=np.uint8)
    st = gpumemprof.status()
    print(json.dumps([st.state, st.in_process, pc.result.peak_increase_bytes]))
    sys.exit(0)

if MODE == "late":
    import numpy as np
    from numba import cuda

    cuda.select_device(0)
    ctx = cuda.current_context()
    before = cuda.device_array(2 * MIB, dtype=np.uint8)  # SITE-BEFORE (a baseline)
    f0, total = ctx.get_memory_info()
    import gpumemprof

    st = gpumemprof.status()
    out["status"] = {"state": st.state, "late": st.late, "in_process": st.in_process}
    with gpumemprof.profile("late-block") as p:
        del before
        ctx.memory_manager.deallocations.clear()
        x = cuda.device_array(MIB, dtype=np.uint8)  # SITE-LATE
        f1, _ = ctx.get_memory_info()
    out["late"] = p.result.as_dict()
    out["oracle"] = {"delta": f0 - f1}
    print(json.dumps(out))
    sys.exit(0)

import gpumemprof  # noqa: E402  (before CUDA)

out["product"] = gpumemprof.__product__
st = gpumemprof.status()
out["status0"] = {"state": st.state, "in_process": st.in_process}
import numpy as np  # noqa: E402
from numba import cuda  # noqa: E402

cuda.select_device(0)
ctx = cuda.current_context()
dealloc = ctx.memory_manager.deallocations
st = gpumemprof.status()
out["status"] = {"state": st.state, "late": st.late, "in_process": st.in_process,
                 "injected": st.injected, "trace": st.trace}


def used():
    f, t = ctx.get_memory_info()
    return t - f


out["oracle"] = {"base": used()}  # the context's own memory: no allocation yet
keep = cuda.device_array(MIB // 2, dtype=np.uint8)  # SITE-KEEP
u0 = used()
with gpumemprof.profile("block") as p:
    a = cuda.device_array(MIB, dtype=np.uint8)  # SITE-A
    b = cuda.device_array(3 * MIB, dtype=np.uint8)  # SITE-B
    u_peak = used()
    del a
    dealloc.clear()
    c = cuda.device_array(MIB // 4, dtype=np.uint8)  # SITE-C
    # more than the journal's 4,096 changes after the peak: the sites at the peak must survive
    for i in range(2100):
        s = cuda.device_array(256, dtype=np.uint8)  # SITE-SMALL
        del s
    dealloc.clear()
    u_end = used()
out["block"] = p.result.as_dict()
out["oracle"].update({"peak": u_peak - u0, "net": u_end - u0})

# nested scopes, and a thread's allocation inside the outer one (a scope counts the process)
with gpumemprof.profile("outer") as po:
    u1 = used()
    with gpumemprof.profile("inner") as pi:
        t = cuda.device_array(2 * MIB, dtype=np.uint8)  # SITE-INNER
        u_ipeak = used()
        del t
        dealloc.clear()

    def worker():
        w = cuda.device_array(MIB, dtype=np.uint8)  # SITE-THREAD
        del w
        cuda.current_context().memory_manager.deallocations.clear()

    th = threading.Thread(target=worker)
    th.start()
    th.join()
    d = cuda.device_array(MIB, dtype=np.uint8)  # SITE-D
    u2 = used()
out["outer"] = po.result.as_dict()
out["inner"] = pi.result.as_dict()
out["oracle"].update({"inner_peak": u_ipeak - u1, "outer_net": u2 - u1})


@gpumemprof.profile("step")
def step(n):
    t = cuda.device_array(n * MIB, dtype=np.uint8)  # SITE-STEP
    del t
    dealloc.clear()


@gpumemprof.profile
def bare():
    return 7


for n in (1, 2, 3):
    step(n)
out["stats"] = step.stats.as_dict()
out["bare"] = [bare(), bare.stats.calls, bare.stats.name]
out["summary"] = sorted(gpumemprof.summary())
out["current"] = {str(k): v for k, v in gpumemprof.current_bytes().items()}
out["oracle"]["current"] = used()
print(json.dumps(out))
