/* Frame rules through their caches (formats/replay/gmp_frames.h): the memo of frame facts
 * (gmp_frame_facts_memo, read through gmp_frame_facts_class and gmp_frames_category_of) and the
 * replay's per-node cache (gmp_replay_category, gmp_replay_frame_facts) must answer exactly what
 * the rules answer without them (gmp_frame_classify, gmp_frames_category), over frames made from
 * the rule table's own patterns and random ones, after the memo starts afresh at its bound, and
 * during a replay whose stacks share frames (a trie), are deeper than the 128 frames the category
 * looks at, and whose modules are defined while it runs. The glob is checked against a plain
 * recursive one. Named frames as real recordings name them get the class the rules promise
 * (test_named); C++ names are shortened for one line (test_short_name); a stack's line and two
 * stacks told apart (test_line_apart). Run all: test_frames; one: test_frames NAME (a cmocka
 * filter). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gmp_doc.h"
#include "gmp_frames.h"
#include "gmp_reader.h"
#include "gmp_render.h"
#include "gmp_replay.h"
#include "replay_tb.h"

static uint64_t rng = 0x243f6a8885a308d3ull;

static uint32_t rnd(uint32_t n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng % n);
}

/* Pieces that the rules' patterns are made of, and others. */
static const char *const pieces[] = {
    "",           "a",        "/",          "::",         "_",
    "*",          "torch",    "optim",      "forward",    "backward",
    "Backward",   ".py",      "lib",        ".so",        "Py",
    "at::",       "c10::",    "std::",      "__",         "site-",
    "packages",   "python3",  "(",          ")",          "<",
    ">",          " ",        "Accumulate", "Grad",       "apply",
    "to",         "cuda",     "__init__",   "_foreach_",  "module.py",
    "nn/",        "modules/", "Engine::",   "autograd::", "fused",
    "_adam",      "x",        "<frozen ",   "importlib",  "(anonymous namespace)",
    "operator()", "-3",       "dist-",
};
#define NPIECES (sizeof pieces / sizeof pieces[0])

/* A string made from pattern p (a rule's glob): each `*` replaced by random pieces. */
static size_t from_pattern(const char *p, char *out, size_t cap)
{
    size_t n = 0;
    for (; *p && n + 64 < cap; p++) {
        if (*p != '*') {
            out[n++] = *p;
            continue;
        }
        for (uint32_t k = rnd(4); k-- > 0;) {
            const char *s = pieces[rnd(NPIECES)];
            size_t l = strlen(s);
            if (n + l + 64 < cap) {
                memcpy(out + n, s, l);
                n += l;
            }
        }
    }
    out[n] = 0;
    return n;
}

static size_t random_string(char *out, size_t cap)
{
    size_t n = 0;
    for (uint32_t k = rnd(6); k-- > 0;) {
        const char *s = pieces[rnd(NPIECES)];
        size_t l = strlen(s);
        if (n + l + 1 < cap) {
            memcpy(out + n, s, l);
            n += l;
        }
    }
    out[n] = 0;
    return n;
}

/* A field: from one of the rules' patterns (any field of any rule: the rules also test fields
 * they do not name), or random, or empty. */
static size_t random_field(char *out, size_t cap)
{
    uint32_t c = rnd(8);
    if (c == 0) {
        out[0] = 0;
        return 0;
    }
    if (c <= 4) {
        const gmp_frame_rule *r = gmp_frame_rule_at(rnd((uint32_t)gmp_frame_rule_count()));
        const char *p = rnd(3) == 0 ? r->module : rnd(2) ? r->function : r->file;
        if (p)
            return from_pattern(p, out, cap);
    }
    return random_string(out, cap);
}

typedef struct frame_buf {
    char fn[512], file[512], mod[512];
    gmp_frame_info fi;
} frame_buf;

static void random_frame(frame_buf *b)
{
    size_t a = random_field(b->fn, sizeof b->fn);
    size_t f = random_field(b->file, sizeof b->file);
    size_t m = random_field(b->mod, sizeof b->mod);
    if (rnd(4) == 0 && a + 12 < sizeof b->fn) { /* parameters, a return type */
        memcpy(b->fn + a, "(int, long)", 12);
        a += 11;
    }
    if (rnd(10) == 0) { /* a Python method that the categories name */
        static const char *const py[] = {"to", "cuda", "_apply", "__init__", "forward", "step"};
        a = (size_t)snprintf(b->fn, sizeof b->fn, "%s", py[rnd(6)]);
        f = (size_t)snprintf(b->file, sizeof b->file, "%s", rnd(2) ? "/w/model.py" : "m.py");
    }
    b->fi.function = (gmp_str){b->fn, (uint32_t)a};
    b->fi.file = (gmp_str){b->file, (uint32_t)f};
    b->fi.module = (gmp_str){b->mod, (uint32_t)m};
}

/* gmp_frame_glob against a plain recursive glob (`*` any run of bytes, nothing else special). */
static int glob_ref(const char *p, const char *s, size_t n)
{
    if (!*p)
        return n == 0;
    if (*p == '*') {
        for (size_t i = 0; i <= n; i++)
            if (glob_ref(p + 1, s + i, n - i))
                return 1;
        return 0;
    }
    return n && *p == *s && glob_ref(p + 1, s + 1, n - 1);
}

static void test_glob(void **state)
{
    static const char alpha[] = "ab*/";
    char p[16], s[24];
    int matched = 0;
    for (int it = 0; it < 200000; it++) {
        size_t pn = rnd(10), sn = rnd(20);
        for (size_t i = 0; i < pn; i++)
            p[i] = alpha[rnd(4)];
        p[pn] = 0;
        for (size_t i = 0; i < sn; i++) /* mostly a, b, /; now and then a literal `*` */
            s[i] = alpha[rnd(2) ? rnd(2) : rnd(8) ? 3 : 2];
        s[sn] = 0;
        int want = glob_ref(p, s, sn);
        matched += want;
        if (gmp_frame_glob(p, s, sn) != want) {
            fprintf(stderr, "glob(\"%s\", \"%s\"): %d, expected %d\n", p, s, !want, want);
            fail();
        }
    }
    assert_true(matched > 1000); /* both answers were exercised */
    /* an empty subject (whose pointer may be NULL) matches only stars */
    assert_true(gmp_frame_glob("", NULL, 0) && gmp_frame_glob("**", NULL, 0));
    assert_false(gmp_frame_glob("*a*", NULL, 0) || gmp_frame_glob("a", "", 0));
    /* literals between stars are found in order, not overlapping the prefix or the suffix */
    assert_true(gmp_frame_glob("ab*b*ba", "abba", 4) == 0 &&
                gmp_frame_glob("ab*ba", "aba", 3) == 0);
    assert_true(gmp_frame_glob("a*b*a*b", "aabab", 5) && !gmp_frame_glob("*ba*ab*", "abba", 4));
    /* the rules' own patterns on strings made from them */
    char buf[512];
    for (size_t i = 0; i < gmp_frame_rule_count(); i++) {
        const gmp_frame_rule *r = gmp_frame_rule_at(i);
        const char *pats[3] = {r->function, r->file, r->module};
        for (int k = 0; k < 3; k++) {
            if (!pats[k])
                continue;
            for (int it = 0; it < 50; it++) {
                size_t n =
                    it & 1 ? from_pattern(pats[k], buf, sizeof buf) : random_field(buf, sizeof buf);
                assert_int_equal(gmp_frame_glob(pats[k], buf, n), glob_ref(pats[k], buf, n));
            }
            assert_true(gmp_frame_glob(pats[k], buf, from_pattern(pats[k], buf, sizeof buf)));
        }
    }
}

/* One frame through the memo m (twice: computed, then remembered) and without it. */
static void check_frame(gmp_frame_memo *m, const gmp_frame_info *f, int *classes)
{
    gmp_frame_class want = gmp_frame_classify(f, NULL);
    classes[want]++;
    for (int k = 0; k < 2; k++) {
        assert_int_equal(gmp_frame_facts_class(gmp_frame_facts_memo(m, f)), want);
    }
}

static void check_stack(gmp_frame_memo *m, const frame_buf *fb, size_t n, int *cats)
{
    gmp_frame_info fi[8];
    for (size_t i = 0; i < n; i++)
        fi[i] = fb[i].fi;
    char rbuf[256];
    size_t rl = rnd(3) ? 0 : random_field(rbuf, sizeof rbuf);
    gmp_str range = {rbuf, (uint32_t)rl};
    gmp_category want = gmp_frames_category(fi, n, range);
    cats[want]++;
    unsigned all = 0;
    for (size_t i = 0; i < n; i++)
        all |= gmp_frame_facts_memo(m, &fi[i]);
    assert_int_equal(gmp_frames_category_of(all, range), want);
}

static void test_memo_same(void **state)
{
    gmp_frame_memo *m = gmp_frame_memo_new();
    assert_non_null(m);
    int classes[3] = {0}, cats[GMP_CAT_COUNT] = {0};
    frame_buf *fb = calloc(8, sizeof *fb);
    assert_non_null(fb);
    for (int it = 0; it < 20000; it++) {
        size_t n = 1 + rnd(8);
        for (size_t i = 0; i < n; i++) {
            if (it > 100 && rnd(3) == 0 && i > 0) { /* frames repeat, as in real stacks */
                fb[i] = fb[i - 1];
                fb[i].fi.function.ptr = fb[i].fn;
                fb[i].fi.file.ptr = fb[i].file;
                fb[i].fi.module.ptr = fb[i].mod;
            } else {
                random_frame(&fb[i]);
            }
            check_frame(m, &fb[i].fi, classes);
            check_frame(NULL, &fb[i].fi, classes); /* no memo (out of memory) */
        }
        check_stack(m, fb, n, cats);
    }
    /* every answer was seen */
    for (int c = 0; c < 3; c++)
        assert_true(classes[c] > 100);
    for (int c = 0; c < GMP_CAT_COUNT; c++)
        assert_true(cats[c] > 20);
    free(fb);
    gmp_frame_memo_free(m);
}

/* Frames whose keys add up past the memo's 32 MiB bound: it starts afresh (more than once), and
 * the frames it forgot, asked again, still get the rules' answers. */
static void test_memo_restart(void **state)
{
    gmp_frame_memo *m = gmp_frame_memo_new();
    assert_non_null(m);
    enum { N = 1000, LEN = 100000 }; /* 100 MB of keys */
    char *big = malloc(LEN + 64);
    assert_non_null(big);
    int classes[3] = {0};
    static const char *const heads[] = {"at::native::", "std::", "user_code_", "_Py", "c10::"};
    gmp_frame_class want[N];
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < N; i++) {
            const char *h = heads[i % 5];
            size_t hl = strlen(h);
            memcpy(big, h, hl);
            memset(big + hl, 'a' + (i % 26), LEN - hl);
            snprintf(big + LEN - 16, 16, "%015d", i); /* distinct keys */
            gmp_frame_info f = {{big, LEN}, {i % 3 ? "x.py" : "", i % 3 ? 4u : 0u}, {"", 0}};
            if (!round)
                want[i] = gmp_frame_classify(&f, NULL);
            classes[want[i]]++;
            for (int k = 0; k < 2; k++) /* computed, then remembered */
                assert_int_equal(gmp_frame_facts_class(gmp_frame_facts_memo(m, &f)), want[i]);
        }
    }
    assert_true(classes[GMP_FRAME_USER] && classes[GMP_FRAME_FRAMEWORK] &&
                classes[GMP_FRAME_INTERNAL]);
    free(big);
    gmp_frame_memo_free(m);
}

/* ---- named frames: what PyTorch's and CPython's sources call their functions ---- */

typedef struct named {
    const char *function, *file, *module;
    gmp_frame_class want;
} named;

/* Frames as real recordings name them (PyTorch's snapshots, native stacks symbolized), each with
 * the class the rules must give it (docs/stacks.md, "Frames from user code"). */
static const named named_frames[] = {
    /* PyTorch's recorder and allocator (torch/csrc/profiler/unwind/unwind.cpp,
     * combined_traceback.cpp, torch/csrc/cuda/memory_snapshot.cpp, CUDACachingAllocator.cpp) */
    {"torch::unwind::unwind()", "??", NULL, GMP_FRAME_INTERNAL},
    {"torch::CapturedTraceback::gather(bool, bool, bool)", "??", NULL, GMP_FRAME_INTERNAL},
    {"torch::cuda::(anonymous namespace)::gather_with_cpp()", "memory_snapshot.cpp", NULL,
     GMP_FRAME_INTERNAL},
    {"gather_with_cpp", NULL, NULL, GMP_FRAME_INTERNAL},
    {"c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(signed char, "
     "unsigned long, CUstream_st*)",
     "CUDACachingAllocator.cpp", NULL, GMP_FRAME_INTERNAL},
    {"c10::CachingDeviceAllocator::DeviceStats::foo()", NULL, NULL, GMP_FRAME_INTERNAL},
    /* PyTorch's dispatch and bindings: framework */
    {"at::_ops::bmm::call(at::Tensor const&, at::Tensor const&)", "??", NULL, GMP_FRAME_FRAMEWORK},
    {"c10::impl::wrap_kernel_functor_unboxed_<c10::impl::detail::WrapFunctionIntoFunctor_<"
     "c10::CompileTimeFunctionPointer<at::Tensor (at::Tensor const&), &at::wrapper_CUDA_exp>, "
     "at::Tensor, c10::guts::typelist::typelist<at::Tensor const&> >, at::Tensor (at::Tensor "
     "const&)>::call(c10::OperatorKernel*, c10::DispatchKeySet, at::Tensor const&)",
     "RegisterCUDA.cpp", NULL, GMP_FRAME_FRAMEWORK},
    {"torch::autograd::dispatch_to(at::Tensor const&, c10::Device, bool, bool, "
     "std::optional<c10::MemoryFormat>)",
     "python_variable_methods.cpp", NULL, GMP_FRAME_FRAMEWORK},
    {"_object* torch::autograd::TypeError_to_NotImplemented_<&torch::autograd::THPVariable_div>"
     "(_object*, _object*, _object*)",
     "python_variable_methods.cpp", NULL, GMP_FRAME_FRAMEWORK},
    {"torch::autograd::generated::details::div_tensor_other_backward(at::Tensor const&)", "", NULL,
     GMP_FRAME_FRAMEWORK},
    {"torch::dynamo::(anonymous namespace)::GuardManager::check_nopybind(_object*)", "guards.cpp",
     NULL, GMP_FRAME_FRAMEWORK},
    {"dynamo__custom_eval_frame", "eval_frame_cpp.cpp", NULL, GMP_FRAME_FRAMEWORK},
    {"torch::cuda::python::initCommMethods(_object*)::{lambda(pybind11::object, "
     "std::vector<long>)#1}::operator()(pybind11::object, std::vector<long>) const",
     NULL, NULL, GMP_FRAME_FRAMEWORK},
    {"pybind11::cpp_function::initialize<at::Tensor (*&)(at::Tensor const&), at::Tensor, "
     "at::Tensor const&, pybind11::name>(at::Tensor (*&)(at::Tensor const&), at::Tensor "
     "(*)(at::Tensor const&), pybind11::name const&)::{lambda(pybind11::detail::"
     "function_call&)#3}::_FUN(pybind11::detail::function_call&)",
     NULL, NULL, GMP_FRAME_INTERNAL},
    {"pybind11::cpp_function::dispatcher(_object*, _object*, _object*)", NULL, NULL,
     GMP_FRAME_INTERNAL},
    {"THCPModule_emptyCache(_object*, _object*)", "Module.cpp", NULL, GMP_FRAME_FRAMEWORK},
    {"c10d::ProcessGroupNCCL::allreduce(std::vector<at::Tensor>&)", NULL, NULL,
     GMP_FRAME_FRAMEWORK},
    {NULL, NULL, "/usr/local/cuda/lib64/libcublasLt.so.12", GMP_FRAME_FRAMEWORK},
    /* autograd's nodes: where a backward allocation opens */
    {"torch::autograd::generated::DivBackward0::apply(std::vector<at::Tensor, "
     "std::allocator<at::Tensor> >&&)",
     "??", NULL, GMP_FRAME_USER},
    {"torch::autograd::AccumulateGrad::apply(std::vector<at::Tensor>&&)", NULL, NULL,
     GMP_FRAME_USER},
    {"torch::autograd::PyNode::apply(std::vector<at::Tensor>&&)", "python_function.cpp", NULL,
     GMP_FRAME_USER},
    {"void torch::autograd::validate_outputs_impl<torch::autograd::Edge>(std::vector<"
     "torch::autograd::Edge>&)",
     NULL, NULL, GMP_FRAME_USER},
    {"torch::autograd::Engine::evaluate_function(std::shared_ptr<torch::autograd::GraphTask>&)",
     NULL, NULL, GMP_FRAME_FRAMEWORK},
    /* CPython's C API and internals (Objects/abstract.c, call.c, methodobject.c, descrobject.c,
     * typeobject.c, Modules/_threadmodule.c, Python/thread_pthread.h) */
    {"binary_op1", "/usr/local/src/conda/python-3.12.3/Objects/abstract.c", NULL,
     GMP_FRAME_INTERNAL},
    {"binary_op1", "??", NULL, GMP_FRAME_INTERNAL},
    {"_PyEval_EvalFrameDefault", "??", NULL, GMP_FRAME_INTERNAL},
    {"_PyObject_VectorcallTstate.lto_priv.4", "", NULL, GMP_FRAME_INTERNAL},
    {"PyObject_Call", "??", NULL, GMP_FRAME_INTERNAL},
    {"cfunction_call", "", NULL, GMP_FRAME_INTERNAL},
    {"method_vectorcall_VARARGS_KEYWORDS", "", NULL, GMP_FRAME_INTERNAL},
    {"type_call", NULL, NULL, GMP_FRAME_INTERNAL},
    {"thread_run", "", NULL, GMP_FRAME_INTERNAL},
    {"thread_run", "_threadmodule.c", NULL, GMP_FRAME_INTERNAL},
    {"binary_op1", "abstract.c", NULL, GMP_FRAME_INTERNAL},
    /* the same names in a program of the user's (a file of its own) are the user's */
    {"thread_run", "/home/u/worker.c", "/home/u/app", GMP_FRAME_USER},
    {"type_call", "/home/u/types.cu", NULL, GMP_FRAME_USER},
    {"binary_op_kernel", "/home/u/ops.cu", NULL, GMP_FRAME_USER},
    {"pythread_wrapper", "", NULL, GMP_FRAME_INTERNAL},
    {"_run_module_as_main", "<frozen runpy>", NULL, GMP_FRAME_INTERNAL},
    /* libffi and ctypes (numba's driver calls) */
    {"ffi_call_unix64", NULL, "/usr/lib/x86_64-linux-gnu/libffi.so.8", GMP_FRAME_INTERNAL},
    {"ffi_call", NULL, NULL, GMP_FRAME_INTERNAL},
    {NULL, NULL, "/usr/lib/x86_64-linux-gnu/libffi.so.8", GMP_FRAME_INTERNAL},
    {NULL, NULL, "/usr/lib/python3.11/lib-dynload/_ctypes.cpython-311-x86_64-linux-gnu.so",
     GMP_FRAME_INTERNAL},
    {"_ctypes_callproc", NULL, NULL, GMP_FRAME_INTERNAL},
    /* Python: torch's own code, installed packages, the standard library, on Linux and on
     * Windows (backslashes) */
    {"_call_impl", "/v/lib/python3.11/site-packages/torch/nn/modules/module.py", NULL,
     GMP_FRAME_INTERNAL},
    {"_call_impl", "C:\\Users\\me\\venv\\Lib\\site-packages\\torch\\nn\\modules\\module.py", NULL,
     GMP_FRAME_INTERNAL},
    {"forward", "C:\\Users\\me\\venv\\Lib\\site-packages\\torch\\nn\\modules\\linear.py", NULL,
     GMP_FRAME_FRAMEWORK},
    {"generate", "D:\\envs\\x\\Lib\\site-packages\\transformers\\generation\\utils.py", NULL,
     GMP_FRAME_FRAMEWORK},
    {"run", "C:\\Users\\me\\AppData\\Local\\Programs\\Python\\Python311\\Lib\\threading.py", NULL,
     GMP_FRAME_FRAMEWORK},
    {"run", "C:\\Users\\me\\miniconda3\\Lib\\threading.py", NULL, GMP_FRAME_FRAMEWORK},
    {"forward", "C:\\Users\\me\\proj\\model.py", NULL, GMP_FRAME_USER},
    {"_fn", "/home/a/pytorch/torch/_dynamo/eval_frame.py", NULL, GMP_FRAME_FRAMEWORK},
    {"runtime_wrapper", "/x/site-packages/torch/_functorch/_aot_autograd/runtime_wrappers.py", NULL,
     GMP_FRAME_FRAMEWORK},
    {"call", "/tmp/torchinductor_alice/xy/cxyz3k2.py", NULL, GMP_FRAME_FRAMEWORK},
    {"forward", "<eval_with_key>.12", NULL, GMP_FRAME_FRAMEWORK},
    {"__compiled_fn_5", "<eval_with_key>.13", NULL, GMP_FRAME_FRAMEWORK},
    {"run", "/usr/lib/python3.11/threading.py", NULL, GMP_FRAME_FRAMEWORK},
    /* the user's code: files of the program, notebook cells, Python special methods */
    {"forward", "/home/alice/proj/model.py", NULL, GMP_FRAME_USER},
    {"<module>", "/tmp/ipykernel_1234/3456.py", NULL, GMP_FRAME_USER},
    {"<module>", "<ipython-input-3-4f5c2a1b>", NULL, GMP_FRAME_USER},
    {"__init__", "/mnt/data/src/train/trainers.py", NULL, GMP_FRAME_USER},
    {"__call__", "/tmp/ipykernel_1/2.py", NULL, GMP_FRAME_USER},
    {"__init__", "/v/lib/python3.11/site-packages/transformers/x.py", NULL, GMP_FRAME_FRAMEWORK},
    {"__libc_start_main", "??", NULL, GMP_FRAME_INTERNAL},
    {"main", "train_sim.cu", "/w/build/samples/train_sim", GMP_FRAME_USER},
    {"myext::fused_rope(at::Tensor const&)", "rope.cpp", NULL, GMP_FRAME_USER},
    /* an address inside no loaded module: nothing known */
    {NULL, NULL, NULL, GMP_FRAME_INTERNAL},
};

static gmp_str s_of(const char *s)
{
    return (gmp_str){s ? s : "", s ? (uint32_t)strlen(s) : 0};
}

static void test_named(void **state)
{
    gmp_frame_memo *m = gmp_frame_memo_new();
    for (size_t i = 0; i < sizeof named_frames / sizeof named_frames[0]; i++) {
        const named *x = &named_frames[i];
        gmp_frame_info f = {s_of(x->function), s_of(x->file), s_of(x->module)};
        const gmp_frame_rule *r = NULL;
        gmp_frame_class got = gmp_frame_classify(&f, &r);
        if (got != x->want) {
            fprintf(stderr, "%s | %s | %s: class %d (rule %s), expected %d\n",
                    x->function ? x->function : "", x->file ? x->file : "",
                    x->module ? x->module : "", got, r ? r->what : "none", x->want);
            fail();
        }
        assert_int_equal(gmp_frame_facts_class(gmp_frame_facts_memo(m, &f)), x->want);
    }
    gmp_frame_memo_free(m);
    /* every rule says what it folds and where it comes from */
    for (size_t i = 0; i < gmp_frame_rule_count(); i++) {
        const gmp_frame_rule *r = gmp_frame_rule_at(i);
        assert_true(r->runtime && *r->runtime && r->what && *r->what);
        assert_true(r->function || r->file || r->module);
    }
}

static void short_is(const char *name, const char *want)
{
    char buf[256];
    size_t n = gmp_frame_short_name(s_of(name), buf, sizeof buf);
    if (n != strlen(want) || strcmp(buf, want) != 0) {
        fprintf(stderr, "short(%s) = \"%s\", expected \"%s\"\n", name, buf, want);
        fail();
    }
}

static void test_short_name(void **state)
{
    short_is("pybind11::cpp_function::initialize<at::Tensor (*&)(at::Tensor const&), at::Tensor>"
             "(at::Tensor (*&)(at::Tensor const&), pybind11::name const&)::{lambda(pybind11::"
             "detail::function_call&)#3}::_FUN(pybind11::detail::function_call&)",
             "pybind11::cpp_function::initialize::{lambda#3}::_FUN");
    short_is("pybind11::cpp_function::initialize<F, R>(F&&, R (*)())", "pybind11::cpp_function::"
                                                                       "initialize");
    short_is("at::TensorBase at::detail::_empty_generic<long>(c10::ArrayRef<long>, "
             "c10::Allocator*)",
             "at::detail::_empty_generic");
    short_is("torch::cuda::(anonymous namespace)::gather_with_cpp()",
             "torch::cuda::(anonymous namespace)::gather_with_cpp");
    short_is("c10::impl::wrap_kernel_functor_unboxed_<c10::impl::detail::WrapFunctionIntoFunctor_"
             "<c10::CompileTimeFunctionPointer<at::Tensor (at::Tensor const&), &at::f>, "
             "at::Tensor> >::call(c10::OperatorKernel*, c10::DispatchKeySet)",
             "c10::impl::wrap_kernel_functor_unboxed_::call");
    short_is("at::native::sumproduct_pair(at::Tensor const&, bool) [clone .constprop.0]",
             "at::native::sumproduct_pair");
    short_is("torch::autograd::Node::operator()(std::vector<at::Tensor>&&)",
             "torch::autograd::Node::operator()");
    short_is("c10::SymInt::operator<(c10::SymInt const&) const", "c10::SymInt::operator<");
    short_is("torch::cuda::python::initCommMethods(_object*)::{lambda(pybind11::object)#1}::"
             "operator()(pybind11::object) const",
             "torch::cuda::python::initCommMethods::{lambda#1}::operator()");
    /* C and Python names are kept */
    short_is("cfunction_call", "cfunction_call");
    short_is("<module>", "<module>");
    short_is("make_weights.<locals>.<listcomp>", "make_weights.<locals>.<listcomp>");
    short_is("", "");
    /* cut at the buffer */
    char small[8];
    assert_int_equal(gmp_frame_short_name(s_of("a::bcdefghijk()"), small, sizeof small), 7);
    assert_string_equal(small, "a::bcde");
    /* hostile: brackets that never close, random bytes: bounded, NUL-terminated */
    static const char alpha[] = "a:<>(){} o";
    char name[64], out[32];
    for (int it = 0; it < 100000; it++) {
        size_t n = rnd(60);
        for (size_t i = 0; i < n; i++)
            name[i] = rnd(20) ? alpha[rnd(sizeof alpha - 1)] : "operator"[rnd(8)];
        size_t k = gmp_frame_short_name((gmp_str){name, (uint32_t)n}, out, sizeof out);
        assert_true(k < sizeof out && strlen(out) == k);
    }
}

static void text_is(const char *fn, const char *file, const char *mod, int python, uint32_t line,
                    const char *want)
{
    gmp_frame_info f = {s_of(fn), s_of(file), s_of(mod)};
    char buf[256];
    size_t n = gmp_frame_text(&f, python, line, 0x12340, buf, sizeof buf);
    if (n != strlen(want) || strcmp(buf, want) != 0) {
        fprintf(stderr, "text \"%s\", expected \"%s\"\n", buf, want);
        fail();
    }
}

/* A frame's one-line name (gmp_frame_text), as the report's rows show it. */
static void test_frame_text(void **state)
{
    text_is("forward", "/w/model.py", NULL, 1, 42, "forward (/w/model.py:42)");
    text_is("forward", "C:\\w\\model.py", NULL, 1, 42, "forward (C:\\w\\model.py:42)");
    text_is("torch::unwind::unwind()", "??", NULL, 1, 0, "torch::unwind::unwind");
    text_is("torch::cuda::(anonymous namespace)::gather_with_cpp()", "memory_snapshot.cpp", NULL, 1,
            0, "torch::cuda::(anonymous namespace)::gather_with_cpp (memory_snapshot.cpp)");
    text_is("thread_run", "", NULL, 1, 0, "thread_run");
    /* a snapshot's C++ frame with a line (PyTorch's symbolizer found one) */
    text_is("at::native::foo(at::Tensor const&)", "/src/Foo.cpp", NULL, 1, 12,
            "at::native::foo (/src/Foo.cpp:12)");
    text_is("at::native::add_out(at::Tensor&, at::Tensor const&)", "/src/aten/BinaryOps.cpp",
            "/v/libtorch_cpu.so", 0, 7, "at::native::add_out (BinaryOps.cpp:7)");
    text_is("main", "/w/train_sim.cu", "/w/train_sim", 0, 0, "main");
    text_is(NULL, NULL, "/opt/app/libtrain.so", 0, 0, "libtrain.so+0x12340");
    text_is(NULL, NULL, NULL, 0, 0, "?");
}

static void line_is(const char *const *names, const uint8_t *hide, size_t n, size_t max,
                    const char *want)
{
    gmp_str s[16];
    for (size_t i = 0; i < n; i++)
        s[i] = s_of(names[i]);
    char buf[512];
    size_t k = gmp_frames_line(s, hide, n, max, buf, sizeof buf);
    if (k != strlen(want) || strcmp(buf, want) != 0) {
        fprintf(stderr, "line \"%s\", expected \"%s\"\n", buf, want);
        fail();
    }
}

static void test_line_apart(void **state)
{
    /* the small-step snapshot's two largest backward stacks, shortened: alike once folded */
    const char *a[] = {"torch::unwind::unwind",
                       "c10::cuda::X::malloc",
                       "at::detail::empty_cuda",
                       "at::_ops::div_Tensor::call",
                       "torch::autograd::generated::details::div_tensor_other_backward",
                       "torch::autograd::generated::DivBackward0::apply",
                       "torch::autograd::Engine::thread_main",
                       "clone"};
    const char *b[] = {"torch::unwind::unwind",
                       "c10::cuda::X::malloc",
                       "at::detail::empty_cuda",
                       "at::_ops::neg::call",
                       "torch::autograd::generated::details::div_tensor_other_backward",
                       "torch::autograd::generated::DivBackward0::apply",
                       "torch::autograd::Engine::thread_main",
                       "clone"};
    size_t n = 8;
    uint8_t cls[8], ha[8], hb[8];
    gmp_frame_info fi[8];
    for (size_t i = 0; i < n; i++) {
        fi[i] = (gmp_frame_info){s_of(a[i]), s_of(NULL), s_of(NULL)};
        cls[i] = (uint8_t)gmp_frame_classify(&fi[i], NULL);
    }
    assert_int_equal(gmp_frames_fold(cls, n, ha), 7);
    memcpy(hb, ha, n);
    line_is(a, ha, n, 0,
            "torch::autograd::generated::DivBackward0::apply [+5 inside] < +2 "
            "internal frames");
    gmp_str sa[8], sb[8];
    for (size_t i = 0; i < n; i++) {
        sa[i] = s_of(a[i]);
        sb[i] = s_of(b[i]);
    }
    /* told apart by the frame that differs nearest the opening frame: the operator called */
    assert_int_equal(gmp_frames_apart(sa, ha, n, sb, hb, n), 1);
    assert_int_equal(ha[3], 2);
    assert_int_equal(hb[3], 2);
    line_is(a, ha, n, 0,
            "torch::autograd::generated::DivBackward0::apply [+5 inside, via "
            "at::_ops::div_Tensor::call] < +2 internal frames");
    line_is(b, hb, n, 1,
            "torch::autograd::generated::DivBackward0::apply [+5 inside, via "
            "at::_ops::neg::call] < ...");
    /* the same names: nothing to tell them apart; stacks that do not look alike: untouched */
    memcpy(hb, ha, n);
    assert_int_equal(gmp_frames_apart(sa, ha, n, sa, hb, n), 0);
    uint8_t hc[8] = {1, 1, 1, 1, 1, 0, 0, 1};
    assert_int_equal(gmp_frames_apart(sa, ha, n, sb, hc, n), 0);
    /* a difference in a later folded run is shown where it is */
    const char *c[] = {"f (x.py:1)", "_PyEval_EvalFrameDefault (bytecodes.c:10)", "g (x.py:2)"};
    const char *d[] = {"f (x.py:1)", "_PyEval_EvalFrameDefault (bytecodes.c:20)", "g (x.py:2)"};
    uint8_t h1[3] = {0, 1, 0}, h2[3] = {0, 1, 0};
    gmp_str sc[3], sd[3];
    for (size_t i = 0; i < 3; i++) {
        sc[i] = s_of(c[i]);
        sd[i] = s_of(d[i]);
    }
    line_is(c, h1, 3, 0, "f (x.py:1) < +1 internal frame < g (x.py:2)");
    assert_int_equal(gmp_frames_apart(sc, h1, 3, sd, h2, 3), 1);
    line_is(d, h2, 3, 0, "f (x.py:1) < _PyEval_EvalFrameDefault (bytecodes.c:20) < g (x.py:2)");
    /* nothing shown (not from gmp_frames_fold): every frame */
    uint8_t all[3] = {1, 1, 1};
    line_is(c, all, 3, 2, "f (x.py:1) < _PyEval_EvalFrameDefault (bytecodes.c:10) < ...");
    /* cut at the buffer, NUL-terminated */
    char small[10];
    assert_int_equal(gmp_frames_line(sc, h1, 3, 0, small, sizeof small), 9);
    assert_string_equal(small, "f (x.py:1");
}

/* gmp_frames_line writes a stack as the report's text rows show it (gmp_render_text: the stack
 * cell of a table, four items), over random stacks: folded runs, frames shown to tell a stack
 * apart inside its first frame and after it. diff builds its lines with gmp_frames_line. */
static void test_line_is_report(void **state)
{
    static const gmp_doc_col col[] = {{"stack", "stack", GMP_DOC_STACK, 0}};
    char names[12][16];
    gmp_str ns[12];
    for (int i = 0; i < 12; i++) {
        snprintf(names[i], sizeof names[i], "f%d (x:%d)", i, i);
        ns[i] = s_of(names[i]);
    }
    for (int it = 0; it < 2000; it++) {
        size_t n = 1 + rnd(12);
        uint8_t hide[12];
        gmp_doc_frame fr[12];
        memset(fr, 0, sizeof fr);
        int shown = 0;
        for (size_t i = 0; i < n; i++) {
            hide[i] = (uint8_t)(rnd(3) ? rnd(2) : 2 * rnd(2));
            shown |= !hide[i];
        }
        if (!shown) /* gmp_frames_fold shows at least one frame */
            hide[rnd((uint32_t)n)] = 0;
        for (size_t i = 0; i < n; i++) {
            fr[i].python = 1;
            fr[i].function = ns[i];
            fr[i].display = ns[i];
            fr[i].internal = hide[i];
        }
        gmp_doc_stack st = {n, fr, 0, 0};
        gmp_doc *d = gmp_doc_new();
        gmp_doc_block *t = gmp_doc_table(d, gmp_doc_root(d), "t", col, 1);
        gmp_doc_row(d, t)[0] = gmp_dv_stack(&st);
        char *out = NULL;
        size_t outn = 0;
        FILE *f = open_memstream(&out, &outn);
        assert_int_equal(gmp_render_text(d, f, &(gmp_render_opts){0}), GMP_OK);
        fclose(f);
        char want[1024];
        gmp_frames_line(ns, hide, n, 4, want, sizeof want);
        char *line = strstr(out, want);
        if (!line || line[strlen(want)] != '\n' || (line > out && line[-1] != '\n')) {
            fprintf(stderr, "gmp_frames_line \"%s\" not a row of:\n%s\n", want, out);
            fail();
        }
        free(out);
        gmp_doc_free(d);
    }
}

/* ---- the replay's cache ---- */

typedef struct cat_check {
    int checked, mismatches, deep;
    int cats[GMP_CAT_COUNT];
} cat_check;

/* What the rules say without any cache: the first 128 frames of the stack as
 * gmp_replay_stack_frames gives them (Python frames by name and file, native ones by their
 * module), and the range's names innermost first joined by '|'. */
static gmp_category category_ref(gmp_replay *rp, uint32_t stack, uint32_t range)
{
    enum { NF = 128 };
    static gmp_replay_frame fr[NF];
    static gmp_frame_info fi[NF];
    size_t n = stack ? gmp_replay_stack_frames(rp, stack, fr, NF) : 0;
    if (n > NF)
        n = NF;
    for (size_t i = 0; i < n; i++) {
        memset(&fi[i], 0, sizeof fi[i]);
        if (fr[i].kind == GMP_FRAME_PYTHON) {
            fi[i].function = fr[i].function;
            fi[i].file = fr[i].file;
        } else if (fr[i].module) {
            fi[i].module = fr[i].module->path;
        }
    }
    char path[1024];
    size_t pl = 0;
    gmp_reader *r = gmp_replay_reader(rp);
    for (uint32_t id = range; id;) {
        const gmp_rec_range *x = gmp_reader_range(r, id);
        if (!x)
            break;
        gmp_str nm = gmp_reader_string(r, x->name);
        if (pl)
            path[pl++] = '|';
        memcpy(path + pl, nm.ptr, nm.len);
        pl += nm.len;
        id = x->parent;
    }
    return gmp_frames_category(fi, n, (gmp_str){path, (uint32_t)pl});
}

/* The class of the innermost frame of stack through gmp_replay_frame_facts is the rules'. */
static int frame_facts_ok(gmp_replay *rp, uint32_t stack)
{
    gmp_replay_frame fr[1];
    if (!gmp_replay_stack_frames(rp, stack, fr, 1))
        return gmp_replay_frame_facts(rp, stack) == 0;
    gmp_frame_info fi;
    memset(&fi, 0, sizeof fi);
    if (fr[0].kind == GMP_FRAME_PYTHON) {
        fi.function = fr[0].function;
        fi.file = fr[0].file;
    } else if (fr[0].module) {
        fi.module = fr[0].module->path;
    }
    return gmp_frame_facts_class(gmp_replay_frame_facts(rp, stack)) ==
           gmp_frame_classify(&fi, NULL);
}

static gmp_err cat_alloc(void *ctx, gmp_replay *rp, const gmp_replay_mem *ev)
{
    cat_check *c = ctx;
    const gmp_rec_mem *m = &ev->rec->u.mem;
    gmp_category want = category_ref(rp, m->stack, m->range);
    gmp_category got = gmp_replay_category(rp, m->stack, m->range);
    c->checked++;
    c->cats[want]++;
    c->mismatches += got != want;
    gmp_replay_frame fr[1];
    if (m->stack && gmp_replay_stack_frames(rp, m->stack, fr, 1) > 128)
        c->deep++;
    if (m->stack)
        c->mismatches += !frame_facts_ok(rp, m->stack);
    return GMP_OK;
}

static const gmp_replay_ops cat_ops = {.alloc = cat_alloc};

static void test_replay_category(void **state)
{
    tb b;
    tb_open(&b, NULL);
    static const char *const files[] = {"train.py", "/usr/lib/python3/site-packages/torch/x.py",
                                        "/opt/torch/optim/adamw.py", "model.py", "??"};
    static const char *const fns[] = {
        "forward",    "main", "step",     "torch::autograd::Engine::run",
        "_call_impl", "to",   "__init__", "AccumulateGrad::apply",
        "loss_fn"};
    uint32_t fstr[5], nstr[9];
    for (int i = 0; i < 5; i++)
        fstr[i] = tb_str(&b, files[i]);
    for (int i = 0; i < 9; i++)
        nstr[i] = tb_str(&b, fns[i]);
    uint32_t ranges[5] = {0, tb_range(&b, "train/optimizer"), tb_range(&b, "train/forward"),
                          tb_range(&b, "train/backward"), tb_range(&b, "eval")};
    uint32_t api = tb_str(&b, "cudaMalloc");
    /* a trie: each new stack extends a random earlier one (or starts one) */
    enum { NS = 3000 };
    static uint32_t st[NS];
    uint32_t nst = 0;
    uint64_t t = 1000, addr = 0x100000;
    for (int i = 0; i < NS; i++) {
        uint32_t parent = nst && rnd(8) ? st[rnd(nst)] : 0;
        uint32_t id;
        if (rnd(4) == 0)
            id = gmp_writer_stack_native(b.w, parent,
                                         0x7f0000000000ull + rnd(4) * 0x100000 + rnd(64));
        else
            id = gmp_writer_stack_python(b.w, parent, fstr[rnd(5)], nstr[rnd(9)], rnd(100));
        assert_true(id != 0);
        st[nst++] = id;
        if (i == NS / 2 || i == NS / 2 + 500) { /* events so far read before the module */
            gmp_writer_sync(b.w, t);            /* written with the events of this cycle */
        }
        if (i == NS / 2) /* modules defined while the trace runs */
            tb_module(&b, 1, "/usr/lib/libtorch_cuda.so", 0x7f0000000000ull, 0x7f0000000000ull,
                      0x100000);
        if (i == NS / 2 + 500)
            tb_module(&b, 2, "/usr/lib/libc10_cuda.so", 0x7f0000100000ull, 0x7f0000100000ull,
                      0x100000);
        tb_alloc(&b, 0, t++, 0, GMP_MEM_DEVICE, addr, 256, api, ranges[rnd(5)], id);
        tb_free(&b, 0, t++, 0, GMP_MEM_DEVICE, addr, 256, api);
        addr += 256;
    }
    /* a chain deeper than the 128 frames the category looks at: the category is decided by a
     * frame near the top (forward) below one past the 128th (optimizer) */
    uint32_t deep = gmp_writer_stack_python(b.w, 0, fstr[2], nstr[2], 1);
    for (int i = 0; i < 200; i++) {
        deep = gmp_writer_stack_python(b.w, deep, fstr[i == 199 ? 0 : 3], nstr[i == 199 ? 0 : 8],
                                       (uint32_t)i);
        tb_alloc(&b, 0, t++, 0, GMP_MEM_DEVICE, addr, 256, api, 0, deep);
        tb_free(&b, 0, t++, 0, GMP_MEM_DEVICE, addr, 256, api);
    }
    tb_close(&b);

    gmp_reader *r;
    gmp_replay *rp;
    cat_check c;
    memset(&c, 0, sizeof c);
    assert_int_equal(gmp_reader_open(&r, b.path, NULL), GMP_OK);
    assert_int_equal(gmp_replay_new(&rp, r, NULL), GMP_OK);
    assert_int_equal(gmp_replay_add(rp, &cat_ops, &c), GMP_OK);
    assert_int_equal(gmp_replay_run(rp), GMP_OK);
    assert_int_equal(c.checked, NS + 200);
    assert_int_equal(c.mismatches, 0);
    assert_true(c.deep > 50);
    for (int k = 0; k < GMP_CAT_COUNT; k++)
        assert_true(c.cats[k] > 0);
    /* after the run, every (stack, range), the deep one included, in another order */
    for (int i = NS; i-- > 0;)
        for (int k = 0; k < 5; k++)
            assert_int_equal(gmp_replay_category(rp, st[i], ranges[k]),
                             category_ref(rp, st[i], ranges[k]));
    for (int i = 0; i < NS; i++) /* native frames cached before their module was defined */
        assert_true(frame_facts_ok(rp, st[i]));
    assert_int_equal(gmp_replay_category(rp, deep, 0), category_ref(rp, deep, 0));
    assert_int_equal(gmp_replay_category(rp, deep, 0), GMP_CAT_ACTIVATION);
    assert_int_equal(gmp_replay_category(rp, 0, ranges[1]), GMP_CAT_OPTIMIZER);
    assert_int_equal(gmp_replay_category(rp, 999999, 0), GMP_CAT_OTHER); /* unknown stack */
    gmp_replay_free(rp);
    gmp_reader_close(r);
    unlink(b.path);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        /* one a line: CMakeLists.txt registers each line's test (clang-format would pack them) */
        // clang-format off
        cmocka_unit_test(test_glob),
        cmocka_unit_test(test_memo_same),
        cmocka_unit_test(test_memo_restart),
        cmocka_unit_test(test_replay_category),
        cmocka_unit_test(test_named),
        cmocka_unit_test(test_short_name),
        cmocka_unit_test(test_line_apart),
        cmocka_unit_test(test_frame_text),
        cmocka_unit_test(test_line_is_report),
        // clang-format on
    };
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
