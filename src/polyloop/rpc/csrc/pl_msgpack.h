/* SPDX-License-Identifier: Apache-2.0 */
/* The MessagePack subset of polyloop's RPC protocol (docs/rpc.md): a bounded reader that
 * never trusts a length, a growable writer, and a parsed message (a map of at most
 * PL_MAX_FIELDS string keys) whose values are read in place. */
#ifndef PL_MSGPACK_H
#define PL_MSGPACK_H

#include <stddef.h>
#include <stdint.h>

#define PL_MAX_DEPTH 16
#define PL_MAX_FIELDS 16

typedef struct {
    const uint8_t *p;
    size_t n, pos;
    const char *err;        /* the first error, or NULL */
} mp_reader;

void mp_reader_init(mp_reader *r, const uint8_t *p, size_t n);
int mp_read_map(mp_reader *r, uint32_t *count);
int mp_read_array(mp_reader *r, uint32_t *count);
int mp_read_str(mp_reader *r, const char **s, uint32_t *len);
int mp_read_bin(mp_reader *r, const uint8_t **b, uint32_t *len);
int mp_read_int(mp_reader *r, int64_t *v);
int mp_read_bool(mp_reader *r, int *v);
int mp_is_nil(mp_reader *r);          /* 1 (and consumed) if the next value is nil */
int mp_is_bin(const mp_reader *r);    /* 1 if the next value is a binary */
int mp_skip(mp_reader *r, int depth);

typedef struct {
    uint8_t *buf;
    size_t len, cap;
    int oom;
} mp_writer;

void mp_writer_init(mp_writer *w);   /* reserves the 4-byte frame header */
void mp_writer_free(mp_writer *w);
void mp_w_map(mp_writer *w, uint32_t n);
void mp_w_array(mp_writer *w, uint32_t n);
void mp_w_str(mp_writer *w, const char *s);
void mp_w_strn(mp_writer *w, const char *s, size_t len);
void mp_w_bin(mp_writer *w, const void *data, size_t len);
void mp_w_int(mp_writer *w, int64_t v);
void mp_w_bool(mp_writer *w, int v);
void mp_w_nil(mp_writer *w);
void mp_w_double(mp_writer *w, double v);
/* Write the frame length into the header; 0, or -1 when out of memory or too large. */
int mp_w_finish(mp_writer *w);

typedef struct {
    const char *key;
    uint32_t key_len;
    size_t pos;             /* where the value starts */
} mp_field;

typedef struct {
    const uint8_t *p;
    size_t n;
    int count;
    mp_field fields[PL_MAX_FIELDS];
} mp_message;

/* Parse a whole frame as one map with string keys; 0, or -1 with *err set. */
int mp_message_parse(mp_message *m, const uint8_t *p, size_t n, const char **err);
/* A reader at the value of ``key``; 0 if present, -1 if not. */
int mp_message_get(const mp_message *m, const char *key, mp_reader *r);

#endif
