#!/usr/bin/env bash
# Scenario tests of the gpumemprof CLI: cli_test.sh CASE
# Environment (set by tests/cli/CMakeLists.txt): GMP (the gpumemprof binary), GEN (tests/tools/gen_traces),
# PATHS_TOOL (test_cli_paths), GOLDEN (tests/cli/golden), WORK (scratch directory of this case),
# BUILD_DIR, VERSION. GMP_REGEN=1 rewrites the golden files instead of comparing.
set -euo pipefail

case_name=${1:?usage: cli_test.sh CASE}
rm -rf "$WORK"
mkdir -p "$WORK"
cd "$WORK"

fail() {
    echo "FAIL ($case_name): $*" >&2
    exit 1
}

# run EXPECTED_RC CMD...: runs CMD with stdout in ./out and stderr in ./err, checks the exit status
run() {
    local want=$1
    shift
    local rc=0
    "$@" >out 2>err || rc=$?
    if [[ $rc -ne $want ]]; then
        echo "--- stdout:" >&2
        head -c 4000 out >&2 || true
        echo "--- stderr:" >&2
        head -c 4000 err >&2 || true
        fail "'$*' exited $rc, expected $want"
    fi
}

has() { # has FILE TEXT: FILE contains the fixed string TEXT
    grep -qF -- "$2" "$1" || {
        echo "--- $1:" >&2
        head -c 4000 "$1" >&2
        fail "$1 does not contain '$2'"
    }
}

lines() { wc -l <"$1" | tr -d ' '; }

# The END record is the only event whose time the generator cannot fix (the writer stamps it when
# it closes the file); replace that time with T so that outputs compare byte for byte.
normalize() {
    # END's time is the writer's clock; compressed sizes depend on the zstd version and level
    sed -E -e 's/^[0-9]+ 0 end /T 0 end /' -e 's/^\{"type":"end","t":[0-9]+,/{"type":"end","t":"T",/' \
        -e 's/ frames?, [0-9]+ bytes/ frames, N bytes/' -e 's/"bytes_read":[0-9]+/"bytes_read":N/'
}

golden() { # golden NAME FILE: compare FILE (normalized) with golden/NAME, or rewrite it
    normalize <"$2" >"$2.norm"
    if [[ -n "${GMP_REGEN:-}" && "$GMP_REGEN" != 0 ]]; then # as tests/tools/gmp_golden.py
        cp "$2.norm" "$GOLDEN/$1"
        echo "regenerated $GOLDEN/$1"
        return 0
    fi
    [[ -f "$GOLDEN/$1" ]] || fail "no golden file $GOLDEN/$1 (run with GMP_REGEN=1 to create it)"
    diff -u "$GOLDEN/$1" "$2.norm" >&2 ||
        fail "output differs from $GOLDEN/$1 (if intended: GMP_REGEN=1 ctest -R cli_dump_golden)"
}

gen() { "$GEN" cli "$@" || fail "gen_traces cli $* failed"; }

check_json_lines() { # every line of FILE is one JSON object; prints the summary object's fields
    python3 -c '
import json, sys
n = 0
last = None
for i, line in enumerate(open(sys.argv[1], encoding="utf-8"), 1):
    try:
        obj = json.loads(line)
    except ValueError as e:
        sys.exit("line %d is not JSON: %s: %r" % (i, e, line[:200]))
    if not isinstance(obj, dict) or "type" not in obj:
        sys.exit("line %d: not an object with a type" % i)
    n += 1
    last = obj
if not last or last["type"] != "summary":
    sys.exit("the last line is not the summary")
print(n, last["complete"], last["truncated"], last["total"])
' "$1"
}

case "$case_name" in
help)
    run 0 "$GMP" --help
    has out "usage: gpumemprof"
    has out "dump"
    has out "print every record of a trace"
    [[ ! -s err ]] || fail "--help wrote to stderr"
    run 0 "$GMP" -h
    run 0 "$GMP" help
    ;;
version)
    run 0 "$GMP" --version
    [[ "$(cat out)" == "gpumemprof $VERSION" ]] || fail "--version printed '$(cat out)'"
    run 0 "$GMP" -V
    run 2 "$GMP" --version extra
    ;;
no_args)
    run 2 "$GMP"
    has err "usage: gpumemprof"
    [[ ! -s out ]] || fail "usage error wrote to stdout"
    ;;
unknown_command)
    run 2 "$GMP" frobnicate trace.zst
    has err "gpumemprof: 'frobnicate' is not a gpumemprof command"
    has err "usage: gpumemprof"
    run 2 "$GMP" --frobnicate
    has err "gpumemprof: --frobnicate: unknown option"
    run 2 "$GMP" help frobnicate
    has err "'frobnicate' is not a gpumemprof command"
    ;;
bad_option)
    gen t.zst
    run 2 "$GMP" dump --foo t.zst
    [[ "$(head -n1 err)" == "gpumemprof dump: --foo: unknown option" ]] ||
        fail "first stderr line: '$(head -n1 err)'"
    has err "usage: gpumemprof dump FILE"
    run 2 "$GMP" dump --foo=1 t.zst
    has err "gpumemprof dump: --foo: unknown option"
    run 2 "$GMP" dump --json=yes t.zst
    has err "gpumemprof dump: --json: takes no value"
    run 2 "$GMP" dump -x t.zst
    has err "gpumemprof dump: -x: unknown option"
    # convert: an output asked for twice would keep only its last file; the usage and the
    # message for no output name every output
    run 2 "$GMP" convert t.zst --report a.txt --report=b.md
    has err "--report given twice (a.txt, b.md)"
    [[ ! -e a.txt && ! -e b.md ]] || fail "convert wrote an output after a usage error"
    run 2 "$GMP" convert t.zst
    for o in speedscope chrome pytorch-snapshot report json pprof html-view; do
        has err "--$o"
    done
    grep -F "usage: gpumemprof convert" err | grep -qF -- "--html-view" ||
        fail "convert's usage line does not list every output: $(cat err)"
    ;;
dump_usage)
    run 2 "$GMP" dump
    has err "gpumemprof dump: missing FILE"
    has err "usage: gpumemprof dump"
    run 2 "$GMP" dump a.zst b.zst
    has err "gpumemprof dump: b.zst: unexpected argument"
    ;;
dump_help)
    run 0 "$GMP" dump --help
    has out "usage: gpumemprof dump FILE"
    has out "print every record of a trace"
    has out "--json"
    has out "--raw"
    has out "Exit status"
    [[ $(lines out) -ge 10 ]] || fail "dump --help is too short to describe the command"
    cp out help1
    run 0 "$GMP" help dump
    cmp -s out help1 || fail "'gpumemprof help dump' differs from 'gpumemprof dump --help'"
    run 0 "$GMP" dump t.zst --help # --help wins wherever it is
    ;;
dump_golden)
    gen t.zst
    run 0 "$GMP" dump t.zst
    golden dump.txt out
    # every record type of the format appears
    for t in header string device thread module stack range range_push range_pop range_start \
        range_end mark alloc free oom pool sample resource alert notice lost end; do
        grep -qE "^([0-9]+ [0-9]+|- -) $t( |$)" out || fail "no '$t' record in the dump"
    done
    # the trace holds a LOST record: the summary and one warning on stderr say so
    tail -n1 out | grep -q '^# ' || fail "no completeness line"
    tail -n1 out | grep -q 'lost' || fail "the completeness line does not mention the lost events"
    [[ $(lines err) -eq 1 ]] || fail "expected one warning line: $(cat err)"
    has err "gpumemprof dump: warning: t.zst: "
    # the trace's static memory has api "MEMORY2" (the CUPTI activity kind), as traces written
    # before "module load" do: every output names it "module load", none says MEMORY2
    "$GMP" convert t.zst --chrome c.json --report r.txt --json j.json --html-view v.html \
        --pytorch-snapshot p.pickle --speedscope s.json 2>/dev/null ||
        fail "convert of the old trace failed"
    for f in out c.json r.txt j.json v.html p.pickle s.json; do
        ! grep -q MEMORY2 "$f" || fail "$f says MEMORY2"
    done
    for f in out c.json r.txt j.json v.html; do
        grep -q 'module load' "$f" || fail "$f does not name static memory's api 'module load'"
    done
    # a second trace written by the generator dumps identically (the generator is deterministic)
    gen t2.zst
    "$GMP" dump t2.zst 2>/dev/null | normalize >out2
    cmp -s out.norm out2 || fail "two generated traces dump differently"
    # a complete trace: nothing on stderr
    gen c.zst --complete
    run 0 "$GMP" dump c.zst
    [[ ! -s err ]] || fail "dump of a complete trace wrote to stderr: $(cat err)"
    grep -q ' lost ' out && fail "a lost record in the --complete trace"
    ;;
dump_json)
    gen c.zst --complete
    run 0 "$GMP" dump --json c.zst
    res=$(check_json_lines out) || fail "invalid JSON lines"
    read -r n complete truncated total <<<"$res"
    [[ $complete == True && $truncated == False ]] || fail "summary: complete=$complete truncated=$truncated"
    gen t.zst
    run 0 "$GMP" dump --json t.zst
    res=$(check_json_lines out) || fail "invalid JSON lines"
    read -r n complete truncated total <<<"$res"
    [[ $complete == False && $truncated == False ]] || fail "summary: complete=$complete truncated=$truncated"
    [[ $n -gt 50 ]] || fail "only $n JSON lines"
    golden dump.jsonl out
    # escaping: control characters and each byte of invalid UTF-8 become \u00XX, quotes and
    # backslashes are escaped, valid UTF-8 is kept; the output is valid UTF-8
    has out '"name":"loader \"w0\"\t\u0001\u00ff"'
    has out '"value":"naïve \"q\"\\\u007f\u00fe"'
    python3 -c 'import sys; open(sys.argv[1], "rb").read().decode("utf-8")' out ||
        fail "JSON output is not valid UTF-8"
    # the text form has as many records as the JSON form
    run 0 "$GMP" dump t.zst
    [[ $(grep -vc '^#' out) -eq $((n - 1)) ]] || fail "text and JSON forms differ in record count"
    ;;
dump_raw)
    gen t.zst
    run 0 "$GMP" dump --raw t.zst
    has out " buffer tid="
    has out " sync time_ns="
    grep -q '^- - buffer ' out || fail "no buffer record"
    raw_allocs=$(grep -cE '^[0-9]+ [0-9]+ alloc ' out)
    run 0 "$GMP" dump t.zst
    grep -q ' sync ' out && fail "framing records in time order"
    grep -q ' buffer ' out && fail "framing records in time order"
    [[ $(grep -cE '^[0-9]+ [0-9]+ alloc ' out) -eq $raw_allocs ]] || fail "raw and time order disagree"
    # time order: the event times never decrease
    grep -E '^[0-9]+ ' out | awk '$1 < prev { bad = 1 } { prev = $1 } END { exit bad }' ||
        fail "events are not in time order"
    run 0 "$GMP" dump --raw --json t.zst
    check_json_lines out >/dev/null || fail "invalid JSON lines with --raw"
    ;;
dump_cut)
    gen t.zst --steps 6
    size=$(stat -c %s t.zst)
    head -c $((size / 2)) t.zst >cut.zst
    run 0 "$GMP" dump cut.zst
    tail -n1 out | grep -q '^# ' || fail "no completeness line"
    grep -qiE 'discard|lost|cut|truncat' <(tail -n1 out) || fail "no loss message: $(tail -n1 out)"
    has err "gpumemprof dump: warning: cut.zst:"
    [[ $(lines err) -eq 1 ]] || fail "more than one stderr line"
    full=$("$GMP" dump t.zst 2>/dev/null | grep -c ' alloc ')
    part=$(grep -c ' alloc ' out)
    [[ $part -gt 0 && $part -lt $full ]] || fail "cut trace: $part allocs of $full"
    run 0 "$GMP" dump --json cut.zst
    res=$(check_json_lines out) || fail "invalid JSON lines"
    read -r n complete truncated total <<<"$res"
    [[ $complete == False && $truncated == True ]] || fail "summary: complete=$complete truncated=$truncated"
    # a complete trace cut in half is incomplete too
    gen c.zst --steps 6 --complete
    head -c $(($(stat -c %s c.zst) / 2)) c.zst >cutc.zst
    run 0 "$GMP" dump --json cutc.zst
    res=$(check_json_lines out) || fail "invalid JSON lines"
    read -r n complete truncated total <<<"$res"
    [[ $complete == False && $truncated == True ]] || fail "summary: complete=$complete truncated=$truncated"
    # a cut inside the first frame leaves nothing to read: that is an error, not a trace
    head -c 20 t.zst >tiny.zst
    run 1 "$GMP" dump tiny.zst
    [[ $(lines err) -eq 1 ]] || fail "more than one error line"
    has err "gpumemprof dump: tiny.zst: "
    ;;
dump_corrupt)
    gen t.zst --steps 4
    # not a trace at all
    printf 'this is not a trace\n' >text.zst
    run 1 "$GMP" dump text.zst
    [[ $(lines err) -eq 1 ]] || fail "more than one error line: $(cat err)"
    has err "gpumemprof dump: text.zst: "
    # a byte changed in the middle of the file: a frame that fails its checksum or decoding
    size=$(stat -c %s t.zst)
    python3 -c '
import sys
d = bytearray(open(sys.argv[1], "rb").read())
i = len(d) * 2 // 3
d[i] ^= 0x5a
open(sys.argv[2], "wb").write(d)' t.zst bad.zst
    run 1 "$GMP" dump bad.zst
    [[ $(lines err) -eq 1 ]] || fail "more than one error line: $(cat err)"
    has err "gpumemprof dump: bad.zst: "
    run 1 "$GMP" dump --json bad.zst
    [[ $(lines err) -eq 1 ]] || fail "more than one error line: $(cat err)"
    ;;
dump_missing)
    run 1 "$GMP" dump does-not-exist.zst
    [[ $(lines err) -eq 1 ]] || fail "more than one error line: $(cat err)"
    has err "gpumemprof dump: does-not-exist.zst: "
    [[ ! -s out ]] || fail "output for a missing file"
    ;;
zstd_test)
    gen t.zst --steps 5
    run 0 zstd -q -t t.zst
    [[ "$(zstd -dc t.zst | head -c 8)" == GMPTRACE ]] || fail "the stream does not start with GMPTRACE"
    ;;
agent_path)
    mkdir -p prefix/bin prefix/lib/gpumemprof
    cp "$PATHS_TOOL" prefix/bin/
    tool=prefix/bin/$(basename "$PATHS_TOOL")
    run 1 env -u GPUMEMPROF_AGENT "$tool"
    has out "/prefix/lib/gpumemprof/libgpumemprof_agent.so"
    : >prefix/lib/gpumemprof/libgpumemprof_agent.so
    run 0 env -u GPUMEMPROF_AGENT "$tool"
    [[ "$(cat out)" == "$(realpath prefix/lib/gpumemprof/libgpumemprof_agent.so)" ]] ||
        fail "agent path '$(cat out)'"
    # through a symlink to the executable: relative to the real location
    mkdir -p elsewhere
    ln -s "$(realpath "$tool")" elsewhere/tool
    run 0 env -u GPUMEMPROF_AGENT elsewhere/tool
    [[ "$(cat out)" == "$(realpath prefix/lib/gpumemprof/libgpumemprof_agent.so)" ]] ||
        fail "agent path through a symlink '$(cat out)'"
    : >custom.so
    run 0 env GPUMEMPROF_AGENT="$PWD/custom.so" "$tool"
    [[ "$(cat out)" == "$PWD/custom.so" ]] || fail "GPUMEMPROF_AGENT ignored: '$(cat out)'"
    run 1 env GPUMEMPROF_AGENT="$PWD/none.so" "$tool"
    ;;
install)
    run 0 cmake --install "$BUILD_DIR" --prefix "$WORK/prefix"
    [[ -x prefix/bin/gpumemprof ]] || fail "no bin/gpumemprof after cmake --install"
    run 0 prefix/bin/gpumemprof --version
    [[ "$(cat out)" == "gpumemprof $VERSION" ]] || fail "installed --version: '$(cat out)'"
    gen t.zst
    run 0 prefix/bin/gpumemprof dump t.zst
    if [[ -e "$BUILD_DIR/lib/gpumemprof/libgpumemprof_agent.so" ]]; then
        [[ -e prefix/lib/gpumemprof/libgpumemprof_agent.so ]] ||
            fail "the agent is built but not installed in lib/gpumemprof"
        # the Python package beside it finds it (relative to itself, and _where.py names it);
        # python3 loads the agent: under a sanitizer build it needs the sanitizer's runtime first,
        # and leak checks off (ctypes.util runs shell commands: their leaks are not ours)
        run 0 env -u CUDA_INJECTION64_PATH -u GPUMEMPROF_AGENT GPUMEMPROF_NO_AUTOSTART=1 \
            ${GMP_SIMCUDA_PRELOAD:+LD_PRELOAD=$GMP_SIMCUDA_PRELOAD ASAN_OPTIONS=detect_leaks=0} \
            PYTHONPATH="$WORK/prefix/lib/gpumemprof/python" python3 -c \
            'import gpumemprof, gpumemprof._where as w; print(gpumemprof.agent_path()); print(w.AGENT)'
        [[ "$(cat out)" == "$WORK/prefix/lib/gpumemprof/libgpumemprof_agent.so"$'\n'"$WORK/prefix/lib/gpumemprof/libgpumemprof_agent.so" ]] ||
            fail "the installed Python package's agent: '$(cat out)'"
        [[ -e prefix/lib/gpumemprof/python/pyproject.toml ]] || fail "no pyproject.toml installed"
    fi
    ;;
replay_pipe)
    # report and convert read a trace from a pipe (one reader per input, from its header to the
    # end of its replay: nothing is read twice) as they read the file
    gen t.zst --steps 4
    run 0 "$GMP" report --format json t.zst
    mv out report.file
    run 0 bash -c 'cat t.zst | "$0" report --format json /dev/stdin' "$GMP"
    sed 's#/dev/stdin#t.zst#' out >report.pipe
    cmp -s report.file report.pipe || fail "report from a pipe differs from report of the file"
    run 0 "$GMP" convert t.zst --chrome file.json --speedscope file.ss.json
    run 0 bash -c 'cat t.zst | "$0" convert /dev/stdin --chrome pipe.json --speedscope pipe.ss.json' "$GMP"
    for f in json ss.json; do # the names differ: the title is the base name, the path as given
        sed 's#/dev/stdin#t.zst#g; s#"stdin"#"t.zst"#g' pipe.$f >pipe.$f.norm
        cmp -s file.$f pipe.$f.norm || fail "convert from a pipe differs from the file's ($f)"
    done
    ;;
*)
    fail "unknown case"
    ;;
esac
echo "ok ($case_name)"
