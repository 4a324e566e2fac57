/* SPDX-License-Identifier: Apache-2.0 */
/* polyloop's RPC server for devices (protocol version 1, docs/rpc.md): what the listening
 * process (pl_server.c), the sessions (pl_session.c, pl_call.c) and the frame I/O (pl_io.c)
 * share. */
#ifndef PL_RPC_H
#define PL_RPC_H

#include <stddef.h>
#include <stdint.h>

#include "pl_msgpack.h"

#define PL_PROTOCOL "polyloop-rpc"
#define PL_VERSION 1
#define PL_NONCE_BYTES 32
#define PL_HELLO_LIMIT (64 * 1024)
#define PL_HELLO_SECONDS 10         /* the time a client has to prove the key */

#if defined(__aarch64__)
#define PL_TRIPLE "aarch64-linux-gnu"
#elif defined(__arm__)
#define PL_TRIPLE "arm-linux-gnueabihf"
#elif defined(__riscv) && __riscv_xlen == 64
#define PL_TRIPLE "riscv64-linux-gnu"
#elif defined(__x86_64__)
#define PL_TRIPLE "x86_64-linux-gnu"
#else
#define PL_TRIPLE "unknown"
#endif

typedef struct {
    const char *host;
    int port;
    const uint8_t *key;         /* NULL: no key */
    size_t key_len;
    const char *work_dir;
    const char *target;         /* the target string the host builds with */
    int max_sessions;
    uint64_t max_upload;        /* bytes of one library */
    uint64_t max_frame;         /* bytes of one request */
    uint64_t max_memory;        /* bytes of the arrays of one call */
    int session_timeout;        /* seconds a session may wait for a request */
    int max_call_seconds;       /* the most a call may ask for */
    const char *tracker_host;   /* NULL: no tracker */
    int tracker_port;
    const char *device_key;
    const char *advertise;      /* the address the tracker hands out; NULL: derived */
} pl_options;

/* frame I/O (pl_io.c) */
int pl_send_all(int fd, const void *data, size_t len);
int pl_recv_all(int fd, void *data, size_t len);
/* Read one frame of at most ``limit`` bytes; 0 and a malloc'ed buffer, 1 on a clean close
 * between frames, -1 with *err set otherwise. */
int pl_recv_frame(int fd, uint64_t limit, uint8_t **buf, size_t *len, const char **err);
int pl_send_writer(int fd, mp_writer *w);
/* Send {"ok": false, "error": why[, "fatal": true]}. */
void pl_send_error(int fd, const char *why, int fatal);
void pl_send_ok(int fd);
int pl_random(uint8_t *out, size_t len);
/* A string field as a NUL-terminated copy in ``out`` (at most cap - 1 bytes); 0 or -1. */
int pl_get_str(const mp_message *m, const char *key, char *out, size_t cap);
int pl_get_int(const mp_message *m, const char *key, int64_t *v);
/* The hello a server or tracker client sends after the peer's hello: prove the key. */
int pl_client_handshake(int fd, const uint8_t *key, size_t key_len, const char *role,
                        const char **err);

/* sessions (pl_session.c): serve one client on ``fd``, in a process of its own */
void pl_serve_session(int fd, const pl_options *opt, const char *session_dir);
void pl_remove_session_dir(const char *dir);

#endif
