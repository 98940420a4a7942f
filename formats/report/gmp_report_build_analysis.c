/* gmp_report_build_analysis: being written (issue 14). */
