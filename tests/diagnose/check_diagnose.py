#!/usr/bin/env python3
"""Tests of `gpumemprof diagnose` on the fixed trace of `gen_traces report fixture` (tests/tools).

    check_diagnose.py MODE GPUMEMPROF REPORT_TRACE

Every case runs in its own scratch directory with an environment seeded with secrets, and opens
the bundle with the system's tar (`tar --zstd`) and zstd (`zstd -dc | tar x`). MODE:

bundle     every expected member is there; report.txt and report.json are byte for byte what
           `gpumemprof report` (and `--format json`) print for the same trace; info.txt is what
           `gpumemprof info` prints; version.txt names the version
secrets    environment.txt lists the secret variables' names with <redacted>, keeps the others,
           and no secret value (environment or command line) is anywhere in the extracted bundle,
           byte for byte, nor on diagnose's stdout or stderr
recorded   a recording whose command line holds secrets (`gen_traces report secrets`):
           --NAME=VALUE, --NAME VALUE and a URL's credentials are redacted in its report.txt,
           report.json and the manifest (counted there, the rules stated); a short option's
           value (-p) is not, as the manifest says
list       --list writes no file and lists the members the bundle then holds
bounds     a recording over --max-file is left out and the manifest says so (its reports stay);
           --max-total likewise
overwrite  the default output name is never overwritten (exit 1, file unchanged); -o replaces
missing    a FILE that does not exist: warning on stderr, listed in the manifest, exit 0
not_trace  a FILE that is not a trace: copied, report-messages.txt says why, warning, exit 0
auto       no FILE: the newest 4 gpumemprof.*.zst of the working directory, the older one noted
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import gmp_testlib  # noqa: E402

EPOCH = 1700000000  # SOURCE_DATE_EPOCH: 2023-11-14 22:13:20 UTC
TOP = "gpumemprof-diagnose-20231114-221320"
DEFAULT_OUT = TOP + ".tar.zst"

ENV_SECRETS = {
    "MY_API_TOKEN": "s3cr3t-token-1",
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY",
    "DB_PASSWORD": "hunter2-db-pw",
    "GH_AUTH": "ghp-auth-value-77",
    "GOOGLE_APPLICATION_CREDENTIALS": "/secret/creds-path-991.json",
    "lower_case_passwd": "lc-passwd-value-5",
}
URL_ENV = {  # secret in the URL only: the name is not a secret's, the rest of the value stays
    "HTTP_PROXY": ("http://user:pa55w0rd@proxy:8080", "http://<redacted>@proxy:8080"),
    "PIP_INDEX_URL": ("https://deploy:idx-pa55-42@pypi.example.com/simple",
                      "https://<redacted>@pypi.example.com/simple"),
}
ARG_URL = "https://alice:cl1-s3cret-9@example.com/other.zst"  # a FILE given with credentials
SECRETS = list(ENV_SECRETS.values()) + ["pa55w0rd", "idx-pa55-42", "cl1-s3cret-9"]
PLAIN = ("GMP_DIAG_PLAIN", "plain-visible-value")


def fail(msg):
    sys.exit("FAIL: " + msg)


def env_with_secrets():
    env = dict(os.environ)
    env.update(ENV_SECRETS)
    env.update({k: v[0] for k, v in URL_ENV.items()})
    env[PLAIN[0]] = PLAIN[1]
    env["SOURCE_DATE_EPOCH"] = str(EPOCH)
    env.pop("NO_COLOR", None)
    return env


def run(args, cwd, expect_rc=0, env=None):
    return gmp_testlib.run(args, expect=expect_rc, cwd=cwd, env=env or env_with_secrets())


def tar_list(bundle, cwd):
    p = run(["tar", "--zstd", "-tf", bundle], cwd)
    return [n for n in p.stdout.decode().splitlines() if not n.endswith("/")]


def extract(bundle, cwd, via_zstd=False):
    """Extracts into a fresh directory; returns the path of the bundle's top directory."""
    dest = tempfile.mkdtemp(dir=cwd, prefix="x-")
    if via_zstd:
        p = subprocess.run("zstd -dc '%s' | tar -xf - -C '%s'" % (bundle, dest), shell=True,
                           cwd=cwd, capture_output=True)
        if p.returncode:
            fail("zstd -dc | tar x: %s" % p.stderr.decode(errors="replace"))
    else:
        run(["tar", "--zstd", "-xf", bundle, "-C", dest], cwd)
    tops = os.listdir(dest)
    if tops != [TOP]:
        fail("top directory: %r, expected [%r]" % (tops, TOP))
    return os.path.join(dest, TOP)


def read(path, mode="r"):
    with open(path, mode) as f:
        return f.read()


def manifest_members(text):
    """The names of the 'Members' section of a manifest (or of --list's output)."""
    lines = text.splitlines()
    try:
        i = next(k for k, l in enumerate(lines) if l.startswith("Members"))
    except StopIteration:
        fail("no Members section in:\n" + text)
    names = []
    for l in lines[i + 1:]:
        if not l.strip():
            break
        m = re.match(r"^\s+(\d+|-)\s+(\S+)\s", l)
        if not m:
            fail("bad member line %r" % l)
        names.append(m.group(2))
    return names


def left_out(text):
    m = re.search(r"^Left out:\n(.*?)\n\n", text, re.S | re.M)
    return m.group(1) if m else ""


def setup(gen, tmp, name="gpumemprof.4242.zst"):
    run([gen, "report", "fixture", name], tmp)
    return name


EXPECTED = ["MANIFEST.txt", "version.txt", "command-line.txt", "environment.txt", "info.txt",
            "info.json", "recording-1/report.txt", "recording-1/report.json",
            "recording-1/gpumemprof.4242.zst"]


def case_bundle(gmp, rt, tmp):
    tr = setup(rt, tmp)
    p = run([gmp, "diagnose", "-o", "b.tar.zst", tr], tmp)
    if b"wrote b.tar.zst" not in p.stderr:
        fail("no 'wrote' line: %r" % p.stderr)
    names = tar_list("b.tar.zst", tmp)
    want = [TOP + "/" + n for n in EXPECTED]
    if sorted(names) != sorted(want):
        fail("members %r, expected %r" % (names, want))
    top = extract("b.tar.zst", tmp)
    top2 = extract("b.tar.zst", tmp, via_zstd=True)
    for n in EXPECTED:
        if read(os.path.join(top, n), "rb") != read(os.path.join(top2, n), "rb"):
            fail("%s differs between tar --zstd and zstd -dc | tar" % n)
    env = env_with_secrets()
    text = run([gmp, "report", tr], tmp, env=env).stdout
    js = run([gmp, "report", "--format", "json", tr], tmp, env=env).stdout
    if read(os.path.join(top, "recording-1/report.txt"), "rb") != text:
        fail("report.txt is not `gpumemprof report`'s output")
    if read(os.path.join(top, "recording-1/report.json"), "rb") != js:
        fail("report.json is not `gpumemprof report --format json`'s output")
    if read(os.path.join(top, "recording-1/gpumemprof.4242.zst"), "rb") != read(
            os.path.join(tmp, tr), "rb"):
        fail("the recording is not a copy of the trace")
    info = run([gmp, "info"], tmp, expect_rc=None, env=env).stdout
    if read(os.path.join(top, "info.txt"), "rb") != info:
        fail("info.txt is not `gpumemprof info`'s output:\n%s\n---\n%s" %
             (read(os.path.join(top, "info.txt")), info.decode()))
    import json
    json.loads(read(os.path.join(top, "info.json")))
    version = run([gmp, "--version"], tmp).stdout.decode().strip()
    if not read(os.path.join(top, "version.txt")).startswith(version + "\n"):
        fail("version.txt does not start with %r" % version)
    man = read(os.path.join(top, "MANIFEST.txt"))
    if manifest_members(man) != EXPECTED:
        fail("manifest members %r, expected %r" % (manifest_members(man), EXPECTED))
    if left_out(man):
        fail("something left out:\n" + man)
    cl = read(os.path.join(top, "command-line.txt"))
    if not cl.startswith("gpumemprof diagnose -o b.tar.zst gpumemprof.4242.zst\n"):
        fail("command-line.txt: %r" % cl)


def case_secrets(gmp, rt, tmp):
    tr = setup(rt, tmp)
    p = run([gmp, "diagnose", "-o", "b.tar.zst", tr, ARG_URL, "--", "--db-password", "hunter2-db-pw",
             "API_KEY=" + ENV_SECRETS["MY_API_TOKEN"]], tmp)
    outputs = p.stdout + p.stderr
    top = extract("b.tar.zst", tmp)
    envtxt = read(os.path.join(top, "environment.txt"))
    lines = envtxt.splitlines()
    for k in ENV_SECRETS:
        if k + "=<redacted>" not in lines:
            fail("environment.txt has no line %s=<redacted>" % k)
    for k, (_, want) in URL_ENV.items():
        if "%s=%s" % (k, want) not in lines:
            fail("environment.txt has no line %s=%s" % (k, want))
    if "%s=%s" % PLAIN not in lines:
        fail("environment.txt lost the plain variable %s" % PLAIN[0])
    cl = read(os.path.join(top, "command-line.txt"))
    for want in ["'https://<redacted>@example.com/other.zst'", "--db-password '<redacted>'",
                 "'API_KEY=<redacted>'"]:
        if want not in cl:
            fail("command-line.txt has no %r:\n%s" % (want, cl))
    nfiles = 0
    for d, _, files in os.walk(top):
        for f in files:
            data = read(os.path.join(d, f), "rb")
            nfiles += 1
            for s in SECRETS:
                if s.encode() in data:
                    fail("secret %r in %s" % (s, os.path.join(d, f)))
    if nfiles < len(EXPECTED):
        fail("only %d files extracted" % nfiles)
    for s in SECRETS:
        if s.encode() in outputs:
            fail("secret %r on diagnose's stdout or stderr" % s)
    man = read(os.path.join(top, "MANIFEST.txt"))
    if "https://<redacted>@example.com/other.zst: cannot be read" not in man:
        fail("the URL given is not in the manifest, redacted:\n" + man)


def case_recorded(gmp, rt, tmp):
    tr = "gpumemprof.4243.zst"
    run([rt, "report", "secrets", tr], tmp)
    run([gmp, "diagnose", "-o", "b.tar.zst", tr], tmp)
    top = extract("b.tar.zst", tmp)
    for name in ("report.txt", "report.json"):
        text = read(os.path.join(top, "recording-1", name))
        # a value with quotes and a backslash: redacted whole in the text, the JSON string intact
        for s in ("hunter3-cmd-pw", "tok-7781-xyz", "pw-5512", "bob:", "te-991", "uo"):
            if s in text:
                fail("secret %r of the recorded command line in %s" % (s, name))
        for want in ("--password=<redacted>", "--api-token <redacted>",
                     "https://<redacted>@data.example/x", "-p port-8080"):
            if want not in text:
                fail("%s has no %r" % (name, want))
    man = read(os.path.join(top, "MANIFEST.txt"))
    json.loads(read(os.path.join(top, "recording-1", "report.json")))  # still JSON
    m = re.search(r"(\d+) option value\(s\) in the reports", man)
    if not m or int(m.group(1)) != 6:  # three options in each report
        fail("the manifest does not count the 4 option values redacted in the reports:\n" + man)
    for rule in ("--NAME=VALUE", "--NAME VALUE", "user:password", "-p VALUE",
                 "copied as they are"):
        if rule not in man:
            fail("the manifest does not state %r:\n%s" % (rule, man))
    if "Secrets are redacted from the environment, the command" in man:
        fail("the manifest still claims more than is redacted")


def case_list(gmp, rt, tmp):
    tr = setup(rt, tmp)
    before = sorted(os.listdir(tmp))
    p = run([gmp, "diagnose", "--list", tr], tmp)
    if sorted(os.listdir(tmp)) != before:
        fail("--list wrote files: %r" % sorted(set(os.listdir(tmp)) - set(before)))
    listed = manifest_members(p.stdout.decode())
    if listed != EXPECTED:
        fail("--list members %r, expected %r" % (listed, EXPECTED))
    run([gmp, "diagnose", tr], tmp)
    names = tar_list(DEFAULT_OUT, tmp)
    if names != [TOP + "/" + n for n in listed]:
        fail("bundle members %r, --list said %r" % (names, listed))
    top = extract(DEFAULT_OUT, tmp)
    man = read(os.path.join(top, "MANIFEST.txt"))
    if manifest_members(man) != listed:
        fail("MANIFEST.txt and --list differ")


def case_bounds(gmp, rt, tmp):
    tr = setup(rt, tmp)
    size = os.path.getsize(os.path.join(tmp, tr))
    # per file: the trace (about 1 KiB) over the bound, the reports too (text 8 KiB, JSON 60 KiB)
    run([gmp, "diagnose", "-o", "b.tar.zst", "--max-file", str(size - 1), tr], tmp)
    names = tar_list("b.tar.zst", tmp)
    if TOP + "/recording-1/gpumemprof.4242.zst" in names:
        fail("a recording over --max-file was included")
    top = extract("b.tar.zst", tmp)
    man = read(os.path.join(top, "MANIFEST.txt"))
    lo = left_out(man)
    if not re.search(r"^\s+%d\s+recording-1/gpumemprof\.4242\.zst\s.*over the per-file bound" %
                     size, lo, re.M):
        fail("the manifest does not say the recording was left out:\n" + man)
    # a bound that keeps the trace and the text report but not the JSON
    run([gmp, "diagnose", "-o", "c.tar.zst", "--max-file", "32K", tr], tmp)
    names = [n[len(TOP) + 1:] for n in tar_list("c.tar.zst", tmp)]
    if "recording-1/report.json" in names or "recording-1/report.txt" not in names or \
            "recording-1/gpumemprof.4242.zst" not in names:
        fail("--max-file 32K: members %r" % names)
    # in all: the generated members are taken first; what they leave is too little for the
    # recording (their sizes from --list, which shows what the same command would write)
    listed = run([gmp, "diagnose", "--list", tr], tmp).stdout.decode()
    sizes = [int(x) for x in re.findall(r"^\s+(\d+)\s+(?!recording-1/gpumemprof)\S+\s", listed,
                                        re.M)]
    total = sum(sizes) + size - 1
    run([gmp, "diagnose", "-o", "d.tar.zst", "--max-total", str(total), tr], tmp)
    top = extract("d.tar.zst", tmp)
    man = read(os.path.join(top, "MANIFEST.txt"))
    if "recording-1/gpumemprof.4242.zst" in manifest_members(man) or \
            "recording-1/report.json" not in manifest_members(man) or \
            "over the total bound" not in left_out(man):
        fail("--max-total: the manifest says:\n" + man)


def case_overwrite(gmp, rt, tmp):
    tr = setup(rt, tmp)
    with open(os.path.join(tmp, DEFAULT_OUT), "w") as f:
        f.write("keep me")
    p = run([gmp, "diagnose", tr], tmp, expect_rc=1)
    if b"not overwritten" not in p.stderr:
        fail("no message: %r" % p.stderr)
    if read(os.path.join(tmp, DEFAULT_OUT)) != "keep me":
        fail("the existing file was changed")
    if sorted(os.listdir(tmp)) != sorted([tr, DEFAULT_OUT]):
        fail("files left behind: %r" % os.listdir(tmp))
    run([gmp, "diagnose", "-o", DEFAULT_OUT, tr], tmp)
    tar_list(DEFAULT_OUT, tmp)  # a bundle now
    if sorted(os.listdir(tmp)) != sorted([tr, DEFAULT_OUT]):
        fail("files left behind: %r" % os.listdir(tmp))
    run([gmp, "diagnose", "-o", "-", tr], tmp, expect_rc=2)
    run([gmp, "diagnose", "--bogus"], tmp, expect_rc=2)
    run([gmp, "diagnose", "-o", "no/such/dir/b.tar.zst", tr], tmp, expect_rc=1)


def case_missing(gmp, rt, tmp):
    tr = setup(rt, tmp)
    p = run([gmp, "diagnose", "-o", "b.tar.zst", "nope.zst", tr], tmp)
    if not re.search(rb"^gpumemprof diagnose: warning: nope\.zst: No such file or directory",
                     p.stderr, re.M):
        fail("no warning: %r" % p.stderr)
    top = extract("b.tar.zst", tmp)
    man = read(os.path.join(top, "MANIFEST.txt"))
    if "1. nope.zst: cannot be read: No such file or directory" not in man:
        fail("the manifest does not list the missing file:\n" + man)
    names = manifest_members(man)
    if "recording-2/gpumemprof.4242.zst" not in names or \
            any(n.startswith("recording-1/") for n in names):
        fail("members: %r" % names)


def case_not_trace(gmp, rt, tmp):
    with open(os.path.join(tmp, "notes.txt"), "w") as f:
        f.write("not a trace\n")
    p = run([gmp, "diagnose", "-o", "b.tar.zst", "notes.txt"], tmp)
    if b"warning: notes.txt: gpumemprof report failed" not in p.stderr:
        fail("no warning: %r" % p.stderr)
    names = [n[len(TOP) + 1:] for n in tar_list("b.tar.zst", tmp)]
    if "recording-1/notes.txt" not in names or "recording-1/report-messages.txt" not in names or \
            "recording-1/report.txt" in names:
        fail("members: %r" % names)
    top = extract("b.tar.zst", tmp)
    msg = read(os.path.join(top, "recording-1/report-messages.txt"))
    if not msg.startswith("gpumemprof report: notes.txt: "):
        fail("report-messages.txt: %r" % msg)


def case_auto(gmp, rt, tmp):
    tr = setup(rt, tmp)
    data = read(os.path.join(tmp, tr), "rb")
    now = time.time()
    for i in range(5):  # gpumemprof.100.zst the oldest ... gpumemprof.104.zst the newest
        path = os.path.join(tmp, "gpumemprof.%d.zst" % (100 + i))
        with open(path, "wb") as f:
            f.write(data)
        os.utime(path, (now - 1000 + i * 100, now - 1000 + i * 100))
    os.utime(os.path.join(tmp, tr), (now - 5000, now - 5000))  # older than all
    with open(os.path.join(tmp, "other.zst"), "wb") as f:
        f.write(data)
    p = run([gmp, "diagnose", "--list"], tmp)
    out = p.stdout.decode()
    names = manifest_members(out)
    recs = [n for n in names if re.match(r"recording-\d+/gpumemprof\.\d+\.zst$", n)]
    want = ["recording-%d/gpumemprof.%d.zst" % (i + 1, 104 - i) for i in range(4)]
    if recs != want:
        fail("picked %r, expected %r" % (recs, want))
    if "older recordings not taken (at most 4 are taken): gpumemprof.100.zst gpumemprof.4242.zst" \
            not in out:
        fail("the older ones are not noted:\n" + out)
    # none at all: a bundle all the same
    empty = tempfile.mkdtemp(dir=tmp)
    run([gmp, "diagnose", "-o", "e.tar.zst"], empty)
    names = [n[len(TOP) + 1:] for n in tar_list("e.tar.zst", empty)]
    if names != EXPECTED[:6]:
        fail("with no recording: %r" % names)


def main():
    mode, gmp, rt = sys.argv[1:4]
    cases = {k[5:]: v for k, v in globals().items() if k.startswith("case_")}
    if mode not in cases:
        sys.exit("unknown mode %s" % mode)
    with gmp_testlib.tmpdir(prefix="gmp-diagnose-") as tmp:
        cases[mode](os.path.abspath(gmp), os.path.abspath(rt), tmp)
    print("ok: diagnose %s" % mode)


if __name__ == "__main__":
    main()
