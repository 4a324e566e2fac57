/* SPDX-License-Identifier: Apache-2.0 */
/* SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104): the session handshake's proof of the key. */
#ifndef PL_SHA256_H
#define PL_SHA256_H

#include <stddef.h>
#include <stdint.h>

void pl_sha256(const uint8_t *data, size_t len, uint8_t out[32]);
void pl_hmac_sha256(const uint8_t *key, size_t key_len, const uint8_t *msg, size_t msg_len,
                    uint8_t out[32]);
/* 1 when the n bytes are equal; the time taken does not depend on where they differ. */
int pl_equal_ct(const uint8_t *a, const uint8_t *b, size_t n);

#endif
