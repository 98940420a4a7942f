#!/usr/bin/env python3
"""tests/view: `gpumemprof view` in a real terminal. tmux (the outside oracle for what a terminal
shows) runs the viewer in a detached session of a given size; `send-keys` types, `capture-pane`
reads the screen back. Each case is one ctest test:

  test_view.py GPUMEMPROF GEN_TRACES CASE [SNAPSHOT]
  test_view.py GPUMEMPROF GEN_TRACES CASE SIMCUDA_DIR TRAIN_SIM GROW_PROG [PRELOAD]

peak      opens at the first device's peak: the screen shows the peak bytes that
          `gpumemprof report --format json` gives, as allocated at the cursor and in the live tree
snapshot  the same on a real PyTorch snapshot (tests/data/torch-snapshots) with record_function
          annotations, which opens grouped by range: the tree's roots on the screen are the
          JSON's live_at_peak_by_range rows, the largest first; then on a copy without its annotations (Python's pickle
          module), which opens grouped by user frame (no ranges): the tree's first roots are the
          JSON's live_at_peak_by_frame rows (bytes, count, frame); grouped by category, the
          categories' bytes and counts are those of the JSON's live_at_peak_by_category
timezero  times read as the report writes them, from the report's zero (its first record of any
          kind): the peak's time on the screen is the report's text's, on the Nsight Systems
          export (whose first record, an NVTX range, comes 0.284 s before its first allocation),
          a snapshot and the generated trace
oom       the qwen3 snapshot (an OOM on device 1 of 3): opens on device 1 with the report's OOM
          verdict in the findings row under the cursor's row, which counts one failure (the
          snapshot's one `oom` entry, imported as a failed allocation and its OOM), grouped by
          user frame (its ranges hold no allocation), the rows
          in heat colours by share (capture-pane -e); at the OOM (o) the focus is the failed
          request (its size, the first frame the report's JSON shows of the OOM's stack) and
          the event's line names that frame
navigate  Home/End/Right/./p move the cursor (the event counter and the cursor's time follow),
          +/0 zoom the window (the axis's end changes and comes back); o/v/V jump to the
          generated trace's OOM (its failed allocation, the same request, is no stop of its own
          for o, O, v or V) and alert
search    / finds an allocation made in a range ('backward'), the focus pane shows that range
resize    the screen follows tmux's resize (120x40 then 80x24) and still draws every pane
follow    --follow on a trace that grows (a copy written a prefix at a time, as a writer flushes
          whole frames): the event count grows to the whole trace's and '(following)' goes away
quit      q exits with status 0 and the terminal is back (the shell's screen, no viewer left);
          Ctrl-C exits by SIGINT (status 130) and restores it too
color     colours on a terminal that has them; none under NO_COLOR (capture-pane -e)
verdict   (test_view.py GPUMEMPROF GEN_TRACES verdict TEST_ANALYSIS) the leaking trace of
          tests/analysis (`test_analysis write-leak`: 10 steps of 10 ms, each leaking 1 MiB in
          step/opt at +3 ms, so the leaked allocations are at +0.013 s .. +0.103 s, addresses
          0x200000000000 + i * 0x10000000): from Home, v lands at the first leaked allocation
          (cursor time, focus address, never freed) with the report's own verdict line (as
          `gpumemprof report` prints it) in the status line; v again at the last one; v once more
          finds nothing after; V goes back; ? lists the report's verdicts under v V; at 80x24 the
          verdict's line fills the last two rows; on the generated trace, v onto its OOM shows the
          report's verdict for it (capacity: ...); the findings row (under the cursor's row) is
          the report's leak verdict
frames    a stack reads as in the report: on the diff tests' trace B (gen_traces diff) at its peak
          the focus's stack is the report's "by call stack" row of that allocation, its outer
          address inside no loaded module (0x401000) left out, also under i (no folded frame);
          on `gen_traces report alike` (no ranges: by user frame) the tree's roots are the
          report JSON's live_at_peak_by_frame rows, a call site whose outer frames are such
          addresses one root, stacks of nothing but such addresses one root `?`
whatif    (test_view.py GPUMEMPROF GEN_TRACES whatif SNAPSHOT) --whatif CONF on the real train-step
          snapshot: row 2 gives CONF's peak reserved as `whatif --format json` computes it (under
          the recording's own settings, the defaults: PyTorch's own peak reserved, by Python's
          pickle module), the y axis reaches the higher of that and the recorded reserve, the
          replayed line and its legend are drawn; nothing of it without --whatif; a setting
          whatif refuses, or --whatif with --follow, is a usage error (status 2)
badinput  (no terminal needed) a file that is no recording, a trace cut in its first frame, a
          corrupt zstd frame: one line on stderr and status 1 before the screen changes; not a
          terminal: status 1; a bad option: status 2
On the simulated CUDA device (tests/simcuda):
layers      the layers sample (samples/train_sim) recorded by `run`: opens at its peak (the JSON
            report's) with the live ranges (train/step/forward/layerN) shown
follow_run  `view --follow` started before the trace exists, while `run` records grow_prog (its
            memory grows by 8 MiB a step): the allocated bytes on the screen grow, and end at the
            report's peak once the trace is complete
run_view    `run --view -- grow_prog`: the viewer shows the memory grow while the program runs,
            '[program ended]' after, the program's output under L, q ends with the program's status
run_view2   `run --view` on a program that starts two CUDA processes (one trace each): the first
            is shown, the second is added as it appears ('trace 1/2') and r switches to it
"""
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import time


def fmt_bytes(b):  # formats/base/gmp_units.c
    if b < 1024:
        return "%d B" % b
    v, u = float(b), -1
    units = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"]
    while v >= 1024.0 and u < 5:
        v /= 1024.0
        u += 1
    return "%.2f %s" % (v, units[u])


class Term:
    def __init__(self, cmd, w=80, h=24, env=None):
        self.sock = "gmpview-%d-%d" % (os.getpid(), int(time.time() * 1000) % 100000)
        e = {"LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "TERM": "screen-256color"}
        e.update(env or {})
        envs = " ".join("%s=%s" % (k, v) for k, v in e.items())
        unset = "" if "NO_COLOR" in e else "unset NO_COLOR; "
        shell = "%sexport %s; trap true INT; %s; echo EXIT=$?; sleep 120" % (unset, envs, cmd)
        subprocess.run(["tmux", "-L", self.sock, "-f", "/dev/null", "new-session", "-d", "-x",
                        str(w), "-y", str(h), "sh", "-c", shell], check=True)

    def tmux(self, *args):
        return subprocess.run(["tmux", "-L", self.sock] + list(args), check=True,
                              capture_output=True, text=True).stdout

    def screen(self, escapes=False):
        return self.tmux("capture-pane", "-p", *(["-e"] if escapes else []))

    def keys(self, *k, literal=False):
        self.tmux("send-keys", *(["-l"] if literal else []), *k)

    def wait(self, what, timeout=10.0, gone=False):
        end = time.time() + timeout
        s = ""
        while time.time() < end:
            s = self.screen()
            if (what in s) != gone:
                return self.settled(s, what, gone)
            time.sleep(0.1)
        fail("%s %r on the screen after %.0f s; screen:\n%s" %
             ("still" if gone else "no", what, timeout, s))

    def settled(self, s, what, gone):
        """The screen once tmux has the whole of a redraw: capture-pane can catch one half drawn
        (the title already there, the rows not yet); up to 1 s for two equal captures."""
        for _ in range(10):
            time.sleep(0.1)
            s2 = self.screen()
            if s2 == s or (what in s2) == gone:
                return s
            s = s2
        return s

    def close(self):
        subprocess.run(["tmux", "-L", self.sock, "kill-server"], capture_output=True)


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def report_peak(gmp, path):
    out = subprocess.run([gmp, "report", "--format", "json", path], check=True,
                         capture_output=True, text=True).stdout
    devs = [d for d in json.loads(out)["devices"] if d["id"] >= 0]
    return devs[0]["peak_allocated_bytes"]


class PlainData(pickle.Unpickler):
    """A PyTorch snapshot is plain data: any global in it is refused."""

    def find_class(self, module, name):
        raise pickle.UnpicklingError("global %s.%s refused" % (module, name))


def load_snapshot(path):  # through Python's own pickle module
    with open(path, "rb") as f:
        return PlainData(f).load()


def without_annotations(path, tmp):
    """A copy of a PyTorch snapshot without its record_function annotations (no ranges)."""
    doc = load_snapshot(path)
    doc.pop("external_annotations", None)
    out = os.path.join(tmp, "no-annotations-" + os.path.basename(path))
    with open(out, "wb") as f:
        pickle.dump(doc, f, protocol=4)
    return out


def tree_roots(screen, n):
    """The first n roots of the live tree (100 columns wide): (bytes, count, name[:28])."""
    roots = [l[:59] for l in screen.splitlines() if l[:2] in ("\u25be ", "\u25b8 ")][:n]
    return sorted((" ".join(r.split()[-3:-1]), int(r.split()[-1]), r[2:30].strip())
                  for r in roots)


def line_of(screen, prefix):
    for l in screen.splitlines():
        if l.startswith(prefix):
            return l
    return ""


def event_no(screen):
    l = [x for x in screen.splitlines() if "Events around the cursor" in x]
    if not l:
        fail("no events pane:\n" + screen)
    w = l[0].split("(event ")[1].split(")")[0].split(" of ")
    return int(w[0]), int(w[1])


def check_peak(gmp, path, t, by="range"):
    peak = fmt_bytes(report_peak(gmp, path))
    s = t.wait("Live at cursor", 30)
    row = line_of(s, "cursor ")
    if ("alloc %s " % peak) not in row or ("peak %s " % peak) not in row:
        fail("the cursor's row does not show the peak %s as allocated and peak:\n%s" % (peak, s))
    if ("Live at cursor by %s: %s in" % (by, peak)) not in s:
        fail("the live tree's total is not the peak %s:\n%s" % (peak, s))
    return s


def focus_stack(screen):
    """The lines of the focus pane's stack (stripped), from under "stack (innermost first):"."""
    lines = screen.splitlines()
    col = [x for x in lines if "Allocation in focus" in x][0].index("Allocation in focus")
    at = [i for i, x in enumerate(lines) if "stack (innermost first):" in x[col:]]
    if not at:
        fail("no stack in the focus:\n" + screen)
    out = []
    for x in lines[at[0] + 1:]:
        if not x[col:].strip():
            break
        out.append(x[col:].strip())
    return out


def alloc_on_screen(screen):
    row = line_of(screen, "cursor ")
    if " alloc " not in row:
        return None
    return row.split(" alloc ")[1].split("  ")[0]


def to_bytes(txt):
    n, u = txt.split()
    return float(n) * {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}[u]


def sim_env():
    e = {"LD_LIBRARY_PATH": sys.argv[4]}
    if len(sys.argv) > 7 and sys.argv[7]:
        e["LD_PRELOAD"] = sys.argv[7]
    return e


def grows(samples):
    """Rises through at least 3 values up to its maximum (grow_prog frees all at its end)."""
    vals = [to_bytes(x) for x in samples if x]
    if not vals:
        return False, vals
    rise = vals[:vals.index(max(vals)) + 1]
    return len(set(rise)) >= 3 and rise == sorted(rise), vals


def main():
    gmp, gen, case = sys.argv[1], sys.argv[2], sys.argv[3]
    tmp = tempfile.mkdtemp(prefix="gmpview")
    tr = os.path.join(tmp, "t.zst")
    subprocess.run([gen, "cli", tr, "--complete", "--steps", "40"], check=True)
    t = None
    try:
        if case == "peak":
            t = Term("%s view %s" % (gmp, tr))
            s = check_peak(gmp, tr, t)
            if "train" not in s or "forward" not in s:
                fail("the live ranges are not shown:\n" + s)
        elif case == "snapshot":
            snap = sys.argv[4]
            # its record_function annotations are ranges with allocations inside: it opens by
            # range, whose roots are the report's "by range" rows
            if not load_snapshot(snap).get("external_annotations"):
                fail("%s has no annotations: pass one that has" % snap)
            t = Term("%s view %s" % (gmp, snap), w=100, h=40)
            s = check_peak(gmp, snap, t, by="range")
            out = subprocess.run([gmp, "report", "--format", "json", snap], check=True,
                                 capture_output=True, text=True).stdout
            dev = [d for d in json.loads(out)["devices"] if d["id"] >= 0][0]
            rows = dev["live_at_peak_by_range"]
            want = [(fmt_bytes(r["bytes"]), r["count"], (r["range"] or "(no range)")[:28].strip())
                    for r in rows]
            got = tree_roots(s, 4)  # those on the screen (the first one is open)
            if not got or max(got, key=lambda r: to_bytes(r[0])) != want[0] or \
                    not set(got) <= set(want) or not any(r["range"] for r in rows):
                fail("the tree's roots %s are not the report's by-range rows %s:\n%s" %
                     (got, want, s))
            t.keys("q")
            t.close()
            # without ranges (the same snapshot, its annotations taken out): it opens on the
            # call-stack tree by user frame, whose roots are the report's "by user frame" rows
            snap = without_annotations(snap, tmp)
            t = Term("%s view %s" % (gmp, snap), w=100, h=40)
            s = check_peak(gmp, snap, t, by="user frame")
            out = subprocess.run([gmp, "report", "--format", "json", snap], check=True,
                                 capture_output=True, text=True).stdout
            dev = [d for d in json.loads(out)["devices"] if d["id"] >= 0][0]
            if "live_at_peak_by_range" in dev and any(r["range"] for r in
                                                      dev["live_at_peak_by_range"]):
                fail("the copy without annotations still has ranges")
            got = tree_roots(s, 4)
            want = sorted((fmt_bytes(r["bytes"]), r["count"],
                           (r["frame"] or "(no stack recorded)")[:28].strip())
                          for r in dev["live_at_peak_by_frame"][:4])
            if got != want:
                fail("the tree's roots %s are not the report's by-user-frame rows %s:\n%s" %
                     (got, want, s))
            # by category (g three times: stack, kind, category): what report's JSON says was
            # live at the peak
            out = subprocess.run([gmp, "report", "--format", "json", snap], check=True,
                                 capture_output=True, text=True).stdout
            dev = [d for d in json.loads(out)["devices"] if d["id"] >= 0][0]
            want = {c["category"]: (fmt_bytes(c["bytes"]), c["count"])
                    for c in dev["live_at_peak_by_category"] if c["count"]}
            t.keys("g", "g", "g")
            s = t.wait("Live at cursor by category")
            got = {}
            for l in s.splitlines():
                if l[:2] in ("\u25be ", "\u25b8 ") and len(l) > 60:
                    left = l[:59].split()
                    got[left[1]] = (" ".join(left[2:4]), int(left[4]))
            if got != want:
                fail("by category the screen says %s, report's JSON %s:\n%s" % (got, want, s))
            print("snapshot: by category", got)
        elif case == "frames":
            a, b = os.path.join(tmp, "a.zst"), os.path.join(tmp, "b.zst")
            subprocess.run([gen, "diff", a, b], check=True)
            rep = subprocess.run([gmp, "report", "--color", "never", b], check=True,
                                 capture_output=True, text=True).stdout
            rows = rep.split("Live at the peak, by call stack:\n")[1].split("\n\n")[0]
            row = [r for r in rows.splitlines() if r.startswith("      1.00 GiB ")]
            if len(row) != 1:
                fail("no 1 GiB row in the report's by-call-stack table:\n" + rows)
            want = row[0].split(None, 4)[4].split(" < ")
            if want != ["libtrain.so+0x12340"]:
                fail("the report's stack %s (0x401000 is inside no loaded module)" % want)
            t = Term("%s view %s" % (gmp, b), w=160, h=45)
            s = check_peak(gmp, b, t)
            if "size   1.00 GiB" not in s or focus_stack(s) != want:
                fail("the focus's stack %s is not the report's %s:\n%s" % (focus_stack(s), want, s))
            t.keys("i")  # internal frames shown: still none for an address inside no module
            time.sleep(0.5)
            s = t.settled(t.screen(), "", False)
            if focus_stack(s) != want or "0x401000" in s:
                fail("under i the focus's stack %s is not the report's %s:\n%s" %
                     (focus_stack(s), want, s))
            t.close()
            al = os.path.join(tmp, "alike.zst")
            subprocess.run([gen, "report", "alike", al], check=True)
            out = subprocess.run([gmp, "report", "--format", "json", al], check=True,
                                 capture_output=True, text=True).stdout
            dev = json.loads(out)["devices"][0]
            want = sorted((fmt_bytes(r["bytes"]), r["count"], (r["frame"] or "")[:28].strip())
                          for r in dev["live_at_peak_by_frame"])
            if not any(w[2] == "?" for w in want) or len(want) != 4:
                fail("the report's by-user-frame rows %s: no one '?' row" % want)
            t = Term("%s view %s" % (gmp, al), w=100, h=40)
            s = check_peak(gmp, al, t, by="user frame")
            got = tree_roots(s, 10)
            if got != want:
                fail("the tree's roots %s are not the report's by-user-frame rows %s:\n%s" %
                     (got, want, s))
            print("frames: roots", got)
        elif case == "timezero":
            nsys = sys.argv[4]
            snap = os.path.join(os.path.dirname(nsys), "..", "torch-snapshots",
                                "transformer-forward-bf16.pickle")
            for path in (nsys, snap, tr):
                rep = subprocess.run([gmp, "report", "--color", "never", path], check=True,
                                     capture_output=True, text=True).stdout
                pk = [x for x in rep.splitlines() if x.strip().startswith("peak allocated")][0]
                when = pk.split(" at ")[1].strip()  # "+17.042860 s"
                t = Term("%s view %s" % (gmp, path), w=120, h=30)
                s = t.wait("Live at cursor", 30)
                row = line_of(s, "cursor ")
                if ("@%s" % when) not in row or not row.startswith("cursor %s " % when):
                    fail("%s: the report's peak is at %s, the screen says:\n%s" % (path, when, s))
                t.keys("q")
                t.close()
                t = None
                print("timezero: %s peak at %s" % (os.path.basename(path), when))
        elif case == "oom":
            snap = sys.argv[4]
            rep = json.loads(subprocess.run([gmp, "report", "-f", "json", snap], check=True,
                                            capture_output=True, text=True).stdout)
            oom = rep["ooms"][0]
            first = [f for f in oom["stack"] if not f.get("internal")][0]
            frame = "%s (%s:%d)" % (first["function"], first["file"], first["line"])
            t = Term("%s view %s" % (gmp, snap), w=160, h=45)
            s = t.wait("Live at cursor", 30)
            lines = s.splitlines()
            if "[device %d]" % oom["device"] not in lines[0]:
                fail("the view does not open on the OOM's device %d:\n%s" % (oom["device"], s))
            # the OOM with its device at once; the report's verdict on it when the analyses'
            # thread is done (it runs at a lower priority: on a loaded machine that takes long)
            head = "findings: out of memory on device %d, %s requested" % (
                oom["device"], fmt_bytes(oom["requested_bytes"]))
            if not s.splitlines()[2].startswith(head):
                fail("the third row is not the findings %r:\n%s" % (head, s))
            want = head + ": capacity"
            end = time.time() + 100
            while want not in t.screen().splitlines()[2] and time.time() < end:
                time.sleep(0.2)
            s = t.screen()
            if not s.splitlines()[2].startswith(want):
                fail("the third row is not the findings %r:\n%s" % (want, s))
            # one failure, counted as the snapshot has it (Python's pickle module: its `oom`
            # entries), though it is written as a failed allocation and its OOM
            nooms = sum(e.get("action") == "oom" for tr in load_snapshot(snap)["device_traces"]
                        for e in tr)
            row = s.splitlines()[2]
            if nooms != 1 or not row.endswith(" (o)") or "failures in all" in row:
                fail("%d oom entries; the findings row does not say one failure:\n%s" %
                     (nooms, row))
            if "Live at cursor by user frame:" not in s:
                fail("a snapshot whose allocations are outside its ranges does not open by user"
                     " frame:\n" + s)
            # heat colours by share of what is live: red from 40%, yellow from 10%, green from 1%
            esc = t.screen(escapes=True).splitlines()
            plain = s.splitlines()
            hdr = [i for i, x in enumerate(plain) if "Live at cursor" in x][0]
            total = to_bytes(" ".join(plain[hdr].split(": ")[1].split()[:2]))
            tw = plain[hdr].index("Allocation in focus") - 1  # the tree pane's width
            for i in range(hdr + 1, hdr + 4):
                share = to_bytes(" ".join(plain[i][:tw].split()[-3:-1])) / total
                code = "31" if share >= 0.4 else "33" if share >= 0.1 else "32" if share >= 0.01 \
                    else None
                if code and ("\x1b[%sm" % code) not in esc[i]:
                    fail("a row of %.1f%% is not in colour %s: %r" % (100 * share, code, esc[i]))
            t.keys("o")
            s = t.wait("OUT OF MEMORY: the request that failed")
            if ("size   %s" % fmt_bytes(oom["requested_bytes"])) not in s:
                fail("the focus is not the failed request:\n" + s)
            col = [x for x in s.splitlines() if "Allocation in focus" in x][0].index(
                "Allocation in focus")  # the focus pane's column
            if not any(frame[:50] in x[col:] for x in s.splitlines()):
                fail("the failed request's first shown frame %r is not in the focus:\n%s" %
                     (frame, s))
            cur = [x for x in s.splitlines() if x.startswith(">")]
            if not cur or "OUT OF MEMORY asking %s  %s" % (fmt_bytes(oom["requested_bytes"]),
                                                           frame[:40]) not in cur[0]:
                fail("the OOM's event line does not name its frame %r:\n%s" % (frame, s))
            # with the memory kind of the failed allocation written for the same request
            if "kind   async-pool, CUDACachingAllocator.malloc" not in s:
                fail("the OOM's request is not the allocator's:\n" + s)
            print("oom: device %d, request %s at %s" % (oom["device"],
                                                       fmt_bytes(oom["requested_bytes"]), frame))
        elif case == "navigate":
            t = Term("%s view %s" % (gmp, tr))
            t.wait("Live at cursor")
            peak_ev, n = event_no(t.screen())
            t.keys("Home")
            s = t.wait("(event 1 of %d)" % n)
            t.keys("End")
            t.wait("(event %d of %d)" % (n, n))
            t.keys("Home")
            t.wait("(event 1 of %d)" % n)
            t.keys("Right")
            time.sleep(0.3)
            e1, _ = event_no(t.screen())
            if e1 <= 1:
                fail("Right did not move the cursor:\n" + t.screen())
            t.keys(".")
            time.sleep(0.3)
            e2, _ = event_no(t.screen())
            if e2 <= e1:
                fail("'.' did not move to a later event (%d -> %d)" % (e1, e2))
            t.keys("p")
            t.wait("(event %d of %d)" % (peak_ev, n))
            def timeline(scr):  # the rows above the panes (title, cursor, timeline, axis)
                ls = scr.splitlines()
                # (not the findings row: the report's verdicts come into it when ready)
                return "\n".join(x for x in ls[:[i for i, x in enumerate(ls)
                                                  if "Live at cursor" in x][0]]
                                  if not x.startswith("findings: "))
            whole = timeline(t.screen())
            t.keys("+", "+")
            time.sleep(0.4)
            zoomed = timeline(t.screen())
            if zoomed == whole:
                fail("+ did not change the timeline")
            t.keys("0")
            time.sleep(0.3)
            if timeline(t.screen()) != whole:
                fail("0 did not give the whole trace back:\n%s\n---\n%s" % (whole, t.screen()))

            def at_cursor():
                return [x for x in t.screen().splitlines() if x.startswith(">")][0]
            # the failed cudaMalloc is written as the agent writes it: the failed allocation,
            # then the OOM of the same request (device, thread, size, API, stack): one failure,
            # whose stop is the OOM
            t.keys("Home", "o")
            time.sleep(0.3)
            if "OUT OF MEMORY asking 100.00 GiB" not in at_cursor():
                fail("o did not go to the OOM: " + at_cursor())
            t.keys("O")  # back: not onto its failed allocation
            time.sleep(0.3)
            if "failed allocation" in at_cursor():
                fail("O stopped at the failed allocation its OOM reports: " + at_cursor())
            t.keys("o")
            time.sleep(0.3)
            if "OUT OF MEMORY asking 100.00 GiB" not in at_cursor():
                fail("o did not go on to the OOM: " + at_cursor())
            t.keys("v")
            time.sleep(0.3)
            if "alert: " not in at_cursor():
                fail("v did not go on to the alert: " + at_cursor())
            t.keys("V")
            time.sleep(0.3)
            if "OUT OF MEMORY" not in at_cursor():
                fail("V did not go back to the OOM: " + at_cursor())
            t.keys("V")
            time.sleep(0.3)
            if "failed allocation" in at_cursor():
                fail("V stopped at the failed allocation its OOM reports: " + at_cursor())
        elif case == "search":
            t = Term("%s view %s" % (gmp, tr))
            t.wait("Live at cursor")
            t.keys("/")
            t.wait("search (range, function, API):")
            t.keys("backward", literal=True)
            t.keys("Enter")
            s = t.wait("'backward': allocation at event")
            if "range  train/step/backward" not in s:
                fail("the focus is not on an allocation of train/step/backward:\n" + s)
            e1, _ = event_no(s)
            t.keys("n")
            time.sleep(0.3)
            e2, _ = event_no(t.screen())
            if e2 == e1:
                fail("n did not go to the next match")
            t.keys("/")
            t.keys("no-such-function", literal=True)
            t.keys("Enter")
            t.wait("'no-such-function': no range, function or API matches")
        elif case == "resize":
            t = Term("%s view %s" % (gmp, tr))
            t.wait("Live at cursor")
            t.tmux("resize-window", "-x", "120", "-y", "40")
            time.sleep(0.5)
            s = t.screen()
            lines = s.splitlines()
            if len(lines) < 39 or "Events around the cursor" not in s:
                fail("the screen did not follow the resize to 120x40:\n" + s)
            ev_row = [i for i, l in enumerate(lines) if "Events around the cursor" in l][0]
            if ev_row < 25:
                fail("the panes do not use the taller terminal (events pane at row %d)" % ev_row)
            if len(line_of(s, " gpumemprof view").rstrip()) <= 80 and "Allocation in focus" not in s:
                fail("the wider terminal is not used:\n" + s)
            t.tmux("resize-window", "-x", "80", "-y", "24")
            time.sleep(0.5)
            s = t.screen()
            if "Events around the cursor" not in s or "Live at cursor" not in s:
                fail("back at 80x24 a pane is missing:\n" + s)
        elif case == "follow":
            grow = os.path.join(tmp, "grow.zst")
            data = open(tr, "rb").read()
            open(grow, "wb").close()
            t = Term("%s view --follow %s" % (gmp, grow))
            counts = []
            steps = 8
            for k in range(1, steps + 1):
                with open(grow, "wb") as f:  # a prefix: the reader sees its whole frames only
                    f.write(data[:len(data) * k // steps])
                time.sleep(0.9)
                s = t.screen()
                if "Events around the cursor" in s:
                    counts.append(event_no(s)[1])
            s = t.wait("(following)", 10, gone=True)
            final = event_no(s)[1]
            n_all = None
            t2 = Term("%s view %s" % (gmp, tr))
            n_all = event_no(t2.wait("Live at cursor"))[1]
            t2.keys("q")
            t2.close()
            if final != n_all:
                fail("after the trace was complete the viewer shows %d events, not %d" %
                     (final, n_all))
            if len(set(counts)) < 3 or counts != sorted(counts):
                fail("the event count did not grow while the trace grew: %s" % counts)
            print("follow: event counts while growing:", counts, "final", final)
        elif case == "quit":
            t = Term("%s view %s" % (gmp, tr))
            t.wait("Live at cursor")
            t.keys("q")
            s = t.wait("EXIT=")
            if "EXIT=0" not in s:
                fail("q did not exit with status 0:\n" + s)
            if "gpumemprof view" in s or "Live at cursor" in s:
                fail("the viewer's screen is still there after q (terminal not restored):\n" + s)
            t.close()
            t = Term("%s view %s" % (gmp, tr))
            t.wait("Live at cursor")
            t.keys("C-c")
            s = t.wait("EXIT=")
            if "EXIT=130" not in s:
                fail("Ctrl-C did not end the viewer by SIGINT:\n" + s)
            if "Live at cursor" in s:
                fail("the viewer's screen is still there after Ctrl-C:\n" + s)
            t.close()
            t = Term("%s view %s" % (gmp, tr))
            t.wait("Live at cursor")
            sh = t.tmux("display-message", "-p", "#{pane_pid}").strip()
            kids = subprocess.run(["pgrep", "-P", sh, "-x", "gpumemprof"], capture_output=True,
                                  text=True).stdout.split()
            if len(kids) != 1:
                fail("cannot find the viewer's process under the pane's shell %s" % sh)
            os.kill(int(kids[0]), 11)  # SIGSEGV: the crash handler restores the terminal
            s = t.wait("EXIT=")
            if "EXIT=139" not in s or "Live at cursor" in s:
                fail("after SIGSEGV the status is not 139 or the screen was not restored:\n" + s)
        elif case == "color":
            t = Term("%s view %s" % (gmp, tr))
            t.wait("Live at cursor")
            if "\x1b[3" not in t.screen(escapes=True) and "\x1b[4" not in t.screen(escapes=True):
                fail("no colours on a 256-colour terminal")
            t.keys("q")
            t.close()
            t = Term("%s view %s" % (gmp, tr), env={"NO_COLOR": "1"})
            t.wait("Live at cursor")
            esc = t.screen(escapes=True)
            import re
            if re.search(r"\x1b\[[0-9;]*(3[0-7]|4[0-7]|38;|48;)", esc):
                fail("colours under NO_COLOR:\n" + repr(esc[:400]))
        elif case == "verdict":
            leak = os.path.join(tmp, "leak.zst")
            subprocess.run([sys.argv[4], "write-leak", leak], check=True)
            rep = subprocess.run([gmp, "report", leak], check=True, capture_output=True,
                                 text=True).stdout
            # the verdict of the "Growth over iterations" section (the findings the report opens
            # with say it too, in other words)
            sect = rep.split("\nGrowth over iterations")[-1]
            want = [x.strip() for x in sect.splitlines() if "probable leak in " in x]
            if len(want) != 1:
                fail("the report has not one leak verdict:\n" + rep)
            want = want[0].split(" (+")[0]  # "probable leak in step/opt ... iterations 4-10"
            t = Term("%s view %s" % (gmp, leak), w=150, h=30)
            t.wait("Live at cursor")

            def stop(when, addr, which):
                s = t.wait("cursor %s " % when)
                status = s.rstrip().splitlines()[-1]
                if want not in status or ("%s leaked allocation" % which) not in status:
                    fail("the status line is not the report's verdict %r (%s):\n%s" %
                         (want, which, s))
                if ("addr   %s" % addr) not in s or "never (live at the end)" not in s:
                    fail("the focus is not the leaked allocation at %s:\n%s" % (addr, s))
                if "range  step/opt" not in s:
                    fail("the focus is not in step/opt:\n" + s)
            # the verdicts are computed in a thread after the index: v says so until they are
            end = time.time() + 10
            while True:
                t.keys("Home")
                t.wait("(event 1 of ")
                t.keys("v")
                time.sleep(0.3)
                if "still being computed" not in t.screen() or time.time() > end:
                    break
            stop("+0.013000 s", "0x200000000000", "first")
            # the analyses are done (v found their verdict): the findings row under the cursor's
            # row is the report's leak verdict
            if not t.screen().splitlines()[2].startswith("findings: " + want):
                fail("the findings row is not the report's verdict %r:\n%s" % (want, t.screen()))
            t.keys("v")
            stop("+0.103000 s", "0x200090000000", "last")
            t.keys("v")
            t.wait("no anomaly (OOM, failure, bad free, alert, notice or lost events) after")
            t.keys("V")
            stop("+0.013000 s", "0x200000000000", "first")
            t.keys("?")
            t.wait("the report's (leak start/end")
            t.close()
            # at 80x24 the verdict's line takes the last two rows
            t = Term("%s view %s" % (gmp, leak))
            t.wait("Live at cursor")
            t.keys("Home")
            t.wait("(event 1 of ")
            end = time.time() + 10
            while True:  # (until the verdicts' thread is done)
                t.keys("v")
                time.sleep(0.3)
                s = t.screen()
                if "cursor +0.013000 s" in s or time.time() > end:
                    break
                t.keys("Home")
            two = " ".join(x.strip() for x in s.rstrip().splitlines()[-2:])
            if want not in two or "first leaked allocation" not in two:
                fail("at 80x24 the last two rows are not the verdict %r:\n%s" % (want, s))
            t.close()
            # the OOM of the generated trace with the report's verdict on it
            rep = subprocess.run([gmp, "report", tr], check=True, capture_output=True,
                                 text=True).stdout
            oom = [x for x in rep.splitlines() if "device 0: 100.00 GiB requested: " in x]
            if not oom:
                fail("the report explains no OOM:\n" + rep)
            why = oom[0].split(" requested: ")[1].split(" (")[0]  # "capacity: what was ..."
            t = Term("%s view %s" % (gmp, tr), w=150, h=30)
            t.wait("Live at cursor")
            t.keys("Home", "o", "o")
            t.wait("OUT OF MEMORY asking 100.00 GiB")
            end = time.time() + 10
            while True:
                t.keys("V", "v")  # back one stop, then forward onto the OOM's verdict
                time.sleep(0.3)
                s = t.screen()
                if "out of memory on device 0" in s or time.time() > end:
                    break
            status = s.rstrip().splitlines()[-1]
            cur = [x for x in s.splitlines() if x.startswith(">")]
            if ("out of memory on device 0, 100.00 GiB requested: " + why) not in status or \
                    not cur or "OUT OF MEMORY asking 100.00 GiB" not in cur[0]:
                fail("v does not show the report's OOM verdict %r at the OOM:\n%s" % (why, s))
        elif case == "whatif":
            snap = sys.argv[4]
            # PyTorch's peak reserved, by Python's pickle module: the reserve before the window
            # (the final segments less the window's net change) plus the window's running maximum
            d = load_snapshot(snap)
            run = top = 0
            for e in d["device_traces"][0]:
                run += {"segment_alloc": e["size"], "segment_free": -e["size"]}.get(e["action"], 0)
                top = max(top, run)
            recorded = sum(x["total_size"] for x in d["segments"] if x["device"] == 0) - run + top
            for conf in ("expandable_segments:False", "max_split_size_mb:128"):
                w = json.loads(subprocess.run([gmp, "whatif", snap, "--format", "json",
                                               "--alloc-conf", conf], check=True,
                                              capture_output=True, text=True).stdout)
                replayed = w["devices"][0]["configs"][1]["peak_reserved_bytes"]
                # under the recording's own settings (the defaults) the model is PyTorch
                if conf.startswith("expandable") and replayed != recorded:
                    fail("whatif under the defaults: %d, PyTorch's %d" % (replayed, recorded))
                t = Term("%s view %s --whatif %s" % (gmp, snap, conf), w=160, h=40)
                s = t.wait("what-if %s: peak res" % conf, timeout=30)
                lines = s.splitlines()
                want = "what-if %s: peak res %s" % (conf, fmt_bytes(replayed))
                if want not in lines[1]:
                    fail("row 2 lacks %r:\n%s" % (want, s))
                # the y axis reaches the higher of the two reserves; the line and its legend (on
                # the timeline's second row; a findings row may come before the timeline)
                y = next((i for i, l in enumerate(lines) if l.startswith("\u2501 what-if")), 3)
                ytop = lines[y - 1][:10].strip()
                if ytop != fmt_bytes(max(replayed, recorded)):
                    fail("the timeline's top %s, not max(replayed %d, recorded %d)" %
                         (ytop, replayed, recorded))
                if not lines[y].startswith("\u2501 what-if") or \
                        not any("\u2501" in l[11:] for l in lines[y - 1:y + 12]):
                    fail("no replayed reserve line or legend in the timeline:\n%s" % s)
                t.keys("q")
                t.close()
                t = None
                print("whatif %s: peak res %s (recorded %s), axis %s" %
                      (conf, fmt_bytes(replayed), fmt_bytes(recorded), ytop))
            t = Term("%s view %s" % (gmp, snap), w=160, h=40)
            s = t.wait("Live at cursor", timeout=30)
            if "what-if" in s or "\u2501" in s:
                fail("a replayed reserve without --whatif:\n%s" % s)
            # a setting whatif refuses, or with --follow: usage errors (status 2)
            for args in (["--whatif", "bogus:1"], ["--whatif", "max_split_size_mb:10"],
                         ["--follow", "--whatif", "max_split_size_mb:128"]):
                p = subprocess.run([gmp, "view", snap] + args, capture_output=True, text=True)
                if p.returncode != 2 or "--whatif" not in p.stderr:
                    fail("view %s: status %d, %r" % (" ".join(args), p.returncode, p.stderr))
        elif case == "badinput":
            text = os.path.join(tmp, "notes.txt")
            open(text, "w").write("hello, not a trace\n")
            cut = os.path.join(tmp, "cut.zst")
            open(cut, "wb").write(open(tr, "rb").read()[:100])
            bad = os.path.join(tmp, "bad.zst")
            open(bad, "wb").write(b"\x28\xb5\x2f\xfd" + b"garbage" * 8)
            for path, want in ((text, "not a gpumemprof trace"), (cut, "cut inside its first"),
                               (bad, "corrupt trace")):
                p = subprocess.run([gmp, "view", path], capture_output=True, text=True,
                                   stdin=subprocess.DEVNULL)
                lines = p.stderr.strip().splitlines()
                if p.returncode != 1 or len(lines) != 1 or want not in lines[0] or p.stdout:
                    fail("%s: status %d, stderr %r (wanted one line with %r)" %
                         (path, p.returncode, p.stderr, want))
            p = subprocess.run([gmp, "view", tr], capture_output=True, text=True,
                               stdin=subprocess.DEVNULL)
            if p.returncode != 1 or "not a terminal" not in p.stderr:
                fail("without a terminal: status %d, %r" % (p.returncode, p.stderr))
            p = subprocess.run([gmp, "view", "--no-such-option", tr], capture_output=True,
                               text=True, stdin=subprocess.DEVNULL)
            if p.returncode != 2:
                fail("a bad option: status %d" % p.returncode)
        elif case == "layers":
            trace = os.path.join(tmp, "layers.zst")
            env = dict(os.environ, **sim_env())
            subprocess.run([gmp, "run", "-q", "-o", trace, "--", sys.argv[5], "6"], env=env,
                           check=True, capture_output=True)
            t = Term("%s view %s" % (gmp, trace))
            s = check_peak(gmp, trace, t)
            for want in ("train", "step", "forward", "layer3", "optimizer"):
                if want not in s:
                    fail("the live range %r is not shown at the peak:\n%s" % (want, s))
        elif case == "follow_run":
            trace = os.path.join(tmp, "grow.zst")
            t = Term("%s view --follow %s" % (gmp, trace))
            t.wait("waiting for")
            env = dict(os.environ, **sim_env())
            # 24 steps of 250 ms: the viewer re-reads at most every 500 ms (more when its last
            # index took long: under ASan on a loaded CI machine it redrew about every 1.2 s, and
            # 14 steps showed only two values once)
            run = subprocess.Popen([gmp, "run", "-q", "-o", trace, "--", sys.argv[6], "24",
                                    "250"], env=env, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
            samples = []
            while run.poll() is None:
                time.sleep(0.3)
                samples.append(alloc_on_screen(t.screen()))
            if run.returncode != 0:
                fail("gpumemprof run failed: %d" % run.returncode)
            s = t.wait("(following)", 10, gone=True)
            ok, vals = grows(samples)
            if not ok:
                fail("the allocated bytes did not grow on the screen while the program ran: %s"
                     % samples)
            peak = fmt_bytes(report_peak(gmp, trace))
            if ("peak %s " % peak) not in line_of(s, "cursor "):
                fail("the complete trace's peak %s is not shown:\n%s" % (peak, s))
            print("follow_run: allocated on the screen:", [x for x in samples if x])
        elif case == "run_view":
            t = Term("cd %s && %s run --view -o %s/rv.%%p.zst -- %s 14 250" %
                     (tmp, gmp, tmp, sys.argv[6]), env=sim_env())
            t.wait("[program running]", 15)
            samples = []
            for _ in range(60):
                s = t.screen()
                samples.append(alloc_on_screen(s))
                if "[program ended]" in s:
                    break
                time.sleep(0.2)
            s = t.wait("[program ended]", 20)
            ok, vals = grows(samples)
            if not ok:
                fail("the allocated bytes did not grow on the screen while the program ran: %s"
                     % samples)
            t.keys("L")
            s = t.wait("The program's output")
            if "step 13" not in s:
                fail("L does not show the program's output:\n" + s)
            t.keys("Escape")
            t.wait("Live at cursor")
            t.keys("q")
            s = t.wait("EXIT=")
            if "EXIT=0" not in s or "gpumemprof-run." not in s:
                fail("run --view did not end with the program's status 0 and the log's name:\n"
                     + s)
            print("run_view: allocated on the screen:", [x for x in samples if x])
        elif case == "run_view2":
            prog = sys.argv[6]
            t = Term("cd %s && %s run --view -o %s/rv2.%%p.zst -- sh -c '%s 10 200 & sleep 0.5; "
                     "%s 10 200; wait'" % (tmp, gmp, tmp, prog, prog), env=sim_env())
            s = t.wait("trace 1/2", 20)
            first = line_of(s, " gpumemprof view").split()[2]
            t.keys("r")
            s = t.wait("trace 2/2")
            second = line_of(s, " gpumemprof view").split()[2]
            if first == second or not second.startswith("rv2."):
                fail("r did not switch to the second process's trace (%s, %s)" % (first, second))
            s = t.wait("[program ended]", 20)
            t.keys("q")
            s = t.wait("EXIT=")
            if "EXIT=0" not in s:
                fail("run --view with two processes did not end with status 0:\n" + s)
            print("run_view2: traces", first, second)
        else:
            fail("unknown case " + case)
        print("ok:", case)
    finally:
        if t:
            t.close()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
