/* SPDX-License-Identifier: MIT */
/* opencl/sha256.h - SHA-256 (FIPS 180-4) for the disk cache's keys and checksums (disk_cache.c),
 * written here rather than taken from a crypto library for these two uses. */
#ifndef CLT_OPENCL_SHA256_H
#define CLT_OPENCL_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct sha256 {
  uint32_t h[8];
  uint64_t len; /* bytes hashed so far */
  unsigned char buf[64];
  size_t nbuf;
} clt__sha256;

void clt__sha256_init(clt__sha256 *c);
void clt__sha256_update(clt__sha256 *c, const void *data, size_t n);
void clt__sha256_final(clt__sha256 *c, unsigned char out[32]);
/* Hashes s (NULL as "") preceded by its length (8 bytes, little-endian), so that fields cannot
 * run into each other. */
void clt__sha256_field(clt__sha256 *c, const char *s);

#endif /* CLT_OPENCL_SHA256_H */
