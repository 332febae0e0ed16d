/*
 * The scan of a redis-global table bucket for the entries near a page's fold: one rule, two callers.
 *
 * A bucket (``backends.redis.cluster_layout``) is a header -- >I4 the bytes of its entries, then a 4-byte mark --
 * then 8-byte entries (a 32-bit fold >I4, a seq >I4), then spare room.  An entry is near a page when its fold is
 * within k bits of the page's (its fingerprint's two 32-bit halves XORed).
 *
 * Included by ``core/_speedups.c`` (``near_folds``: the worker scans the buckets it read) and by
 * ``backends/redis/module/simhash_module.c`` (``SIMHASH.NEAR``: a node scans them, where the module is loaded):
 * the two give the same seqs in the same order.  Plain C, no Python and no Redis header.
 */
#ifndef SIMHASH_NEAR_SCAN_H
#define SIMHASH_NEAR_SCAN_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* cluster_layout.BUCKET_HEAD, cluster_layout.ENTRY */
#define NEAR_BUCKET_HEAD 8
#define NEAR_ENTRY 8

static inline uint32_t near_be32(const unsigned char *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

/* The entries a bucket of ``len`` bytes holds: what its header counts, never past its end. */
static inline ptrdiff_t near_entry_count(const unsigned char *data, size_t len) {
    if (len < NEAR_BUCKET_HEAD) return 0;
    size_t used = near_be32(data), room = len - NEAR_BUCKET_HEAD;
    return (ptrdiff_t)((used < room ? used : room) / NEAR_ENTRY);
}

/* The fold as it lies in memory (its 4 big-endian bytes read as a native word): the entries are compared as they
   lie, no byte swap; a popcount does not depend on the bits' order. */
static inline uint32_t near_fold_mem(uint32_t fold) {
    const unsigned char bytes[4] = {(unsigned char)(fold >> 24), (unsigned char)(fold >> 16),
                                    (unsigned char)(fold >> 8), (unsigned char)fold};
    uint32_t word;
    memcpy(&word, bytes, 4);
    return word;
}

/* The set bits of a 32-bit word (SWAR: no popcnt instruction needed, which a portable build may not have). */
static inline unsigned int near_bits32(uint32_t x) {
    x = x - ((x >> 1) & 0x55555555u);
    x = (x & 0x33333333u) + ((x >> 2) & 0x33333333u);
    x = (x + (x >> 4)) & 0x0F0F0F0Fu;
    return (x * 0x01010101u) >> 24;
}

/* The first entry from ``from`` on (of ``count`` entries at ``p``, the bucket's first entry) whose fold is within
   ``k`` bits of ``fold_mem``, else ``count``.  Two copies: one compiled for the popcnt instruction (x86 CPUs since
   2008), taken when the CPU has it (``near_popcnt_ok``, set by the includer at load), and the portable one. */
#define NEAR_NEXT_BODY(POPCOUNT)                                          \
    for (ptrdiff_t j = from; j < count; j++) {                           \
        uint32_t word;                                                    \
        memcpy(&word, p + NEAR_ENTRY * j, 4);                             \
        if ((int)POPCOUNT(word ^ fold_mem) <= k) return j;                \
    }                                                                     \
    return count;

static ptrdiff_t near_next_portable(const unsigned char *p, ptrdiff_t from, ptrdiff_t count, uint32_t fold_mem,
                                    int k) {
    NEAR_NEXT_BODY(near_bits32)
}

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_NEAR_POPCNT 1
__attribute__((target("popcnt")))
static ptrdiff_t near_next_popcnt(const unsigned char *p, ptrdiff_t from, ptrdiff_t count, uint32_t fold_mem,
                                  int k) {
    NEAR_NEXT_BODY(__builtin_popcount)
}
#endif

/* Whether the CPU has popcnt (``near_scan_init``). */
static int near_popcnt_ok = 0;

static void near_scan_init(void) {
#ifdef HAVE_NEAR_POPCNT
    __builtin_cpu_init();
    near_popcnt_ok = __builtin_cpu_supports("popcnt") ? 1 : 0;
#endif
}

static inline ptrdiff_t near_next(const unsigned char *p, ptrdiff_t from, ptrdiff_t count, uint32_t fold_mem, int k) {
#ifdef HAVE_NEAR_POPCNT
    if (near_popcnt_ok) return near_next_popcnt(p, from, count, fold_mem, k);
#endif
    return near_next_portable(p, from, count, fold_mem, k);
}

/* The seq of entry ``j``. */
static inline uint32_t near_seq(const unsigned char *p, ptrdiff_t j) { return near_be32(p + NEAR_ENTRY * j + 4); }

#endif
