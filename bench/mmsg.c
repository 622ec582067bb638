/* mmsg.c - the bare loop `rate --batch` is compared with: a sender thread that sends
 * BATCH datagrams of SIZE bytes per sendmmsg, and a receiver thread that takes up to
 * BATCH per recvmmsg(MSG_WAITFORONE), over UDP on 127.0.0.1 or a Unix datagram socket
 * pair. Each datagram carries a 64-bit sequence number in its first 8 bytes (as
 * sockbench's do); the receiver only counts them. Both threads are left where the
 * scheduler puts them, like sockbench's roles, unless two CPUs are given.
 *
 * After WARMUP seconds the receiver notes its count and the time, after SECONDS more it
 * notes them again, and prints the messages it received per second in between:
 *
 *   received=N seconds=T per_second=R sent=S calls_sent=C calls_received=D
 *
 * Build: cc -O2 -pthread -o mmsg bench/mmsg.c
 * Run:   ./mmsg udp|unix BATCH SIZE SECONDS [WARMUP [SENDER_CPU RECEIVER_CPU]]
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int tx_fd, rx_fd, batch;
static size_t size;
static atomic_int measuring, stop, sender_done;
static uint64_t sent, calls_sent, calls_received;
static uint64_t count0, count1;
static struct timespec t0, t1;

static void die(const char *what) {
    perror(what);
    exit(1);
}

static void pin(int cpu) {
    if (cpu < 0) return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (pthread_setaffinity_np(pthread_self(), sizeof set, &set)) die("pthread_setaffinity_np");
}

static double seconds(struct timespec a, struct timespec b) {
    return (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
}

static void *sender(void *arg) {
    pin(*(int *)arg);
    char *buf = aligned_alloc(4096, ((size * batch + 4095) / 4096) * 4096);
    struct mmsghdr *hdrs = calloc(batch, sizeof *hdrs);
    struct iovec *iovs = calloc(batch, sizeof *iovs);
    if (!buf || !hdrs || !iovs) die("alloc");
    memset(buf, 0xC3, size * batch);
    for (int i = 0; i < batch; i++) {
        iovs[i].iov_base = buf + (size_t)i * size;
        iovs[i].iov_len = size;
        hdrs[i].msg_hdr.msg_iov = &iovs[i];
        hdrs[i].msg_hdr.msg_iovlen = 1;
    }
    uint64_t seq = 0;
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        for (int i = 0; i < batch; i++) {
            uint64_t s = seq + i;
            memcpy(buf + (size_t)i * size, &s, size < 8 ? size : 8);
        }
        int off = 0;
        while (off < batch) {
            int n = sendmmsg(tx_fd, hdrs + off, batch - off, 0);
            if (n < 0) {
                if (errno == EINTR) continue;
                die("sendmmsg");
            }
            off += n;
            calls_sent++;
        }
        seq += batch;
    }
    sent = seq;
    atomic_store(&sender_done, 1);
    return NULL;
}

static void *receiver(void *arg) {
    pin(*(int *)arg);
    char *buf = aligned_alloc(4096, ((size * batch + 4095) / 4096) * 4096);
    struct mmsghdr *hdrs = calloc(batch, sizeof *hdrs);
    struct iovec *iovs = calloc(batch, sizeof *iovs);
    if (!buf || !hdrs || !iovs) die("alloc");
    memset(buf, 0, size * batch);
    for (int i = 0; i < batch; i++) {
        iovs[i].iov_base = buf + (size_t)i * size;
        iovs[i].iov_len = size;
        hdrs[i].msg_hdr.msg_iov = &iovs[i];
        hdrs[i].msg_hdr.msg_iovlen = 1;
    }
    uint64_t count = 0;
    int phase = 0; /* 0: warming up, 1: measuring, 2: done, draining */
    for (;;) {
        int n = recvmmsg(rx_fd, hdrs, batch, MSG_WAITFORONE, NULL);
        if (n < 0 && errno != EAGAIN && errno != EINTR) die("recvmmsg");
        if (n > 0) {
            count += n;
            calls_received++;
        }
        if (phase == 0 && atomic_load_explicit(&measuring, memory_order_relaxed)) {
            clock_gettime(CLOCK_MONOTONIC, &t0);
            count0 = count;
            phase = 1;
        }
        if (phase == 1 && atomic_load_explicit(&stop, memory_order_relaxed)) {
            clock_gettime(CLOCK_MONOTONIC, &t1);
            count1 = count;
            phase = 2;
        }
        if (phase == 2 && atomic_load(&sender_done)) break;
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: %s udp|unix BATCH SIZE SECONDS [WARMUP [SENDER_CPU RECEIVER_CPU]]\n", argv[0]);
        return 2;
    }
    batch = atoi(argv[2]);
    size = (size_t)atol(argv[3]);
    double secs = atof(argv[4]), warm = argc > 5 ? atof(argv[5]) : 0.25;
    int cpus[2] = {argc > 7 ? atoi(argv[6]) : -1, argc > 7 ? atoi(argv[7]) : -1};
    if (batch < 1 || batch > 1024 || size < 1 || secs <= 0) return 2;
    if (!strcmp(argv[1], "udp")) {
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t len = sizeof a;
        rx_fd = socket(AF_INET, SOCK_DGRAM, 0);
        tx_fd = socket(AF_INET, SOCK_DGRAM, 0);
        if (rx_fd < 0 || tx_fd < 0) die("socket");
        if (bind(rx_fd, (struct sockaddr *)&a, sizeof a)) die("bind");
        if (getsockname(rx_fd, (struct sockaddr *)&a, &len)) die("getsockname");
        if (connect(tx_fd, (struct sockaddr *)&a, sizeof a)) die("connect");
        len = sizeof a;
        if (getsockname(tx_fd, (struct sockaddr *)&a, &len)) die("getsockname");
        if (connect(rx_fd, (struct sockaddr *)&a, sizeof a)) die("connect");
    } else if (!strcmp(argv[1], "unix")) {
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_DGRAM, 0, sv)) die("socketpair");
        tx_fd = sv[0];
        rx_fd = sv[1];
    } else {
        return 2;
    }
    /* The receiver wakes now and then to see whether the run is over. */
    struct timeval tv = {.tv_sec = 0, .tv_usec = 50000};
    if (setsockopt(rx_fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv)) die("SO_RCVTIMEO");
    pthread_t s, r;
    if (pthread_create(&r, NULL, receiver, &cpus[1])) die("pthread_create");
    if (pthread_create(&s, NULL, sender, &cpus[0])) die("pthread_create");
    struct timespec w = {.tv_sec = (time_t)warm, .tv_nsec = (long)((warm - (time_t)warm) * 1e9)};
    nanosleep(&w, NULL);
    atomic_store(&measuring, 1);
    struct timespec d = {.tv_sec = (time_t)secs, .tv_nsec = (long)((secs - (time_t)secs) * 1e9)};
    nanosleep(&d, NULL);
    atomic_store(&stop, 1);
    pthread_join(s, NULL);
    pthread_join(r, NULL);
    double t = seconds(t0, t1);
    uint64_t got = count1 - count0;
    printf("received=%llu seconds=%.6f per_second=%.0f sent=%llu calls_sent=%llu calls_received=%llu\n",
           (unsigned long long)got, t, got / t, (unsigned long long)sent,
           (unsigned long long)calls_sent, (unsigned long long)calls_received);
    return 0;
}
