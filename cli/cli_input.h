/* cli_input: the one way commands open a recording (report, convert, diff, dump, info; import for
 * its probe and its importers).
 *
 * A recording is a gpumemprof trace, a PyTorch memory snapshot (torch.cuda.memory._dump_snapshot, a
 * pickle) or an Nsight Systems SQLite export (nsys export --type sqlite), recognised by its first
 * bytes, never by its name:
 *  - a zstd frame or a zstd skippable frame: a trace (gmp_reader_probe), read where it is;
 *  - "SQLite format 3\0": an nsys export (gmp_import_nsys_probe);
 *  - 0x80 then 2..5 (pickle protocols 2 to 5): a snapshot (gmp_import_torch_probe).
 * A snapshot or an export is imported into a temporary trace (a snapshot's written stored, not
 * compressed: faster to write and to read back; for `report`, a large snapshot's trace goes
 * from the writing thread to the reader through a queue instead, read as it is written:
 * GMP_CLI_INPUT_STREAM) that has no name
 * anywhere: a memfd (memfd_create), or where there is none an O_TMPFILE file in $TMPDIR (else
 * /tmp), or as a last resort a file made by mkstemp there and unlinked at once. Nothing is left
 * behind, not even when the process is killed. Readers then open the trace through /proc/self/fd,
 * each with its own file offset. A file that is none of the three gets one line that says what was
 * expected and what the file begins with. A pipe or a character device is not probed (reading its
 * head would consume it): it is read as a trace, as before.
 *
 * A trace file with PyTorch's memory history beside it (`run --torch-history` writes
 * TRACE.torch.pickle, else only TRACE.oom.torch.pickle) is read merged with it: the snapshot is
 * imported, then merged with the trace (gmp_merge_torch) into another temporary trace, which is
 * what readers open (summary: the merge's line; the trace's kind stays TRACE). A snapshot that
 * cannot be merged gives one warning line on stderr and the trace is read alone; so it is with
 * GPUMEMPROF_TORCH_MERGE=0 in the environment (silently). */
#ifndef GMP_CLI_INPUT_H
#define GMP_CLI_INPUT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "gmp_error.h"
#include "gmp_reader.h"

typedef enum gmp_cli_input_kind {
    GMP_CLI_INPUT_UNKNOWN = 0,
    GMP_CLI_INPUT_TRACE,
    GMP_CLI_INPUT_TORCH,
    GMP_CLI_INPUT_NSYS,
} gmp_cli_input_kind;

/* Bytes of the head the probes look at (a shorter file gives fewer). */
#define GMP_CLI_INPUT_HEAD 64

/* What each command's --help says about its inputs (a paragraph, ending with a newline). */
#define GMP_CLI_INPUT_HELP                                                                         \
    "Inputs, recognised by their content (never their name): gpumemprof traces, PyTorch\n"         \
    "memory snapshots (torch.cuda.memory._dump_snapshot pickles) and Nsight Systems SQLite\n"      \
    "exports (nsys export --type sqlite); the last two are imported into a temporary trace\n"      \
    "first, which nothing keeps (gpumemprof import keeps a copy). Kinds can be mixed.\n"           \
    "A trace with TRACE.torch.pickle beside it (run --torch-history) is read merged with\n"        \
    "it: PyTorch's tensors inside the trace's segments (GPUMEMPROF_TORCH_MERGE=0: alone).\n"

typedef struct gmp_cli_input {
    const char *path;        /* as given (not copied): what messages and outputs name */
    gmp_cli_input_kind kind; /* never UNKNOWN once open */
    uint64_t file_bytes;     /* size of the file given (0 for a pipe) */
    uint64_t trace_bytes;    /* size of the trace read: the file, or the imported trace */
    int fd;                  /* the imported trace; -1 for a trace read where it is */
    char trace_path[32];     /* what readers open: "" for path itself, else /proc/self/fd/N */
    void *job;               /* GMP_CLI_INPUT_STREAM: the import writing into queue */
    struct gmp_tq *queue;    /* GMP_CLI_INPUT_STREAM: its frames, for the reader (gmp_tq.h) */
    char summary[512];       /* the importer's one-line summary ("" for a trace) */
    /* A snapshot imported by gmp_cli_input_open (not streamed): its allocator_settings'
     * PYTORCH_CUDA_ALLOC_CONF, torch_conf_known 0 when it has none */
    int torch_conf_known;
    char torch_alloc_conf[512];
} gmp_cli_input;

/* The kind of recording the head of a file begins, GMP_CLI_INPUT_UNKNOWN for none. */
gmp_cli_input_kind gmp_cli_input_probe(const void *head, size_t n);
/* "gpumemprof trace", "PyTorch memory snapshot", "Nsight Systems SQLite export". */
const char *gmp_cli_input_kind_name(gmp_cli_input_kind kind);
/* Short names: "trace", "pytorch", "nsys" ("unknown"). */
const char *gmp_cli_input_kind_id(gmp_cli_input_kind kind);
/* What an importable kind is, for import's --help: "PyTorch memory snapshot
 * (torch.cuda.memory._dump_snapshot)"; NULL for the others. */
const char *gmp_cli_input_kind_what(gmp_cli_input_kind kind);

/* The message for a file that is no recording: "not a gpumemprof trace, a PyTorch memory snapshot
 * (pickle) or an Nsight Systems SQLite export (it begins with "...")" ("(it is empty)" when n is
 * 0). */
void gmp_cli_input_unknown_msg(const void *head, size_t n, char *msg, size_t msglen);

/* Imports the file in_path of an importable kind (TORCH, NSYS) as a trace into out_fd (owned from
 * now on: closed). On success msg holds the importer's one-line summary, else the error line. */
gmp_err gmp_cli_input_import(gmp_cli_input_kind kind, const char *in_path, int out_fd, char *msg,
                             size_t msglen);

/* Opens the recording at path: probes it and imports a foreign one. On failure returns an error
 * with one line in msg (without the path: callers print "gpumemprof CMD: PATH: msg") and in needs
 * no close. */
gmp_err gmp_cli_input_open(gmp_cli_input *in, const char *path, char *msg, size_t msglen);
/* gmp_cli_input_open with flags. An imported trace is written stored (not compressed: faster to
 * write and to read back; trace_bytes is its size) unless GMP_CLI_INPUT_COMPRESSED asks for it
 * compressed as `gpumemprof import` writes it (info and dump show its size). */
#define GMP_CLI_INPUT_COMPRESSED 1u
/* STREAM: a PyTorch snapshot is read (every error of the reading returned by the open), then its
 * trace is written by a thread into a queue of frames (gmp_tq.h: no file, no framing, no
 * checksums) that the one reader reads as it is written, so that the writing and the reading
 * overlap (and no temporary file holds the trace). For a command that
 * opens one reader per input and reads it to the end, once (report); it then calls
 * gmp_cli_input_finish for the writing's outcome. trace_bytes is an estimate (from the events).
 * Such an input is never shared (gmp_cli_input_share). Snapshots under 8 MiB, other kinds, and
 * any input under RLIMIT_DATA or RLIMIT_AS open as without it. */
#define GMP_CLI_INPUT_STREAM 2u
gmp_err gmp_cli_input_open_flags(gmp_cli_input *in, const char *path, unsigned flags, char *msg,
                                 size_t msglen);
/* A reader over the input's trace, from its first record (any number, one after the other or at
 * once). On failure the reader's message goes into msg. */
gmp_err gmp_cli_input_reader(const gmp_cli_input *in, gmp_reader **r, const gmp_reader_opts *opts,
                             char *msg, size_t msglen);
/* GMP_CLI_INPUT_STREAM: after its reader has read to the end (and been closed), waits for the
 * writing and returns its outcome, with one line in msg on failure (GMP_OK at once for an input
 * that is not streamed). Safe twice. */
gmp_err gmp_cli_input_finish(gmp_cli_input *in, char *msg, size_t msglen);
/* Closes the imported trace (it disappears with its last descriptor; a streamed one's writing is
 * stopped and waited for). Safe twice. */
void gmp_cli_input_close(gmp_cli_input *in);

/* While an open input is shared, gmp_cli_input_open of the same path (the same string) gives a
 * copy of it reading the same imported trace (a descriptor of its own) instead of importing the
 * file again: diagnose opens each recording once and runs several reports on it. At most 8 at
 * once (more are not shared: imported again); unshare before closing. */
void gmp_cli_input_share(const gmp_cli_input *in);
void gmp_cli_input_unshare(const gmp_cli_input *in);

/* Opens every path of paths[0..n) into ins[0..n) (a calloc'd array returned in *out); on the first
 * failure prints "gpumemprof CMD: PATH: msg" on stderr, closes what was opened and returns 1. */
int gmp_cli_inputs_open(const char *cmd, char **paths, size_t n, gmp_cli_input **out);
/* The same with gmp_cli_input_open_flags' flags. */
int gmp_cli_inputs_open_flags(const char *cmd, char **paths, size_t n, unsigned flags,
                              gmp_cli_input **out);
void gmp_cli_inputs_close(gmp_cli_input *ins, size_t n);

#endif
