#!/usr/bin/env python3
"""Opens `gpumemprof convert --pytorch-snapshot` files in the real memory_viz (PyTorch's
torch/utils/viz/MemoryViz.js, the page behind https://pytorch.org/memory_viz) running in Debian's
headless chromium, and checks that each loads without error and that its Active Memory Timeline
peaks at the peak allocated bytes `gpumemprof report --format json` gives, per device.

    memviz_viewer.py GPUMEMPROF CONVERT_DATA_DIR SNAPSHOT_DIR HARNESS_DIR WORK_DIR

MemoryViz.js is not in this repository: GMP_MEMVIZ_JS names a copy taken from PyTorch's public
repository (docs/convert.md says which commit and how to fetch it). Without it, or without
chromium or node, the test is skipped (exit 77, ctest SKIP_RETURN_CODE).

How: MemoryViz.js imports d3@5 and d3-axis/-scale/-zoom/-brush@1 from cdn.skypack.dev as ES
modules. HARNESS_DIR (tests/convert/memviz) holds those versions from npm (package.json and its
lock file; `npm ci`, run by scripts/install-deps.sh --browser). This script serves them, the
directory of MemoryViz.js and one page per snapshot from a local HTTP server on 127.0.0.1; the
page's import map sends the CDN addresses and d3's bare module names to the local files (a d3
module that imports "./x" gets x.js: the server adds the extension, as the CDN does). Chromium
resolves no other host (--host-resolver-rules), so nothing is fetched from the network.
The page (HARNESS_DIR/page.html) calls memory_viz's add_local_files with the pickle in base64,
as torch.cuda._memory_viz's own HTML does, selects each device through memory_viz's <select>,
and reads the y axis memory_viz draws: its ticks' positions and labels give the plot's maximum
(to a fraction of a byte). chromium --dump-dom prints the page with the result; console errors
(--enable-logging=stderr) and exceptions fail the check. The check first proves that it sees
failures: a pickle of protocol 5 (which memory_viz refuses) and a snapshot whose peak is
changed must both be reported."""
import base64
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import urllib.parse

SKIP = 77
CDN = re.compile(r'''from\s+["'](https://cdn\.skypack\.dev/([a-z0-9-]+)@(\d+))["']''')


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        p = shutil.which(name)
        if p:
            return p
    return None


def module_entry(pkg_dir):
    pj = json.load(open(os.path.join(pkg_dir, "package.json")))
    entry = pj.get("module") or pj.get("jsnext:main") or pj.get("main") or "index.js"
    if not entry.endswith(".js"):
        entry += ".js"
    return pj["version"], entry


def import_map(memviz_js, node_modules):
    """The import map: MemoryViz.js's CDN imports and every package's bare name -> local files;
    nested node_modules (d3's own d3-scale@2) as scopes."""
    imports, scopes = {}, {}

    def add_dir(nm, url_prefix, target):
        for name in sorted(os.listdir(nm)):
            d = os.path.join(nm, name)
            if not os.path.exists(os.path.join(d, "package.json")):
                continue
            _, entry = module_entry(d)
            target[name] = "%s/%s/%s" % (url_prefix, name, entry)
            if os.path.isdir(os.path.join(d, "node_modules")):
                scope = {}
                add_dir(os.path.join(d, "node_modules"), "%s/%s/node_modules" % (url_prefix, name),
                        scope)
                scopes["%s/%s/" % (url_prefix, name)] = scope

    add_dir(node_modules, "/node_modules", imports)
    src = open(memviz_js, encoding="utf-8").read()
    cdn = CDN.findall(src)
    if not cdn:
        sys.exit("%s imports nothing from cdn.skypack.dev: not the MemoryViz.js this test knows" %
                 memviz_js)
    for url, name, major in cdn:
        d = os.path.join(node_modules, name)
        if not os.path.isdir(d):
            sys.exit("MemoryViz.js imports %s, which tests/convert/memviz/package.json lacks" % url)
        version, entry = module_entry(d)
        if version.split(".")[0] != major:
            sys.exit("MemoryViz.js imports %s but tests/convert/memviz has %s %s" %
                     (url, name, version))
        imports[url] = "/node_modules/%s/%s" % (name, entry)
    return {"imports": imports, "scopes": scopes}, cdn


class Server:
    """Serves /memviz/ (the directory of MemoryViz.js), /node_modules/ and /case/NAME/."""

    def __init__(self, memviz_dir, node_modules, page_html, imap):
        self.roots = {"memviz": memviz_dir, "node_modules": node_modules}
        self.cases = {}
        page = open(page_html, encoding="utf-8").read()
        tag = '<script type="importmap">%s</script>' % json.dumps(imap)
        self.page = re.sub(r"<!-- IMPORTMAP:.*?-->", lambda _: tag, page, count=1, flags=re.S)
        srv = self

        class H(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                body, ctype = srv.get(urllib.parse.urlparse(self.path).path)
                if body is None:
                    self.send_response(404)
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                self.wfile.write(body)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def get(self, path):
        parts = [p for p in path.split("/") if p]
        if len(parts) == 3 and parts[0] == "case" and parts[1] in self.cases:
            if parts[2] == "page.html":
                return self.page.encode(), "text/html; charset=utf-8"
            if parts[2] == "snapshot.js":
                return self.cases[parts[1]].encode(), "text/javascript"
            return None, None
        if not parts or parts[0] not in self.roots or ".." in parts:
            return None, None
        p = os.path.join(self.roots[parts[0]], *parts[1:])
        for cand in (p, p + ".js", os.path.join(p, "index.js")):  # "./band" -> band.js
            if os.path.isfile(cand):
                ctype = "text/javascript" if cand.endswith(".js") else "application/octet-stream"
                if cand.endswith(".json"):
                    ctype = "application/json"
                return open(cand, "rb").read(), ctype
        return None, None

    def add_case(self, name, pickle_bytes, views):
        data = pickle_bytes + b"\0" * (3 - len(pickle_bytes) % 3)  # as _memory_viz pads it
        self.cases[name] = "export default %s;\n" % json.dumps(
            {"name": name + ".pickle", "base64": base64.b64encode(data).decode(), "views": views})
        return "http://127.0.0.1:%d/case/%s/page.html" % (self.port, name)


def run_page(chromium, url, work):
    """Returns (result dict or None, console lines)."""
    for attempt in range(3):
        profile_dir = tempfile.mkdtemp(prefix="chromium-", dir=work)
        args = [chromium, "--headless", "--no-sandbox", "--disable-gpu",
                "--enable-unsafe-swiftshader", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run",
                "--disable-dev-shm-usage", "--user-data-dir=" + profile_dir,
                "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
                "--enable-logging=stderr", "--v=0", "--virtual-time-budget=60000",
                "--dump-dom", url]
        try:
            p = subprocess.run(args, capture_output=True, timeout=240)
        except subprocess.TimeoutExpired:
            continue
        finally:
            shutil.rmtree(profile_dir, ignore_errors=True)
        dom = p.stdout.decode("utf-8", "replace")
        console = [l for l in p.stderr.decode("utf-8", "replace").splitlines() if "CONSOLE" in l]
        if "<html" not in dom:
            continue
        m = re.search(r'<pre id="gmp-memviz-result"[^>]*>(.*?)</pre>', dom, re.S)
        if not m or not m.group(1).strip():
            return None, console
        import html
        return json.loads(html.unescape(m.group(1))), console
    sys.exit("chromium did not load %s (3 attempts)" % url)


def report_peaks(gmp, trace):
    p = subprocess.run([gmp, "report", trace, "--format", "json"], capture_output=True)
    if p.returncode != 0:
        sys.exit("report %s: exit %d\n%s" % (trace, p.returncode, p.stderr.decode()))
    doc = json.loads(p.stdout)
    procs = doc.get("processes") or [doc]
    peaks = {}
    for proc in procs:
        for d in proc.get("devices", []):
            if isinstance(d.get("id"), int) and d["id"] >= 0:  # GPUs (host memory: no snapshot)
                peaks[d["id"]] = (d["peak_allocated_bytes"], d["peak_reserved_bytes"])
    return peaks


# Console lines that are chromium's own, not the page's: none expected, but headless builds
# sometimes log these.
BENIGN = ("Permissions-Policy", "favicon")


def check(chromium, srv, name, pickle_bytes, want, work, views=None):
    """None when memory_viz loads the snapshot without error and its Active Memory Timeline
    peaks at want[device] on every device; else why not. Also returns the figures."""
    url = srv.add_case(name, pickle_bytes, views or ["Active Memory Timeline"])
    res, console = run_page(chromium, url, work)
    errs = [l for l in console if ("ERROR" in l or "Uncaught" in l or "Error" in l) and
            not any(b in l for b in BENIGN)]
    if res is None:
        return "the page did not finish (console: %s)" % " | ".join(console[-5:]), None
    if res["errors"]:
        return "memory_viz failed: %s" % " | ".join(res["errors"])[:2000], res
    if errs:
        return "console errors: %s" % " | ".join(errs)[:2000], res
    if sorted(res.get("devices", [])) != sorted(want):
        return "memory_viz offers devices %s, the report has %s" % (res.get("devices"),
                                                                   sorted(want)), res
    for v in res["views"]:
        if v.get("errors"):
            return "%s, device %d: %s" % (v["view"], v["device"], " | ".join(v["errors"])), res
        if v["view"] != "Active Memory Timeline":
            continue
        if v.get("max") is None:
            return "device %d: no peak could be read from the plot's axis (%s)" % (v["device"],
                                                                                   v), res
        if abs(v.get("bottom", 576) - 576) > 1e-6 and v["max"]:
            return "device %d: the axis does not start at 0 (%s)" % (v["device"], v), res
        if v["max"] != want[v["device"]]:
            return "device %d: memory_viz peaks at %d bytes, the report at %d" % (
                v["device"], v["max"], want[v["device"]]), res
    return None, res


def main():
    gmp, data, snapdir, harness, work = sys.argv[1:6]
    memviz_js = os.environ.get("GMP_MEMVIZ_JS", "")
    if not memviz_js:
        print("SKIP: set GMP_MEMVIZ_JS to PyTorch's torch/utils/viz/MemoryViz.js "
              "(docs/convert.md, 'memory_viz')")
        return SKIP
    if not os.path.isfile(memviz_js):
        sys.exit("GMP_MEMVIZ_JS=%s: no such file" % memviz_js)
    chromium = find_chromium()
    if not chromium or not shutil.which("node"):
        print("SKIP: needs chromium and node (scripts/install-deps.sh --browser installs them)")
        return SKIP
    node_modules = os.path.join(os.path.abspath(harness), "node_modules")
    if not os.path.isdir(os.path.join(node_modules, "d3")):
        sys.exit("%s is missing: run scripts/install-deps.sh --browser (npm ci in %s)" %
                 (node_modules, harness))
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    imap, cdn = import_map(memviz_js, node_modules)
    srv = Server(os.path.dirname(os.path.abspath(memviz_js)), node_modules,
                 os.path.join(harness, "page.html"), imap)
    print("MemoryViz.js: %s; its CDN imports served from npm: %s" %
          (memviz_js, ", ".join("%s@%s" % (n, module_entry(os.path.join(node_modules, n))[0])
                                for _, n, _m in cdn)))

    # what to open: exported test traces, and real snapshots imported then exported again
    cases = []
    for t in ("basic", "hostile", "rank0"):
        cases.append((t, os.path.join(data, t + ".trace")))
    for f in sorted(os.listdir(snapdir)):
        if not f.endswith(".pickle"):
            continue
        trace = os.path.join(work, f[:-7] + ".zst")
        p = subprocess.run([gmp, "import", os.path.join(snapdir, f), "-o", trace, "--force",
                            "--quiet"], capture_output=True)
        if p.returncode != 0:
            sys.exit("import %s: exit %d\n%s" % (f, p.returncode, p.stderr.decode()))
        cases.append((f[:-7], trace))

    exported = []
    for name, trace in cases:
        out = os.path.join(work, name + ".pytorch.pickle")
        p = subprocess.run([gmp, "convert", trace, "--pytorch-snapshot", out, "--no-progress"],
                           capture_output=True)
        if p.returncode != 0:
            sys.exit("convert %s: exit %d\n%s" % (name, p.returncode, p.stderr.decode()))
        blob = open(out, "rb").read()
        if blob[:1] != b"\x80" or not 2 <= blob[1] <= 4:
            sys.exit("%s: pickle protocol %d: memory_viz reads protocols 2 to 4" % (out, blob[1]))
        want = {d: v[0] for d, v in report_peaks(gmp, trace).items()}
        exported.append((name, blob, want))

    # 1. the check sees failures
    name, blob, want = exported[0]
    proto5 = b"\x80\x05" + blob[2:]
    err, _ = check(chromium, srv, "broken-protocol5", proto5, want, work)
    if err is None:
        sys.exit("the check did not notice a protocol 5 pickle: it cannot be trusted")
    print("ok: a protocol 5 pickle is reported: %s" % err.splitlines()[0][:200])
    wrong = {d: v + 4096 for d, v in want.items()}
    err, _ = check(chromium, srv, "broken-peak", blob, wrong, work)
    if err is None:
        sys.exit("the check did not notice a wrong peak: it cannot be trusted")
    print("ok: a peak 4096 bytes off is reported: %s" % err.splitlines()[0][:200])

    # 2. every exported snapshot loads without error and peaks where the report says
    failed = 0
    for name, blob, want in exported:
        err, res = check(chromium, srv, name, blob, want, work)
        if err:
            print("FAIL: %s.pytorch.pickle: %s" % (name, err))
            failed += 1
            continue
        shown = ", ".join("device %d %d bytes (axis %s)" % (v["device"], v["max"],
                                                             "/".join(v.get("labels", [])[-1:]))
                          for v in res["views"])
        print("ok: %s.pytorch.pickle (%d bytes) loads in memory_viz; Active Memory Timeline "
              "peak = report's peak allocated: %s" % (name, len(blob), shown))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
