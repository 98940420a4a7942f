"""Golden files shared by the tests' check scripts (python3, stdlib only).

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tools"))
    import gmp_golden

golden_bytes(path, out, regen_var)  the output must be byte-identical to the golden file
golden_json(path, out, regen_var)   the output and the golden file must parse to the same JSON
                                    (object key order ignored, list order and types significant);
                                    a mismatch names the first differing path ($.a[3].b)

out is the tool's output (bytes). When the environment variable regen_var is set (non-empty and
not "0"; or regen=True/False given by the caller, which then decides), the golden file is first
rewritten with out as it is: JSON goldens keep the tool's own layout. Review `git diff` after
regenerating. Every test reads one variable, REGEN_VAR (GMP_REGEN); regen_requested() says whether
it is set, for checks that write their expected files themselves."""
import difflib
import json
import os
import sys


REGEN_VAR = "GMP_REGEN"


def _env_set(var):
    v = os.environ.get(var, "")
    return v not in ("", "0")


def regen_requested():
    """GMP_REGEN is set (non-empty, not "0"): rewrite expected files instead of comparing."""
    return _env_set(REGEN_VAR)


def _write_if_regen(path, out, var, force):
    if _env_set(var) if force is None else force:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(out)
        print("regenerated", path)


def golden_bytes(path, out, regen_var, regen=None):
    _write_if_regen(path, out, regen_var, regen)
    with open(path, "rb") as f:
        want = f.read()
    if out == want:
        return
    a = want.decode("utf-8", errors="replace").splitlines(True)
    b = out.decode("utf-8", errors="replace").splitlines(True)
    diff = "".join(difflib.unified_diff(a, b, "golden/" + os.path.basename(path), "produced",
                                        n=2))
    if not diff:
        diff = "(the lines are equal as decoded text: a byte differs, e.g. invalid UTF-8)\n"
    sys.exit("FAIL: output differs from %s (%s=1 rewrites it):\n%s" %
             (path, regen_var, diff[:8000]))


def _no_dup_keys(pairs):
    d = {}
    for k, v in pairs:
        if k in d:
            raise ValueError("duplicate key %r" % k)
        d[k] = v
    return d


def parse_json(data, what):
    """Strict: UTF-8, no duplicate keys, no NaN/Infinity."""
    try:
        text = data.decode("utf-8")
        return json.loads(text, object_pairs_hook=_no_dup_keys,
                          parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    except ValueError as e:
        sys.exit("FAIL: %s is not valid JSON: %s" % (what, e))


def _kind(x):
    # bool before int: True == 1 in Python, but not in the JSON
    for t, n in ((bool, "bool"), (int, "int"), (float, "float"), (str, "string"),
                 (list, "array"), (dict, "object"), (type(None), "null")):
        if isinstance(x, t):
            return n
    return type(x).__name__


def first_difference(want, got, path="$"):
    """(path, golden, output) of the first difference, or None when equal."""
    if _kind(want) != _kind(got):
        return path, want, got
    if isinstance(want, dict):
        for k in want:
            if k not in got:
                return "%s.%s" % (path, k), want[k], "(missing)"
            d = first_difference(want[k], got[k], "%s.%s" % (path, k))
            if d:
                return d
        for k in got:
            if k not in want:
                return "%s.%s" % (path, k), "(missing)", got[k]
        return None
    if isinstance(want, list):
        for i, (a, b) in enumerate(zip(want, got)):
            d = first_difference(a, b, "%s[%d]" % (path, i))
            if d:
                return d
        if len(want) != len(got):
            i = min(len(want), len(got))
            return ("%s[%d]" % (path, i), want[i] if i < len(want) else "(missing)",
                    got[i] if i < len(got) else "(missing)")
        return None
    return None if want == got else (path, want, got)


def golden_json(path, out, regen_var, regen=None):
    _write_if_regen(path, out, regen_var, regen)
    got = parse_json(out, "the output")
    with open(path, "rb") as f:
        want = parse_json(f.read(), path)
    d = first_difference(want, got)
    if d:
        def short(v):
            s = json.dumps(v)
            return s if len(s) <= 300 else s[:300] + "..."
        sys.exit("FAIL: JSON differs from %s (%s=1 rewrites it) at %s:\n  golden: %s\n  output: "
                 "%s" % (path, regen_var, d[0], short(d[1]), short(d[2])))
