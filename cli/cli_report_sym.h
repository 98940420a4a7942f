/* cli_report_sym: plugs the offline symbolizer (formats/symbols/gmp_symbolize.h, libdwarf) into the
 * report model (gmp_report_set_symbolizer), which lives in gmp_formats and cannot link it. Every
 * command that makes a report (report, convert --report/--json) calls this once. */
#ifndef GMP_CLI_REPORT_SYM_H
#define GMP_CLI_REPORT_SYM_H

/* debug_dir: separate debug files (NULL: /usr/lib/debug); kept by pointer. */
void gmp_cli_report_symbolizer_install(const char *debug_dir);

#endif
