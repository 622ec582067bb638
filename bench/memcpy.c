/* Single-thread memcpy bandwidth at a given block size: the physical limit for any
 * transport that copies (every one here copies at least once). Prints bytes/second.
 * Usage: memcpy BLOCK_BYTES SECONDS */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    size_t block = argc > 1 ? strtoull(argv[1], NULL, 10) : 1 << 20;
    double secs = argc > 2 ? atof(argv[2]) : 1.0;
    char *src = malloc(block), *dst = malloc(block);
    if (!src || !dst) return 1;
    memset(src, 0xa5, block);
    memset(dst, 0, block);
    unsigned long long bytes = 0;
    double t0 = now(), t;
    do {
        for (int i = 0; i < 16; i++) {
            memcpy(dst, src, block);
            __asm__ volatile("" : : "r"(dst) : "memory");
            bytes += block;
        }
        t = now();
    } while (t - t0 < secs);
    printf("%.0f\n", bytes / (t - t0));
    return 0;
}
