/* gmp_report_build: being written (issue 14). */
