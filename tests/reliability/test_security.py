#!/usr/bin/env python3
"""Security of the agent and the converter (docs/reliability.md).

  test_security.py COMMON-OPTIONS SCENARIO

hostile_env    every GPUMEMPROF_* variable set, one at a time, to hostile values (a huge number,
               a negative one, a non-number, 100 KB, printf patterns, control characters): the
               program's exit status and stdout never change; a rejected value gives exactly one
               stderr line "gpumemprof: not profiling: ..." (every stderr line of the agent is whole and
               free of control characters, even for a path holding a newline), and no trace file;
               nothing is created outside the output directory (but a relative GPUMEMPROF_OUTPUT,
               which is a valid path).
trace_files    trace files are created mode 0600 even under umask 000; a symbolic link planted at
               the output path is refused and its target untouched, with --force too; a FIFO or a
               directory at the path is refused at once (the program is never blocked opening it).
hostile_trace  a trace made with the writer whose every string holds quotes, backslashes,
               </script>, <gmpx>/<img onerror> markup, control bytes, a NUL and invalid UTF-8, and
               whose modules name a FIFO, a device, a directory, a path with "..", and a file that
               is not ELF: report --format json/html/text/markdown, convert --speedscope/--chrome,
               dump --json and diff --format json all finish (nothing blocks on the FIFO), JSON
               parses with the json module, the HTML holds no element or attribute that came from
               the trace (html.parser), the FIFO was never opened for writing nor any file created
               beside the trace except the outputs asked for."""
import html.parser
import json
import os
import stat
import sys
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rellib as L  # noqa: E402

VARS = ["GPUMEMPROF_OUTPUT", "GPUMEMPROF_FORCE", "GPUMEMPROF_STACKS", "GPUMEMPROF_STACK_UNWIND",
        "GPUMEMPROF_STACK_DEPTH", "GPUMEMPROF_SAMPLE_INTERVAL_MS", "GPUMEMPROF_BUFFER_SIZE",
        "GPUMEMPROF_FLUSH_INTERVAL_MS", "GPUMEMPROF_CUPTI", "GPUMEMPROF_NVTX",
        "GPUMEMPROF_ACTIVITY", "GPUMEMPROF_QUIET", "GPUMEMPROF_ALERT_THRESHOLD",
        "GPUMEMPROF_ACTIVITY_BUFFER"]
VALUES = {"huge": "99999999999999999999999999", "negative": "-1", "word": "abc",
          "long": "x" * 100000, "printf": "%s%n%x%p%%%99999999d%", "control": "1\n2\x1b[31m",
          "overflow": "18446744073709551615G"}


def hostile_env(c):
    outdir = os.path.join(c.tmp, "out")
    os.makedirs(outdir)
    rc0, out0, _ = L.run(L.prog(c, "loop", 20, 64), L.env_with(c))
    jobs = [(v, k) for v in VARS for k in VALUES]

    def one(job):
        var, kind = job
        work = os.path.join(c.tmp, "cwd-%s-%s" % (var, kind))
        os.makedirs(work)
        env = L.direct_env(c, os.path.join(outdir, "%s-%s.%%p.zst" % (var, kind)),
                           GPUMEMPROF_SAMPLE_INTERVAL_MS=0)
        env[var] = VALUES[kind]
        return job, work, L.run(L.prog(c, "loop", 20, 64), env, cwd=work)
    with ThreadPoolExecutor(2) as ex:
        results = list(ex.map(one, jobs))
    rejected = 0
    for (var, kind), work, (rc, so, se) in results:
        what = "%s=<%s>" % (var, kind)
        L.eq(rc, rc0, what + ": exit status")
        L.eq(so, out0, what + ": stdout")
        lines = L.agent_lines(se)
        for l in se.splitlines():
            L.check(l.startswith(("gpumemprof: ", "rel_prog: ")) and
                    all(ch >= " " and ch != "\x7f" for ch in l) and len(l) < 1200,
                    what + ": only whole, clean, bounded agent lines: %r" % l[:120])
        if var == "GPUMEMPROF_OUTPUT":  # a relative path is a valid output: one trace at most
            L.check(len(os.listdir(work)) <= 1, what + ": at most the trace created")
        else:
            L.eq(os.listdir(work), [], what + ": nothing created in the working directory")
        no = [l for l in lines if l.startswith("gpumemprof: not profiling:")]
        if no:
            rejected += 1
            L.eq(len(lines), 1, what + ": one line: %r" % lines)
        elif var not in ("GPUMEMPROF_CUPTI", "GPUMEMPROF_STACKS", "GPUMEMPROF_OUTPUT"):
            L.check(False, what + ": accepted: %r" % lines)
    made = os.listdir(outdir)
    L.check(all(f.startswith("GPUMEMPROF_CUPTI-") or f.startswith("GPUMEMPROF_OUTPUT-")
                for f in made), "traces only where a value was acceptable: %r" % made)
    print("hostile_env: %d runs, %d rejected with one line, exit status and output unchanged"
          % (len(results), rejected))


def trace_files(c):
    # mode 0600 whatever the umask
    out = os.path.join(c.tmp, "mode.zst")
    old = os.umask(0)
    try:
        rc, so, se = L.run(L.prog(c, "loop", 5, 64), L.direct_env(c, out))
    finally:
        os.umask(old)
    L.eq(rc, 0, "umask 000: exit status")
    if L.check(os.path.exists(out), "umask 000: trace written"):
        L.eq(stat.S_IMODE(os.lstat(out).st_mode), 0o600, "umask 000: mode")
    # a planted symlink, with --force as well
    target = os.path.join(c.tmp, "precious")
    with open(target, "w") as f:
        f.write("keep me\n")
    for force in ("0", "1"):
        link = os.path.join(c.tmp, "link%s.zst" % force)
        os.symlink(target, link)
        rc, so, se = L.run(L.prog(c, "loop", 5, 64), L.direct_env(c, link, GPUMEMPROF_FORCE=force))
        L.eq(rc, 0, "symlink (force=%s): exit status" % force)
        lines = L.agent_lines(se)
        L.check(len(lines) == 1 and "not profiling" in lines[0] and
                ("symbolic link" in lines[0] or "exists" in lines[0]),
                "symlink (force=%s): refused: %r" % (force, lines))
        L.eq(open(target).read(), "keep me\n", "symlink (force=%s): target untouched" % force)
    # a FIFO or a directory at the path: refused at once, never blocking the program
    fifo = os.path.join(c.tmp, "fifo.zst")
    os.mkfifo(fifo)
    d = os.path.join(c.tmp, "dir.zst")
    os.mkdir(d)
    for path, name in ((fifo, "FIFO"), (d, "directory")):
        for force in ("0", "1"):
            t0 = time.monotonic()
            rc, so, se = L.run(L.prog(c, "loop", 5, 64), L.direct_env(c, path,
                                                                     GPUMEMPROF_FORCE=force),
                               timeout=60)
            took = time.monotonic() - t0
            L.eq(rc, 0, "%s (force=%s): exit status" % (name, force))
            L.check(took < 20, "%s (force=%s): not blocked (%.1f s)" % (name, force, took))
            lines = L.agent_lines(se)
            L.check(len(lines) == 1 and "not profiling" in lines[0],
                    "%s (force=%s): refused in one line: %r" % (name, force, lines))


class Tags(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.bad = []
        self.scripts = 0

    def handle_starttag(self, tag, attrs):
        if tag in ("gmpx", "img"):
            self.bad.append(tag)
        if tag == "script":
            self.scripts += 1
        for k, v in attrs:
            if k.startswith("on") or (k in ("src", "href") and v and "GMPXSS" in v):
                self.bad.append("%s %s=%r" % (tag, k, v))


def html_check(path, what):
    with open(path, "rb") as f:
        text = f.read().decode("utf-8", "replace")
    p = Tags()
    p.feed(text)
    p.close()
    L.eq(p.bad, [], what + ": elements or attributes from the trace")
    return p.scripts


def hostile_trace(c):
    work = os.path.join(c.tmp, "w")
    os.makedirs(work)
    fifo = os.path.join(work, "module-fifo")
    os.mkfifo(fifo)
    notelf = os.path.join(work, "notelf.so")
    with open(notelf, "w") as f:
        f.write("not an ELF file\n")
    modules = [fifo, "/dev/zero", "/dev/tty", "/", "/proc/self/../self/mem", notelf,
               "relative/lib.so", "/nonexistent/\x01lib.so"]
    trace = os.path.join(work, "hostile.zst")
    gen = os.path.join(c.progs, "rel_gen_hostile")
    rc, so, se = L.run([gen, trace] + modules, c.env)
    if not L.eq(rc, 0, "generator: " + se):
        return
    benign = os.path.join(work, "benign.zst")
    L.run([gen, benign], c.env)
    before = set(os.listdir(work))
    o = lambda n: os.path.join(work, n)  # noqa: E731
    cmds = {
        "report-json": ([c.gmp, "report", "--format", "json", trace], "json-stdout"),
        "report-html": ([c.gmp, "report", "--format", "html", "-o", o("r.html"), trace], o("r.html")),
        "report-text": ([c.gmp, "report", trace], None),
        "report-markdown": ([c.gmp, "report", "--format", "markdown", trace], None),
        "convert": ([c.gmp, "convert", trace, "--speedscope", o("s.json"), "--chrome",
                     o("c.json")], [o("s.json"), o("c.json")]),
        "dump-json": ([c.gmp, "dump", "--json", trace], "jsonl-stdout"),
        "diff-json": ([c.gmp, "diff", "--format", "json", benign, trace], "json-stdout"),
        "benign-html": ([c.gmp, "report", "--format", "html", "-o", o("b.html"), benign],
                        o("b.html")),
    }
    scripts = {}
    for name, (cmd, outp) in cmds.items():
        t0 = time.monotonic()
        try:
            rc, so, se = L.run(cmd, c.env, cwd=work, timeout=60)
        except Exception as e:  # a hang on the FIFO ends here
            L.check(False, "%s: %s" % (name, e))
            continue
        L.check(rc in (0, 1), "%s: exit status %d: %s" % (name, rc, se[:300]))
        L.check(time.monotonic() - t0 < 30, "%s: finished in time" % name)
        for l in se.splitlines():
            L.check("\x1b" not in l and "\x07" not in l, "%s: raw control bytes on stderr" % name)
        if outp == "json-stdout":
            try:
                json.loads(so)
            except ValueError as e:
                L.check(False, "%s: invalid JSON: %s" % (name, e))
        elif outp == "jsonl-stdout":
            for line in so.splitlines():
                try:
                    json.loads(line)
                except ValueError as e:
                    L.check(False, "%s: invalid JSON line: %s" % (name, e))
        elif isinstance(outp, list):
            for p in outp:
                try:
                    with open(p, "rb") as f:
                        json.loads(f.read().decode("utf-8"))
                except (OSError, ValueError) as e:
                    L.check(False, "%s: %s: %s" % (name, os.path.basename(p), e))
        elif outp:
            if L.check(os.path.exists(outp), "%s: output written" % name):
                scripts[name] = html_check(outp, name)
        elif name == "report-text" or name == "report-markdown":
            L.check("\x1b" not in so and "\x07" not in so, "%s: raw control bytes" % name)
    if "report-html" in scripts and "benign-html" in scripts:
        L.eq(scripts["report-html"], scripts["benign-html"],
             "<script> elements in the hostile report vs a benign one")
    made = set(os.listdir(work)) - before
    L.eq(sorted(made), sorted(["r.html", "s.json", "c.json", "b.html"]),
         "files created: only the outputs asked for")
    L.eq(stat.S_ISFIFO(os.lstat(fifo).st_mode), True, "the FIFO is still a FIFO")
    print("hostile_trace: %d commands on a hostile trace: outputs escaped, nothing opened that "
          "should not be" % len(cmds))


def main():
    c = L.setup()
    {"hostile_env": hostile_env, "trace_files": trace_files,
     "hostile_trace": hostile_trace}[c.args.scenario](c)
    L.finish(c, c.args.scenario)


if __name__ == "__main__":
    main()
