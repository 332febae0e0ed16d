/*
 * simhash: a Redis module for SIMHASH_BACKEND = "redis-global" (optional; load it on every node of the cluster).
 *
 *   redis-server --loadmodule "$(python -m simhash_scrapy.backends.redis.module)"
 *
 * Two commands that do in the node what a worker does otherwise with a plain GET and a Lua script, on the same
 * table buckets (``backends.redis.cluster_layout``: the layout does not change; workers with and without the
 * module share a cluster):
 *
 *   SIMHASH.NEAR bucket fold k
 *       [the bytes of the bucket's entries (its header's count; 0: no bucket), then the seq of every entry whose
 *       fold is within k bits of ``fold``, in the bucket's order].  A worker otherwise GETs the whole bucket (~14 KB
 *       at 10 million pages) and scans it itself (``_speedups.near_folds``): the scan is the same code
 *       (``core/near_scan.h``).
 *
 *   SIMHASH.APPEND bucket entry mark room_share room_min [k expected]
 *       ``cluster_backend.APPEND_LUA``, byte for byte: the entry written after the bucket's entries in its spare
 *       room, the header's count raised; a bucket without room (or a new one, marked ``mark``) made again at its
 *       entries' size plus room (used / room_share + room_min, the layout's rule, sent by the worker).  Replies
 *       the bytes of its entries now.  With ``k`` and ``expected`` (version 2): when the bytes of its entries are
 *       not ``expected`` (the worker's count: what it read, plus its own appends), the bucket changed since the
 *       worker read it, and the reply is SIMHASH.NEAR's for the entry's fold after the append, [the bytes of its
 *       entries, the seq of every entry within k bits of the entry's fold]: the worker's race look-again
 *       (``GlobalRedisBackend._races``) without a second round trip.
 *
 * No Redis header is needed to build it: the few functions of the modules API it uses are declared below, and
 * looked up at load as redismodule.h does (the API of Redis 4.0 and later).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../../core/near_scan.h"

/* ---------------------------------------------------------------- the modules API (a subset of redismodule.h) */
#define REDISMODULE_OK 0
#define REDISMODULE_ERR 1
#define REDISMODULE_APIVER_1 1
#define REDISMODULE_READ (1 << 0)
#define REDISMODULE_WRITE (1 << 1)
#define REDISMODULE_KEYTYPE_EMPTY 0
#define REDISMODULE_KEYTYPE_STRING 1

typedef struct RedisModuleCtx RedisModuleCtx;
typedef struct RedisModuleKey RedisModuleKey;
typedef struct RedisModuleString RedisModuleString;
typedef int (*RedisModuleCmdFunc)(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);

static int (*RedisModule_GetApi)(const char *, void *);
static int (*RedisModule_CreateCommand)(RedisModuleCtx *, const char *, RedisModuleCmdFunc, const char *, int, int,
                                        int);
static void (*RedisModule_SetModuleAttribs)(RedisModuleCtx *, const char *, int, int);
static int (*RedisModule_IsModuleNameBusy)(const char *);
static void *(*RedisModule_OpenKey)(RedisModuleCtx *, RedisModuleString *, int);
static void (*RedisModule_CloseKey)(RedisModuleKey *);
static int (*RedisModule_KeyType)(RedisModuleKey *);
static char *(*RedisModule_StringDMA)(RedisModuleKey *, size_t *, int);
static int (*RedisModule_StringSet)(RedisModuleKey *, RedisModuleString *);
static RedisModuleString *(*RedisModule_CreateString)(RedisModuleCtx *, const char *, size_t);
static void (*RedisModule_FreeString)(RedisModuleCtx *, RedisModuleString *);
static const char *(*RedisModule_StringPtrLen)(const RedisModuleString *, size_t *);
static int (*RedisModule_StringToLongLong)(const RedisModuleString *, long long *);
static int (*RedisModule_ReplyWithArray)(RedisModuleCtx *, long);
static int (*RedisModule_ReplyWithLongLong)(RedisModuleCtx *, long long);
static int (*RedisModule_ReplyWithError)(RedisModuleCtx *, const char *);
static int (*RedisModule_WrongArity)(RedisModuleCtx *);
static int (*RedisModule_ReplicateVerbatim)(RedisModuleCtx *);
static int (*RedisModule_Replicate)(RedisModuleCtx *, const char *, const char *, ...);
static void *(*RedisModule_Alloc)(size_t);
static void (*RedisModule_Free)(void *);

#define GET_API(name) RedisModule_GetApi("RedisModule_" #name, (void *)&RedisModule_##name)

/* redismodule.h's RedisModule_Init: the context's first field is the API lookup. */
static int module_init(RedisModuleCtx *ctx, const char *name, int version) {
    RedisModule_GetApi = (int (*)(const char *, void *))((void **)ctx)[0];
    if (GET_API(CreateCommand) || GET_API(SetModuleAttribs) || GET_API(OpenKey) || GET_API(CloseKey) ||
        GET_API(KeyType) || GET_API(StringDMA) || GET_API(StringSet) || GET_API(CreateString) ||
        GET_API(FreeString) || GET_API(StringPtrLen) || GET_API(StringToLongLong) || GET_API(ReplyWithArray) ||
        GET_API(ReplyWithLongLong) || GET_API(ReplyWithError) ||
        GET_API(WrongArity) || GET_API(ReplicateVerbatim) || GET_API(Replicate) || GET_API(Alloc) || GET_API(Free))
        return REDISMODULE_ERR;
    if (GET_API(IsModuleNameBusy) == REDISMODULE_OK && RedisModule_IsModuleNameBusy(name)) return REDISMODULE_ERR;
    RedisModule_SetModuleAttribs(ctx, name, version, REDISMODULE_APIVER_1);
    return REDISMODULE_OK;
}

/* 2: SIMHASH.APPEND's ``k expected`` (``cluster_backend.APPEND_NEAR_VERSION``: workers read it in MODULE LIST). */
#define MODULE_VERSION 2

/* Redis' largest string (proto-max-bulk-len's default): a header that counts more is damaged. */
#define MAX_BUCKET (512ULL << 20)

static const char WRONGTYPE[] = "WRONGTYPE Operation against a key holding the wrong kind of value";

/* SIMHASH.NEAR's reply for a bucket's ``len`` bytes at ``data``: [the bytes of its entries, the seq of every entry
 * within ``k`` bits of ``fold``, in the bucket's order]. */
static void reply_near(RedisModuleCtx *ctx, const unsigned char *data, size_t len, uint32_t fold, int k) {
    ptrdiff_t count = near_entry_count(data, len);
    const unsigned char *entries = data + NEAR_BUCKET_HEAD;
    uint32_t fold_mem = near_fold_mem(fold);
    /* The matches counted first, then the array of a known length: a postponed length (set after the items) makes
     * Redis put every later reply of the pipeline in its reply list, not its output buffer, at a cost a call. */
    long found = 0;
    for (ptrdiff_t j = near_next(entries, 0, count, fold_mem, k); j < count;
         j = near_next(entries, j + 1, count, fold_mem, k))
        found++;
    RedisModule_ReplyWithArray(ctx, 1 + found);
    RedisModule_ReplyWithLongLong(ctx, len >= 4 ? (long long)near_be32(data) : 0);
    for (ptrdiff_t j = near_next(entries, 0, count, fold_mem, k); j < count;
         j = near_next(entries, j + 1, count, fold_mem, k))
        RedisModule_ReplyWithLongLong(ctx, near_seq(entries, j));
}

/* ---------------------------------------------------------------- SIMHASH.NEAR bucket fold k */
static int near_command(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 4) return RedisModule_WrongArity(ctx);
    long long fold, k;
    if (RedisModule_StringToLongLong(argv[2], &fold) != REDISMODULE_OK || fold < 0 || fold > 0xFFFFFFFFLL)
        return RedisModule_ReplyWithError(ctx, "ERR simhash.near: the fold must be an integer of 0 to 2^32-1");
    if (RedisModule_StringToLongLong(argv[3], &k) != REDISMODULE_OK || k < 0 || k > 32)
        return RedisModule_ReplyWithError(ctx, "ERR simhash.near: k must be an integer of 0 to 32");
    RedisModuleKey *key = RedisModule_OpenKey(ctx, argv[1], REDISMODULE_READ);
    int type = RedisModule_KeyType(key);
    if (type == REDISMODULE_KEYTYPE_EMPTY) {
        RedisModule_CloseKey(key);
        RedisModule_ReplyWithArray(ctx, 1);
        return RedisModule_ReplyWithLongLong(ctx, 0);
    }
    if (type != REDISMODULE_KEYTYPE_STRING) {
        RedisModule_CloseKey(key);
        return RedisModule_ReplyWithError(ctx, WRONGTYPE);
    }
    size_t len;
    const unsigned char *data = (const unsigned char *)RedisModule_StringDMA(key, &len, REDISMODULE_READ);
    reply_near(ctx, data, len, (uint32_t)fold, (int)k);
    RedisModule_CloseKey(key);
    return REDISMODULE_OK;
}

/* ---------------------------------------------------------------- SIMHASH.APPEND bucket entry mark share min */
static void put_be32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

static int append_command(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 6 && argc != 8) return RedisModule_WrongArity(ctx);
    size_t entry_len, mark_len;
    const char *entry = RedisModule_StringPtrLen(argv[2], &entry_len);
    const char *mark = RedisModule_StringPtrLen(argv[3], &mark_len);
    long long share, least, k = -1, expected = -1;
    if (mark_len != 4) return RedisModule_ReplyWithError(ctx, "ERR simhash.append: the mark must be 4 bytes");
    if (RedisModule_StringToLongLong(argv[4], &share) != REDISMODULE_OK || share < 1 ||
        RedisModule_StringToLongLong(argv[5], &least) != REDISMODULE_OK || least < 0 || least > (1LL << 30))
        return RedisModule_ReplyWithError(ctx, "ERR simhash.append: room_share must be >= 1, room_min >= 0");
    if (argc == 8) {
        if (RedisModule_StringToLongLong(argv[6], &k) != REDISMODULE_OK || k < 0 || k > 32)
            return RedisModule_ReplyWithError(ctx, "ERR simhash.append: k must be an integer of 0 to 32");
        if (RedisModule_StringToLongLong(argv[7], &expected) != REDISMODULE_OK || expected < 0)
            return RedisModule_ReplyWithError(ctx, "ERR simhash.append: expected must be an integer >= 0");
        if (entry_len < 4) return RedisModule_ReplyWithError(ctx, "ERR simhash.append: an entry starts with its fold");
    }
    RedisModuleKey *key = RedisModule_OpenKey(ctx, argv[1], REDISMODULE_READ | REDISMODULE_WRITE);
    int type = RedisModule_KeyType(key);
    if (type != REDISMODULE_KEYTYPE_EMPTY && type != REDISMODULE_KEYTYPE_STRING) {
        RedisModule_CloseKey(key);
        return RedisModule_ReplyWithError(ctx, WRONGTYPE);
    }
    size_t len = 0;
    unsigned char *data = NULL;
    if (type == REDISMODULE_KEYTYPE_STRING) data = (unsigned char *)RedisModule_StringDMA(key, &len, REDISMODULE_WRITE);
    uint64_t used = len >= 4 ? near_be32(data) : 0;
    uint64_t now = used + entry_len;
    if (NEAR_BUCKET_HEAD + now > MAX_BUCKET) { /* a damaged header: the script fails there too (a string's limit) */
        RedisModule_CloseKey(key);
        return RedisModule_ReplyWithError(ctx, "ERR simhash.append: the bucket would pass 512 MB (a damaged header?)");
    }
    if (NEAR_BUCKET_HEAD + now > len) {
        /* No room: the string made again at its size (SET in the script; a string grown in place keeps up to as
           much again spare).  Kept: the header and the entries, or a new header marked ``mark``. */
        size_t keep = len < used + NEAR_BUCKET_HEAD ? len : (size_t)(used + NEAR_BUCKET_HEAD);
        size_t size = (keep < NEAR_BUCKET_HEAD ? NEAR_BUCKET_HEAD : keep) + entry_len + (size_t)(now / share) +
                      (size_t)least;
        if (size < NEAR_BUCKET_HEAD + now) size = NEAR_BUCKET_HEAD + now; /* a header that counts past its end */
        unsigned char *made = RedisModule_Alloc(size);
        memset(made, 0, size);
        if (keep < NEAR_BUCKET_HEAD)
            memcpy(made + 4, mark, 4);
        else
            memcpy(made, data, keep);
        RedisModuleString *value = RedisModule_CreateString(ctx, (const char *)made, size);
        RedisModule_Free(made);
        RedisModule_StringSet(key, value);
        RedisModule_FreeString(ctx, value);
        data = (unsigned char *)RedisModule_StringDMA(key, &len, REDISMODULE_WRITE);
    }
    memcpy(data + NEAR_BUCKET_HEAD + used, entry, entry_len);
    put_be32(data, (uint32_t)now);
    /* Replicas and the AOF get the write alone (the first five arguments): the same bytes, and a replica or a
     * restart with a version-1 module takes it too. */
    if (argc == 6)
        RedisModule_ReplicateVerbatim(ctx);
    else
        RedisModule_Replicate(ctx, "simhash.append", "sssss", argv[1], argv[2], argv[3], argv[4], argv[5]);
    if (k < 0 || (long long)now == expected) {
        RedisModule_CloseKey(key);
        return RedisModule_ReplyWithLongLong(ctx, (long long)now);
    }
    reply_near(ctx, data, len, near_be32((const unsigned char *)entry), (int)k);
    RedisModule_CloseKey(key);
    return REDISMODULE_OK;
}

int RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    (void)argv;
    (void)argc;
    if (module_init(ctx, "simhash", MODULE_VERSION) == REDISMODULE_ERR) return REDISMODULE_ERR;
    near_scan_init();
    if (RedisModule_CreateCommand(ctx, "simhash.near", near_command, "readonly", 1, 1, 1) == REDISMODULE_ERR)
        return REDISMODULE_ERR;
    if (RedisModule_CreateCommand(ctx, "simhash.append", append_command, "write deny-oom", 1, 1, 1) ==
        REDISMODULE_ERR)
        return REDISMODULE_ERR;
    return REDISMODULE_OK;
}
