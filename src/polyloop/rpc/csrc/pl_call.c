/* SPDX-License-Identifier: Apache-2.0 */
/* The call request: the arrays copied in (or zeroed), the function called under the session's
 * time limit, TVM's time_evaluator timing, and the kept arrays sent back. */
#define _GNU_SOURCE
#include "pl_session.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef struct {
    void **bufs;
    size_t *sizes;
    int count;
    int64_t *params;
    uint32_t n_params;
    int *keep;
    uint32_t n_keep;
} call_args;

static void free_args(call_args *a) {
    for (int i = 0; i < a->count; i++) free(a->bufs[i]);
    free(a->bufs);
    free(a->sizes);
    free(a->params);
    free(a->keep);
}

static int add_buffer(call_args *a, size_t size, uint64_t *total, uint64_t limit) {
    if (size > limit || *total > limit - size) return -1;
    *total += size;
    void *p = NULL;
    if (posix_memalign(&p, 64, size ? size : 1)) return -1;
    memset(p, 0, size ? size : 1);
    a->bufs[a->count] = p;
    a->sizes[a->count++] = size;
    return 0;
}

/* The arrays of a call: "args" (binary: copied in; integer: that many zero bytes), "params",
 * "keep"; then the workspace when the function has one. 0, or -1 with *why set. */
static int read_call_args(session *s, const mp_message *m, const fn_slot *fn, call_args *a,
                          const char **why) {
    mp_reader r;
    uint32_t n;
    uint64_t total = 0;
    memset(a, 0, sizeof *a);
    if (mp_message_get(m, "params", &r) || mp_read_array(&r, &a->n_params) || a->n_params > MAX_PARAMS)
        pl_fatal(s, "call: field 'params' (an array of at most 4096 integers) is missing");
    a->params = calloc(a->n_params + 1, sizeof *a->params);
    for (uint32_t i = 0; a->params && i < a->n_params; i++)
        if (mp_read_int(&r, &a->params[i])) pl_fatal(s, "call: a size parameter is not an integer");
    if (mp_message_get(m, "args", &r) || mp_read_array(&r, &n) || n > MAX_ARGS)
        pl_fatal(s, "call: field 'args' (an array of at most 4096 arrays) is missing");
    a->bufs = calloc(n + 1, sizeof *a->bufs);
    a->sizes = calloc(n + 1, sizeof *a->sizes);
    if (!a->params || !a->bufs || !a->sizes) return *why = "out of memory", -1;
    for (uint32_t i = 0; i < n; i++) {
        const uint8_t *data = NULL;
        uint32_t len = 0;
        int64_t size;
        if (mp_is_bin(&r)) {
            if (mp_read_bin(&r, &data, &len)) pl_fatal(s, "call: an argument is truncated");
            size = len;
        } else if (mp_read_int(&r, &size) || size < 0) {
            pl_fatal(s, "call: an argument is neither binary data nor a byte count");
        }
        if ((uint64_t)size > SIZE_MAX || add_buffer(a, (size_t)size, &total, s->opt->max_memory))
            return *why = "the arrays of the call are over the server's memory limit (--max-memory)", -1;
        if (data) memcpy(a->bufs[i], data, len);
    }
    if (fn->workspace) {
        int64_t bytes = fn->workspace(a->params);
        if (bytes < 0 || (uint64_t)bytes > SIZE_MAX
            || add_buffer(a, (size_t)bytes, &total, s->opt->max_memory))
            return *why = "the model's workspace is over the server's memory limit (--max-memory)", -1;
    }
    if (mp_message_get(m, "keep", &r) == 0) {
        if (mp_read_array(&r, &a->n_keep)) pl_fatal(s, "call: field 'keep' is not an array");
        a->keep = calloc(a->n_keep + 1, sizeof *a->keep);
        if (!a->keep) return *why = "out of memory", -1;
        for (uint32_t i = 0; i < a->n_keep; i++) {
            int64_t k;
            if (mp_read_int(&r, &k) || k < 0 || k >= (int64_t)n) pl_fatal(s, "call: 'keep' names no argument");
            a->keep[i] = (int)k;
        }
    }
    return 0;
}

/* TVM's time_evaluator: after the first call, ``repeat`` timings of ``number`` calls each;
 * a timing shorter than ``min_repeat_ms`` is taken again with more calls. */
static int32_t time_calls(const fn_slot *fn, call_args *a, int64_t number, int64_t repeat,
                          int64_t min_repeat_ms, double *times) {
    int32_t status = 0;
    for (int64_t k = 0; k < repeat && !status; k++) {
        for (;;) {
            double start = now();
            for (int64_t i = 0; i < number && !status; i++) status = fn->entry(a->bufs, a->params);
            double elapsed = now() - start;
            times[k] = elapsed / (double)number;
            if (status || elapsed * 1e3 >= (double)min_repeat_ms || number >= MAX_NUMBER) break;
            double scale = elapsed > 0 ? 1.2 * (double)min_repeat_ms / (elapsed * 1e3) : 10.0;
            int64_t next = (int64_t)((double)number * (scale > 10.0 ? 10.0 : scale)) + 1;
            number = next > MAX_NUMBER ? MAX_NUMBER : next < 2 * number ? 2 * number : next;
        }
    }
    return status;
}

static void reply_call(session *s, const fn_slot *fn, call_args *a, int32_t status,
                       const double *times, int64_t repeat) {
    int fault = status == 2 && fn->fault, why = status == 3 && fn->check;
    mp_writer w;
    mp_writer_init(&w);
    mp_w_map(&w, (uint32_t)(4 + fault + why));
    mp_w_str(&w, "ok");
    mp_w_bool(&w, 1);
    mp_w_str(&w, "status");
    mp_w_int(&w, status);
    mp_w_str(&w, "outputs");
    mp_w_array(&w, a->n_keep);
    for (uint32_t i = 0; i < a->n_keep; i++) mp_w_bin(&w, a->bufs[a->keep[i]], a->sizes[a->keep[i]]);
    mp_w_str(&w, "times");
    mp_w_array(&w, (uint32_t)repeat);
    for (int64_t k = 0; k < repeat; k++) mp_w_double(&w, times[k]);
    if (fault) {
        mp_w_str(&w, "fault");
        mp_w_array(&w, 5);
        for (int k = 0; k < 5; k++) mp_w_int(&w, fn->fault[k]);
    }
    if (why) {
        const char *text = fn->check(a->params);
        mp_w_str(&w, "why");
        mp_w_strn(&w, text ? text : "", text ? strnlen(text, 1000) : 0);
    }
    if (pl_send_writer(s->fd, &w)) pl_fatal(s, "cannot send the results");
    mp_writer_free(&w);
}

/* call {fn, args, params, keep?, number?, repeat?, min_repeat_ms?, timeout_ms?}
 *   -> {status, outputs, times[, fault][, why]} */
void pl_op_call(session *s, const mp_message *m) {
    int64_t f, number = 0, repeat = 1, min_ms = 0, timeout_ms = 0;
    const char *why = NULL;
    if (pl_get_int(m, "fn", &f)) pl_fatal(s, "call: field 'fn' (an integer) is missing");
    if (f < 0 || f >= s->n_fns || !s->fns[f].entry)
        REFUSE("call: no function of that number is loaded in this session%s", NULL);
    pl_get_int(m, "number", &number);
    pl_get_int(m, "repeat", &repeat);
    pl_get_int(m, "min_repeat_ms", &min_ms);
    pl_get_int(m, "timeout_ms", &timeout_ms);
    if (number < 0 || number > MAX_NUMBER || repeat < 1 || repeat > MAX_REPEAT || min_ms < 0
        || min_ms > 3600000 || timeout_ms < 0)
        REFUSE("call: number, repeat, min_repeat_ms or timeout_ms is out of range%s", NULL);
    if (number == 0) repeat = 0;
    const fn_slot *fn = &s->fns[f];
    call_args a;
    memset(&a, 0, sizeof a);
    double *times = calloc((size_t)repeat + 1, sizeof *times);
    int seconds = s->opt->max_call_seconds;
    if (timeout_ms > 0 && (timeout_ms + 999) / 1000 < seconds) seconds = (int)((timeout_ms + 999) / 1000);
    if (!times || read_call_args(s, m, fn, &a, &why)) {
        free(times);
        free_args(&a);
        REFUSE("call: %s", why ? why : "out of memory");
    }
    alarm((unsigned)seconds);         /* a kernel that hangs ends this session's process */
    int32_t status = fn->entry(a.bufs, a.params);
    if (!status && number > 0) status = time_calls(fn, &a, number, repeat, min_ms, times);
    alarm(0);
    reply_call(s, fn, &a, status, times, status ? 0 : repeat);
    free(times);
    free_args(&a);
}
