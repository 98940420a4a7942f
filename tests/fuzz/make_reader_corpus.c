/* Writes the seed corpus of fuzz_reader (tests/fuzz/corpus/reader/): a few small valid traces,
 * a cut one, one with skippable frames, and "records mode" inputs (see fuzz_reader.c).
 * Usage: make_reader_corpus DIR */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace_build.h"

static char dir[3000];

static void save(const char *name, const void *p, size_t n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n || fclose(f)) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
}

static gmp_rec mk(unsigned type, uint64_t t)
{
    gmp_rec r;
    memset(&r, 0, sizeof r);
    r.type = type;
    r.time_ns = t;
    return r;
}

/* Appends a small trace's chunks; after each chunk, cb(b) is called (frame or record it). */
static void body(tb *b, void (*chunk)(tb *))
{
    tb_start(b, NULL);
    tb_string(b, 1, "cudaMalloc");
    tb_string(b, 2, "train");
    tb_string(b, 3, "step");
    gmp_rec r = mk(GMP_REC_RANGE, 0);
    r.u.range.id = 1;
    r.u.range.name = 2;
    tb_rec(b, &r);
    r.u.range.id = 2;
    r.u.range.parent = 1;
    r.u.range.name = 3;
    tb_rec(b, &r);
    r = mk(GMP_REC_STACK, 0);
    r.u.stack.id = 1;
    r.u.stack.address = 0x401000;
    tb_rec(b, &r);
    r = mk(GMP_REC_DEVICE, 0);
    r.u.device.name = (gmp_str){"GPU", 3};
    tb_rec(b, &r);
    r = mk(GMP_REC_THREAD, 0);
    r.u.thread.tid = 11;
    r.u.thread.name = (gmp_str){"main", 4};
    tb_rec(b, &r);
    r = mk(GMP_REC_MODULE, 0);
    r.u.module.id = 1;
    r.u.module.path = (gmp_str){"/bin/x", 6};
    tb_rec(b, &r);
    chunk(b);
    for (uint32_t t = 11; t <= 13; t++) {
        tb_buffer(b, t, 1000);
        gmp_rec e = mk(GMP_REC_RANGE_PUSH, 1000 + t);
        e.u.rev.range = 2;
        tb_rec(b, &e);
        e = mk(GMP_REC_ALLOC, 1010 + t);
        e.u.mem = (gmp_rec_mem){0, 1, 0, 1, 0x7f0000000000ull + t, 4096, 0, 1, 2, 77, 0, 0};
        tb_rec(b, &e);
        e.type = GMP_REC_FREE;
        e.time_ns = 1020 + t;
        tb_rec(b, &e);
        e = mk(GMP_REC_RANGE_POP, 1030 + t);
        e.u.rev.range = 2;
        tb_rec(b, &e);
        if (t == 12)
            chunk(b);
    }
    tb_sync(b, 1100);
    tb_buffer(b, 0, 1100);
    gmp_rec e = mk(GMP_REC_NOTICE, 1101);
    e.u.notice.severity = 2;
    e.u.notice.message = (gmp_str){"activity off", 12};
    tb_rec(b, &e);
    e = mk(GMP_REC_OOM, 1102);
    e.u.oom.api = 1;
    tb_rec(b, &e);
    e = mk(GMP_REC_LOST, 1103);
    e.u.lost.count = 3;
    e.u.lost.reason = 1;
    tb_rec(b, &e);
    e = mk(GMP_REC_END, 1104);
    e.u.end = (gmp_rec_end){15, 3, 3, 3};
    tb_rec(b, &e);
    chunk(b);
}

static void frame(tb *b)
{
    tb_frame(b);
}

static tb *records_out;
static void record_chunk(tb *b)
{
    tb_file_bytes(records_out, b->raw, b->rlen);
    tb_file_bytes(records_out, "FRME", 4);
    b->rlen = 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: make_reader_corpus DIR\n");
        return 2;
    }
    snprintf(dir, sizeof dir, "%s", argv[1]);
    tb b;
    tb_init(&b);
    body(&b, frame);
    save("valid.trace", b.file, b.len);
    save("cut.trace", b.file, b.frame_end[1] + (b.len - b.frame_end[1]) / 2);
    tb_free(&b);

    tb_init(&b);
    static const uint8_t skip[] = {0x5f, 0x2a, 0x4d, 0x18, 2, 0, 0, 0, 'h', 'i'};
    tb_file_bytes(&b, skip, sizeof skip);
    body(&b, frame);
    tb_file_bytes(&b, skip, sizeof skip);
    save("skippable.trace", b.file, b.len);
    tb_free(&b);

    tb out, src;
    tb_init(&out);
    tb_init(&src);
    records_out = &out;
    tb_file_bytes(&out, "\0\0", 2);
    body(&src, record_chunk);
    out.len -= 4; /* no separator after the last chunk */
    save("records.bin", out.file, out.len);
    out.file[1] = 3; /* window of 3 events */
    save("records-window.bin", out.file, out.len);
    tb_free(&out);
    tb_free(&src);

    /* unknown types and a newer field */
    tb_init(&out);
    tb_init(&src);
    tb_file_bytes(&out, "\0\0", 2);
    tb_start(&src, NULL);
    static const uint8_t unk[] = {0x50, 2, 1, 2, 0x08, 2, 5, 0, 0x28, 2, 4, 9, 0x14, 2, 2, 0};
    tb_raw(&src, unk, sizeof unk);
    tb_file_bytes(&out, src.raw, src.rlen);
    save("records-unknown.bin", out.file, out.len);
    tb_free(&out);
    tb_free(&src);
    return 0;
}
