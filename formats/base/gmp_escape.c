/* JSON and HTML escaping of untrusted bytes (see gmp_escape.h). */
#include "gmp_escape.h"

#include <string.h>

/* Output either into a bounded buffer (counting the full length) or onto a FILE. */
typedef struct sink {
    char *dst;
    size_t cap;
    size_t len;
    FILE *f;
    int err;
} sink;

static void put(sink *k, const char *s, size_t n)
{
    if (k->f) {
        if (!k->err && fwrite(s, 1, n, k->f) != n)
            k->err = 1;
    } else if (k->len < k->cap) {
        size_t room = k->cap - k->len;
        memcpy(k->dst + k->len, s, n < room ? n : room);
    }
    k->len += n;
}

static void put_hex_escape(sink *k, const char *prefix, unsigned v, int digits, const char *suffix)
{
    static const char hex[] = "0123456789abcdef";
    char b[16];
    size_t i = 0;
    for (const char *p = prefix; *p; p++)
        b[i++] = *p;
    for (int d = digits - 1; d >= 0; d--)
        b[i++] = hex[(v >> (4 * d)) & 0xf];
    for (const char *p = suffix; *p; p++)
        b[i++] = *p;
    put(k, b, i);
}

static size_t finish(sink *k)
{
    if (k->cap) {
        size_t end = k->len < k->cap ? k->len : k->cap - 1;
        k->dst[end] = '\0';
    }
    return k->len;
}

size_t gmp_utf8_seq_len(const unsigned char *s, size_t n)
{
    if (n == 0)
        return 0;
    unsigned c = s[0];
    if (c < 0x80)
        return 1;
    size_t len;
    unsigned lo = 0x80, hi = 0xbf; /* allowed range of the second byte */
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        if (c == 0xe0)
            lo = 0xa0; /* overlong */
        else if (c == 0xed)
            hi = 0x9f; /* surrogates */
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        if (c == 0xf0)
            lo = 0x90; /* overlong */
        else if (c == 0xf4)
            hi = 0x8f; /* > U+10FFFF */
    } else {
        return 0; /* continuation byte, 0xc0, 0xc1, 0xf5.. */
    }
    if (n < len || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if (s[i] < 0x80 || s[i] > 0xbf)
            return 0;
    return len;
}

int gmp_utf8_valid(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        size_t l = gmp_utf8_seq_len(u + i, n - i);
        if (!l)
            return 0;
        i += l;
    }
    return 1;
}

static void json_escape(sink *k, const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, run = 0; /* run: start of bytes copied unchanged */
    while (i < n) {
        unsigned c = u[i];
        const char *rep = NULL;
        size_t l = 1;
        if (c >= 0x80) {
            l = gmp_utf8_seq_len(u + i, n - i);
            if (l) {
                i += l;
                continue;
            }
        } else if (c >= 0x20 && c != '"' && c != '\\' && c != 0x7f) {
            i++;
            continue;
        }
        put(k, s + run, i - run);
        switch (c) {
        case '"': rep = "\\\""; break;
        case '\\': rep = "\\\\"; break;
        case '\n': rep = "\\n"; break;
        case '\r': rep = "\\r"; break;
        case '\t': rep = "\\t"; break;
        case '\b': rep = "\\b"; break;
        case '\f': rep = "\\f"; break;
        }
        if (rep)
            put(k, rep, strlen(rep));
        else
            put_hex_escape(k, "\\u", c, 4, "");
        i += 1;
        run = i;
    }
    put(k, s + run, n - run);
}

static void html_escape(sink *k, const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, run = 0;
    while (i < n) {
        unsigned c = u[i];
        const char *rep = NULL;
        if (c >= 0x80) {
            size_t l = gmp_utf8_seq_len(u + i, n - i);
            if (l) {
                i += l;
                continue;
            }
            rep = "&#xFFFD;";
        } else if (c == '&') {
            rep = "&amp;";
        } else if (c == '<') {
            rep = "&lt;";
        } else if (c == '>') {
            rep = "&gt;";
        } else if (c == '"') {
            rep = "&quot;";
        } else if (c == '\'') {
            rep = "&#39;";
        } else if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) {
            rep = NULL; /* numeric reference below */
        } else {
            i++;
            continue;
        }
        put(k, s + run, i - run);
        if (rep)
            put(k, rep, strlen(rep));
        else if (c == 0)
            put(k, "&#xFFFD;", 8); /* NUL is not allowed in HTML, even as a reference */
        else
            put_hex_escape(k, "&#x", c, 2, ";");
        i++;
        run = i;
    }
    put(k, s + run, n - run);
}

size_t gmp_json_escape(char *dst, size_t cap, const char *s, size_t n)
{
    sink k = {dst, cap, 0, NULL, 0};
    json_escape(&k, s, n);
    return finish(&k);
}

int gmp_json_fputs(FILE *f, const char *s, size_t n)
{
    sink k = {NULL, 0, 0, f, 0};
    put(&k, "\"", 1);
    json_escape(&k, s, n);
    put(&k, "\"", 1);
    return k.err ? -1 : 0;
}

size_t gmp_html_escape(char *dst, size_t cap, const char *s, size_t n)
{
    sink k = {dst, cap, 0, NULL, 0};
    html_escape(&k, s, n);
    return finish(&k);
}

int gmp_html_fputs(FILE *f, const char *s, size_t n)
{
    sink k = {NULL, 0, 0, f, 0};
    html_escape(&k, s, n);
    return k.err ? -1 : 0;
}
