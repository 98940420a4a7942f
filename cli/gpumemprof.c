/* gpumemprof: the command-line program. Dispatches to one command from the table below; every
 * command is in its own file (cli/cmd_*.c). Exit status: 0 success, 1 failure, 2 bad usage. */
#include <stdio.h>
#include <string.h>

#include "cli_cmds.h"
#include "cli_heap.h"
#include "cli_opts.h"

#ifndef GMP_VERSION_STRING
#error "GMP_VERSION_STRING must be defined by the build"
#endif

typedef struct command {
    gmp_cli_cmd_info info; /* name, usage, summary */
    int (*fn)(const gmp_cli_cmd_info *cmd, int argc, char **argv);
} command;

/* The commands, in the order --help lists them. A command appears here when it works. */
static const command commands[] = {
    {{"run", "[OPTIONS] [--] COMMAND [ARGS...]",
      "profile the GPU memory of a command and every CUDA process it starts"},
     gmp_cmd_run},
    {{"report",
      "FILE... [--format text|markdown|html|json] [--top N] [--device N] [--by KEYS] "
      "[--sort KEY] [-o FILE]",
      "peaks, what was live at them, leaks, OOMs and per-range statistics of recordings"},
     gmp_cmd_report},
    {{"view", "FILE... [--follow] [--color WHEN]",
      "explore recordings in the terminal: timeline, live set at a cursor, stacks; --follow a run"},
     gmp_cmd_view},
    {{"whatif",
      "FILE [--alloc-conf CONF]... [--capacity SIZE] [--format text|markdown|json] [-o FILE]",
      "replay PyTorch's tensors under other allocator settings: peak reserved, what fits"},
     gmp_cmd_whatif},
    {{"convert",
      "FILE... [--speedscope|--chrome|--pytorch-snapshot|--report|--json|--pprof|"
      "--html-view FILE]... [--parquet DIR] [OPTIONS]",
      "write recordings as speedscope, Chrome/Perfetto, pprof, an HTML view, Parquet and more"},
     gmp_cmd_convert},
    {{"dump", "FILE [--json] [--raw]", "print every record of a trace, one per line"},
     gmp_cmd_dump},
    {{"import", "INPUT -o TRACE [--force]",
      "convert another tool's recording (Nsight Systems SQLite, PyTorch memory snapshot) into a "
      "trace"},
     gmp_cmd_import},
    {{"diff", "A B [--format text|markdown|html|json] [--top N] [-o FILE]",
      "compare two recordings: peaks, live at the peak by range and stack, leaks"},
     gmp_cmd_diff},
    {{"info", "[FILE...] [--json]",
      "driver, CUDA, CUPTI, devices: can profiling work here; with FILEs, what each recording is"},
     gmp_cmd_info},
    {{"diagnose", "[-o BUNDLE.tar.zst] [--list] [--max-file SIZE] [--max-total SIZE] [FILE...]",
      "one file for a bug report: recordings, their reports, info, version, environment"},
     gmp_cmd_diagnose},
};

#define NCOMMANDS (sizeof commands / sizeof commands[0])

static const command *find_command(const char *name)
{
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (strcmp(name, commands[i].info.name) == 0)
            return &commands[i];
    return NULL;
}

static void print_usage(FILE *f)
{
    fprintf(f, "usage: gpumemprof [--help] [--version] COMMAND [ARGS...]\n");
}

static void print_help(void)
{
    printf("gpumemprof %s: a GPU memory profiler for CUDA programs.\n\n", GMP_VERSION_STRING);
    print_usage(stdout);
    printf("\nCommands:\n");
    for (size_t i = 0; i < NCOMMANDS; i++)
        printf("  %-10s %s\n", commands[i].info.name, commands[i].info.summary);
    printf("\nOptions:\n"
           "  -h, --help     show this help and exit\n"
           "  -V, --version  print the version and exit\n"
           "\nRun 'gpumemprof COMMAND --help' for the options of a command.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "gpumemprof: no command given\n");
        print_usage(stderr);
        fprintf(stderr, "Run 'gpumemprof --help' for the list of commands.\n");
        return 2;
    }
    const char *a = argv[1];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0 || strcmp(a, "help") == 0) {
        if (argc == 2) {
            print_help();
            return 0;
        }
        /* "gpumemprof help COMMAND" is "gpumemprof COMMAND --help" */
        const command *c = argc == 3 ? find_command(argv[2]) : NULL;
        if (!c) {
            if (argc == 3)
                fprintf(stderr, "gpumemprof: '%s' is not a gpumemprof command\n", argv[2]);
            else
                fprintf(stderr, "gpumemprof: %s: expected at most one command name\n", a);
            print_usage(stderr);
            return 2;
        }
        char *sub[] = {argv[2], "--help", NULL};
        return c->fn(&c->info, 2, sub);
    }
    if (strcmp(a, "--version") == 0 || strcmp(a, "-V") == 0) {
        if (argc != 2) {
            fprintf(stderr, "gpumemprof: --version takes no arguments\n");
            print_usage(stderr);
            return 2;
        }
        printf("gpumemprof %s\n", GMP_VERSION_STRING);
        return 0;
    }
    if (a[0] == '-') {
        fprintf(stderr, "gpumemprof: %s: unknown option\n", a);
        print_usage(stderr);
        return 2;
    }
    const command *c = find_command(a);
    if (c && strcmp(a, "run") != 0)
        gmp_cli_heap_setup(); /* reading recordings: the heap in large pages */
    if (c)
        return c->fn(&c->info, argc - 1, argv + 1);
    fprintf(stderr, "gpumemprof: '%s' is not a gpumemprof command\n", a);
    print_usage(stderr);
    fprintf(stderr, "Run 'gpumemprof --help' for the list of commands.\n");
    return 2;
}
