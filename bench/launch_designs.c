/* Three shapes of a launcher, with nothing else to do, to tell what the
 * shape costs from what a launcher's own work costs (issue 21). Each runs
 * N copies of PROGRAM, T at a time, each child bound to its slot's CPU when
 * BIND is set (as slurp binds a task to its cores):
 *
 *   floor    T threads, each a loop of spawn + waitpid: the kernel wakes the
 *            thread whose child ended, on that child's CPU (spawn_floor.c
 *            with binding).
 *   loop     one thread keeps T children running, watching each through a
 *            pidfd in one epoll set: slurp's shape (one event loop that
 *            every end and start goes through).
 *   handoff  T runner threads spawn and reap, one coordinating thread
 *            decides what each starts next: every task passes from a runner
 *            to the coordinator and back (an eventfd each way).
 *
 *   cc -O2 -pthread -o launch_designs bench/launch_designs.c
 *   ./launch_designs MODE N T PROGRAM        (bench/launch_designs.sh runs them)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static const char *program;
static int bind_children;
static int slots;

static void die(const char *what) {
    perror(what);
    exit(1);
}

/* Starts PROGRAM bound to `cpu` (when binding and `rebind`): the calling
 * thread binds itself around the spawn, so the child is born on its CPU. A
 * thread bound for good passes `rebind` 0. */
static pid_t start_on(int cpu, int rebind) {
    char *argv[] = {(char *)program, NULL};
    cpu_set_t all, one;
    rebind = rebind && bind_children;
    if (rebind) {
        sched_getaffinity(0, sizeof all, &all);
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        sched_setaffinity(0, sizeof one, &one);
    }
    pid_t pid;
    int err = posix_spawn(&pid, program, NULL, NULL, argv, environ);
    if (rebind)
        sched_setaffinity(0, sizeof all, &all);
    if (err != 0) {
        errno = err;
        die("posix_spawn");
    }
    return pid;
}

static pid_t start(int cpu) { return start_on(cpu, 1); }

static void reap(pid_t pid) {
    int status;
    if (waitpid(pid, &status, 0) < 0)
        die("waitpid");
}

/* floor */
static atomic_long left;

static void *floor_thread(void *arg) {
    int cpu = (int)(long)arg;
    if (bind_children) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        pthread_setaffinity_np(pthread_self(), sizeof one, &one);
    }
    /* The thread itself is bound: its children are born bound. */
    while (atomic_fetch_sub(&left, 1) > 0)
        reap(start_on(cpu, 0));
    return NULL;
}

/* loop */

/* Starts slot k's next child and watches it through a pidfd in `ep`. */
static void start_watched(int ep, int k, pid_t *pids, int *fds) {
    pids[k] = start(k);
    fds[k] = (int)syscall(SYS_pidfd_open, pids[k], 0);
    struct epoll_event e = {.events = EPOLLIN, .data.u32 = (uint32_t)k};
    if (fds[k] < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fds[k], &e) < 0)
        die("pidfd");
}

static void one_loop(long n) {
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0)
        die("epoll_create1");
    pid_t pids[256];
    int fds[256];
    long started = 0, ended = 0;
    for (int k = 0; k < slots && started < n; k++, started++)
        start_watched(ep, k, pids, fds);
    while (ended < n) {
        struct epoll_event es[256];
        int m = epoll_wait(ep, es, 256, -1);
        for (int i = 0; i < m; i++) {
            int k = (int)es[i].data.u32;
            reap(pids[k]);
            epoll_ctl(ep, EPOLL_CTL_DEL, fds[k], NULL);
            close(fds[k]);
            ended++;
            if (started < n) {
                started++;
                start_watched(ep, k, pids, fds);
            }
        }
    }
}

/* handoff */
static int to_runner[256], from_runner[256];

static void *runner(void *arg) {
    int k = (int)(long)arg;
    for (;;) {
        uint64_t v;
        if (read(to_runner[k], &v, 8) != 8 || v == 2)
            return NULL;
        reap(start(k));
        v = 1;
        if (write(from_runner[k], &v, 8) != 8)
            die("write");
    }
}

static void handoff(long n) {
    int ep = epoll_create1(EPOLL_CLOEXEC);
    pthread_t t[256];
    for (long k = 0; k < slots; k++) {
        to_runner[k] = eventfd(0, EFD_CLOEXEC);
        from_runner[k] = eventfd(0, EFD_CLOEXEC);
        struct epoll_event e = {.events = EPOLLIN, .data.u32 = (uint32_t)k};
        if (to_runner[k] < 0 || from_runner[k] < 0 ||
            epoll_ctl(ep, EPOLL_CTL_ADD, from_runner[k], &e) < 0)
            die("eventfd");
        if (pthread_create(&t[k], NULL, runner, (void *)k) != 0)
            die("pthread_create");
    }
    long started = 0, ended = 0;
    uint64_t go = 1, stop = 2;
    for (int k = 0; k < slots && started < n; k++, started++)
        if (write(to_runner[k], &go, 8) != 8)
            die("write");
    while (ended < n) {
        struct epoll_event es[256];
        int m = epoll_wait(ep, es, 256, -1);
        for (int i = 0; i < m; i++) {
            int k = (int)es[i].data.u32;
            uint64_t v;
            if (read(from_runner[k], &v, 8) != 8)
                die("read");
            ended += (long)v;
            if (started < n) {
                started++;
                if (write(to_runner[k], &go, 8) != 8)
                    die("write");
            }
        }
    }
    for (int k = 0; k < slots; k++) {
        if (write(to_runner[k], &stop, 8) != 8)
            die("write");
        pthread_join(t[k], NULL);
    }
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s floor|loop|handoff N T PROGRAM (BIND=1: bind each child)\n", argv[0]);
        return 2;
    }
    long n = atol(argv[2]);
    slots = atoi(argv[3]);
    program = argv[4];
    bind_children = getenv("BIND") != NULL && strcmp(getenv("BIND"), "0") != 0;
    if (slots < 1 || slots > 256 || slots > CPU_SETSIZE) {
        fprintf(stderr, "T must be 1..256\n");
        return 2;
    }
    if (!strcmp(argv[1], "floor")) {
        atomic_store(&left, n);
        pthread_t t[256];
        for (long k = 0; k < slots; k++)
            if (pthread_create(&t[k], NULL, floor_thread, (void *)k) != 0)
                die("pthread_create");
        for (int k = 0; k < slots; k++)
            pthread_join(t[k], NULL);
    } else if (!strcmp(argv[1], "loop")) {
        one_loop(n);
    } else if (!strcmp(argv[1], "handoff")) {
        handoff(n);
    } else {
        fprintf(stderr, "unknown mode %s\n", argv[1]);
        return 2;
    }
    return 0;
}
