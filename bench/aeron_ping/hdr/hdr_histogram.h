/* The part of HdrHistogram_c's interface that Aeron's C ping sample (cping.c) uses, for
 * bench/middlewares.py, which builds that sample here where HdrHistogram_c is not packaged.
 * It keeps every value (exact percentiles, no buckets) and prints one line that the bench
 * reads: "samples=N p50_ns=.. p90_ns=.. p99_ns=.. p999_ns=.. max_ns=..". Aeron's sample does the
 * timing itself, with its own clock; this only counts. */
#ifndef MSGPERF_HDR_SHIM_H
#define MSGPERF_HDR_SHIM_H
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

enum format_type { CLASSIC, CSV };

struct hdr_histogram {
    int64_t *values;
    size_t count, capacity;
};

static int hdr_init(int64_t lowest, int64_t highest, int significant_figures, struct hdr_histogram **result) {
    (void)lowest; (void)highest; (void)significant_figures;
    struct hdr_histogram *h = calloc(1, sizeof *h);
    if (!h) return -1;
    h->capacity = 1 << 20;
    h->values = malloc(h->capacity * sizeof *h->values);
    if (!h->values) { free(h); return -1; }
    *result = h;
    return 0;
}

static bool hdr_record_value(struct hdr_histogram *h, int64_t value) {
    if (h->count == h->capacity) {
        int64_t *grown = realloc(h->values, 2 * h->capacity * sizeof *grown);
        if (!grown) return false;
        h->values = grown;
        h->capacity *= 2;
    }
    h->values[h->count++] = value;
    return true;
}

static void hdr_reset(struct hdr_histogram *h) { h->count = 0; }

static void hdr_close(struct hdr_histogram *h) {
    if (h) { free(h->values); free(h); }
}

static int msgperf_hdr_cmp(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int64_t msgperf_hdr_at(const struct hdr_histogram *h, double p) {
    size_t i = (size_t)(p * (double)(h->count - 1) + 0.5);
    return h->values[i];
}

static int hdr_percentiles_print(struct hdr_histogram *h, FILE *stream, int32_t ticks, double scale, enum format_type format) {
    (void)ticks; (void)scale; (void)format;
    if (h->count == 0) return fprintf(stream, "samples=0\n") < 0;
    qsort(h->values, h->count, sizeof *h->values, msgperf_hdr_cmp);
    fprintf(stream, "samples=%zu p50_ns=%lld p90_ns=%lld p99_ns=%lld p999_ns=%lld max_ns=%lld\n", h->count,
            (long long)msgperf_hdr_at(h, 0.5), (long long)msgperf_hdr_at(h, 0.9), (long long)msgperf_hdr_at(h, 0.99),
            (long long)msgperf_hdr_at(h, 0.999), (long long)h->values[h->count - 1]);
    return 0;
}
#endif
