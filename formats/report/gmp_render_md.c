/* gmp_render_md: being written (issue 14). */
