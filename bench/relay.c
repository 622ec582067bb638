/* Bare TCP relay: the floor `sockbench relay`'s copy methods are held to (each within
 * 0.95x of this doing the same calls). Accepts connections on 127.0.0.1:LISTEN_PORT,
 * connects each to 127.0.0.1:TARGET_PORT and copies both directions, a thread per
 * direction, until that side's EOF, then shutdown(SHUT_WR); when both directions are
 * done it closes the pair. Sockets stay blocking except for epoll. On SIGINT or SIGTERM
 * it prints one line to stdout and exits:
 *   bytes=N connections=N calls=N ops=N read=N write=N ...
 * bytes: written to the far side (both directions); calls: the system calls that moved
 * them (read, write, readv, writev, splice, io_uring_enter; failed ones too, EAGAIN
 * included; not epoll_wait, printed on its own); ops: data operations, ring ones too.
 *
 * Methods (BUFFER default 64K, PIPE_SIZE default 64K; sizes in bytes or with K/M):
 *   read-write       read(2) into one BUFFER-byte buffer, write(2) all of it out
 *   vectored         readv(2)/writev(2) over 4 iovecs making up BUFFER
 *   buffered         a reader and a writer buffer of BUFFER bytes each, as Go's bufio:
 *                    read into the reader buffer, copy into the writer buffer, write it
 *                    when full or when the reader buffer is drained (nothing more now)
 *   splice           splice(2) socket -> pipe -> socket, SPLICE_F_MOVE (as sockbench:
 *                    SPLICE_F_MORE would hold a short last segment back for
 *                    TCP's 200 ms), the pipe sized to PIPE_SIZE with F_SETPIPE_SZ
 *   io-uring         the read-write calls as IORING_OP_READ/WRITE, one
 *                    io_uring_submit_and_wait per operation
 *   io-uring-splice  the splice calls as IORING_OP_SPLICE, likewise
 *   epoll            non-blocking read/write, epoll_wait (edge-triggered) on EAGAIN:
 *                    what an async runtime's copy does (sockbench's async method)
 *
 * Build: gcc -O2 -pthread -o relay bench/relay.c -luring
 *        (without liburing: add -DNO_URING; the io-uring methods then refuse to run)
 * Usage: relay METHOD LISTEN_PORT TARGET_PORT [BUFFER] [PIPE_SIZE]
 * bench/relay.sh builds it and runs it between iperf3's client and server. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>
#ifndef NO_URING
#include <liburing.h>
#endif

#define IOVECS 4

enum method { READ_WRITE, VECTORED, BUFFERED, SPLICE, IO_URING, IO_URING_SPLICE, EPOLL };
static const char *const method_names[] = {
    "read-write", "vectored", "buffered", "splice", "io-uring", "io-uring-splice", "epoll",
};

static enum method method;
static size_t buffer_size = 64 << 10, pipe_size = 64 << 10;
static struct sockaddr_in target;

/* Counted as the copies go, so an interrupted relay still reports what it did. */
static _Atomic unsigned long long n_bytes, n_conns, n_read, n_write, n_readv, n_writev,
    n_splice, n_enter, n_ops, n_epoll_wait;
#define COUNT(c, n) atomic_fetch_add_explicit(&(c), (n), memory_order_relaxed)

static volatile sig_atomic_t stop;
static void on_signal(int sig) { (void)sig; stop = 1; }

static void die(const char *what) {
    perror(what);
    exit(1);
}

static size_t parse_size(const char *s) {
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end == 'K' || *end == 'k') v <<= 10, end++;
    else if (*end == 'M' || *end == 'm') v <<= 20, end++;
    if (*end || v == 0) {
        fprintf(stderr, "relay: bad size '%s' (bytes, or with K or M)\n", s);
        exit(2);
    }
    return v;
}

static void *page_buffer(size_t size) {
    void *p = aligned_alloc(4096, (size + 4095) & ~(size_t)4095);
    if (!p) die("aligned_alloc");
    memset(p, 0, size); /* fault it in before the copy starts */
    return p;
}

/* The pipe between the two splices, sized as asked; returns the size granted. */
static size_t make_pipe(int p[2]) {
    if (pipe2(p, O_CLOEXEC) < 0) return 0;
    int got = fcntl(p[1], F_SETPIPE_SZ, (int)pipe_size);
    if (got < 0) {
        perror("F_SETPIPE_SZ");
        got = fcntl(p[1], F_GETPIPE_SZ);
    }
    return got > 0 ? (size_t)got : 0;
}

/* ---------------------------------------------------------------- blocking methods
 * Each copies `from` to `to` until from's EOF: 0 then, -1 on an error (errno set). */

static int write_all(int to, const char *buf, size_t len) {
    while (len) {
        ssize_t n = write(to, buf, len);
        COUNT(n_write, 1), COUNT(n_ops, 1);
        if (n < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        COUNT(n_bytes, n);
        buf += n, len -= n;
    }
    return 0;
}

static int copy_read_write(int from, int to) {
    char *buf = page_buffer(buffer_size);
    int rc = 0;
    for (;;) {
        ssize_t n = read(from, buf, buffer_size);
        COUNT(n_read, 1), COUNT(n_ops, 1);
        if (n == 0) break;
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 || write_all(to, buf, n) < 0) { rc = -1; break; }
    }
    free(buf);
    return rc;
}

static int copy_vectored(int from, int to) {
    char *buf = page_buffer(buffer_size);
    struct iovec in[IOVECS], out[IOVECS];
    size_t part = buffer_size / IOVECS;
    for (int i = 0; i < IOVECS; i++) {
        in[i].iov_base = buf + i * part;
        in[i].iov_len = i == IOVECS - 1 ? buffer_size - i * part : part;
    }
    int rc = 0;
    for (;;) {
        ssize_t n = readv(from, in, IOVECS);
        COUNT(n_readv, 1), COUNT(n_ops, 1);
        if (n == 0) break;
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) { rc = -1; break; }
        /* The iovecs that hold the n bytes read, then writev until all are out. */
        int cnt = 0;
        for (size_t left = n; left; cnt++) {
            out[cnt].iov_base = in[cnt].iov_base;
            out[cnt].iov_len = left < in[cnt].iov_len ? left : in[cnt].iov_len;
            left -= out[cnt].iov_len;
        }
        struct iovec *v = out;
        while (cnt) {
            ssize_t w = writev(to, v, cnt);
            COUNT(n_writev, 1), COUNT(n_ops, 1);
            if (w < 0 && errno == EINTR) continue;
            if (w < 0) { rc = -1; goto out; }
            COUNT(n_bytes, w);
            while (cnt && (size_t)w >= v->iov_len) w -= v->iov_len, v++, cnt--;
            if (cnt) v->iov_base = (char *)v->iov_base + w, v->iov_len -= w;
        }
    }
out:
    free(buf);
    return rc;
}

static int copy_buffered(int from, int to) {
    char *rbuf = page_buffer(buffer_size), *wbuf = page_buffer(buffer_size);
    size_t wlen = 0;
    int rc = 0;
    for (;;) {
        ssize_t n = read(from, rbuf, buffer_size); /* the reader fills its buffer */
        COUNT(n_read, 1), COUNT(n_ops, 1);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) { rc = -1; break; }
        if (n == 0) { /* EOF: flush what the writer holds */
            if (wlen && write_all(to, wbuf, wlen) < 0) rc = -1;
            break;
        }
        for (size_t off = 0; off < (size_t)n;) { /* into the writer, written when full */
            size_t take = buffer_size - wlen < n - off ? buffer_size - wlen : n - off;
            memcpy(wbuf + wlen, rbuf + off, take);
            wlen += take, off += take;
            if (wlen == buffer_size) {
                if (write_all(to, wbuf, wlen) < 0) { rc = -1; goto out; }
                wlen = 0;
            }
        }
        /* The reader buffer is drained: nothing more right now, so flush. */
        if (wlen) {
            if (write_all(to, wbuf, wlen) < 0) { rc = -1; break; }
            wlen = 0;
        }
    }
out:
    free(rbuf);
    free(wbuf);
    return rc;
}

static int copy_splice(int from, int to) {
    int p[2];
    size_t cap = make_pipe(p);
    if (!cap) return -1;
    const unsigned flags = SPLICE_F_MOVE;
    int rc = 0;
    for (;;) {
        ssize_t n = splice(from, NULL, p[1], NULL, cap, flags);
        COUNT(n_splice, 1), COUNT(n_ops, 1);
        if (n == 0) break;
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) { rc = -1; break; }
        while (n) {
            ssize_t w = splice(p[0], NULL, to, NULL, n, flags);
            COUNT(n_splice, 1), COUNT(n_ops, 1);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) { rc = -1; goto out; }
            COUNT(n_bytes, w);
            n -= w;
        }
    }
out:
    close(p[0]);
    close(p[1]);
    return rc;
}

/* ---------------------------------------------------------------- io_uring methods */
#ifndef NO_URING
/* Submit the one prepared operation and wait for it: one io_uring_enter. Returns the
 * completion's result (a negative errno on failure). */
static int ring_run(struct io_uring *ring) {
    int r;
    do {
        r = io_uring_submit_and_wait(ring, 1);
        COUNT(n_enter, 1);
    } while (r == -EINTR);
    if (r < 0) return r;
    struct io_uring_cqe *cqe;
    if ((r = io_uring_peek_cqe(ring, &cqe)) < 0) return r;
    COUNT(n_ops, 1);
    r = cqe->res;
    io_uring_cqe_seen(ring, cqe);
    return r;
}

static int copy_io_uring(int from, int to) {
    struct io_uring ring;
    int r = io_uring_queue_init(4, &ring, 0);
    if (r < 0) { errno = -r; return -1; }
    char *buf = page_buffer(buffer_size);
    int rc = 0;
    for (;;) {
        io_uring_prep_read(io_uring_get_sqe(&ring), from, buf, buffer_size, 0);
        int n = ring_run(&ring);
        if (n == 0) break;
        if (n == -EINTR) continue;
        if (n < 0) { errno = -n; rc = -1; break; }
        for (int off = 0; off < n;) {
            io_uring_prep_write(io_uring_get_sqe(&ring), to, buf + off, n - off, 0);
            int w = ring_run(&ring);
            if (w == -EINTR) continue;
            if (w <= 0) { errno = w ? -w : EPIPE; rc = -1; goto out; }
            COUNT(n_bytes, w);
            off += w;
        }
    }
out:
    free(buf);
    io_uring_queue_exit(&ring);
    return rc;
}

static int copy_io_uring_splice(int from, int to) {
    struct io_uring ring;
    int r = io_uring_queue_init(4, &ring, 0);
    if (r < 0) { errno = -r; return -1; }
    int p[2];
    size_t cap = make_pipe(p);
    if (!cap) { io_uring_queue_exit(&ring); return -1; }
    const unsigned flags = SPLICE_F_MOVE;
    int rc = 0;
    for (;;) {
        io_uring_prep_splice(io_uring_get_sqe(&ring), from, -1, p[1], -1, cap, flags);
        int n = ring_run(&ring);
        if (n == 0) break;
        if (n == -EINTR) continue;
        if (n < 0) { errno = -n; rc = -1; break; }
        while (n) {
            io_uring_prep_splice(io_uring_get_sqe(&ring), p[0], -1, to, -1, n, flags);
            int w = ring_run(&ring);
            if (w == -EINTR) continue;
            if (w <= 0) { errno = w ? -w : EPIPE; rc = -1; goto out; }
            COUNT(n_bytes, w);
            n -= w;
        }
    }
out:
    close(p[0]);
    close(p[1]);
    io_uring_queue_exit(&ring);
    return rc;
}
#else
static int copy_io_uring(int from, int to) { (void)from, (void)to; errno = ENOSYS; return -1; }
static int copy_io_uring_splice(int from, int to) { (void)from, (void)to; errno = ENOSYS; return -1; }
#endif

/* ---------------------------------------------------------------- epoll method
 * Both sockets are non-blocking (the relay's two directions share them). Each direction
 * has its own epoll instance watching from (in) and to (out), edge-triggered as async
 * runtimes register them; on EAGAIN it waits for the next event and tries again. */

static int wait_event(int ep) {
    struct epoll_event ev[2];
    int r = epoll_wait(ep, ev, 2, -1);
    COUNT(n_epoll_wait, 1);
    return r < 0 && errno != EINTR ? -1 : 0;
}

static int copy_epoll(int from, int to) {
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0) return -1;
    struct epoll_event in = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET, .data.fd = from};
    struct epoll_event out = {.events = EPOLLOUT | EPOLLET, .data.fd = to};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, from, &in) < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, to, &out) < 0) {
        close(ep);
        return -1;
    }
    char *buf = page_buffer(buffer_size);
    int rc = 0;
    for (;;) {
        ssize_t n = read(from, buf, buffer_size);
        COUNT(n_read, 1), COUNT(n_ops, 1);
        if (n == 0) break;
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN && wait_event(ep) == 0) continue;
            rc = -1;
            break;
        }
        for (ssize_t off = 0; off < n;) {
            ssize_t w = write(to, buf + off, n - off);
            COUNT(n_write, 1), COUNT(n_ops, 1);
            if (w < 0) {
                if (errno == EINTR) continue;
                if (errno == EAGAIN && wait_event(ep) == 0) continue;
                rc = -1;
                goto out;
            }
            COUNT(n_bytes, w);
            off += w;
        }
    }
out:
    free(buf);
    close(ep);
    return rc;
}

/* ---------------------------------------------------------------- connections */

struct conn {
    int fd[2]; /* [0] the accepted client, [1] the connection to the target */
    atomic_int left; /* directions still copying */
};
struct direction {
    struct conn *c;
    int from, to;
};

static int (*const copiers[])(int, int) = {
    copy_read_write, copy_vectored, copy_buffered, copy_splice,
    copy_io_uring, copy_io_uring_splice, copy_epoll,
};

static void *relay_direction(void *arg) {
    struct direction d = *(struct direction *)arg;
    free(arg);
    if (copiers[method](d.from, d.to) < 0) {
        if (errno != ECONNRESET && errno != EPIPE) perror("relay: copy");
        /* Wake the other direction too: this connection is over. */
        shutdown(d.from, SHUT_RDWR);
        shutdown(d.to, SHUT_RDWR);
    } else {
        shutdown(d.to, SHUT_WR);
    }
    if (atomic_fetch_sub(&d.c->left, 1) == 1) {
        close(d.c->fd[0]);
        close(d.c->fd[1]);
        free(d.c);
    }
    return NULL;
}

static void start_direction(struct conn *c, int from, int to) {
    struct direction *d = malloc(sizeof *d);
    if (!d) die("malloc");
    *d = (struct direction){c, from, to};
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int e = pthread_create(&t, &attr, relay_direction, d);
    pthread_attr_destroy(&attr);
    if (e) {
        errno = e;
        die("pthread_create");
    }
}

static void relay_connection(int client) {
    int server = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (server < 0 || connect(server, (struct sockaddr *)&target, sizeof target) < 0) {
        perror("relay: connect to target");
        if (server >= 0) close(server);
        close(client);
        return;
    }
    if (method == EPOLL) {
        fcntl(client, F_SETFL, fcntl(client, F_GETFL) | O_NONBLOCK);
        fcntl(server, F_SETFL, fcntl(server, F_GETFL) | O_NONBLOCK);
    }
    struct conn *c = malloc(sizeof *c);
    if (!c) die("malloc");
    c->fd[0] = client, c->fd[1] = server;
    atomic_init(&c->left, 2);
    COUNT(n_conns, 1);
    start_direction(c, client, server);
    start_direction(c, server, client);
}

static void report(void) {
    printf("bytes=%llu connections=%llu calls=%llu ops=%llu", n_bytes, n_conns,
           n_read + n_write + n_readv + n_writev + n_splice + n_enter, n_ops);
    const char *names[] = {"read", "write", "readv", "writev", "splice", "io_uring_enter", "epoll_wait"};
    unsigned long long v[] = {n_read, n_write, n_readv, n_writev, n_splice, n_enter, n_epoll_wait};
    for (int i = 0; i < 7; i++)
        if (v[i]) printf(" %s=%llu", names[i], v[i]);
    printf("\n");
    fflush(stdout);
}

static int port(const char *s) {
    char *end;
    long p = strtol(s, &end, 10);
    if (*end || p < 1 || p > 65535) {
        fprintf(stderr, "relay: bad port '%s'\n", s);
        exit(2);
    }
    return p;
}

int main(int argc, char **argv) {
    if (argc < 4 || argc > 6) {
        fprintf(stderr, "usage: relay METHOD LISTEN_PORT TARGET_PORT [BUFFER] [PIPE_SIZE]\n"
                        "methods: read-write vectored buffered splice io-uring io-uring-splice epoll\n");
        return 2;
    }
    int m = 0;
    while (m < 7 && strcmp(argv[1], method_names[m])) m++;
    if (m == 7) {
        fprintf(stderr, "relay: unknown method '%s'\n", argv[1]);
        return 2;
    }
    method = m;
#ifdef NO_URING
    if (method == IO_URING || method == IO_URING_SPLICE) {
        fprintf(stderr, "relay: %s: built without liburing (-DNO_URING)\n", argv[1]);
        return 2;
    }
#endif
    int listen_port = port(argv[2]);
    target = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = htons(port(argv[3])),
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (argc > 4) buffer_size = parse_size(argv[4]);
    if (argc > 5) pipe_size = parse_size(argv[5]);
    if (method == VECTORED && buffer_size < IOVECS) {
        fprintf(stderr, "relay: vectored needs a buffer of at least %d bytes\n", IOVECS);
        return 2;
    }

    /* SIGINT and SIGTERM stay blocked everywhere (the copy threads inherit the mask)
     * except inside the main thread's ppoll, so they stop the accept loop and nothing
     * else, and one arriving between two ppolls is not lost. */
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigset_t block, normal;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &block, &normal);
    sigdelset(&normal, SIGINT);
    sigdelset(&normal, SIGTERM);

    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (lfd < 0) die("socket");
    int one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(listen_port),
                               .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(lfd, (struct sockaddr *)&addr, sizeof addr) < 0) die("bind");
    if (listen(lfd, 128) < 0) die("listen");
    fprintf(stderr, "relay %s: 127.0.0.1:%d -> 127.0.0.1:%d, buffer %zu, pipe %zu\n",
            method_names[method], listen_port, port(argv[3]), buffer_size, pipe_size);

    while (!stop) {
        struct pollfd p = {.fd = lfd, .events = POLLIN};
        if (ppoll(&p, 1, NULL, &normal) < 0) {
            if (errno == EINTR) continue;
            die("ppoll");
        }
        int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0) {
            if (errno != EINTR && errno != ECONNABORTED) perror("accept");
            continue;
        }
        relay_connection(c);
    }
    report();
    _exit(0);
}
