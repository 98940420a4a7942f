/* gmp_pkstream_input: the streaming pickle reader's input (gmp_pkstream_impl.h): a window
 * [p, end) over the input in memory, or over a file read with pread into a buffer of INBUF bytes
 * that grows (doubling, charged) for an opcode longer than it. fill() makes k bytes available. */
#include "gmp_pkstream_impl.h"

/* ---- input ---- */

/* Puts what is left of the window (have bytes at p) at the start of P->buf, grown first (doubling)
 * to hold at least need bytes. */
static int buf_keep(gmp_pkstream *P, size_t need, size_t have)
{
    if (need > P->bufcap) {
        size_t nc = P->bufcap;
        while (nc < need)
            nc *= 2;
        if (charge(P, nc - P->bufcap) < 0)
            return -1;
        unsigned char *nb = malloc(nc);
        if (!nb) {
            uncharge(P, nc - P->bufcap);
            return gmp_pks_fail(P, GMP_ERR_NOMEM, "out of memory");
        }
        memcpy(nb, P->p, have);
        free(P->buf);
        P->buf = nb;
        P->bufcap = nc;
    } else if (have && P->p != P->buf) {
        memmove(P->buf, P->p, have);
    }
    return 0;
}

/* Makes at least k bytes available at p; -1 (truncated, or an I/O error) when the input has
 * fewer. */
int gmp_pks_fill_slow(gmp_pkstream *P, size_t k)
{
    if (P->fd < 0)
        return -1;
    uint64_t off = P->base + (uint64_t)(P->p - P->start);
    if (k > P->size - off)
        return -1;
    size_t have = (size_t)(P->end - P->p);
    if (buf_keep(P, k, have) < 0)
        return -1;
    P->start = P->p = P->buf;
    P->end = P->buf + have;
    P->base = off;
    while ((size_t)(P->end - P->p) < k) {
        size_t room = P->bufcap - (size_t)(P->end - P->buf);
        ssize_t r = pread(P->fd, (void *)P->end, room, (off_t)(off + (uint64_t)(P->end - P->p)));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return gmp_pks_fail(P, GMP_ERR_IO, "cannot read the input: %s", strerror(errno));
        if (r == 0)
            return -1;
        P->end += r;
    }
    return 0;
}

void gmp_pks_input_reset(gmp_pkstream *P)
{
    if (P->fd >= 0) {
        P->start = P->p = P->end = P->buf;
    } else {
        P->start = P->p = P->data;
        P->end = P->data + P->size;
    }
    P->base = 0;
}
