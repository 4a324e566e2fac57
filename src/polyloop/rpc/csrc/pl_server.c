/* SPDX-License-Identifier: Apache-2.0 */
/* polyloop-rpc-server: the device side of polyloop's RPC (docs/rpc.md), with no Python.
 *
 *   polyloop-rpc-server [--host 127.0.0.1] [--port 9090] [--key KEY | --key-file FILE]
 *       [--work-dir DIR] [--target "c -mtriple=..."] [--max-sessions 4]
 *       [--max-upload BYTES] [--max-frame BYTES] [--max-memory BYTES]
 *       [--session-timeout S] [--call-timeout S]
 *       [--tracker HOST:PORT --device-key NAME [--advertise HOST]]
 *
 * The listening process never loads a library: each connection is served by a process of
 * its own (pl_session.c), with a directory of its own inside the work directory, removed when
 * the session ends or its process dies. It binds to loopback unless told otherwise, and then
 * only with a key. With --tracker it registers with a tracker and stays registered (a lost
 * tracker is tried again every few seconds). */
#define _GNU_SOURCE
#include "pl_rpc.h"

#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>

#define MAX_CHILDREN 256
#define TRACKER_RETRY_SECONDS 3

typedef struct {
    pid_t pid;
    char dir[PATH_MAX];
} child;

static volatile sig_atomic_t stopping = 0;
static child children[MAX_CHILDREN];
static int n_children = 0;
#ifdef PL_DEFAULT_TARGET          /* polyloop rpc build-server bakes the target it was built for */
static char default_target[] = PL_DEFAULT_TARGET;
#else
static char default_target[] = "c -mtriple=" PL_TRIPLE;
#endif
static char work_dir_buf[PATH_MAX];
static int created_work_dir = 0;

static void on_stop(int sig) {
    (void)sig;
    stopping = 1;
}

static void usage_error(const char *what, const char *value) {
    fprintf(stderr, "polyloop-rpc-server: %s%s%s\n", what, value ? ": " : "", value ? value : "");
    exit(2);
}

static uint64_t parse_size(const char *flag, const char *text) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno || *end || end == text || text[0] == '-') usage_error(flag, "expects a number");
    return (uint64_t)v;
}

static int is_loopback(const char *host) {
    return !strcmp(host, "localhost") || !strncmp(host, "127.", 4) || !strcmp(host, "::1");
}

static char *read_key_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) usage_error("cannot read the key file", path);
    static char key[4096];
    size_t n = fread(key, 1, sizeof key - 1, f);
    fclose(f);
    while (n && (key[n - 1] == '\n' || key[n - 1] == '\r')) n--;
    key[n] = 0;
    *len = n;
    return key;
}

static void parse_args(int argc, char **argv, pl_options *o) {
    *o = (pl_options){.host = "127.0.0.1", .port = 9090, .target = default_target,
                      .max_sessions = 4, .max_upload = 64u << 20, .max_frame = 256u << 20,
                      .max_memory = 1024u << 20, .session_timeout = 300,
                      .max_call_seconds = 600};
    const char *env_key = getenv("POLYLOOP_RPC_KEY");
    if (env_key && *env_key) {
        o->key = (const uint8_t *)env_key;
        o->key_len = strlen(env_key);
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            puts("usage: polyloop-rpc-server [--host H] [--port P] [--key K | --key-file F] "
                 "[--work-dir D] [--target T] [--max-sessions N] [--max-upload B] "
                 "[--max-frame B] [--max-memory B] [--session-timeout S] [--call-timeout S] "
                 "[--tracker H:P --device-key NAME [--advertise H]]");
            exit(0);
        }
        if (!v) usage_error("missing value after", a);
        i++;
        if (!strcmp(a, "--host")) o->host = v;
        else if (!strcmp(a, "--port")) o->port = (int)parse_size(a, v);
        else if (!strcmp(a, "--key")) { o->key = (const uint8_t *)v; o->key_len = strlen(v); }
        else if (!strcmp(a, "--key-file")) o->key = (const uint8_t *)read_key_file(v, &o->key_len);
        else if (!strcmp(a, "--work-dir")) o->work_dir = v;
        else if (!strcmp(a, "--target")) o->target = v;
        else if (!strcmp(a, "--max-sessions")) o->max_sessions = (int)parse_size(a, v);
        else if (!strcmp(a, "--max-upload")) o->max_upload = parse_size(a, v);
        else if (!strcmp(a, "--max-frame")) o->max_frame = parse_size(a, v);
        else if (!strcmp(a, "--max-memory")) o->max_memory = parse_size(a, v);
        else if (!strcmp(a, "--session-timeout")) o->session_timeout = (int)parse_size(a, v);
        else if (!strcmp(a, "--call-timeout")) o->max_call_seconds = (int)parse_size(a, v);
        else if (!strcmp(a, "--device-key")) o->device_key = v;
        else if (!strcmp(a, "--advertise")) o->advertise = v;
        else if (!strcmp(a, "--tracker")) {
            const char *colon = strrchr(v, ':');
            if (!colon || colon == v) usage_error("--tracker expects HOST:PORT, got", v);
            static char host[256];
            snprintf(host, sizeof host, "%.*s", (int)(colon - v), v);
            o->tracker_host = host;
            o->tracker_port = (int)parse_size(a, colon + 1);
        } else usage_error("unknown option", a);
    }
    if (o->key && o->key_len == 0) o->key = NULL;
    if (!is_loopback(o->host) && !o->key)
        usage_error("listening on another address than loopback needs a key (--key, --key-file "
                    "or POLYLOOP_RPC_KEY); refusing to listen on", o->host);
    if (o->port > 65535 || o->max_sessions < 1 || o->max_sessions > MAX_CHILDREN
        || o->session_timeout < 1 || o->max_call_seconds < 1)
        usage_error("an option is out of range", NULL);
    if (o->tracker_host && !o->device_key) usage_error("--tracker needs --device-key", NULL);
    if (o->max_frame < o->max_upload + 1024) o->max_frame = o->max_upload + 1024;
}

/* The work directory: the given one (created 0700, refused when others may write it), or a
 * fresh one under $TMPDIR. */
static void make_work_dir(pl_options *o) {
    if (o->work_dir) {
        struct stat st;
        if (mkdir(o->work_dir, 0700) && errno != EEXIST) usage_error("cannot create --work-dir", o->work_dir);
        if (stat(o->work_dir, &st) || !S_ISDIR(st.st_mode) || st.st_uid != getuid()
            || (st.st_mode & (S_IWGRP | S_IWOTH)))
            usage_error("--work-dir must be a directory of this user that others cannot write", o->work_dir);
        return;
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(work_dir_buf, sizeof work_dir_buf, "%s/polyloop-rpc-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(work_dir_buf)) usage_error("cannot create a work directory in", tmp ? tmp : "/tmp");
    o->work_dir = work_dir_buf;
    created_work_dir = 1;
}

static int listen_on(const pl_options *o, int *port) {
    struct addrinfo hints = {0}, *res;
    char service[16];
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    snprintf(service, sizeof service, "%d", o->port);
    if (getaddrinfo(o->host, service, &hints, &res)) usage_error("cannot resolve --host", o->host);
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd < 0 || bind(fd, res->ai_addr, res->ai_addrlen) || listen(fd, 16)) {
        perror("polyloop-rpc-server: cannot listen");
        exit(1);
    }
    freeaddrinfo(res);
    struct sockaddr_storage a;
    socklen_t len = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &len);
    *port = ntohs(a.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&a)->sin6_port
                                          : ((struct sockaddr_in *)&a)->sin_port);
    return fd;
}

static void reap(void) {
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        for (int k = 0; k < n_children; k++) {
            if (children[k].pid == pid) {
                pl_remove_session_dir(children[k].dir);   /* a crashed session leaves files */
                children[k] = children[--n_children];
                break;
            }
        }
    }
}

static void busy(int fd, int max) {
    char text[128];
    mp_writer w;
    snprintf(text, sizeof text, "the server is busy: it serves at most %d sessions at once "
                                "(--max-sessions)", max);
    mp_writer_init(&w);
    mp_w_map(&w, 4);
    mp_w_str(&w, "proto"); mp_w_str(&w, PL_PROTOCOL);
    mp_w_str(&w, "version"); mp_w_int(&w, PL_VERSION);
    mp_w_str(&w, "role"); mp_w_str(&w, "server");
    mp_w_str(&w, "error"); mp_w_str(&w, text);
    pl_send_writer(fd, &w);
    mp_writer_free(&w);
}

static void start_session(int listener, int tracker, int fd, const pl_options *o) {
    static unsigned long counter = 0;
    child c;
    snprintf(c.dir, sizeof c.dir, "%s/session-%ld-%lu", o->work_dir, (long)getpid(), ++counter);
    if (mkdir(c.dir, 0700)) {
        pl_send_error(fd, "the server cannot create a session directory", 1);
        return;
    }
    pid_t pid = fork();
    if (pid == 0) {
        close(listener);
        if (tracker >= 0) close(tracker);
#ifdef PR_SET_PDEATHSIG
        prctl(PR_SET_PDEATHSIG, SIGKILL);    /* a session does not outlive its server */
#endif
        signal(SIGTERM, SIG_DFL);
        signal(SIGINT, SIG_DFL);
        pl_serve_session(fd, o, c.dir);
    }
    if (pid < 0) {
        pl_send_error(fd, "the server cannot start a session process", 1);
        pl_remove_session_dir(c.dir);
        return;
    }
    c.pid = pid;
    children[n_children++] = c;
}

/* tracker registration ------------------------------------------------------------------------ */
static int connect_to(const char *host, int port) {
    struct addrinfo hints = {0}, *res;
    char service[16];
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    snprintf(service, sizeof service, "%d", port);
    if (getaddrinfo(host, service, &hints, &res)) return -1;
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct timeval t = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &t, sizeof t);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &t, sizeof t);
    if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen)) {
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    return fd;
}

/* The address clients reach this server at: --advertise, the listening host, or (listening
 * on every address) the local address of the connection to the tracker. */
static void advertised_host(const pl_options *o, int tracker, char *out, size_t cap) {
    if (o->advertise) {
        snprintf(out, cap, "%s", o->advertise);
    } else if (strcmp(o->host, "0.0.0.0") && strcmp(o->host, "::")) {
        snprintf(out, cap, "%s", o->host);
    } else {
        struct sockaddr_storage a;
        socklen_t len = sizeof a;
        getsockname(tracker, (struct sockaddr *)&a, &len);
        void *addr = a.ss_family == AF_INET6 ? (void *)&((struct sockaddr_in6 *)&a)->sin6_addr
                                             : (void *)&((struct sockaddr_in *)&a)->sin_addr;
        inet_ntop(a.ss_family, addr, out, (socklen_t)cap);
    }
}

static int register_with_tracker(const pl_options *o, int port) {
    const char *err = NULL;
    int fd = connect_to(o->tracker_host, o->tracker_port);
    if (fd < 0) return -1;
    if (pl_client_handshake(fd, o->key, o->key_len, "tracker", &err)) {
        fprintf(stderr, "polyloop-rpc-server: the tracker refused the session: %s\n", err);
        close(fd);
        return -1;
    }
    char host[256];
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    advertised_host(o, fd, host, sizeof host);
    mp_writer w;
    mp_writer_init(&w);
    mp_w_map(&w, 8);
    mp_w_str(&w, "op"); mp_w_str(&w, "register");
    mp_w_str(&w, "device_key"); mp_w_str(&w, o->device_key);
    mp_w_str(&w, "host"); mp_w_str(&w, host);
    mp_w_str(&w, "port"); mp_w_int(&w, port);
    mp_w_str(&w, "target"); mp_w_str(&w, o->target);
    mp_w_str(&w, "impl"); mp_w_str(&w, "c");
    mp_w_str(&w, "threads"); mp_w_int(&w, cpus > 0 ? cpus : 1);
    mp_w_str(&w, "max_sessions"); mp_w_int(&w, o->max_sessions);
    int bad = pl_send_writer(fd, &w);
    mp_writer_free(&w);
    uint8_t *buf = NULL;
    size_t len;
    mp_message m;
    mp_reader r;
    int ok = 0;
    bad = bad || pl_recv_frame(fd, PL_HELLO_LIMIT, &buf, &len, &err)
          || mp_message_parse(&m, buf, len, &err) || mp_message_get(&m, "ok", &r)
          || mp_read_bool(&r, &ok) || !ok;
    free(buf);
    if (bad) {
        close(fd);
        return -1;
    }
    struct timeval none = {0, 0};        /* from now on only poll() decides when to read */
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof none);
    fprintf(stderr, "polyloop-rpc-server: registered with the tracker %s:%d as '%s' at %s:%d\n",
            o->tracker_host, o->tracker_port, o->device_key, host, port);
    return fd;
}

/* The tracker wrote (a ping, answered) or closed the connection (-1: register again). */
static int tracker_message(int fd) {
    uint8_t *buf = NULL;
    size_t len;
    const char *err;
    if (pl_recv_frame(fd, PL_HELLO_LIMIT, &buf, &len, &err)) {
        close(fd);
        return -1;
    }
    free(buf);
    pl_send_ok(fd);
    return fd;
}

int main(int argc, char **argv) {
    pl_options o;
    parse_args(argc, argv, &o);
    make_work_dir(&o);
    signal(SIGPIPE, SIG_IGN);
    struct sigaction stop = {0};
    stop.sa_handler = on_stop;
    sigaction(SIGTERM, &stop, NULL);
    sigaction(SIGINT, &stop, NULL);
    int port, tracker = -1;
    time_t next_try = 0;
    int listener = listen_on(&o, &port);
    printf("polyloop rpc server (C, protocol %d, target '%s') listening on %s:%d, work directory "
           "%s%s\n", PL_VERSION, o.target, o.host, port, o.work_dir, o.key ? ", key required" : "");
    fflush(stdout);
    while (!stopping) {
        if (o.tracker_host && tracker < 0 && time(NULL) >= next_try) {
            tracker = register_with_tracker(&o, port);
            next_try = time(NULL) + TRACKER_RETRY_SECONDS;
        }
        struct pollfd p[2] = {{listener, POLLIN, 0}, {tracker, POLLIN, 0}};
        int ready = poll(p, tracker >= 0 ? 2 : 1, 500);
        reap();
        if (ready <= 0) continue;
        if (tracker >= 0 && (p[1].revents & (POLLIN | POLLHUP | POLLERR)))
            tracker = tracker_message(tracker);
        if (!(p[0].revents & POLLIN)) continue;
        int fd = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) continue;
        if (n_children >= o.max_sessions) busy(fd, o.max_sessions);
        else start_session(listener, tracker, fd, &o);
        close(fd);
    }
    for (int k = 0; k < n_children; k++) {
        kill(children[k].pid, SIGKILL);
        waitpid(children[k].pid, NULL, 0);
        pl_remove_session_dir(children[k].dir);
    }
    if (created_work_dir) rmdir(o.work_dir);
    return 0;
}
