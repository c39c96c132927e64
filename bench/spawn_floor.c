/* The floor for launching short tasks here: T threads, each a loop of
 * posix_spawn + waitpid of one program, N runs in all. What any launcher
 * adds is measured against this.
 *
 *   cc -O2 -pthread -o spawn_floor bench/spawn_floor.c
 *   ./spawn_floor N THREADS PROGRAM
 */
#include <pthread.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

extern char **environ;

static atomic_long left;
static const char *program;

static void *loop(void *unused) {
    (void)unused;
    char *argv[] = {(char *)program, NULL};
    while (atomic_fetch_sub(&left, 1) > 0) {
        pid_t pid;
        if (posix_spawn(&pid, program, NULL, NULL, argv, environ) != 0) {
            perror("posix_spawn");
            exit(1);
        }
        int status;
        if (waitpid(pid, &status, 0) < 0) {
            perror("waitpid");
            exit(1);
        }
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s N THREADS PROGRAM\n", argv[0]);
        return 2;
    }
    atomic_store(&left, atol(argv[1]));
    int threads = atoi(argv[2]);
    program = argv[3];
    pthread_t t[256];
    if (threads < 1 || threads > 256) {
        fprintf(stderr, "THREADS must be 1..256\n");
        return 2;
    }
    for (int i = 0; i < threads; i++)
        pthread_create(&t[i], NULL, loop, NULL);
    for (int i = 0; i < threads; i++)
        pthread_join(t[i], NULL);
    return 0;
}
