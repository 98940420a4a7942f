/* gmp_render_json: being written (issue 14). */
