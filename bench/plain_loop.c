/* The plainest C loop of each OS transport, for msgperf's benchmark (bench/ratios):
 *   plain_loop pingpong|stream pipe|uds|tcp|udp SIZE SECONDS CPU_A CPU_B
 * Forks a peer pinned to CPU_B, measures on CPU_A, and prints one line:
 *   pingpong: "p50_ns=N samples=N"     stream: "mb_per_s=X"
 * No framing, no histogram: read/write, clock_gettime, a sample array, qsort. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + t.tv_nsec;
}

static void pin(int cpu) {
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    sched_setaffinity(0, sizeof s, &s);
}

/* a_r/a_w: the measuring side; b_r/b_w: the peer. */
static int a_r, a_w, b_r, b_w, dgram;

static void make(const char *t) {
    int p1[2], p2[2], sv[2];
    if (!strcmp(t, "pipe")) {
        /* FIFOs, as msgperf's pipe transport uses (opened, then unlinked). */
        char d[] = "/tmp/plain_loop_XXXXXX", f1[64], f2[64];
        if (!mkdtemp(d)) exit(2);
        snprintf(f1, sizeof f1, "%s/a", d);
        snprintf(f2, sizeof f2, "%s/b", d);
        if (mkfifo(f1, 0600) || mkfifo(f2, 0600)) exit(2);
        p1[0] = open(f1, O_RDONLY | O_NONBLOCK); p1[1] = open(f1, O_WRONLY);
        p2[0] = open(f2, O_RDONLY | O_NONBLOCK); p2[1] = open(f2, O_WRONLY);
        if (p1[0] < 0 || p1[1] < 0 || p2[0] < 0 || p2[1] < 0) exit(2);
        fcntl(p1[0], F_SETFL, 0); fcntl(p2[0], F_SETFL, 0);
        unlink(f1); unlink(f2); rmdir(d);
        a_r = p1[0]; b_w = p1[1]; b_r = p2[0]; a_w = p2[1];
    } else if (!strcmp(t, "uds")) {
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) exit(2);
        a_r = a_w = sv[0]; b_r = b_w = sv[1];
    } else if (!strcmp(t, "tcp")) {
        struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t len = sizeof addr;
        int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
        bind(l, (void *)&addr, sizeof addr);
        listen(l, 1);
        getsockname(l, (void *)&addr, &len);
        a_r = a_w = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(a_r, (void *)&addr, sizeof addr)) exit(2);
        b_r = b_w = accept(l, NULL, NULL);
        setsockopt(a_r, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        setsockopt(b_r, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        close(l);
    } else if (!strcmp(t, "udp")) {
        struct sockaddr_in x = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)}, y = x;
        socklen_t len = sizeof x;
        a_r = a_w = socket(AF_INET, SOCK_DGRAM, 0);
        b_r = b_w = socket(AF_INET, SOCK_DGRAM, 0);
        bind(a_r, (void *)&x, sizeof x);
        bind(b_r, (void *)&y, sizeof y);
        getsockname(a_r, (void *)&x, &len);
        len = sizeof y;
        getsockname(b_r, (void *)&y, &len);
        connect(a_r, (void *)&y, sizeof y);
        connect(b_r, (void *)&x, sizeof x);
        dgram = 1;
    } else {
        fprintf(stderr, "unknown transport %s\n", t);
        exit(2);
    }
}

static int read_msg(int fd, char *buf, size_t n) {
    if (dgram) return read(fd, buf, n) > 0;
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r <= 0) return 0;
        got += r;
    }
    return 1;
}

static int write_msg(int fd, const char *buf, size_t n) {
    size_t put = 0;
    while (put < n) {
        ssize_t r = write(fd, buf + put, n - put);
        if (r <= 0) return 0;
        put += r;
    }
    return 1;
}

static int cmp(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: %s pingpong|stream pipe|uds|tcp|udp SIZE SECONDS CPU_A CPU_B\n", argv[0]);
        return 2;
    }
    int stream = !strcmp(argv[1], "stream");
    size_t size = strtoul(argv[3], 0, 10);
    uint64_t dur = (uint64_t)(atof(argv[4]) * 1e9), warm = 200000000ull;
    int cpu_a = atoi(argv[5]), cpu_b = atoi(argv[6]);
    char *buf = calloc(1, size);
    make(argv[2]);
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        pin(cpu_b);
        if (a_r != a_w) close(a_w);
        close(a_r);
        if (stream) {
            uint64_t end = now_ns() + warm + dur;
            while (now_ns() < end && write_msg(b_w, buf, size)) {}
            if (dgram) for (int i = 0; i < 20; i++) { write(b_w, buf, 0); usleep(1000); }
        } else {
            while (read_msg(b_r, buf, size) && write_msg(b_w, buf, size)) {}
        }
        _exit(0);
    }
    pin(cpu_a);
    close(b_r);
    if (b_w != b_r) close(b_w);
    if (stream) {
        struct timeval tv = {1, 0};
        setsockopt(a_r, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        uint64_t first = 0, start = 0, last = 0, bytes = 0, reads = 0;
        ssize_t n;
        while ((n = read(a_r, buf, size)) > 0) {
            uint64_t t = now_ns();
            if (!first) first = t;
            if (t >= first + warm) {
                if (!reads++) start = t; else bytes += n;
                last = t;
            }
        }
        printf("mb_per_s=%.1f\n", bytes / ((last - start) / 1e9) / 1e6);
    } else {
        size_t cap = 1 << 22, n = 0;
        uint32_t *s = malloc(cap * sizeof *s);
        uint64_t warm_end = now_ns() + warm, end = warm_end + dur;
        for (;;) {
            uint64_t t0 = now_ns();
            if (!write_msg(a_w, buf, size) || !read_msg(a_r, buf, size)) break;
            uint64_t t1 = now_ns();
            if (t0 >= warm_end && n < cap) s[n++] = (uint32_t)(t1 - t0);
            if (t1 >= end) break;
        }
        if (dgram) write(a_w, buf, 0);
        qsort(s, n, sizeof *s, cmp);
        printf("p50_ns=%u samples=%zu\n", n ? s[n / 2] : 0, n);
    }
    close(a_r);
    if (a_w != a_r) close(a_w);
    waitpid(pid, 0, 0);
    return 0;
}
