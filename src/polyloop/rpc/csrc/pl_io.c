/* SPDX-License-Identifier: Apache-2.0 */
/* Frames on a socket: a 4-byte big-endian length, then one MessagePack map (docs/rpc.md). */
#include "pl_rpc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "pl_sha256.h"

int pl_send_all(int fd, const void *data, size_t len) {
    const uint8_t *p = data;
    while (len) {
        ssize_t k = send(fd, p, len, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        p += k;
        len -= (size_t)k;
    }
    return 0;
}

int pl_recv_all(int fd, void *data, size_t len) {
    uint8_t *p = data;
    while (len) {
        ssize_t k = recv(fd, p, len, 0);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        p += k;
        len -= (size_t)k;
    }
    return 0;
}

int pl_recv_frame(int fd, uint64_t limit, uint8_t **buf, size_t *len, const char **err) {
    uint8_t head[4];
    ssize_t k;
    do {
        k = recv(fd, head, 1, 0);
    } while (k < 0 && errno == EINTR);
    if (k == 0) return 1;
    if (k < 0) {
        *err = errno == EAGAIN || errno == EWOULDBLOCK ? "the session was idle too long"
                                                       : "the connection failed";
        return -1;
    }
    if (pl_recv_all(fd, head + 1, 3)) {
        *err = "the connection ended inside a frame header";
        return -1;
    }
    uint64_t n = (uint64_t)head[0] << 24 | (uint64_t)head[1] << 16 | (uint64_t)head[2] << 8 | head[3];
    if (n > limit || n > (uint64_t)SIZE_MAX - 1) {
        *err = "a frame is over the server's size limit";
        return -1;
    }
    *buf = malloc(n ? (size_t)n : 1);
    if (!*buf) {
        *err = "out of memory for a frame";
        return -1;
    }
    if (pl_recv_all(fd, *buf, (size_t)n)) {
        free(*buf);
        *buf = NULL;
        *err = "the connection ended inside a frame";
        return -1;
    }
    *len = (size_t)n;
    return 0;
}

int pl_send_writer(int fd, mp_writer *w) {
    if (mp_w_finish(w)) return -1;
    return pl_send_all(fd, w->buf, w->len);
}

void pl_send_error(int fd, const char *why, int fatal) {
    mp_writer w;
    mp_writer_init(&w);
    mp_w_map(&w, fatal ? 3 : 2);
    mp_w_str(&w, "ok");
    mp_w_bool(&w, 0);
    mp_w_str(&w, "error");
    mp_w_str(&w, why);
    if (fatal) {
        mp_w_str(&w, "fatal");
        mp_w_bool(&w, 1);
    }
    pl_send_writer(fd, &w);
    mp_writer_free(&w);
}

void pl_send_ok(int fd) {
    mp_writer w;
    mp_writer_init(&w);
    mp_w_map(&w, 1);
    mp_w_str(&w, "ok");
    mp_w_bool(&w, 1);
    pl_send_writer(fd, &w);
    mp_writer_free(&w);
}

int pl_random(uint8_t *out, size_t len) {
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    size_t got = 0;
    while (got < len) {
        ssize_t k = read(fd, out + got, len - got);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            close(fd);
            return -1;
        }
        got += (size_t)k;
    }
    close(fd);
    return 0;
}

int pl_get_str(const mp_message *m, const char *key, char *out, size_t cap) {
    mp_reader r;
    const char *s;
    uint32_t len;
    if (mp_message_get(m, key, &r) || mp_read_str(&r, &s, &len) || len >= cap) return -1;
    if (memchr(s, 0, len)) return -1;
    memcpy(out, s, len);
    out[len] = 0;
    return 0;
}

int pl_get_int(const mp_message *m, const char *key, int64_t *v) {
    mp_reader r;
    return mp_message_get(m, key, &r) || mp_read_int(&r, v) ? -1 : 0;
}

static int read_message(int fd, uint64_t limit, uint8_t **buf, mp_message *m, const char **err) {
    size_t len;
    int got = pl_recv_frame(fd, limit, buf, &len, err);
    if (got == 1) *err = "the peer closed the connection";
    if (got) return -1;
    if (mp_message_parse(m, *buf, len, err)) {
        free(*buf);
        *buf = NULL;
        return -1;
    }
    return 0;
}

int pl_client_handshake(int fd, const uint8_t *key, size_t key_len, const char *role,
                        const char **err) {
    uint8_t *buf = NULL, mac[32];
    mp_message m;
    mp_reader r;
    const uint8_t *nonce;
    uint32_t nonce_len;
    char text[64];
    int64_t version;
    if (read_message(fd, PL_HELLO_LIMIT, &buf, &m, err)) return -1;
    int bad = pl_get_str(&m, "proto", text, sizeof text) || strcmp(text, PL_PROTOCOL)
              || pl_get_int(&m, "version", &version) || version != PL_VERSION
              || pl_get_str(&m, "role", text, sizeof text) || strcmp(text, role)
              || mp_message_get(&m, "nonce", &r) || mp_read_bin(&r, &nonce, &nonce_len)
              || nonce_len != PL_NONCE_BYTES;
    if (bad) {
        free(buf);
        *err = "the peer's hello is not a polyloop RPC version 1 hello of the expected role";
        return -1;
    }
    if (key) pl_hmac_sha256(key, key_len, nonce, nonce_len, mac);
    free(buf);
    mp_writer w;
    mp_writer_init(&w);
    mp_w_map(&w, 3);
    mp_w_str(&w, "op");
    mp_w_str(&w, "hello");
    mp_w_str(&w, "version");
    mp_w_int(&w, PL_VERSION);
    mp_w_str(&w, "mac");
    if (key) mp_w_bin(&w, mac, sizeof mac);
    else mp_w_nil(&w);
    int sent = pl_send_writer(fd, &w);
    mp_writer_free(&w);
    if (sent) {
        *err = "the connection failed";
        return -1;
    }
    if (read_message(fd, PL_HELLO_LIMIT, &buf, &m, err)) return -1;
    int ok = 0;
    if (mp_message_get(&m, "ok", &r) || mp_read_bool(&r, &ok) || !ok) {
        free(buf);
        *err = "the peer refused the key";
        return -1;
    }
    free(buf);
    return 0;
}
