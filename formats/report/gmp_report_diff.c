/* gmp_report_diff: being written (issue 14). */
