"""The ctypes binding of the gpumemprof agent's C ABI (agent/gmp_agent_api.h, version 1).

Finds the agent library (libgpumemprof_agent.so), loads it once and declares its functions. The
structs mirror gmp_agent_api.h field for field; gmp_scope_close is given their sizes, so an agent
of a later minor version fills only what this module knows."""
import ctypes
import os
import threading

API_MAJOR = 0  # GMP_API_VERSION // 1000: versions 1..999 are compatible
MAX_SITES = 16  # GMP_API_MAX_SITES
MAX_DEVICES = 64

STATE_DISABLED, STATE_OFF, STATE_WAITING, STATE_ON, STATE_DONE = -1, 0, 1, 2, 3
STATE_NAMES = {-1: "disabled", 0: "off", 1: "waiting", 2: "on", 3: "done"}
F_INJECTED, F_INPROC, F_LATE, F_TRACE = 0x1, 0x2, 0x4, 0x8

LIBNAME = "libgpumemprof_agent.so"


class Site(ctypes.Structure):
    _fields_ = [("bytes", ctypes.c_uint64), ("allocs", ctypes.c_uint64),
                ("stack", ctypes.c_uint32), ("pad", ctypes.c_uint32)]


class Device(ctypes.Structure):
    _fields_ = [("device", ctypes.c_int32), ("nsites", ctypes.c_uint32),
                ("start_bytes", ctypes.c_uint64), ("peak_bytes", ctypes.c_uint64),
                ("end_bytes", ctypes.c_uint64), ("allocated_bytes", ctypes.c_uint64),
                ("freed_bytes", ctypes.c_uint64), ("allocs", ctypes.c_uint64),
                ("frees", ctypes.c_uint64), ("baseline_frees", ctypes.c_uint64),
                ("sites", Site * MAX_SITES)]


class Scope(ctypes.Structure):
    _fields_ = [("size", ctypes.c_uint32), ("dev_size", ctypes.c_uint32),
                ("flags", ctypes.c_uint32), ("ndevices", ctypes.c_uint32),
                ("elapsed_ns", ctypes.c_uint64), ("lost_events", ctypes.c_uint64),
                ("state", ctypes.c_int32), ("pad", ctypes.c_uint32)]


def candidates():
    """Where the agent library is looked for, in order, with where each comes from."""
    out = []
    env = os.environ.get("GPUMEMPROF_AGENT", "")
    if env:
        out.append((env, "GPUMEMPROF_AGENT"))
    inj = os.environ.get("CUDA_INJECTION64_PATH", "")
    if inj:
        # gpumemprof run (or an earlier start) injected this one: the same library, the same agent
        out.append((inj, "CUDA_INJECTION64_PATH"))
    here = os.path.dirname(os.path.abspath(__file__))
    # build tree and cmake --install: <agentdir>/python/gpumemprof/ beside <agentdir>/LIBNAME
    out.append((os.path.normpath(os.path.join(here, "..", "..", LIBNAME)), "beside the package"))
    try:
        from . import _where  # written by the build: the agent this copy was built with

        if getattr(_where, "AGENT", ""):
            out.append((_where.AGENT, "the build this package came from"))
    except ImportError:
        pass
    return out


class Agent:
    """The loaded library, or why there is none (lib None, why set)."""

    def __init__(self):
        self.lib, self.path, self.why = None, None, None
        tried = []
        for path, origin in candidates():
            if not os.path.exists(path):
                tried.append("%s (%s): no such file" % (path, origin))
                continue
            try:
                lib = ctypes.CDLL(path)
                ver = lib.gmp_api_version
            except (OSError, AttributeError) as e:
                # CUDA_INJECTION64_PATH may name another tool's library: not ours, go on
                tried.append("%s (%s): %s" % (path, origin, e))
                continue
            ver.restype = ctypes.c_int
            v = ver()
            if v < 1 or v // 1000 != API_MAJOR:
                tried.append("%s (%s): ABI version %d, this package needs major %d" %
                             (path, origin, v, API_MAJOR))
                continue
            self._declare(lib)
            self.lib, self.path, self.version = lib, path, v
            return
        self.why = ("the gpumemprof package at %s found no gpumemprof agent library (%s); tried: %s. "
                    "Set GPUMEMPROF_AGENT to the path of libgpumemprof_agent.so"
                    % (os.path.dirname(os.path.abspath(__file__)), LIBNAME,
                       "; ".join(tried) or "nothing"))

    @staticmethod
    def _declare(lib):
        c = ctypes
        lib.gmp_start.argtypes = [c.c_char_p, c.c_size_t]
        lib.gmp_start.restype = c.c_int
        lib.gmp_status.argtypes = [c.POINTER(c.c_uint), c.c_char_p, c.c_size_t]
        lib.gmp_status.restype = c.c_int
        lib.gmp_scope_open.argtypes = [c.c_char_p]
        lib.gmp_scope_open.restype = c.c_uint64
        lib.gmp_scope_close.argtypes = [c.c_uint64, c.POINTER(Scope), c.c_void_p, c.c_int]
        lib.gmp_scope_close.restype = c.c_int
        lib.gmp_current_bytes.argtypes = [c.POINTER(c.c_int32), c.POINTER(c.c_uint64), c.c_int]
        lib.gmp_current_bytes.restype = c.c_int
        lib.gmp_stack_text.argtypes = [c.c_uint32, c.c_char_p, c.c_size_t]
        lib.gmp_stack_text.restype = c.c_int

    def start(self):
        buf = ctypes.create_string_buffer(2048)
        st = self.lib.gmp_start(buf, len(buf))
        return st, buf.value.decode("utf-8", "replace")

    def status(self):
        flags = ctypes.c_uint(0)
        buf = ctypes.create_string_buffer(2048)
        st = self.lib.gmp_status(ctypes.byref(flags), buf, len(buf))
        return st, flags.value, buf.value.decode("utf-8", "replace")

    def open(self, name):
        return self.lib.gmp_scope_open(name.encode("utf-8", "replace") if name else None)

    _tls = threading.local()  # each thread's result buffers, reused: no allocation per close

    def close(self, handle):
        b = getattr(self._tls, "b", None)
        if b is None:
            b = self._tls.b = (Scope(size=ctypes.sizeof(Scope), dev_size=ctypes.sizeof(Device)),
                               (Device * MAX_DEVICES)())
        info, devs = b
        n = self.lib.gmp_scope_close(handle, ctypes.byref(info), devs, MAX_DEVICES)
        if n < 0:
            return None, []
        # copies: the buffers are reused by the next close of this thread
        return (Scope.from_buffer_copy(info),
                [Device.from_buffer_copy(devs[i]) for i in range(min(n, MAX_DEVICES))])

    def current(self):
        d = (ctypes.c_int32 * MAX_DEVICES)()
        b = (ctypes.c_uint64 * MAX_DEVICES)()
        n = self.lib.gmp_current_bytes(d, b, MAX_DEVICES)
        return {d[i]: b[i] for i in range(n)}

    def stack_text(self, stack):
        buf = ctypes.create_string_buffer(65536)
        n = self.lib.gmp_stack_text(stack, buf, len(buf))
        if n < 0:
            return []
        return buf.value.decode("utf-8", "replace").splitlines()
