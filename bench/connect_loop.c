/* The plainest connection loop, for msgperf's `connect` benchmark (bench/connect.py):
 *   connect_loop tcp|uds SIZE SECONDS CPU_A CPU_B
 * An accepting thread pinned to CPU_B; the connecting loop on CPU_A: connect, write SIZE
 * bytes, read their echo, close; the acceptor reads, echoes and closes after its peer, as
 * msgperf's connect workload does. Prints "conn_per_s=X connections=N". */
#define _GNU_SOURCE
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static int tcp, size;
static struct sockaddr_in in_addr;
static struct sockaddr_un un_addr;
static volatile int done;

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

static int full(ssize_t (*io)(int, void *, size_t), int fd, char *b, int n) {
    for (int got = 0; got < n;) {
        ssize_t r = io(fd, b + got, n - got);
        if (r <= 0) return -1;
        got += r;
    }
    return 0;
}
static ssize_t rd(int fd, void *b, size_t n) { return read(fd, b, n); }
static ssize_t wr(int fd, void *b, size_t n) { return write(fd, b, n); }

static void *acceptor(void *arg) {
    int l = *(int *)arg;
    pin(*((int *)arg + 1));
    char *b = malloc(size);
    while (!done) {
        int c = accept(l, NULL, NULL);
        if (c < 0) continue;
        if (full(rd, c, b, size) == 0 && full(wr, c, b, size) == 0) read(c, b, size);
        close(c);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: connect_loop tcp|uds SIZE SECONDS CPU_A CPU_B\n");
        return 2;
    }
    tcp = strcmp(argv[1], "tcp") == 0;
    size = atoi(argv[2]);
    double secs = atof(argv[3]);
    int args[2] = {0, atoi(argv[5])};
    pin(atoi(argv[4]));
    int l = socket(tcp ? AF_INET : AF_UNIX, SOCK_STREAM, 0);
    socklen_t len;
    struct sockaddr *addr;
    if (tcp) {
        in_addr.sin_family = AF_INET;
        in_addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        len = sizeof in_addr;
        addr = (struct sockaddr *)&in_addr;
        bind(l, addr, len);
        getsockname(l, addr, &len);
    } else {
        un_addr.sun_family = AF_UNIX;
        snprintf(un_addr.sun_path, sizeof un_addr.sun_path, "/tmp/connect_loop.%d", getpid());
        unlink(un_addr.sun_path);
        len = sizeof un_addr;
        addr = (struct sockaddr *)&un_addr;
        bind(l, addr, len);
    }
    listen(l, 128);
    args[0] = l;
    pthread_t t;
    pthread_create(&t, NULL, acceptor, args);
    char *b = malloc(size);
    memset(b, 7, size);
    uint64_t start = now_ns(), end = start + (uint64_t)(secs * 1e9), n = 0, last = start;
    while ((last = now_ns()) < end) {
        int c = socket(tcp ? AF_INET : AF_UNIX, SOCK_STREAM, 0);
        int one = 1;
        if (connect(c, addr, len) != 0) { perror("connect"); return 1; }
        if (tcp) setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (full(wr, c, b, size) || full(rd, c, b, size)) { perror("exchange"); return 1; }
        close(c);
        n++;
    }
    done = 1;
    /* Wake the acceptor's last accept. */
    int c = socket(tcp ? AF_INET : AF_UNIX, SOCK_STREAM, 0);
    connect(c, addr, len);
    close(c);
    pthread_join(t, NULL);
    if (!tcp) unlink(un_addr.sun_path);
    printf("conn_per_s=%.0f connections=%llu\n", n / ((last - start) / 1e9), (unsigned long long)n);
    return 0;
}
