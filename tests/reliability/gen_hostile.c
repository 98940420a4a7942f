/* Writes a hostile trace with the trace writer, for test_security.py:
 *   rel_gen_hostile OUT [MODULE_PATH...]
 * Every string the outputs show (range and domain names, thread and device names, API names,
 * notices, the host name and command line, Python file and function names) holds quotes,
 * backslashes, "</script>", "<gmpx>" and "<img onerror>" markup, "-->" and "]]>", control bytes,
 * a NUL, and invalid UTF-8. Each MODULE_PATH becomes a module with a native frame inside it, so
 * that the symbolizer is asked to read it (the test passes a FIFO, a device, a directory, a
 * path with "..", and a file that is not ELF). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gmp_trace.h"
#include "gmp_writer.h"

#define T0 1000000000ull

static const char payload[] = "q\"uo'te\\ </script><script>alert(\"GMPXSS\")</script><gmpx>"
                              "<img src=x onerror=GMPXSS> --> ]]> \x01\x07\x1b[31m\t\r\n\x7f"
                              "\xc3\x28 \xff\xfe \xed\xa0\x80 \xf4\x90\x80\x80 \xe2\x82 ok\0nul";
#define PLEN (sizeof payload - 1)

static gmp_str hs(void)
{
    return (gmp_str){payload, (uint32_t)PLEN};
}

_Noreturn static void die(const char *m)
{
    fprintf(stderr, "rel_gen_hostile: %s\n", m);
    exit(1);
}

int main(int argc, char **argv)
{
    if (argc < 2)
        die("usage: rel_gen_hostile OUT [MODULE_PATH...]");
    int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
        die("cannot create the output");
    gmp_rec_header h;
    memset(&h, 0, sizeof h);
    h.producer = hs();
    h.pid = 4242;
    h.ppid = 1;
    h.hostname = hs();
    h.cmdline = hs();
    h.rank = -1;
    h.start_wall_ns = 1700000000000000000ull;
    h.start_trace_ns = T0;
    h.clock = (gmp_str){"CLOCK_MONOTONIC", 15};
    h.options = hs();
    gmp_writer_opts o;
    gmp_writer_opts_default(&o);
    o.threaded = 0;
    gmp_writer *w = NULL;
    if (gmp_writer_open(&w, fd, &o, &h) != GMP_OK)
        die("cannot open the writer");

    gmp_rec d = {.type = GMP_REC_DEVICE};
    d.u.device.id = 0;
    d.u.device.name = hs();
    d.u.device.total_bytes = 80ull << 30;
    d.u.device.cc_major = 9;
    gmp_writer_define(w, &d);
    gmp_rec th = {.type = GMP_REC_THREAD};
    th.u.thread.tid = 77;
    th.u.thread.name = hs();
    gmp_writer_define(w, &th);

    uint32_t s = gmp_writer_string(w, payload, PLEN);
    uint32_t dom = gmp_writer_string(w, payload, 20);
    uint32_t r1 = gmp_writer_range(w, 0, dom, s);
    uint32_t r2 = gmp_writer_range(w, r1, 0, gmp_writer_string(w, payload + 3, PLEN - 3));
    /* native frames in every module given, and a Python frame with hostile names */
    uint32_t stack = gmp_writer_stack_python(w, 0, s, s, 7);
    for (int i = 2; i < argc; i++) {
        gmp_rec m = {.type = GMP_REC_MODULE};
        m.u.module.id = (uint32_t)(i - 1);
        m.u.module.path = (gmp_str){argv[i], (uint32_t)strlen(argv[i])};
        m.u.module.base = 0x100000000ull * (uint64_t)i;
        m.u.module.lo = m.u.module.base;
        m.u.module.size = 0x100000;
        gmp_writer_define(w, &m);
        stack = gmp_writer_stack_native(w, stack, m.u.module.base + 0x1234);
    }
    if (!s || !dom || !r1 || !r2 || !stack)
        die("cannot define the strings");

    gmp_wthread *t = gmp_writer_thread(w, 77);
    uint64_t now = T0;
    gmp_rec ev = {.type = GMP_REC_RANGE_PUSH, .time_ns = now += 1000};
    ev.u.rev.range = r1;
    gmp_wthread_event(t, &ev);
    ev = (gmp_rec){.type = GMP_REC_RANGE_PUSH, .time_ns = now += 1000};
    ev.u.rev.range = r2;
    gmp_wthread_event(t, &ev);
    for (int i = 0; i < 4; i++) {
        gmp_rec a = {.type = GMP_REC_ALLOC, .time_ns = now += 1000};
        a.u.mem.device = 0;
        a.u.mem.kind = GMP_MEM_DEVICE;
        a.u.mem.api = s;
        a.u.mem.address = 0x7f0000000000ull + (uint64_t)i * 0x100000;
        a.u.mem.size = (uint64_t)(i + 1) << 20;
        a.u.mem.stack = stack;
        a.u.mem.range = r2;
        gmp_wthread_event(t, &a);
    }
    gmp_rec f = {.type = GMP_REC_FREE, .time_ns = now += 1000};
    f.u.mem.device = 0;
    f.u.mem.kind = GMP_MEM_DEVICE;
    f.u.mem.api = s;
    f.u.mem.address = 0x7f0000000000ull;
    f.u.mem.size = 1 << 20;
    f.u.mem.stack = stack;
    f.u.mem.range = r2;
    gmp_wthread_event(t, &f);
    gmp_rec oom = {.type = GMP_REC_OOM, .time_ns = now += 1000};
    oom.u.oom.api = s;
    oom.u.oom.requested = 1ull << 40;
    oom.u.oom.stack = stack;
    oom.u.oom.range = r2;
    oom.u.oom.result = 2;
    gmp_wthread_event(t, &oom);
    gmp_rec n = {.type = GMP_REC_NOTICE, .time_ns = now += 1000};
    n.u.notice.severity = GMP_NOTICE_WARNING;
    n.u.notice.message = hs();
    gmp_wthread_event(t, &n);
    gmp_rec mk = {.type = GMP_REC_MARK, .time_ns = now += 1000};
    mk.u.rev.range = r1;
    gmp_wthread_event(t, &mk);
    ev = (gmp_rec){.type = GMP_REC_RANGE_POP, .time_ns = now += 1000};
    ev.u.rev.range = r2;
    gmp_wthread_event(t, &ev);
    gmp_writer_sync(w, now);
    gmp_wthread_release(t);
    gmp_writer_stats st;
    if (gmp_writer_close(w, &st) != GMP_OK)
        die("cannot write the trace");
    return 0;
}
