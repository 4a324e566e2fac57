/* SPDX-License-Identifier: Apache-2.0 */
/* See pl_msgpack.h. Every read checks the bytes left before it looks at them. */
#include "pl_msgpack.h"

#include <stdlib.h>
#include <string.h>

void mp_reader_init(mp_reader *r, const uint8_t *p, size_t n) {
    r->p = p;
    r->n = n;
    r->pos = 0;
    r->err = NULL;
}

static int fail(mp_reader *r, const char *why) {
    if (!r->err) r->err = why;
    return -1;
}

static int need(mp_reader *r, size_t k) {
    if (r->err) return -1;
    if (k > r->n - r->pos) return fail(r, "message truncated");
    return 0;
}

static uint64_t big_endian(const uint8_t *p, int width) {
    uint64_t v = 0;
    for (int i = 0; i < width; i++) v = (v << 8) | p[i];
    return v;
}

/* The next byte's length field of ``width`` bytes, consumed. */
static int length_field(mp_reader *r, int width, uint32_t *out) {
    if (need(r, (size_t)width)) return -1;
    *out = (uint32_t)big_endian(r->p + r->pos, width);
    r->pos += (size_t)width;
    return 0;
}

static int container(mp_reader *r, uint32_t *count, uint8_t fix, uint8_t b16, uint8_t b32,
                     size_t per_item, const char *what) {
    if (need(r, 1)) return -1;
    uint8_t b = r->p[r->pos];
    if ((b & 0xf0) == fix) {
        *count = b & 0x0f;
        r->pos++;
    } else if (b == b16 || b == b32) {
        r->pos++;
        if (length_field(r, b == b16 ? 2 : 4, count)) return -1;
    } else {
        return fail(r, what);
    }
    /* every element takes at least one byte: a count beyond the message is a lie */
    if ((uint64_t)*count * per_item > r->n - r->pos) return fail(r, "a count is longer than the message");
    return 0;
}

int mp_read_map(mp_reader *r, uint32_t *count) {
    return container(r, count, 0x80, 0xde, 0xdf, 2, "expected a map");
}

int mp_read_array(mp_reader *r, uint32_t *count) {
    return container(r, count, 0x90, 0xdc, 0xdd, 1, "expected an array");
}

static int sized(mp_reader *r, const uint8_t **data, uint32_t *len, int str) {
    if (need(r, 1)) return -1;
    uint8_t b = r->p[r->pos];
    if (str && (b & 0xe0) == 0xa0) {
        *len = b & 0x1f;
        r->pos++;
    } else if (str && b >= 0xd9 && b <= 0xdb) {
        r->pos++;
        if (length_field(r, b == 0xd9 ? 1 : b == 0xda ? 2 : 4, len)) return -1;
    } else if (!str && b >= 0xc4 && b <= 0xc6) {
        r->pos++;
        if (length_field(r, b == 0xc4 ? 1 : b == 0xc5 ? 2 : 4, len)) return -1;
    } else {
        return fail(r, str ? "expected a string" : "expected binary data");
    }
    if (need(r, *len)) return -1;
    *data = r->p + r->pos;
    r->pos += *len;
    return 0;
}

int mp_read_str(mp_reader *r, const char **s, uint32_t *len) {
    return sized(r, (const uint8_t **)s, len, 1);
}

int mp_read_bin(mp_reader *r, const uint8_t **b, uint32_t *len) {
    return sized(r, b, len, 0);
}

int mp_read_int(mp_reader *r, int64_t *v) {
    if (need(r, 1)) return -1;
    uint8_t b = r->p[r->pos];
    if (b < 0x80 || b >= 0xe0) {
        *v = (int8_t)b;
        r->pos++;
        return 0;
    }
    int width;
    int is_signed = b >= 0xd0 && b <= 0xd3;
    if (b >= 0xcc && b <= 0xcf) width = 1 << (b - 0xcc);
    else if (is_signed) width = 1 << (b - 0xd0);
    else return fail(r, "expected an integer");
    r->pos++;
    if (need(r, (size_t)width)) return -1;
    uint64_t u = big_endian(r->p + r->pos, width);
    r->pos += (size_t)width;
    if (is_signed) {
        int shift = 64 - 8 * width;      /* sign-extend */
        *v = shift ? (int64_t)(u << shift) >> shift : (int64_t)u;
    } else {
        if (u > (uint64_t)INT64_MAX) return fail(r, "an integer is larger than 2**63 - 1");
        *v = (int64_t)u;
    }
    return 0;
}

int mp_read_bool(mp_reader *r, int *v) {
    if (need(r, 1)) return -1;
    uint8_t b = r->p[r->pos];
    if (b != 0xc2 && b != 0xc3) return fail(r, "expected a boolean");
    *v = b == 0xc3;
    r->pos++;
    return 0;
}

int mp_is_nil(mp_reader *r) {
    if (need(r, 1) || r->p[r->pos] != 0xc0) return 0;
    r->pos++;
    return 1;
}

int mp_is_bin(const mp_reader *r) {
    return !r->err && r->pos < r->n && r->p[r->pos] >= 0xc4 && r->p[r->pos] <= 0xc6;
}

int mp_skip(mp_reader *r, int depth) {
    if (depth > PL_MAX_DEPTH) return fail(r, "message nested too deeply");
    if (need(r, 1)) return -1;
    uint8_t b = r->p[r->pos];
    const uint8_t *data;
    uint32_t n;
    int64_t i;
    if (b < 0x80 || b >= 0xe0 || (b >= 0xcc && b <= 0xd3)) return mp_read_int(r, &i);
    if (b == 0xc0 || b == 0xc2 || b == 0xc3) { r->pos++; return 0; }
    if (b == 0xca || b == 0xcb) {
        size_t k = b == 0xca ? 4 : 8;
        r->pos++;
        if (need(r, k)) return -1;
        r->pos += k;
        return 0;
    }
    if ((b & 0xe0) == 0xa0 || (b >= 0xd9 && b <= 0xdb)) return mp_read_str(r, (const char **)&data, &n);
    if (b >= 0xc4 && b <= 0xc6) return mp_read_bin(r, &data, &n);
    if ((b & 0xf0) == 0x90 || b == 0xdc || b == 0xdd) {
        if (mp_read_array(r, &n)) return -1;
        for (uint32_t k = 0; k < n; k++)
            if (mp_skip(r, depth + 1)) return -1;
        return 0;
    }
    if ((b & 0xf0) == 0x80 || b == 0xde || b == 0xdf) {
        if (mp_read_map(r, &n)) return -1;
        for (uint32_t k = 0; k < 2 * n; k++)
            if (mp_skip(r, depth + 1)) return -1;
        return 0;
    }
    return fail(r, "unknown MessagePack type byte");
}

/* writer ------------------------------------------------------------------------------------ */
void mp_writer_init(mp_writer *w) {
    w->cap = 256;
    w->buf = malloc(w->cap);
    w->len = 4;
    w->oom = w->buf == NULL;
}

void mp_writer_free(mp_writer *w) {
    free(w->buf);
    w->buf = NULL;
}

static void put(mp_writer *w, const void *data, size_t k) {
    if (w->oom) return;
    if (k > (size_t)-1 - w->len) { w->oom = 1; return; }
    if (w->len + k > w->cap) {
        size_t cap = w->cap;
        while (cap < w->len + k) cap = cap > (size_t)-1 / 2 ? w->len + k : 2 * cap;
        uint8_t *grown = realloc(w->buf, cap);
        if (!grown) { w->oom = 1; return; }
        w->buf = grown;
        w->cap = cap;
    }
    memcpy(w->buf + w->len, data, k);
    w->len += k;
}

static void put_be(mp_writer *w, uint8_t tag, uint64_t v, int width) {
    uint8_t tmp[9];
    tmp[0] = tag;
    for (int i = 0; i < width; i++) tmp[1 + i] = (uint8_t)(v >> (8 * (width - 1 - i)));
    put(w, tmp, 1 + (size_t)width);
}

static void head(mp_writer *w, uint32_t n, int fix, uint32_t fix_limit, int b8, uint8_t b16,
                 uint8_t b32) {
    if (fix >= 0 && n < fix_limit) {
        uint8_t b = (uint8_t)(fix | (int)n);
        put(w, &b, 1);
    } else if (b8 >= 0 && n < 256) {
        put_be(w, (uint8_t)b8, n, 1);
    } else if (n < 65536) {
        put_be(w, b16, n, 2);
    } else {
        put_be(w, b32, n, 4);
    }
}

void mp_w_map(mp_writer *w, uint32_t n) { head(w, n, 0x80, 16, -1, 0xde, 0xdf); }
void mp_w_array(mp_writer *w, uint32_t n) { head(w, n, 0x90, 16, -1, 0xdc, 0xdd); }

void mp_w_strn(mp_writer *w, const char *s, size_t len) {
    if (len > 0xffffffffu) { w->oom = 1; return; }
    head(w, (uint32_t)len, 0xa0, 32, 0xd9, 0xda, 0xdb);
    put(w, s, len);
}

void mp_w_str(mp_writer *w, const char *s) { mp_w_strn(w, s, strlen(s)); }

void mp_w_bin(mp_writer *w, const void *data, size_t len) {
    if (len > 0xffffffffu) { w->oom = 1; return; }
    head(w, (uint32_t)len, -1, 0, 0xc4, 0xc5, 0xc6);
    put(w, data, len);
}

void mp_w_int(mp_writer *w, int64_t v) {
    if (v >= 0 && v < 128) {
        uint8_t b = (uint8_t)v;
        put(w, &b, 1);
    } else if (v < 0 && v >= -32) {
        uint8_t b = (uint8_t)(v & 0xff);
        put(w, &b, 1);
    } else {
        put_be(w, 0xd3, (uint64_t)v, 8);
    }
}

void mp_w_bool(mp_writer *w, int v) {
    uint8_t b = v ? 0xc3 : 0xc2;
    put(w, &b, 1);
}

void mp_w_nil(mp_writer *w) {
    uint8_t b = 0xc0;
    put(w, &b, 1);
}

void mp_w_double(mp_writer *w, double v) {
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    put_be(w, 0xcb, u, 8);
}

int mp_w_finish(mp_writer *w) {
    if (w->oom || w->len - 4 > 0xffffffffu) return -1;
    uint64_t n = w->len - 4;
    for (int i = 0; i < 4; i++) w->buf[i] = (uint8_t)(n >> (8 * (3 - i)));
    return 0;
}

/* messages ---------------------------------------------------------------------------------- */
int mp_message_parse(mp_message *m, const uint8_t *p, size_t n, const char **err) {
    mp_reader r;
    uint32_t count;
    mp_reader_init(&r, p, n);
    m->p = p;
    m->n = n;
    m->count = 0;
    if (mp_read_map(&r, &count)) { *err = r.err; return -1; }
    if (count > PL_MAX_FIELDS) { *err = "a message has too many fields"; return -1; }
    for (uint32_t k = 0; k < count; k++) {
        mp_field *f = &m->fields[k];
        if (mp_read_str(&r, &f->key, &f->key_len)) { *err = r.err; return -1; }
        for (uint32_t j = 0; j < k; j++) {
            if (m->fields[j].key_len == f->key_len && !memcmp(m->fields[j].key, f->key, f->key_len)) {
                *err = "a key appears twice in a message";
                return -1;
            }
        }
        f->pos = r.pos;
        if (mp_skip(&r, 1)) { *err = r.err; return -1; }
        m->count = (int)k + 1;
    }
    if (r.pos != n) { *err = "bytes after the end of the message"; return -1; }
    return 0;
}

int mp_message_get(const mp_message *m, const char *key, mp_reader *r) {
    size_t len = strlen(key);
    for (int k = 0; k < m->count; k++) {
        const mp_field *f = &m->fields[k];
        if (f->key_len == len && !memcmp(f->key, key, len)) {
            mp_reader_init(r, m->p, m->n);
            r->pos = f->pos;
            return 0;
        }
    }
    return -1;
}
