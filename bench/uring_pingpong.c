/* uring_pingpong.c - the bare round-trip loops `pingpong -e io-uring` and
 * `pingpong -e blocking` are compared with: a client process sends SIZE bytes and waits
 * for SIZE bytes back, a server process echoes them, over a TCP connection on 127.0.0.1
 * (TCP_NODELAY) or a Unix stream socket pair.
 *
 * Methods:
 *   blocking   send(2) and recv(2), one call each.
 *   io-uring   what a careful io_uring program does for one connection and what sockbench's
 *              engine does: the descriptor registered as a fixed file; the ring set up
 *              with SINGLE_ISSUER | DEFER_TASKRUN where the kernel has them; the send of a
 *              request (or an answer) queued and submitted with the receive that follows,
 *              in one io_uring_enter; the receive asks to arm its poll first
 *              (IORING_RECVSEND_POLL_FIRST), since nothing can have arrived yet.
 *   multishot  as io-uring, but one multishot receive (IORING_RECV_MULTISHOT) stays armed
 *              into a ring of provided buffers, and the bytes are copied out of them.
 *
 * After WARMUP seconds the client times every round trip for SECONDS more (CLOCK_MONOTONIC
 * before the send and after the last byte of the answer) and prints:
 *
 *   method=M transport=T round_trips=N p50_us=X p99_us=Y
 *
 * Build: gcc -O2 -o uring_pingpong bench/uring_pingpong.c -luring   (liburing-dev)
 * Run:   ./uring_pingpong blocking|io-uring|multishot tcp|unix SIZE SECONDS WARMUP
 *            CLIENT_CPU SERVER_CPU
 * bench/uring_vs_c.sh builds it and runs it against sockbench. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SEND_TAG 1
#define RECV_TAG 2
#define BUFS 16
#define BUF_SIZE 65536
#define GROUP 1

enum method { BLOCKING, URING, MULTISHOT };

static enum method method;
static struct io_uring ring;
static char queued[BUF_SIZE]; /* the ring's copy of a queued send */
static int send_pending;
static struct io_uring_buf_ring *provided;
static char *provided_mem;
static int multishot_armed;
static char carry[BUF_SIZE * BUFS]; /* bytes received but not yet asked for */
static size_t carry_len, carry_off;

static void die(const char *what) {
    perror(what);
    exit(1);
}

static void fail(const char *what, int res) {
    fprintf(stderr, "%s: %s\n", what, strerror(-res));
    exit(1);
}

static void pin(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set)) die("sched_setaffinity");
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Make the ring of the calling process (the thread that submits must be the one that
 * made it, for SINGLE_ISSUER) and register the descriptor as fixed file 0. */
static void ring_setup(int fd) {
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    p.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
    if (io_uring_queue_init_params(16, &ring, &p) < 0) {
        memset(&p, 0, sizeof p);
        int r = io_uring_queue_init_params(16, &ring, &p);
        if (r < 0) fail("io_uring_queue_init", r);
    }
    int r = io_uring_register_files(&ring, &fd, 1);
    if (r < 0) fail("io_uring_register_files", r);
    if (method == MULTISHOT) {
        provided = aligned_alloc(4096, 4096);
        provided_mem = aligned_alloc(4096, (size_t)BUFS * BUF_SIZE);
        if (!provided || !provided_mem) die("aligned_alloc");
        memset(provided, 0, 4096);
        struct io_uring_buf_reg reg = {
            .ring_addr = (unsigned long)provided, .ring_entries = BUFS, .bgid = GROUP};
        r = io_uring_register_buf_ring(&ring, &reg, 0);
        if (r < 0) fail("io_uring_register_buf_ring", r);
        io_uring_buf_ring_init(provided);
        for (int i = 0; i < BUFS; i++)
            io_uring_buf_ring_add(provided, provided_mem + (size_t)i * BUF_SIZE, BUF_SIZE, i,
                                  io_uring_buf_ring_mask(BUFS), i);
        io_uring_buf_ring_advance(provided, BUFS);
    }
}

/* Publish the queued entries to the kernel without entering it; returns how many the
 * kernel has not consumed yet. */
static unsigned publish(void) {
    unsigned tail = ring.sq.sqe_tail;
    if (ring.sq.sqe_head != tail) {
        ring.sq.sqe_head = tail;
        io_uring_smp_store_release(ring.sq.ktail, tail);
    }
    return tail - *ring.sq.khead;
}

/* One io_uring_enter: submit what is queued and wait for `want` completions. */
static void enter(unsigned submit, unsigned want) {
    int r = io_uring_enter(ring.ring_fd, submit, want, IORING_ENTER_GETEVENTS, NULL);
    if (r < 0 && r != -EINTR && r != -EAGAIN && r != -EBUSY) fail("io_uring_enter", r);
}

static void uring_send(const char *buf, size_t n) {
    memcpy(queued, buf, n);
    struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
    io_uring_prep_send(sqe, 0, queued, n, MSG_WAITALL | MSG_NOSIGNAL);
    sqe->flags |= IOSQE_FIXED_FILE;
    sqe->user_data = SEND_TAG;
    send_pending = 1;
}

static void sent(const struct io_uring_cqe *cqe) {
    if (cqe->res < 0) fail("send", cqe->res);
    send_pending = 0;
}

static ssize_t uring_recv(char *buf, size_t n) {
    struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
    io_uring_prep_recv(sqe, 0, buf, n, 0);
    sqe->flags |= IOSQE_FIXED_FILE;
    if (send_pending) sqe->ioprio |= IORING_RECVSEND_POLL_FIRST;
    sqe->user_data = RECV_TAG;
    unsigned submit = publish(), want = 1 + (unsigned)send_pending;
    ssize_t res = 0;
    for (;;) {
        enter(submit, want);
        submit = 0;
        struct io_uring_cqe *cqe;
        unsigned head, seen = 0;
        io_uring_for_each_cqe(&ring, head, cqe) {
            seen++;
            if (cqe->user_data == SEND_TAG) {
                sent(cqe);
            } else {
                res = cqe->res;
            }
            want--;
        }
        io_uring_cq_advance(&ring, seen);
        if (want == 0) return res;
    }
}

static ssize_t multishot_recv(char *buf, size_t n) {
    for (;;) {
        if (carry_len > carry_off) {
            size_t k = carry_len - carry_off < n ? carry_len - carry_off : n;
            memcpy(buf, carry + carry_off, k);
            carry_off += k;
            if (carry_off == carry_len) carry_off = carry_len = 0;
            return (ssize_t)k;
        }
        if (!multishot_armed) {
            struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
            io_uring_prep_recv_multishot(sqe, 0, NULL, 0, 0);
            sqe->flags |= IOSQE_FIXED_FILE | IOSQE_BUFFER_SELECT;
            sqe->buf_group = GROUP;
            sqe->user_data = RECV_TAG;
            multishot_armed = 1;
        }
        unsigned submit = publish();
        int got = 0;
        while (!got || send_pending) {
            enter(submit, 1);
            submit = 0;
            struct io_uring_cqe *cqe;
            unsigned head, seen = 0;
            io_uring_for_each_cqe(&ring, head, cqe) {
                seen++;
                if (cqe->user_data == SEND_TAG) {
                    sent(cqe);
                    continue;
                }
                if (!(cqe->flags & IORING_CQE_F_MORE)) multishot_armed = 0;
                if (cqe->res == -ENOBUFS) continue;
                if (cqe->res <= 0) {
                    io_uring_cq_advance(&ring, seen);
                    return cqe->res;
                }
                int bid = (int)(cqe->flags >> IORING_CQE_BUFFER_SHIFT);
                char *from = provided_mem + (size_t)bid * BUF_SIZE;
                memcpy(carry + carry_len, from, (size_t)cqe->res);
                carry_len += (size_t)cqe->res;
                got = 1;
                io_uring_buf_ring_add(provided, from, BUF_SIZE, bid, io_uring_buf_ring_mask(BUFS), 0);
                io_uring_buf_ring_advance(provided, 1);
            }
            io_uring_cq_advance(&ring, seen);
        }
    }
}

static ssize_t xrecv(int fd, char *buf, size_t n) {
    switch (method) {
    case BLOCKING: return recv(fd, buf, n, 0);
    case URING: return uring_recv(buf, n);
    default: return multishot_recv(buf, n);
    }
}

static void xsend(int fd, const char *buf, size_t n) {
    if (method != BLOCKING) {
        uring_send(buf, n);
    } else if (send(fd, buf, n, MSG_NOSIGNAL) != (ssize_t)n) {
        die("send");
    }
}

/* All of n bytes; 0 at the end of the stream. */
static ssize_t recv_all(int fd, char *buf, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = xrecv(fd, buf + got, n - got);
        /* blocking: -1 and errno; the rings: the negated errno */
        int err = r >= 0 ? 0 : method == BLOCKING ? errno : (int)-r;
        if (err == EINTR) continue;
        if (err) fail("recv", -err);
        if (r == 0) return 0;
        got += (size_t)r;
    }
    return (ssize_t)got;
}

static void flush_send(void) {
    if (method == BLOCKING || !send_pending) return;
    unsigned submit = publish();
    while (send_pending) {
        enter(submit, 1);
        submit = 0;
        struct io_uring_cqe *cqe;
        unsigned head, seen = 0;
        io_uring_for_each_cqe(&ring, head, cqe) {
            seen++;
            if (cqe->user_data == SEND_TAG) sent(cqe);
        }
        io_uring_cq_advance(&ring, seen);
    }
}

static int cmp(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc != 8) {
        fprintf(stderr,
                "usage: %s blocking|io-uring|multishot tcp|unix SIZE SECONDS WARMUP CLIENT_CPU SERVER_CPU\n",
                argv[0]);
        return 2;
    }
    if (!strcmp(argv[1], "blocking")) method = BLOCKING;
    else if (!strcmp(argv[1], "io-uring")) method = URING;
    else if (!strcmp(argv[1], "multishot")) method = MULTISHOT;
    else return 2;
    int tcp = !strcmp(argv[2], "tcp");
    size_t size = (size_t)atol(argv[3]);
    double secs = atof(argv[4]), warm = atof(argv[5]);
    int client_cpu = atoi(argv[6]), server_cpu = atoi(argv[7]);
    if (size < 1 || size > BUF_SIZE || secs <= 0) return 2;

    int fds[2];
    if (!tcp) {
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds)) die("socketpair");
    } else {
        int one = 1;
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t len = sizeof a;
        int l = socket(AF_INET, SOCK_STREAM, 0);
        if (l < 0) die("socket");
        if (bind(l, (struct sockaddr *)&a, sizeof a) || getsockname(l, (struct sockaddr *)&a, &len) ||
            listen(l, 1))
            die("listen");
        fds[0] = socket(AF_INET, SOCK_STREAM, 0);
        if (fds[0] < 0 || connect(fds[0], (struct sockaddr *)&a, sizeof a)) die("connect");
        fds[1] = accept(l, NULL, NULL);
        if (fds[1] < 0) die("accept");
        close(l);
        for (int i = 0; i < 2; i++)
            if (setsockopt(fds[i], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one)) die("TCP_NODELAY");
    }
    static char buf[BUF_SIZE];
    memset(buf, 0x5A, size);

    pid_t server = fork();
    if (server < 0) die("fork");
    if (server == 0) {
        close(fds[0]);
        pin(server_cpu);
        if (method != BLOCKING) ring_setup(fds[1]);
        while (recv_all(fds[1], buf, size) > 0) xsend(fds[1], buf, size);
        flush_send();
        _exit(0);
    }
    close(fds[1]);
    pin(client_cpu);
    if (method != BLOCKING) ring_setup(fds[0]);
    size_t cap = 20000000, n = 0;
    float *lat = malloc(cap * sizeof *lat);
    if (!lat) die("malloc");
    double t0 = now(), from = t0 + warm, until = from + secs;
    for (;;) {
        double s = now();
        if (s >= until) break;
        xsend(fds[0], buf, size);
        if (recv_all(fds[0], buf, size) == 0) {
            fprintf(stderr, "the server closed the connection\n");
            return 1;
        }
        if (s >= from && n < cap) lat[n++] = (float)((now() - s) * 1e6);
    }
    flush_send();
    shutdown(fds[0], SHUT_WR);
    int status;
    waitpid(server, &status, 0);
    if (n == 0) {
        fprintf(stderr, "no round trip was timed\n");
        return 1;
    }
    qsort(lat, n, sizeof *lat, cmp);
    printf("method=%s transport=%s round_trips=%zu p50_us=%.3f p99_us=%.3f\n", argv[1], argv[2], n,
           (double)lat[n / 2], (double)lat[n * 99 / 100]);
    return 0;
}
