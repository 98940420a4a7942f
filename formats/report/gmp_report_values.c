/* gmp_report_values: the report model's strings and stacks as document values (gmp_doc.h), for
 * every builder of the report (gmp_report_build.c, gmp_report_build_analysis.c). */
#include "gmp_report_values.h"

#include <string.h>

gmp_doc_val gmp_report_dv_str(const gmp_report_trace *t, uint32_t i, const char *none)
{
    return gmp_dv_str(gmp_report_str(t, i), none);
}

const gmp_doc_stack *gmp_report_doc_stack(gmp_doc *d, const gmp_report_trace *t, uint32_t stack,
                                          int all_frames)
{
    if (stack == GMP_REPORT_NO_STACK || stack == GMP_REPORT_ALL || stack >= t->nstacks)
        return NULL;
    const gmp_report_stack *s = &t->stacks[stack];
    if (!s->nframes)
        return NULL;
    gmp_doc_stack *ds = gmp_doc_alloc(d, sizeof *ds);
    gmp_doc_frame *fr = gmp_doc_alloc(d, s->nframes * sizeof *fr);
    uint8_t *cls = gmp_doc_alloc(d, 2 * s->nframes);
    if (!ds || !fr || !cls)
        return NULL;
    uint8_t *hide = cls + s->nframes;
    for (size_t i = 0; i < s->nframes; i++)
        cls[i] = s->frames[i].cls;
    if (!all_frames)
        gmp_frames_fold(cls, s->nframes, hide);
    else
        memset(hide, 0, s->nframes);
    for (size_t i = 0; i < s->nframes; i++) {
        const gmp_report_frame *x = &s->frames[i];
        gmp_doc_frame *y = &fr[i];
        char name[1024];
        size_t n = gmp_report_frame_text(t, x, name, sizeof name);
        y->display = gmp_doc_strdup(d, name, n);
        y->python = x->kind == GMP_FRAME_PYTHON;
        y->function = gmp_report_str(t, x->function);
        y->file = gmp_report_str(t, x->file);
        y->line = x->line;
        y->internal = hide[i];
        if (y->python)
            continue;
        y->module = gmp_report_str(t, x->module);
        y->offset = x->offset;
        y->address = x->address;
        y->inlined = x->inlined;
        if (x->unknown)
            y->unknown = gmp_report_str(t, x->unknown);
        else if (!x->symbolized)
            y->unknown = (gmp_str){"not symbolized", 14};
    }
    ds->n = s->nframes;
    ds->frames = fr;
    return ds;
}

static const gmp_doc_col site_cols[GMP_REPORT_SITE_COLS] = {
    {"kind", "kind", GMP_DOC_LIT, 0},          {"range", "range", GMP_DOC_STR, 0},
    {"stack", "stack", GMP_DOC_STACK, 0},      {"device", "device", GMP_DOC_DEVICE, GMP_DOC_DATA},
    {"API", "api", GMP_DOC_STR, GMP_DOC_DATA},
};

size_t gmp_report_site_table(gmp_doc_col *out, const gmp_doc_col *own, size_t n)
{
    memcpy(out, own, n * sizeof *own);
    memcpy(out + n, site_cols, sizeof site_cols);
    return n + GMP_REPORT_SITE_COLS;
}

void gmp_report_site_cells(gmp_doc *d, const gmp_report_trace *t, const gmp_report_view *v,
                           const gmp_analysis_site *s, gmp_doc_val *out)
{
    out[0] = gmp_dv_lit(gmp_mem_kind_name(s->kind));
    out[1] = gmp_report_dv_str(t, s->range, "(no range)");
    out[2] = gmp_dv_stack(gmp_report_doc_stack(d, t, s->stack, v->all_frames));
    out[3] = gmp_dv_device(s->device);
    out[4] = gmp_report_dv_str(t, s->api, "(no API)");
}
