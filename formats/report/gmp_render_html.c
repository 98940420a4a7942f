/* gmp_render_html: being written (issue 14). */
