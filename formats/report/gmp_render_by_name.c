/* gmp_render_by_name: a renderer of the report document (gmp_render.h) chosen by its format's name
 * (--format). A module of its own: it uses every renderer, and they all use gmp_render.c. */
#include <string.h>

#include "gmp_render.h"

gmp_render_fn gmp_render_by_name(const char *name)
{
    static const struct {
        const char *name;
        gmp_render_fn fn;
    } fmts[] = {
        {"text", gmp_render_text}, {"markdown", gmp_render_md}, {"md", gmp_render_md},
        {"html", gmp_render_html}, {"json", gmp_render_json},
    };
    for (size_t i = 0; name && i < sizeof fmts / sizeof fmts[0]; i++)
        if (!strcmp(name, fmts[i].name))
            return fmts[i].fn;
    return NULL;
}
