/* Bare two-thread cache-line ping-pong: the floor for any shared-memory round trip on
 * this machine. Thread A writes a counter and spins until thread B echoes it back; each
 * echo is one round trip. Prints the median round trip in nanoseconds over batches.
 * The two threads are pinned to CPUs 0 and 1.
 * Usage: cacheline_pingpong SECONDS */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static _Alignas(128) _Atomic unsigned long ping;
static _Alignas(128) _Atomic unsigned long pong;
static _Alignas(128) _Atomic int stop;

/* The spin-wait hint (x86 PAUSE), as any well-behaved spinner uses. */
static inline void relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void pin(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

static void *echo(void *arg) {
    (void)arg;
    pin(1);
    unsigned long seen = 0;
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        unsigned long v = atomic_load_explicit(&ping, memory_order_acquire);
        if (v != seen) {
            seen = v;
            atomic_store_explicit(&pong, v, memory_order_release);
        } else {
            relax();
        }
    }
    return NULL;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 1.0;
    pthread_t t;
    pin(0);
    pthread_create(&t, NULL, echo, NULL);
    enum { BATCH = 10000, MAXB = 100000 };
    static double per_trip[MAXB];
    int batches = 0;
    unsigned long n = 0;
    double t0 = now();
    while (now() - t0 < secs && batches < MAXB) {
        double b0 = now();
        for (int i = 0; i < BATCH; i++) {
            n++;
            atomic_store_explicit(&ping, n, memory_order_release);
            while (atomic_load_explicit(&pong, memory_order_acquire) != n) {
                relax();
            }
        }
        per_trip[batches++] = (now() - b0) / BATCH * 1e9;
    }
    atomic_store(&stop, 1);
    pthread_join(t, NULL);
    qsort(per_trip, batches, sizeof per_trip[0], cmp);
    printf("%.1f\n", per_trip[batches / 2]);
    return 0;
}
