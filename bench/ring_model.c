/*
 * shm's ring, modelled in plain C against the cache line it is measured by: two threads
 * pinned to CPUs 0 and 1 run round trips of six kinds in turn, in short slices, so that each
 * kind sees the same vCPU placements (this VM's two vCPUs move between near and far host
 * cores every few hundred ms); it prints each slice's median round trip of each kind, in ns,
 * one row per round of the six. bench/ring_model.py runs it and groups the rows.
 * Kinds:
 *  line:     one 64 B line: A writes 2n+1, B waits for it and writes 2n+2
 *  twoline:  A writes line X, B waits on X and writes line Y, A waits on Y (msgperf floor's)
 *  ring:     two rings of 64 B cells; a message is one cell whose head is written last; the
 *            reader polls the next cell's head; after each message the writer clears the head
 *            of the cell after the next one (shm's ring layout, with none of its code)
 *  ringseq:  ring, and the reader stores its position (a line of its own) after each message
 *  ringcopy: ringseq, with the 60 B body copied in and out through a local buffer
 *  ringbatch: ringcopy, with the writer clearing heads 16 at a time, 32 ahead (shm's ring
 *            before 2026-12-04: the lines cleared ahead sit in the writer's cache, where the
 *            reader's prefetches reach them)
 * Usage: ring_model [ROUNDS] [SLICE_MS]
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CELLS 16384
#define KINDS 6
static const char *names[KINDS] = {"line", "twoline", "ring", "ringseq", "ringcopy", "ringbatch"};

struct __attribute__((aligned(128))) padded { _Atomic uint64_t v; };
static struct padded L, X, Y, seqA, seqB;
static _Atomic uint32_t *ringAB, *ringBA; // cells of 16 u32
static _Atomic int kind = -1, go = 0, stop_all = 0, acked = 0;

static uint64_t now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000000000ull + t.tv_nsec;
}
static void pin(int c) {
  cpu_set_t s; CPU_ZERO(&s); CPU_SET(c, &s);
  pthread_setaffinity_np(pthread_self(), sizeof s, &s);
}
static inline void relax(void) { __builtin_ia32_pause(); }

struct side { _Atomic uint32_t *tx, *rx; uint64_t w, r, cleared; struct padded *seq; char buf[64]; };
static inline _Atomic uint32_t *cell(_Atomic uint32_t *ring, uint64_t p) { return ring + (p % CELLS) * 16; }
static inline void ring_write(struct side *s, int copy, int batch) {
  _Atomic uint32_t *c = cell(s->tx, s->w);
  if (copy) memcpy((char *)c + 4, s->buf + 4, 60);
  atomic_store_explicit(c, 64, memory_order_release);
  s->w++;
  uint64_t ahead = batch ? 32 : 2;
  if (s->cleared <= s->w + ahead / 2) {
    uint64_t to = s->w + ahead;
    for (uint64_t p = s->cleared; p < to; p++) atomic_store_explicit(cell(s->tx, p), 0, memory_order_relaxed);
    s->cleared = to;
  }
}
static inline void ring_read(struct side *s, int seq, int copy) {
  _Atomic uint32_t *c = cell(s->rx, s->r);
  while (atomic_load_explicit(c, memory_order_acquire) == 0) relax();
  if (copy) memcpy(s->buf + 4, (char *)c + 4, 60);
  s->r++;
  if (seq) atomic_store_explicit(&s->seq->v, s->r, memory_order_release);
}

static struct side sa, sb;
static void reset_rings(void) {
  memset((void *)ringAB, 0, CELLS * 64);
  memset((void *)ringBA, 0, CELLS * 64);
  sa = (struct side){.tx = ringAB, .rx = ringBA, .cleared = 32, .seq = &seqA};
  sb = (struct side){.tx = ringBA, .rx = ringAB, .cleared = 32, .seq = &seqB};
  atomic_store(&L.v, 0); atomic_store(&X.v, 0); atomic_store(&Y.v, 0);
}

static void *peer(void *arg) {
  (void)arg;
  pin(1);
  uint64_t n = 0;
  int last_go = 0;
  while (!atomic_load(&stop_all)) {
    int g = atomic_load(&go);
    if (g == last_go) { relax(); continue; }
    last_go = g; n = 0;
    int k = atomic_load(&kind);
    for (;;) {
      if (k == 0) {
        uint64_t v;
        while ((v = atomic_load_explicit(&L.v, memory_order_acquire)) != 2 * n + 1) {
          if (v == UINT64_MAX)
            goto done;
          relax();
        }
        atomic_store_explicit(&L.v, 2 * n + 2, memory_order_release);
      } else if (k == 1) {
        uint64_t v;
        while ((v = atomic_load_explicit(&X.v, memory_order_acquire)) != n + 1) {
          if (v == UINT64_MAX)
            goto done;
          relax();
        }
        atomic_store_explicit(&Y.v, n + 1, memory_order_release);
      } else {
        _Atomic uint32_t *c = cell(sb.rx, sb.r);
        uint32_t h;
        while ((h = atomic_load_explicit(c, memory_order_acquire)) == 0) relax();
        if (h == 7) goto done;
        ring_read(&sb, k >= 3, k >= 4);
        ring_write(&sb, k >= 4, k == 5);
      }
      n++;
    }
  done:
    atomic_store(&acked, g);
  }
  return 0;
}

static int cmp(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  int slices = argc > 1 ? atoi(argv[1]) : 100;
  double slice_ms = argc > 2 ? atof(argv[2]) : 30;
  ringAB = aligned_alloc(4096, CELLS * 64);
  ringBA = aligned_alloc(4096, CELLS * 64);
  pthread_t t;
  pin(0);
  pthread_create(&t, 0, peer, 0);
  static uint64_t med[KINDS][1000];
  static uint64_t lat[2000000];
  int counts[KINDS] = {0};
  for (int s = 0; s < slices * KINDS; s++) {
    int k = s % KINDS;
    reset_rings();
    atomic_store(&kind, k);
    atomic_fetch_add(&go, 1);
    uint64_t end = now() + (uint64_t)(slice_ms * 1e6), n = 0;
    int m = 0;
    while (m < 2000000) {
      uint64_t t0 = now();
      if (k == 0) {
        atomic_store_explicit(&L.v, 2 * n + 1, memory_order_release);
        while (atomic_load_explicit(&L.v, memory_order_acquire) != 2 * n + 2) relax();
      } else if (k == 1) {
        atomic_store_explicit(&X.v, n + 1, memory_order_release);
        while (atomic_load_explicit(&Y.v, memory_order_acquire) != n + 1) relax();
      } else {
        ring_write(&sa, k >= 4, k == 5);
        ring_read(&sa, k >= 3, k >= 4);
      }
      uint64_t t1 = now();
      lat[m++] = t1 - t0;
      n++;
      if (t1 > end) break;
    }
    // stop the peer
    if (k == 0) atomic_store(&L.v, UINT64_MAX);
    else if (k == 1) atomic_store(&X.v, UINT64_MAX);
    else atomic_store_explicit(cell(sa.tx, sa.w), 7, memory_order_release);
    while (atomic_load(&acked) != atomic_load(&go)) relax();
    qsort(lat + m / 10, m - m / 10, sizeof lat[0], cmp); // drop the first tenth (warm-up)
    med[k][counts[k]++] = lat[m / 10 + (m - m / 10) / 2];
    for (volatile int i = 0; i < 100000; i++);
  }
  atomic_store(&stop_all, 1);
  pthread_join(t, 0);
  // per-slice medians, sorted, grouped by the line's figure in the same round
  printf("round   ");
  for (int k = 0; k < KINDS; k++) printf("%9s", names[k]);
  printf("\n");
  for (int s = 0; s < slices; s++) {
    printf("%5d   ", s);
    for (int k = 0; k < KINDS; k++) printf("%9lu", (unsigned long)med[k][s]);
    printf("\n");
  }
  return 0;
}
