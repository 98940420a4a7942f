/* gmp_render_text: being written (issue 14). */
