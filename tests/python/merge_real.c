/* merge_real: for test_merge_real.py, the trace CUPTI would have recorded beside a real PyTorch
 * snapshot: imports SNAP (gmp_import_torch) and writes, from its segments, the caching allocator's
 * cudaMalloc / cudaFree calls as a trace of their own (every segment_alloc an ALLOC of kind device
 * at its address and size, every segment_free a FREE; segments from before the window at its
 * start; expandable segments' mapped memory as cuMemCreate chunks of kind vmm-physical), on a
 * trace clock 1000 s ahead of the snapshot's, the header mapping it to the same wall clock. The
 * test then reads TRACE with SNAP beside it, merged, and compares with SNAP read alone.
 *
 *   merge_real SNAP.pickle TRACE
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gmp_import_torch.h"
#include "gmp_reader.h"
#include "gmp_writer.h"

#define SHIFT 1000000000000ull /* the trace clock is the snapshot's + 1000 s */
#define NOT_ADDRESS 0xd000000000000000ull
#define EXPANDABLE 0xe000000000000000ull
#define MAX_DEV 64

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: merge_real SNAP.pickle TRACE\n");
        return 2;
    }
    char imp[4096], msg[512];
    snprintf(imp, sizeof imp, "%s.imported", argv[2]);
    int fd = open(imp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || gmp_import_torch(argv[1], fd, NULL, msg, sizeof msg) != GMP_OK) {
        fprintf(stderr, "merge_real: import: %s\n", msg);
        return 1;
    }
    gmp_reader *r;
    if (gmp_reader_open(&r, imp, NULL) != GMP_OK) {
        fprintf(stderr, "merge_real: %s\n", gmp_reader_open_error());
        return 1;
    }
    gmp_rec_header h = *gmp_reader_header(r);
    h.start_trace_ns += SHIFT;
    int out = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    gmp_writer_opts o;
    gmp_writer_opts_default(&o);
    o.threaded = 0;
    gmp_writer *w;
    if (out < 0 || gmp_writer_open(&w, out, &o, &h) != GMP_OK) {
        fprintf(stderr, "merge_real: cannot write %s\n", argv[2]);
        return 1;
    }
    gmp_wthread *th = gmp_writer_thread(w, 4242);
    uint32_t api_malloc = gmp_writer_string(w, "cudaMalloc", 10);
    uint32_t api_free = gmp_writer_string(w, "cudaFree", 8);
    uint32_t api_create = gmp_writer_string(w, "cuMemCreate", 11);
    uint32_t api_release = gmp_writer_string(w, "cuMemRelease", 12);
    /* expandable segments: mapped bytes per device, as a stack of chunks */
    uint64_t mapped[MAX_DEV] = {0};
    uint64_t *chunk[MAX_DEV] = {0}, *caddr[MAX_DEV] = {0};
    size_t nchunk[MAX_DEV] = {0}, cap[MAX_DEV] = {0};
    uint64_t next_handle = 0x5e0000000000ull, last = 0;
    const gmp_rec *rec;
    gmp_err e;
    while ((e = gmp_reader_next(r, &rec)) == GMP_OK) {
        if (rec->type != GMP_REC_POOL)
            continue;
        const gmp_rec_pool *p = &rec->u.pool;
        gmp_rec ev = {.type = GMP_REC_ALLOC, .time_ns = rec->time_ns + SHIFT};
        last = ev.time_ns;
        ev.u.mem.device = p->device;
        ev.u.mem.kind = GMP_MEM_DEVICE;
        if ((p->pool & 0xf000000000000000ull) == EXPANDABLE) {
            int d = p->device;
            if (d < 0 || d >= MAX_DEV || p->op != GMP_POOL_RESERVED)
                continue;
            ev.u.mem.kind = GMP_MEM_VMM_PHYSICAL;
            while (mapped[d] > p->value && nchunk[d]) { /* unmapped: the latest chunks go */
                nchunk[d]--;
                ev.type = GMP_REC_FREE;
                ev.u.mem.api = api_release;
                ev.u.mem.address = caddr[d][nchunk[d]];
                ev.u.mem.size = chunk[d][nchunk[d]];
                mapped[d] -= chunk[d][nchunk[d]];
                gmp_wthread_event(th, &ev);
            }
            if (p->value > mapped[d]) {
                if (nchunk[d] == cap[d]) {
                    cap[d] = cap[d] ? cap[d] * 2 : 64;
                    chunk[d] = realloc(chunk[d], cap[d] * sizeof *chunk[d]);
                    caddr[d] = realloc(caddr[d], cap[d] * sizeof *caddr[d]);
                    if (!chunk[d] || !caddr[d])
                        return 1;
                }
                ev.type = GMP_REC_ALLOC;
                ev.u.mem.api = api_create;
                ev.u.mem.address = next_handle;
                ev.u.mem.handle = next_handle;
                next_handle += 0x1000;
                ev.u.mem.size = p->value - mapped[d];
                caddr[d][nchunk[d]] = ev.u.mem.address;
                chunk[d][nchunk[d]++] = ev.u.mem.size;
                mapped[d] = p->value;
                gmp_wthread_event(th, &ev);
            }
            continue;
        }
        if (p->pool >= NOT_ADDRESS)
            continue; /* the import's pre-window filler: no address */
        if (p->op == GMP_POOL_RESERVED) {
            ev.u.mem.api = api_malloc;
            ev.u.mem.address = p->pool;
            ev.u.mem.size = p->value;
            gmp_wthread_event(th, &ev);
        } else if (p->op == GMP_POOL_DESTROY) {
            ev.type = GMP_REC_FREE;
            ev.u.mem.api = api_free;
            ev.u.mem.address = p->pool;
            gmp_wthread_event(th, &ev);
        }
    }
    if (e != GMP_END) {
        fprintf(stderr, "merge_real: %s\n", gmp_reader_error(r));
        return 1;
    }
    gmp_writer_sync(w, last);
    gmp_reader_close(r);
    for (int d = 0; d < MAX_DEV; d++) {
        free(chunk[d]);
        free(caddr[d]);
    }
    unlink(imp);
    return gmp_writer_close(w, NULL) == GMP_OK ? 0 : 1;
}
