#!/usr/bin/env python3
"""Opens `gpumemprof convert --speedscope` files in the real speedscope viewer (the npm package
`speedscope`, installed under tests/convert/viewer by scripts/install-deps.sh --browser) running in
Debian's headless chromium, and fails when speedscope cannot import them.

    speedscope_viewer.py GPUMEMPROF DATA_DIR VIEWER_DIR WORK_DIR

How: speedscope's `index.html#localProfilePath=FILE.js` loads FILE.js, which calls
`speedscope.loadFileFromBase64(name, base64)` (what speedscope's own CLI does). chromium
--dump-dom prints the DOM once the page settles (--virtual-time-budget). A file imported without
error sets the document title to "<name> - speedscope" and lists every profile by name; an import
error leaves the title alone, shows "Something went wrong" and logs "Failed to load format" on the
console (--enable-logging=stderr). The test first proves that it sees such errors by opening broken
files, which must be reported as failures.

Exit status 77 (ctest SKIP_RETURN_CODE) when chromium or node is not installed."""
import base64
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

SKIP = 77


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        p = shutil.which(name)
        if p:
            return p
    return None


def open_in_speedscope(chromium, index_html, profile_path, work):
    """Returns (title, dom_text, console_text)."""
    data = open(profile_path, "rb").read()
    js = os.path.join(work, os.path.basename(profile_path) + ".js")
    with open(js, "w") as f:
        f.write("speedscope.loadFileFromBase64(%s, %s)" %
                (json.dumps(os.path.basename(profile_path)),
                 json.dumps(base64.b64encode(data).decode())))
    url = "file://%s#localProfilePath=%s" % (index_html, os.path.abspath(js))
    for attempt in range(3):
        profile_dir = tempfile.mkdtemp(prefix="chromium-", dir=work)
        args = [chromium, "--headless", "--no-sandbox", "--disable-gpu",
                "--enable-unsafe-swiftshader", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run",
                "--disable-dev-shm-usage", "--user-data-dir=" + profile_dir,
                "--enable-logging=stderr", "--v=0", "--virtual-time-budget=5000",
                "--allow-file-access-from-files", "--dump-dom", url]
        try:
            p = subprocess.run(args, capture_output=True, timeout=120)
        except subprocess.TimeoutExpired:
            continue
        finally:
            shutil.rmtree(profile_dir, ignore_errors=True)
        dom = p.stdout.decode("utf-8", "replace")
        console = "\n".join(l for l in p.stderr.decode("utf-8", "replace").splitlines()
                            if "CONSOLE" in l)
        if "<html" in dom:
            m = re.search(r"<title>(.*?)</title>", dom, re.S)
            return (m.group(1) if m else ""), dom, console
    sys.exit("chromium did not load %s (3 attempts)" % url)


def html_unescape(s):
    import html
    return html.unescape(s)


def check_imported(chromium, index_html, path, work):
    """Returns None when speedscope imported the file and shows every profile, else why not."""
    doc = json.load(open(path, encoding="utf-8"))
    title, dom, console = open_in_speedscope(chromium, index_html, path, work)
    text = html_unescape(re.sub(r"<[^>]*>", "\n", dom))
    if "Failed to load format" in console:
        return "speedscope logged an import error:\n" + console[-2000:]
    if "Something went wrong" in dom:
        return "speedscope shows 'Something went wrong'"
    if html_unescape(title) != doc["name"] + " - speedscope":
        return "the document title is %r, not the profile's name (import did not finish)" % title
    if "Importing as speedscope json file" not in console:
        return "speedscope did not import the file as its own format"
    # profile names as speedscope displays them (it collapses whitespace in HTML text)
    shown = " ".join(text.split())
    for p in doc["profiles"]:
        want = " ".join(p["name"].split())
        if want not in shown:
            return "profile %r is not listed" % p["name"]
    return None


def main():
    gmp, data, viewer, work = sys.argv[1:5]
    if os.environ.get("GMP_TEST_NO_BROWSER", "") not in ("", "0"):
        print("SKIP: GMP_TEST_NO_BROWSER (convert_golden_speedscope checks the file itself)")
        return SKIP
    chromium = find_chromium()
    if not chromium or not shutil.which("node"):
        print("SKIP: needs chromium and node (scripts/install-deps.sh --browser installs them)")
        return SKIP
    index_html = os.path.join(os.path.abspath(viewer), "node_modules", "speedscope", "dist",
                              "release", "index.html")
    if not os.path.exists(index_html):
        sys.exit("%s is missing: run scripts/install-deps.sh --browser (npm ci in %s)" %
                 (index_html, viewer))
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)

    outputs = []
    for name, traces in (("basic", ["basic.trace"]), ("hostile", ["hostile.trace"]),
                         ("multi", ["rank0.trace", "rank1.trace"]), ("empty", ["empty.trace"])):
        out = os.path.join(work, name + ".speedscope.json")
        p = subprocess.run([gmp, "convert"] + [os.path.join(data, t) for t in traces] +
                           ["--speedscope", out], capture_output=True)
        if p.returncode != 0:
            sys.exit("convert %s: exit %d\n%s" % (name, p.returncode, p.stderr.decode()))
        outputs.append(out)

    # 1. the check sees import errors: broken files must fail it
    basic = json.load(open(outputs[0], encoding="utf-8"))
    broken = []
    unbalanced = json.loads(json.dumps(basic))
    ev = [p for p in unbalanced["profiles"] if p["type"] == "evented"][0]
    ev["events"] = [{"type": "O", "frame": 0, "at": ev["startValue"]},
                    {"type": "C", "frame": 1, "at": ev["startValue"] + 1}]
    broken.append(("closes a frame that is not open", unbalanced))
    bad_frame = json.loads(json.dumps(basic))
    bad_frame["profiles"][0]["samples"][0] = [len(basic["shared"]["frames"]) + 5]
    broken.append(("refers to a frame that does not exist", bad_frame))
    for why, doc in broken:
        path = os.path.join(work, "broken.speedscope.json")
        with open(path, "w") as f:
            json.dump(doc, f)
        err = check_imported(chromium, index_html, path, work)
        if err is None:
            sys.exit("the viewer check did not notice a broken file (%s): it cannot be trusted" %
                     why)
        print("ok: a broken file (%s) is reported: %s" % (why, err.splitlines()[0]))

    # 2. every file gpumemprof writes imports without error
    for out in outputs:
        err = check_imported(chromium, index_html, out, work)
        if err:
            sys.exit("%s: %s" % (os.path.basename(out), err))
        n = len(json.load(open(out, encoding="utf-8"))["profiles"])
        print("ok: %s imported by speedscope, %d profiles listed" % (os.path.basename(out), n))
    return 0


if __name__ == "__main__":
    sys.exit(main())
