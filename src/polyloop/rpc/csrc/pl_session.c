/* SPDX-License-Identifier: Apache-2.0 */
/* One client session, in a process of its own (a kernel that crashes or hangs ends only this
 * process). Libraries are written only into the session's directory, under names the server
 * chooses, and only a library uploaded in this session can be loaded. A request that breaks
 * the wire format ends the session with an error; one that asks for something impossible (an
 * unknown library, a limit) gets an error and the session goes on. */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "pl_session.h"
#include "pl_sha256.h"

void pl_fatal(session *s, const char *why) {
    pl_send_error(s->fd, why, 1);
    pl_remove_session_dir(s->dir);
    _exit(2);
}

static void lib_path(const session *s, int k, char *out, size_t cap) {
    snprintf(out, cap, "%s/lib%d.so", s->dir, k);
}

static int is_identifier(const char *name) {
    if (!name[0] || (name[0] >= '0' && name[0] <= '9')) return 0;
    for (const char *c = name; *c; c++) {
        int ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9')
                 || *c == '_';
        if (!ok) return 0;
    }
    return 1;
}

void pl_reply_error(session *s, const char *fmt, const char *detail) {
    char text[512];
    snprintf(text, sizeof text, fmt, detail ? detail : "");
    pl_send_error(s->fd, text, 0);
}

/* upload {data: bin} -> {lib: int} */
static void op_upload(session *s, const mp_message *m) {
    mp_reader r;
    const uint8_t *data;
    uint32_t len;
    char path[PATH_MAX], limit[64];
    if (mp_message_get(m, "data", &r) || mp_read_bin(&r, &data, &len))
        pl_fatal(s, "upload: field 'data' (binary) is missing");
    if (len > s->opt->max_upload) {
        snprintf(limit, sizeof limit, "%llu", (unsigned long long)s->opt->max_upload);
        REFUSE("upload: the library is larger than the server's limit of %s "
                              "bytes (--max-upload)", limit);
    }
    if (len < 4 || memcmp(data, "\177ELF", 4))
        REFUSE("upload: the data is not an ELF shared library%s", NULL);
    if (s->n_libs >= MAX_LIBS) REFUSE("upload: too many libraries in one session%s", NULL);
    lib_slot *grown = realloc(s->libs, (size_t)(s->n_libs + 1) * sizeof *grown);
    if (!grown) REFUSE("upload: out of memory%s", NULL);
    s->libs = grown;
    int k = s->n_libs;
    lib_path(s, k, path, sizeof path);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0700);
    if (fd < 0) REFUSE("upload: cannot create the library file: %s", strerror(errno));
    size_t done = 0;
    while (done < len) {
        ssize_t w = write(fd, data + done, len - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            close(fd);
            unlink(path);
            REFUSE("upload: cannot write the library file: %s", strerror(errno));
        }
        done += (size_t)w;
    }
    close(fd);
    s->libs[k].handle = NULL;
    s->libs[k].state = LIB_UPLOADED;
    s->n_libs++;
    mp_writer w;
    mp_writer_init(&w);
    mp_w_map(&w, 2);
    mp_w_str(&w, "ok");
    mp_w_bool(&w, 1);
    mp_w_str(&w, "lib");
    mp_w_int(&w, k);
    pl_send_writer(s->fd, &w);
    mp_writer_free(&w);
}

static int lib_index(session *s, const mp_message *m) {
    int64_t k;
    if (pl_get_int(m, "lib", &k)) pl_fatal(s, "field 'lib' (an integer) is missing");
    if (k < 0 || k >= s->n_libs || s->libs[k].state == LIB_GONE) return -1;
    return (int)k;
}

/* a symbol named ``entry`` + ``suffix`` in the library, or NULL */
static void *symbol(void *handle, const char *entry, const char *suffix) {
    char name[MAX_NAME + 32];
    snprintf(name, sizeof name, "%s%s", entry, suffix);
    return dlsym(handle, name);
}

/* load {lib, entry, workspace?: str, threads?: int} -> {fn: int} */
static void op_load(session *s, const mp_message *m) {
    char entry[MAX_NAME + 1], workspace[MAX_NAME + 1], path[PATH_MAX];
    int k = lib_index(s, m);
    if (k < 0) REFUSE("load: no library of that number was uploaded in this session%s", NULL);
    if (pl_get_str(m, "entry", entry, sizeof entry)) pl_fatal(s, "load: field 'entry' (a string) is missing");
    if (!is_identifier(entry)) REFUSE("load: '%s' is not a C function name", entry);
    mp_reader r;
    int has_workspace = mp_message_get(m, "workspace", &r) == 0 && !mp_is_nil(&r);
    if (has_workspace && (pl_get_str(m, "workspace", workspace, sizeof workspace)
                          || !is_identifier(workspace)))
        pl_fatal(s, "load: field 'workspace' is not a C function name");
    lib_slot *lib = &s->libs[k];
    if (!lib->handle) {
        lib_path(s, k, path, sizeof path);
        lib->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!lib->handle) REFUSE("load: cannot load the library: %s", dlerror());
        lib->state = LIB_LOADED;
        /* The OpenMP runtime a kernel pulled in keeps threads that outlive the kernel's
         * library: it must never be unloaded with it (unload would pull the code from under
         * them). Pinned if loaded; nothing otherwise. */
        dlopen("libgomp.so.1", RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
    }
    fn_slot fn = {k, NULL, NULL, NULL, NULL};
    *(void **)&fn.entry = dlsym(lib->handle, entry);
    if (!fn.entry) REFUSE("load: the library has no function '%s'", entry);
    if (has_workspace) {
        *(void **)&fn.workspace = dlsym(lib->handle, workspace);
        if (!fn.workspace) REFUSE("load: the library has no function '%s'", workspace);
    }
    fn.fault = symbol(lib->handle, entry, "_index_fault");
    *(void **)&fn.check = symbol(lib->handle, entry, "_check_sizes");
    int64_t threads;
    if (pl_get_int(m, "threads", &threads) == 0 && threads > 0 && threads <= 4096) {
        threads_fn set;
        *(void **)&set = dlsym(lib->handle, "omp_set_num_threads");
        if (set) set((int)threads);
    }
    fn_slot *grown = realloc(s->fns, (size_t)(s->n_fns + 1) * sizeof *grown);
    if (!grown) REFUSE("load: out of memory%s", NULL);
    s->fns = grown;
    s->fns[s->n_fns] = fn;
    mp_writer w;
    mp_writer_init(&w);
    mp_w_map(&w, 2);
    mp_w_str(&w, "ok");
    mp_w_bool(&w, 1);
    mp_w_str(&w, "fn");
    mp_w_int(&w, s->n_fns++);
    pl_send_writer(s->fd, &w);
    mp_writer_free(&w);
}

/* unload {lib}: the library is closed and its file removed; its functions are gone */
static void op_unload(session *s, const mp_message *m) {
    char path[PATH_MAX];
    int k = lib_index(s, m);
    if (k < 0) REFUSE("unload: no library of that number is loaded%s", NULL);
    if (s->libs[k].handle) dlclose(s->libs[k].handle);
    s->libs[k].handle = NULL;
    s->libs[k].state = LIB_GONE;
    for (int f = 0; f < s->n_fns; f++)
        if (s->fns[f].lib == k) s->fns[f].entry = NULL;
    lib_path(s, k, path, sizeof path);
    unlink(path);
    pl_send_ok(s->fd);
}


static void send_hello(session *s, const uint8_t *nonce) {
    struct utsname u;
    if (uname(&u)) strcpy(u.machine, "unknown");
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    mp_writer w;
    mp_writer_init(&w);
    mp_w_map(&w, 11);
    mp_w_str(&w, "proto"); mp_w_str(&w, PL_PROTOCOL);
    mp_w_str(&w, "version"); mp_w_int(&w, PL_VERSION);
    mp_w_str(&w, "role"); mp_w_str(&w, "server");
    mp_w_str(&w, "impl"); mp_w_str(&w, "c");
    mp_w_str(&w, "target"); mp_w_str(&w, s->opt->target);
    mp_w_str(&w, "machine"); mp_w_str(&w, u.machine);
    mp_w_str(&w, "threads"); mp_w_int(&w, cpus > 0 ? cpus : 1);
    mp_w_str(&w, "nonce"); mp_w_bin(&w, nonce, PL_NONCE_BYTES);
    mp_w_str(&w, "auth"); mp_w_bool(&w, s->opt->key != NULL);
    mp_w_str(&w, "max_frame"); mp_w_int(&w, (int64_t)s->opt->max_frame);
    mp_w_str(&w, "max_upload"); mp_w_int(&w, (int64_t)s->opt->max_upload);
    if (pl_send_writer(s->fd, &w)) _exit(1);
    mp_writer_free(&w);
}

/* The client's hello must prove the key (when the server has one). */
static void check_client(session *s, const uint8_t *nonce) {
    uint8_t *buf = NULL, mac[32];
    size_t len;
    const char *err = NULL;
    mp_message m;
    mp_reader r;
    char op[16];
    int64_t version;
    int got = pl_recv_frame(s->fd, PL_HELLO_LIMIT, &buf, &len, &err);
    if (got) {
        pl_remove_session_dir(s->dir);
        _exit(got == 1 ? 0 : 2);
    }
    if (mp_message_parse(&m, buf, len, &err)) pl_fatal(s, err);
    if (pl_get_str(&m, "op", op, sizeof op) || strcmp(op, "hello"))
        pl_fatal(s, "the first request must be a hello");
    if (pl_get_int(&m, "version", &version) || version != PL_VERSION)
        pl_fatal(s, "this server speaks protocol version 1 only");
    if (s->opt->key) {
        const uint8_t *given;
        uint32_t given_len;
        pl_hmac_sha256(s->opt->key, s->opt->key_len, nonce, PL_NONCE_BYTES, mac);
        if (mp_message_get(&m, "mac", &r) || mp_read_bin(&r, &given, &given_len)
            || given_len != sizeof mac || !pl_equal_ct(given, mac, sizeof mac))
            pl_fatal(s, "wrong key");
    }
    free(buf);
    pl_send_ok(s->fd);
}

void pl_serve_session(int fd, const pl_options *opt, const char *session_dir) {
    session s = {fd, opt, session_dir, NULL, 0, NULL, 0};
    uint8_t nonce[PL_NONCE_BYTES];
    /* a client that does not prove the key promptly does not hold a session for long */
    struct timeval hello = {opt->session_timeout < PL_HELLO_SECONDS ? opt->session_timeout
                                                                    : PL_HELLO_SECONDS, 0};
    struct timeval idle = {opt->session_timeout, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &hello, sizeof hello);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &idle, sizeof idle);
    if (pl_random(nonce, sizeof nonce)) pl_fatal(&s, "the server cannot read /dev/urandom");
    send_hello(&s, nonce);
    check_client(&s, nonce);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &idle, sizeof idle);
    for (;;) {
        uint8_t *buf = NULL;
        size_t len;
        const char *err = NULL;
        char op[16];
        mp_message m;
        int got = pl_recv_frame(fd, opt->max_frame, &buf, &len, &err);
        if (got == 1) break;
        if (got < 0) pl_fatal(&s, err);
        if (mp_message_parse(&m, buf, len, &err)) pl_fatal(&s, err);
        if (pl_get_str(&m, "op", op, sizeof op)) pl_fatal(&s, "a request has no 'op'");
        if (!strcmp(op, "upload")) op_upload(&s, &m);
        else if (!strcmp(op, "load")) op_load(&s, &m);
        else if (!strcmp(op, "call")) pl_op_call(&s, &m);
        else if (!strcmp(op, "unload")) op_unload(&s, &m);
        else if (!strcmp(op, "bye")) {
            pl_send_ok(fd);
            free(buf);
            break;
        } else pl_reply_error(&s, "unknown request '%s'", op);
        free(buf);
    }
    pl_remove_session_dir(session_dir);
    _exit(0);
}

void pl_remove_session_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL)
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
                unlinkat(dirfd(d), e->d_name, 0);
        closedir(d);
    }
    rmdir(dir);
}
