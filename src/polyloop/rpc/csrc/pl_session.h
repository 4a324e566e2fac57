/* SPDX-License-Identifier: Apache-2.0 */
/* What the parts of a session (pl_session.c: the session, upload, load, unload; pl_call.c:
 * calls and their timing) share. Internal to the server. */
#ifndef PL_SESSION_H
#define PL_SESSION_H

#include "pl_rpc.h"

#define MAX_LIBS 65536
#define MAX_ARGS 4096
#define MAX_PARAMS 4096
#define MAX_NAME 200
#define MAX_REPEAT 10000
#define MAX_NUMBER 1000000000LL

typedef int32_t (*entry_fn)(void **, const int64_t *);
typedef int64_t (*size_fn)(const int64_t *);
typedef const char *(*check_fn)(const int64_t *);
typedef void (*threads_fn)(int);

enum { LIB_NONE, LIB_UPLOADED, LIB_LOADED, LIB_GONE };

typedef struct {
    void *handle;
    int state;
} lib_slot;

typedef struct {
    int lib;
    entry_fn entry;
    size_fn workspace;
    const int64_t *fault;
    check_fn check;
} fn_slot;

typedef struct {
    int fd;
    const pl_options *opt;
    const char *dir;
    lib_slot *libs;
    int n_libs;
    fn_slot *fns;
    int n_fns;
} session;

/* End the session after telling the client why (a request that breaks the protocol). */
__attribute__((noreturn)) void pl_fatal(session *s, const char *why);
/* Answer the request with an error; the session goes on. ``fmt`` has one %s: ``detail``. */
void pl_reply_error(session *s, const char *fmt, const char *detail);
/* call {fn, args, params, keep?, number?, repeat?, min_repeat_ms?, timeout_ms?} */
void pl_op_call(session *s, const mp_message *m);

/* answer the request with an error (the session goes on) and return */
#define REFUSE(fmt, detail) do { pl_reply_error(s, fmt, detail); return; } while (0)

#endif
