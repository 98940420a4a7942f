/* gmp_escape: escaping of untrusted byte strings for JSON and HTML output.
 *
 * Trace strings (API names, range names, paths, command lines) are bytes: UTF-8 expected, not
 * guaranteed. Every output format of gpumemprof escapes them here, so that every output is valid
 * whatever the trace holds:
 *  - JSON (RFC 8259): '"' and '\' are backslash-escaped, control characters (< 0x20, 0x7f) become
 *    \n, \t, ... or \u00XX, valid UTF-8 sequences are copied, and each byte of an invalid UTF-8
 *    sequence (bad lead byte, truncated or overlong sequence, surrogate, > U+10FFFF) becomes \u00XX
 *    (its Latin-1 reading), so no byte is lost and the result is pure valid UTF-8.
 *  - HTML (text and attribute values): & < > " ' become entities, control characters other than
 *    tab/newline become &#xXX; and each invalid UTF-8 byte becomes U+FFFD (&#xFFFD;).
 *
 * Two forms of each: into a caller's buffer (snprintf-like: writes at most cap bytes including the
 * NUL, returns the full escaped length) and onto a FILE. */
#ifndef GMP_ESCAPE_H
#define GMP_ESCAPE_H

#include <stddef.h>
#include <stdio.h>

/* Length of the valid UTF-8 sequence at s[0..n) (1..4), or 0 when s[0] does not begin one. */
size_t gmp_utf8_seq_len(const unsigned char *s, size_t n);
/* Non-zero when s[0..n) is entirely valid UTF-8. */
int gmp_utf8_valid(const char *s, size_t n);

/* JSON: escapes s[0..n) without the surrounding quotes. */
size_t gmp_json_escape(char *dst, size_t cap, const char *s, size_t n);
/* JSON: writes s[0..n) as a quoted JSON string. Returns 0, or -1 when the stream reports an error.
 */
int gmp_json_fputs(FILE *f, const char *s, size_t n);

/* HTML: escapes s[0..n) for element text and quoted attribute values. */
size_t gmp_html_escape(char *dst, size_t cap, const char *s, size_t n);
/* HTML: writes s[0..n) escaped. Returns 0, or -1 when the stream reports an error. */
int gmp_html_fputs(FILE *f, const char *s, size_t n);

#endif
