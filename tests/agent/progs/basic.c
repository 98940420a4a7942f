/* A small CUDA program with modes, for the tests of `gpumemprof run` and of the agent's life
 * cycle:
 *   alloc N     N cudaMalloc of 1 MiB, then their frees; prints a line per call
 *   exit K      one allocation, then exit(K)
 *   sigterm     one allocation, then raise(SIGTERM) (default action)
 *   wait        one allocation, prints "ready", waits for a signal
 *   loop        prints "ready <pid>", then allocates and frees 4 KiB every 100 us, for ever
 *   fork        allocates, forks a child that tries to allocate and exits, waits for it, then
 *               allocates and frees again */
#include <cuda_runtime_api.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "prog_util.h"

#define MIB (1024ull * 1024ull)

static void *one(size_t n)
{
    void *p = NULL;
    CHECK(cudaMalloc(&p, n), cudaSuccess);
    return p;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: basic alloc N | exit K | sigterm | wait | loop | fork\n");
        return 2;
    }
    const char *mode = argv[1];
    long arg = argc > 2 ? strtol(argv[2], NULL, 10) : 0;
    if (!strcmp(mode, "alloc")) {
        void *ps[64];
        EXPECT(arg >= 0 && arg <= 64);
        for (long i = 0; i < arg; i++) {
            ps[i] = one(MIB);
            printf("alloc %ld\n", i);
        }
        for (long i = 0; i < arg; i++)
            CHECK(cudaFree(ps[i]), cudaSuccess);
        printf("basic: ok\n");
        return 0;
    }
    if (!strcmp(mode, "exit")) {
        one(4096);
        printf("exiting with %ld\n", arg);
        exit((int)arg);
    }
    if (!strcmp(mode, "sigterm")) {
        one(4096);
        printf("raising SIGTERM\n");
        fflush(stdout);
        raise(SIGTERM);
        return 0;
    }
    if (!strcmp(mode, "wait")) {
        one(4096);
        printf("ready\n");
        fflush(stdout);
        for (;;)
            pause();
    }
    if (!strcmp(mode, "loop")) {
        void *p = one(4096);
        CHECK(cudaFree(p), cudaSuccess);
        printf("ready %ld\n", (long)getpid());
        fflush(stdout);
        struct timespec ts = {0, 100000};
        for (;;) {
            p = one(4096);
            CHECK(cudaFree(p), cudaSuccess);
            nanosleep(&ts, NULL);
        }
    }
    if (!strcmp(mode, "fork")) {
        void *p1 = one(1 * MIB);
        SHOWP("p1", p1);
        fflush(stdout);
        pid_t pid = fork();
        EXPECT(pid >= 0);
        if (pid == 0) {
            /* CUDA cannot be used after fork in reality; simcuda lets the call through, and the
             * agent must not record it into the parent's trace */
            void *c = NULL;
            int rc = cudaMalloc(&c, 2 * MIB);
            printf("child: pid %ld\n", (long)getpid());
            printf("child: cudaMalloc returned %d\n", rc);
            fflush(stdout);
            exit(0); /* exit handlers run in the child too */
        }
        int st = 0;
        EXPECT(waitpid(pid, &st, 0) == pid);
        EXPECT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        void *p2 = one(3 * MIB);
        SHOWP("p2", p2);
        CHECK(cudaFree(p2), cudaSuccess);
        CHECK(cudaFree(p1), cudaSuccess);
        printf("parent: ok\n");
        return 0;
    }
    fprintf(stderr, "basic: unknown mode %s\n", mode);
    return 2;
}
