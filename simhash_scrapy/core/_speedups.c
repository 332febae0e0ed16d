/*
 * simhash_scrapy.core._speedups: optional C helpers that never touch lxml.
 *
 * Every function here has a pure-Python twin that gives the same result (the
 * tests run both); the package works without this module, only slower.  The
 * walks over lxml's trees are in _walker.c, a separate module built against
 * lxml's headers: an lxml/libxml2 version mismatch turns off only that one
 * (simhash_scrapy/core/_native.py), never these.
 *
 *   hash_tokens(chunk) -> (hashes, specials)
 *       the tokeniser's hashes (simhash_scrapy/core/features/features.py): ``chunk`` is
 *       text already put through features._ASCII_TABLE, tokens are the runs of
 *       bytes other than a space, each hashed as mix64(polynomial hash +
 *       length); tokens holding non-ASCII bytes are listed in ``specials`` as
 *       (index, start, end) for the Python side to re-tokenise with Unicode
 *       rules, except tokens whose only non-ASCII characters are separators
 *       (``set_separators``: punctuation such as a pilcrow or a curly quote),
 *       which are split at them here, as the Unicode rules would split them.
 *
 *   hash_text(data, table) -> (hashes, specials)
 *       hash_tokens(data.translate(table)) (``table``: features._ASCII_TABLE), reading
 *       each byte through the table instead of making the translated copy.
 *
 *   count_distinct(hashes) -> (features, counts)
 *       np.unique(hashes, return_counts=True) of a uint64 array (features.py:
 *       each distinct feature and how often it occurs): a hash table, then a
 *       radix sort of the distinct values.
 *
 *   vote(features, weights) -> int or None
 *       the simhash bit vote (simhash_scrapy/core/features/fingerprint.py), or None when a bit's sum is
 *       too near a tie to be sure of numpy's rounding (the caller then lets numpy decide).
 *
 *   not_content_rules(data, labels, window, rules) -> int
 *       which of features.strip_not_content's rules (bits of ``rules``) may change
 *       ``data``: each bit is kept only when the text holds what its regex must
 *       start with ("[" and a digit; "URL", an optional ASCII space, ":"; "ed on"/"ed
 *       at" after a date label of ``labels``; "etrieved from"; "Links:"), so the
 *       regexes run only on the texts they may change.
 *
 *   is_utf8(data) -> bool
 *       whether ``data.decode("utf-8")`` would succeed, without building the str
 *       (simhash_scrapy/core/extract/text.py's to_utf8 checks every page's bytes).
 *
 *   key_slot(key) -> int;  route_commands(commands, table, nodes) -> groups
 *       Redis Cluster's hash slot of a key, and a batch's commands grouped by the node of their key's slot and
 *       packed in RESP2 (simhash_scrapy/backends/redis/node_link.py, whose _route_python is the twin).
 *
 *   bucket_commands(commands, keys, group, per, verb, tail, tail_count[, lengths, step, sent]);  near_replies(...)
 *       a batch's commands of one verb packed at once, each as (slot, RESP2 bytes) (node_link.py's packed_calls,
 *       whose Python branch is the twin), and the module's SIMHASH.NEAR replies read (cluster_backend.py's
 *       _near_found).
 *
 *   bucket_names(base, spans, fingerprints) -> [str, ...]
 *       the table bucket keys of many fingerprints at once (cluster_layout.py's GlobalKeys.buckets_many).
 *
 *   encode_payload(primed, kind, identity_bytes, digest, url, ...) -> bytes;  pack_global_record(record) -> bytes;
 *   parse_global_record(value, cls) -> cls
 *       a page's payload (layout.py's Codec.encode, once its scope's dictionary is in use) and a record of the
 *       global index (cluster_layout.py's pack_record and parse_record), each NotImplemented for what it does not
 *       take, which the Python lines (the twins) then handle.
 *
 *   prepare_tables(tables) -> capsule
 *       the table specs parsed once, for query_tables (until the tables change).
 *
 *   insert_sorted(buffer, count, at, values)
 *       np.insert(buffer[:count], at, values) in place (the index's tables
 *       keep spare room, so merging new rows allocates nothing).
 *
 *   query_tables(queries, fingerprints, alive, tables, max_distance, tail_start)
 *       the index's queries (simhash_scrapy/core/index/index.py): for every query,
 *       every table's bucket is read (and, for tables whose key may differ in
 *       ``errors`` bits, every bucket within that many flipped bits, its rows
 *       first screened by their 16-bit filter) and each candidate verified with
 *       a popcount, and the rows from ``tail_start`` on (not in the tables
 *       yet) are scanned; pairs are returned once, sorted by query, distance,
 *       row, as three int64 arrays (bytes).  The loop runs without the GIL.
 *
 *   template_lines(data, known, article, room) -> (kept, added)
 *       the template learner's pass over a page's lines (simhash_scrapy/core/cluster/sitetemplate.py,
 *       whose _template_lines is the pure-Python twin): see the block "template lines" below.
 *
 *   extras_records(data, start, names) -> (used, positions, alsos, ..., hashes)
 *       the Redis mirror's records of steps 5-7 (simhash_scrapy/backends/redis/mirror.py, whose
 *       _records_python is the pure-Python twin) read in columns: see the block "extras records" below.
 *
 *   batch_related(fingerprints, alsos, seconds, sketches, k) -> (related, shared)
 *       the Redis mirror's batch cut (simhash_scrapy/backends/redis/mirror.py, whose _related_numpy is
 *       the numpy twin): see the block "a batch's related pages" below.
 *
 * Nothing here depends on lxml or Scrapy: Python's headers only.
 */
#define _GNU_SOURCE /* memmem */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <float.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <string.h>

/* ------------------------------------------------------------- tokens */

/* The same constants as features.py (polynomial base, SplitMix64 finaliser). */
#define POLY_BASE 0x100000001B3ULL

static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* Non-ASCII code points that only separate words (features.py: SEPARATOR_CODE_POINTS, checked
 * there against the Unicode path's rules), sorted; set by set_separators(). */
#define MAX_SEPARATORS 512
static uint32_t separators[MAX_SEPARATORS];
static Py_ssize_t separator_count = 0;

static int is_separator(uint32_t cp) {
    Py_ssize_t lo = 0, hi = separator_count;
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        if (separators[mid] < cp) lo = mid + 1;
        else hi = mid;
    }
    return lo < separator_count && separators[lo] == cp;
}

/* Length of the well-formed UTF-8 sequence at s[0..n) (its code point in *cp), or 0 if there is none. */
static int utf8_sequence(const unsigned char *s, Py_ssize_t n, uint32_t *cp) {
    unsigned char b0 = s[0];
    int len;
    uint32_t value, min;
    if (b0 >= 0xC2 && b0 <= 0xDF) len = 2, value = b0 & 0x1F, min = 0x80;
    else if (b0 >= 0xE0 && b0 <= 0xEF) len = 3, value = b0 & 0x0F, min = 0x800;
    else if (b0 >= 0xF0 && b0 <= 0xF4) len = 4, value = b0 & 0x07, min = 0x10000;
    else return 0;
    if (n < len) return 0;
    for (int k = 1; k < len; k++) {
        if ((s[k] & 0xC0) != 0x80) return 0;
        value = (value << 6) | (s[k] & 0x3F);
    }
    if (value < min || value > 0x10FFFF || (value >= 0xD800 && value <= 0xDFFF)) return 0;
    *cp = value;
    return len;
}

/* features.stable_hash64 of s[start..end): the polynomial hash (wrapping modulo 2**64, as in numpy), four
 * bytes a step and then one by one (the same sum), then mixed with the length. */
#define POLY_BASE2 (POLY_BASE * POLY_BASE)
#define POLY_BASE3 (POLY_BASE2 * POLY_BASE)
#define POLY_BASE4 (POLY_BASE2 * POLY_BASE2)
static uint64_t hash_run(const unsigned char *s, Py_ssize_t start, Py_ssize_t end) {
    uint64_t acc = 0, power = 1;
    Py_ssize_t i = start;
    for (; i + 4 <= end; i += 4) {
        acc += (s[i] + s[i + 1] * POLY_BASE + s[i + 2] * POLY_BASE2 + s[i + 3] * POLY_BASE3) * power;
        power *= POLY_BASE4;
    }
    for (; i < end; i++) {
        acc += (uint64_t)s[i] * power;
        power *= POLY_BASE;
    }
    return mix64(acc + (uint64_t)(end - start));
}

/* A piece whose non-ASCII characters are all separators: the hashes of its ASCII runs, written to
 * out[*count...].  Returns 0 (and writes nothing) when some character is not a separator. */
static int split_at_separators(const unsigned char *s, Py_ssize_t start, Py_ssize_t end, uint64_t *out,
                               Py_ssize_t *count) {
    for (Py_ssize_t i = start; i < end;) {
        uint32_t cp;
        int len;
        if (s[i] < 0x80) {
            i++;
        } else if ((len = utf8_sequence(s + i, end - i, &cp)) > 0 && is_separator(cp)) {
            i += len;
        } else {
            return 0;
        }
    }
    Py_ssize_t run = -1;
    for (Py_ssize_t i = start; i <= end; i++) {
        if (i < end && s[i] < 0x80) {
            if (run < 0) run = i;
            continue;
        }
        if (run >= 0) out[(*count)++] = hash_run(s, run, i);
        run = -1;
        /* skip the rest of the separator's sequence (continuation bytes are >= 0x80 too) */
    }
    return 1;
}

/* P**0 .. P**(POWERS - 1) modulo 2**64: a token's bytes are multiplied by them independently of
 * each other, not through a running product (the same sums, without a chain of multiplications). */
#define POWERS 64
static uint64_t powers[POWERS + 1];
/* Each byte as itself (hash_tokens reads text already put through the table). */
static unsigned char identity[256];

static void fill_tables(void) {
    powers[0] = 1;
    for (int k = 1; k <= POWERS; k++) powers[k] = powers[k - 1] * POLY_BASE;
    for (int c = 0; c < 256; c++) identity[c] = (unsigned char)c;
}

/* The tokens of ``s`` read through ``table`` (each byte ``s[i]`` as ``table[s[i]]``): (hashes, specials),
 * as hash_tokens gives them for the text put through the table. */
static PyObject *hash_pieces(const unsigned char *s, Py_ssize_t n, const unsigned char *table) {
    /* At most one token per two bytes (a separator inside a piece takes at least two): the hashes
     * never need more room than that. */
    PyObject *hashes = PyBytes_FromStringAndSize(NULL, ((n + 1) / 2) * (Py_ssize_t)sizeof(uint64_t));
    PyObject *specials = PyList_New(0);
    unsigned char *piece = NULL; /* a special piece through the table, for split_at_separators */
    if (hashes == NULL || specials == NULL) goto fail;
    uint64_t *out = (uint64_t *)PyBytes_AS_STRING(hashes);
    Py_ssize_t count = 0, i = 0;
    while (i < n) {
        if (table[s[i]] == ' ') {
            i++;
            continue;
        }
        Py_ssize_t start = i;
        uint64_t acc = 0;
        unsigned char high = 0;
        Py_ssize_t short_end = n - start > POWERS ? start + POWERS : n;
        for (; i < short_end; i++) {
            unsigned char c = table[s[i]];
            if (c == ' ') break;
            acc += (uint64_t)c * powers[i - start]; /* wraps modulo 2**64, as in numpy */
            high |= c;
        }
        if (i == start + POWERS) { /* a long token: on with a running power */
            uint64_t power = powers[POWERS];
            for (; i < n; i++) {
                unsigned char c = table[s[i]];
                if (c == ' ') break;
                acc += (uint64_t)c * power;
                power *= POLY_BASE;
                high |= c;
            }
        }
        if (!(high & 0x80)) {
            out[count++] = mix64(acc + (uint64_t)(i - start));
            continue;
        }
        /* Non-ASCII: punctuation such as a pilcrow or curly quote only separates words, as the
         * Unicode path would find; anything else is listed for the Python side. */
        const unsigned char *text = s + start;
        if (table != identity) {
            piece = PyMem_Malloc((size_t)(i - start));
            if (piece == NULL) {
                PyErr_NoMemory();
                goto fail;
            }
            for (Py_ssize_t j = start; j < i; j++) piece[j - start] = table[s[j]];
            text = piece;
        }
        int split = split_at_separators(text, 0, i - start, out, &count);
        PyMem_Free(piece);
        piece = NULL;
        if (split) continue;
        PyObject *item = Py_BuildValue("(nnn)", count, start, i);
        if (item == NULL || PyList_Append(specials, item) < 0) {
            Py_XDECREF(item);
            goto fail;
        }
        Py_DECREF(item);
        out[count++] = 0; /* replaced by the Python side */
    }
    if (_PyBytes_Resize(&hashes, count * (Py_ssize_t)sizeof(uint64_t)) < 0) {
        Py_DECREF(specials);
        return NULL;
    }
    return Py_BuildValue("(NN)", hashes, specials);
fail:
    Py_XDECREF(hashes);
    Py_XDECREF(specials);
    return NULL;
}

static PyObject *hash_tokens(PyObject *module, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    PyObject *result = hash_pieces(view.buf, view.len, identity);
    PyBuffer_Release(&view);
    return result;
}

/* hash_text(data, table) -> (hashes, specials): hash_tokens(data.translate(table)) without making
 * the translated copy (specials' offsets are the same in both). */
static PyObject *hash_text(PyObject *module, PyObject *args) {
    Py_buffer view;
    const char *table;
    Py_ssize_t table_len;
    if (!PyArg_ParseTuple(args, "y*y#:hash_text", &view, &table, &table_len)) return NULL;
    PyObject *result = NULL;
    if (table_len != 256) PyErr_SetString(PyExc_ValueError, "hash_text: the table must hold 256 bytes");
    else result = hash_pieces(view.buf, view.len, (const unsigned char *)table);
    PyBuffer_Release(&view);
    return result;
}

/* is_utf8(data) -> bool: whether ``data`` is well-formed UTF-8, exactly as ``data.decode("utf-8")``
 * accepts it (no overlong forms, surrogates or code points above U+10FFFF), without building the str. */
static PyObject *is_utf8(PyObject *module, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    const unsigned char *s = view.buf;
    Py_ssize_t n = view.len, i = 0;
    int valid = 1;
    while (i < n) {
        /* ASCII runs eight bytes at a time (most of a page's markup). */
        while (i + 8 <= n) {
            uint64_t word;
            memcpy(&word, s + i, 8);
            if (word & 0x8080808080808080ULL) break;
            i += 8;
        }
        if (i >= n) break;
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        uint32_t cp;
        int len = utf8_sequence(s + i, n - i, &cp);
        if (len == 0) {
            valid = 0;
            break;
        }
        i += len;
    }
    PyBuffer_Release(&view);
    return PyBool_FromLong(valid);
}

/* ------------------------------------------------ Redis Cluster commands (backends.redis.node_link) */

/* CRC16-CCITT (XMODEM: polynomial 0x1021, initial 0), Redis Cluster's key hash: binascii.crc_hqx(data, 0). */
static uint16_t crc16_table[256];
static int crc16_ready = 0;

static uint16_t crc16(const unsigned char *s, Py_ssize_t n) {
    if (!crc16_ready) {
        for (int b = 0; b < 256; b++) {
            uint16_t crc = (uint16_t)(b << 8);
            for (int j = 0; j < 8; j++) crc = (uint16_t)((crc & 0x8000) ? (crc << 1) ^ 0x1021 : crc << 1);
            crc16_table[b] = crc;
        }
        crc16_ready = 1;
    }
    uint16_t crc = 0;
    for (Py_ssize_t i = 0; i < n; i++) crc = (uint16_t)((crc << 8) ^ crc16_table[((crc >> 8) ^ s[i]) & 0xFF]);
    return crc;
}

/* ``v`` in decimal at ``out`` (room for 21 characters); its length (snprintf costs several times more). */
static Py_ssize_t decimal(char *out, long long v) {
    char tmp[24];
    int n = 0;
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    Py_ssize_t len = 0;
    if (v < 0) out[len++] = '-';
    while (n) out[len++] = tmp[--n];
    return len;
}

/* The bytes Redis reads for ``arg`` (a str as UTF-8 with surrogatepass, as node_link's Python packer; bytes,
 * bytearray and memoryview as they are; an int in decimal); ``*owned`` a new reference to release after, or NULL.  Sets an
 * exception and returns NULL for any other type. */
static const char *resp_bytes(PyObject *arg, Py_ssize_t *n, PyObject **owned, char *digits) {
    *owned = NULL;
    if (PyBytes_Check(arg)) {
        *n = PyBytes_GET_SIZE(arg);
        return PyBytes_AS_STRING(arg);
    }
    if (PyUnicode_Check(arg)) {
        const char *s = PyUnicode_AsUTF8AndSize(arg, n);
        if (s != NULL) return s;
        PyErr_Clear(); /* a lone surrogate: encoded as Python's "surrogatepass" does */
        *owned = PyUnicode_AsEncodedString(arg, "utf-8", "surrogatepass");
        if (*owned == NULL) return NULL;
        *n = PyBytes_GET_SIZE(*owned);
        return PyBytes_AS_STRING(*owned);
    }
    if (PyLong_Check(arg)) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(arg, &overflow);
        if (v == -1 && PyErr_Occurred()) return NULL;
        if (!overflow) {
            *n = decimal(digits, v);
            return digits;
        }
        PyObject *text = PyObject_Str(arg);
        if (text == NULL) return NULL;
        *owned = PyUnicode_AsUTF8String(text);
        Py_DECREF(text);
        if (*owned == NULL) return NULL;
        *n = PyBytes_GET_SIZE(*owned);
        return PyBytes_AS_STRING(*owned);
    }
    if (PyByteArray_Check(arg) || PyMemoryView_Check(arg)) { /* (not any buffer: a numpy integer's is its machine
                                                                  * bytes, which Redis would get as they are) */
        *owned = PyBytes_FromObject(arg);
        if (*owned == NULL) return NULL;
        *n = PyBytes_GET_SIZE(*owned);
        return PyBytes_AS_STRING(*owned);
    }
    PyErr_Format(PyExc_TypeError, "a Redis command argument must be str, bytes or int, not %.100s",
                 Py_TYPE(arg)->tp_name);
    return NULL;
}

/* The hash slot of a key (str or bytes): the CRC16 of its hash tag (the bytes between the first "{" and the
 * first "}" after it, when not empty) or of the whole key, modulo 16384: redis.crc.key_slot.  -1: an error. */
static int slot_of_key(PyObject *key) {
    Py_ssize_t n;
    PyObject *owned;
    char digits[24];
    if (!PyUnicode_Check(key) && !PyBytes_Check(key)) {
        PyErr_Format(PyExc_TypeError, "a Redis key must be str or bytes, not %.100s", Py_TYPE(key)->tp_name);
        return -1;
    }
    const char *s = resp_bytes(key, &n, &owned, digits);
    if (s == NULL) return -1;
    const char *open = memchr(s, '{', (size_t)n);
    if (open != NULL) {
        const char *close = memchr(open + 1, '}', (size_t)(n - (open + 1 - s)));
        if (close != NULL && close != open + 1) {
            s = open + 1;
            n = close - s;
        }
    }
    int slot = crc16((const unsigned char *)s, n) & 16383;
    Py_XDECREF(owned);
    return slot;
}

/* key_slot(key) -> int: redis.crc.key_slot of a str (its UTF-8) or bytes key. */
static PyObject *key_slot(PyObject *module, PyObject *key) {
    int slot = slot_of_key(key);
    return slot < 0 ? NULL : PyLong_FromLong(slot);
}

typedef struct {
    char *data;
    Py_ssize_t used, size;
    PyObject *indexes; /* the commands' numbers in this group, in order */
} resp_group;

static int group_put(resp_group *group, const char *s, Py_ssize_t n) {
    if (group->used + n > group->size) {
        Py_ssize_t size = group->size ? group->size : 1024;
        while (size < group->used + n) size *= 2;
        char *data = PyMem_Realloc(group->data, (size_t)size);
        if (data == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        group->data = data;
        group->size = size;
    }
    memcpy(group->data + group->used, s, (size_t)n);
    group->used += n;
    return 0;
}

/* One argument as a RESP2 bulk string at the end of ``group``: "$<length>", then its bytes (``resp_bytes``). */
static int group_bulk(resp_group *group, PyObject *arg) {
    char head[32], digits[24];
    Py_ssize_t n, len;
    PyObject *owned;
    const char *s = resp_bytes(arg, &n, &owned, digits);
    if (s == NULL) return -1;
    head[0] = '$';
    len = 1 + decimal(head + 1, n);
    head[len++] = '\r';
    head[len++] = '\n';
    int failed = group_put(group, head, len) < 0 || group_put(group, s, n) < 0 || group_put(group, "\r\n", 2) < 0;
    Py_XDECREF(owned);
    return failed ? -1 : 0;
}

/* One command in RESP2 at the end of ``group``: "*N", then each argument as a bulk string. */
static int group_command(resp_group *group, PyObject *args) {
    char head[32];
    Py_ssize_t count = PyTuple_GET_SIZE(args), len;
    head[0] = '*';
    len = 1 + decimal(head + 1, count);
    head[len++] = '\r';
    head[len++] = '\n';
    if (group_put(group, head, len) < 0) return -1;
    for (Py_ssize_t a = 0; a < count; a++) {
        if (group_bulk(group, PyTuple_GET_ITEM(args, a)) < 0) return -1;
    }
    return 0;
}

static PyObject *route_groups_out(resp_group *groups, Py_ssize_t count) {
    PyObject *out = PyList_New(count);
    for (Py_ssize_t g = 0; out != NULL && g < count; g++) {
        PyObject *item = Py_None;
        if (groups[g].indexes != NULL) {
            PyObject *packed = PyBytes_FromStringAndSize(groups[g].data, groups[g].used);
            item = packed == NULL ? NULL : PyTuple_Pack(2, groups[g].indexes, packed);
            Py_XDECREF(packed);
            if (item == NULL) Py_CLEAR(out);
        } else {
            Py_INCREF(item);
        }
        if (out != NULL) PyList_SET_ITEM(out, g, item);
    }
    return out;
}

/* route_commands(commands, table, nodes) -> groups: node_link's routing and packing of a batch at once.
 * ``commands``: a list of (key, args tuple); ``table``: 16,384 uint16 (native order), the node number of each
 * hash slot.  ``groups[n]`` is (the numbers of the commands whose key's slot is on node n, in order; their RESP2
 * bytes, one after the other) or None; ``groups[nodes]`` the commands whose slot's number is ``nodes`` or more (no
 * node). */
static PyObject *route_commands(PyObject *module, PyObject *args) {
    PyObject *commands;
    Py_buffer table;
    Py_ssize_t nodes;
    if (!PyArg_ParseTuple(args, "O!y*n:route_commands", &PyList_Type, &commands, &table, &nodes)) return NULL;
    PyObject *out = NULL;
    resp_group *groups = NULL;
    if (table.len != 16384 * (Py_ssize_t)sizeof(uint16_t) || nodes < 0 || nodes > 65535) {
        PyErr_SetString(PyExc_ValueError, "route_commands: a table of 16384 uint16 and 0 <= nodes <= 65535");
        goto done;
    }
    groups = PyMem_Calloc((size_t)nodes + 1, sizeof(resp_group));
    if (groups == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    const uint16_t *node_of = table.buf;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(commands); i++) {
        PyObject *command = PyList_GET_ITEM(commands, i);
        PyObject *body = PyTuple_Check(command) && PyTuple_GET_SIZE(command) == 2 ? PyTuple_GET_ITEM(command, 1) : NULL;
        int packed = body != NULL && PyBytes_Check(body) && PyLong_CheckExact(PyTuple_GET_ITEM(command, 0));
        if (body == NULL || !(packed || PyTuple_Check(body))) {
            PyErr_SetString(PyExc_TypeError, "route_commands: each command a (key, args tuple) or a (slot, RESP bytes)");
            goto done;
        }
        int slot;
        if (packed) {
            long value = PyLong_AsLong(PyTuple_GET_ITEM(command, 0));
            if (value < 0 || value >= 16384) {
                if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "route_commands: a slot is from 0 to 16383");
                goto done;
            }
            slot = (int)value;
        } else if ((slot = slot_of_key(PyTuple_GET_ITEM(command, 0))) < 0) {
            goto done;
        }
        Py_ssize_t n = node_of[slot] < nodes ? node_of[slot] : nodes;
        resp_group *group = &groups[n];
        if (group->indexes == NULL && (group->indexes = PyList_New(0)) == NULL) goto done;
        PyObject *number = PyLong_FromSsize_t(i);
        int failed = number == NULL || PyList_Append(group->indexes, number) < 0;
        Py_XDECREF(number);
        if (failed) goto done;
        if (packed ? group_put(group, PyBytes_AS_STRING(body), PyBytes_GET_SIZE(body)) < 0 : group_command(group, body) < 0)
            goto done;
    }
    out = route_groups_out(groups, nodes + 1);
done:
    if (groups != NULL) {
        for (Py_ssize_t g = 0; g <= nodes; g++) {
            PyMem_Free(groups[g].data);
            Py_XDECREF(groups[g].indexes);
        }
        PyMem_Free(groups);
    }
    PyBuffer_Release(&table);
    return out;
}

/* bucket_commands(commands, keys, group, per, verb, tail, tail_count[, lengths, step, sent]) -> expected lengths
 * or None
 * node_link.packed_calls: for each key of ``keys`` (str or bytes), one command packed in RESP2, appended to
 * ``commands`` as (its key's hash slot, its bytes): "*N", ``verb`` (packed: a bulk string), the key, the arguments
 * of ``per[i // group]`` (an argument, or a tuple of them: str, bytes or int; one item for each ``group`` keys), then
 * ``tail`` (``tail_count`` arguments, packed).  With ``lengths`` (a dict): each key's value there grows by ``step``
 * (from 0), and the list of the values after each command is returned (a bucket's expected length after an
 * append); with ``sent`` true, each command ends with that value too (SIMHASH.APPEND's ``expected``). */
static PyObject *bucket_commands(PyObject *module, PyObject *args) {
    PyObject *commands, *keys, *per, *lengths = Py_None;
    Py_ssize_t group, tail_count, step = 0;
    int sent = 0;
    Py_buffer verb, tail;
    if (!PyArg_ParseTuple(args, "O!O!nO!y*y*n|Onp:bucket_commands", &PyList_Type, &commands, &PyList_Type, &keys,
                          &group, &PyList_Type, &per, &verb, &tail, &tail_count, &lengths, &step, &sent))
        return NULL;
    PyObject *expected = NULL, *out = NULL;
    resp_group buffer = {NULL, 0, 0, NULL};
    Py_ssize_t count = PyList_GET_SIZE(keys);
    if (group < 1 || PyList_GET_SIZE(per) * group != count || tail_count < 0 ||
        (lengths != Py_None && !PyDict_CheckExact(lengths))) {
        PyErr_SetString(PyExc_ValueError, "bucket_commands: group >= 1 keys for each of per, and lengths a dict or None");
        goto done;
    }
    if (lengths != Py_None && (expected = PyList_New(count)) == NULL) goto done;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *key = PyList_GET_ITEM(keys, i), *item = PyList_GET_ITEM(per, i / group);
        int slot = slot_of_key(key);
        if (slot < 0) goto done;
        int several = PyTuple_Check(item);
        PyObject *now = NULL; /* (this key's length after the command, with ``lengths``) */
        if (expected != NULL) {
            PyObject *had = PyDict_GetItemWithError(lengths, key);
            if (had == NULL && PyErr_Occurred()) goto done;
            Py_ssize_t value = had == NULL ? 0 : PyLong_AsSsize_t(had);
            if (value == -1 && PyErr_Occurred()) goto done;
            if ((now = PyLong_FromSsize_t(value + step)) == NULL) goto done;
            PyList_SET_ITEM(expected, i, now); /* (the list's reference) */
            if (PyDict_SetItem(lengths, key, now) < 0) goto done;
        }
        int extra = now != NULL && sent;
        char head[32];
        Py_ssize_t len = 1;
        head[0] = '*';
        len += decimal(head + 1, 2 + (several ? PyTuple_GET_SIZE(item) : 1) + tail_count + extra);
        head[len++] = '\r';
        head[len++] = '\n';
        buffer.used = 0;
        if (group_put(&buffer, head, len) < 0 || group_put(&buffer, verb.buf, verb.len) < 0 ||
            group_bulk(&buffer, key) < 0)
            goto done;
        for (Py_ssize_t a = 0; a < (several ? PyTuple_GET_SIZE(item) : 1); a++) {
            if (group_bulk(&buffer, several ? PyTuple_GET_ITEM(item, a) : item) < 0) goto done;
        }
        if (group_put(&buffer, tail.buf, tail.len) < 0 || (extra && group_bulk(&buffer, now) < 0)) goto done;
        PyObject *packed = PyBytes_FromStringAndSize(buffer.data, buffer.used);
        PyObject *number = packed == NULL ? NULL : PyLong_FromLong(slot);
        PyObject *command = number == NULL ? NULL : PyTuple_Pack(2, number, packed);
        Py_XDECREF(number);
        Py_XDECREF(packed);
        int failed = command == NULL || PyList_Append(commands, command) < 0;
        Py_XDECREF(command);
        if (failed) goto done;
    }
    out = expected != NULL ? expected : Py_None;
    Py_INCREF(out);
done:
    Py_XDECREF(expected);
    PyMem_Free(buffer.data);
    PyBuffer_Release(&verb);
    PyBuffer_Release(&tail);
    return out;
}

/* encode_payload(primed, kind, identity_bytes, digest, url, identity, referer, depth, text, etag, last_modified,
 *                canonical_link) -> bytes, or NotImplemented
 * layout.Codec.encode once its scope's dictionary is in use (its Python lines are the twin): the kind byte,
 * ``identity_bytes``, the digest (8 bytes, big-endian; none when None), then ``primed.copy()``'s compression of the
 * JSON list of the eight values (trailing Nones left out), the text ``json_list`` gives, in UTF-8 (a lone surrogate
 * as ``surrogatepass`` writes it).  NotImplemented for a value that is not a str, None or an int (a bool, a float):
 * the caller's Python path encodes it. */
static int json_put_str(resp_group *out, PyObject *s) {
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    static const char hex[] = "0123456789abcdef";
    if (group_put(out, "\"", 1) < 0) return -1;
    Py_ssize_t run = 0; /* (an ASCII string's bytes that need no escape, put at once) */
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (kind == PyUnicode_1BYTE_KIND && c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
            run++;
            continue;
        }
        if (run && group_put(out, (const char *)data + i - run, run) < 0) return -1;
        run = 0;
        char buf[6];
        Py_ssize_t len = 0;
        if (c == '"' || c == '\\') {
            buf[0] = '\\', buf[1] = (char)c, len = 2;
        } else if (c < 0x20) {
            buf[0] = '\\';
            switch (c) {
            case '\b': buf[1] = 'b', len = 2; break;
            case '\f': buf[1] = 'f', len = 2; break;
            case '\n': buf[1] = 'n', len = 2; break;
            case '\r': buf[1] = 'r', len = 2; break;
            case '\t': buf[1] = 't', len = 2; break;
            default:
                buf[1] = 'u', buf[2] = '0', buf[3] = '0', buf[4] = hex[(c >> 4) & 0xf], buf[5] = hex[c & 0xf];
                len = 6;
            }
        } else if (c < 0x80) {
            buf[0] = (char)c, len = 1;
        } else if (c < 0x800) {
            buf[0] = (char)(0xC0 | (c >> 6)), buf[1] = (char)(0x80 | (c & 0x3F)), len = 2;
        } else if (c < 0x10000) { /* (a lone surrogate too, as "surrogatepass" writes it) */
            buf[0] = (char)(0xE0 | (c >> 12)), buf[1] = (char)(0x80 | ((c >> 6) & 0x3F));
            buf[2] = (char)(0x80 | (c & 0x3F)), len = 3;
        } else {
            buf[0] = (char)(0xF0 | (c >> 18)), buf[1] = (char)(0x80 | ((c >> 12) & 0x3F));
            buf[2] = (char)(0x80 | ((c >> 6) & 0x3F)), buf[3] = (char)(0x80 | (c & 0x3F)), len = 4;
        }
        if (group_put(out, buf, len) < 0) return -1;
    }
    if (run && group_put(out, (const char *)data + n - run, run) < 0) return -1;
    return group_put(out, "\"", 1);
}

/* The value's JSON at the end of ``out``: 0, -1 (an error set), or 1 (a value of another type). */
static int json_put_value(resp_group *out, PyObject *value) {
    if (PyUnicode_CheckExact(value)) return json_put_str(out, value);
    if (value == Py_None) return group_put(out, "null", 4);
    if (!PyLong_CheckExact(value)) return 1;
    int overflow = 0;
    long long number = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (number == -1 && PyErr_Occurred()) return -1;
    if (!overflow) {
        char digits[24];
        return group_put(out, digits, decimal(digits, number));
    }
    PyObject *text = PyObject_Str(value); /* (beyond 64 bits: int's own decimal text) */
    if (text == NULL) return -1;
    Py_ssize_t len;
    const char *s = PyUnicode_AsUTF8AndSize(text, &len);
    int failed = s == NULL || group_put(out, s, len) < 0;
    Py_DECREF(text);
    return failed ? -1 : 0;
}

static PyObject *encode_payload(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    static PyObject *copy_name, *compress_name, *flush_name;
    if (nargs != 12) {
        PyErr_SetString(PyExc_TypeError, "encode_payload takes 12 arguments");
        return NULL;
    }
    if (copy_name == NULL && ((copy_name = PyUnicode_InternFromString("copy")) == NULL ||
                              (compress_name = PyUnicode_InternFromString("compress")) == NULL ||
                              (flush_name = PyUnicode_InternFromString("flush")) == NULL))
        return NULL;
    PyObject *primed = args[0], *identity_bytes = args[2], *digest = args[3];
    long kind = PyLong_AsLong(args[1]);
    if (kind == -1 && PyErr_Occurred()) return NULL;
    if (kind < 0 || kind > 255) {
        PyErr_SetString(PyExc_ValueError, "encode_payload: a kind byte");
        return NULL;
    }
    if (!PyBytes_CheckExact(identity_bytes) || (digest != Py_None && !PyLong_Check(digest)))
        Py_RETURN_NOTIMPLEMENTED; /* (the Python lines take, or refuse, what else they are given) */
    unsigned char digest_bytes[8];
    if (digest != Py_None) {
        unsigned long long value = PyLong_AsUnsignedLongLong(digest);
        if (value == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
        for (int b = 0; b < 8; b++) digest_bytes[b] = (unsigned char)(value >> (56 - 8 * b));
    }
    Py_ssize_t count = 8;
    while (count > 1 && args[4 + count - 1] == Py_None) count--;
    resp_group json = {NULL, 0, 0, NULL};
    PyObject *raw = NULL, *packer = NULL, *body = NULL, *tail = NULL, *out = NULL;
    if (group_put(&json, "[", 1) < 0) goto done;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (i && group_put(&json, ",", 1) < 0) goto done;
        int put = json_put_value(&json, args[4 + i]);
        if (put < 0) goto done;
        if (put > 0) {
            out = Py_NewRef(Py_NotImplemented);
            goto done;
        }
    }
    if (group_put(&json, "]", 1) < 0) goto done;
    if ((raw = PyBytes_FromStringAndSize(json.data, json.used)) == NULL) goto done;
    if ((packer = PyObject_CallMethodNoArgs(primed, copy_name)) == NULL) goto done;
    if ((body = PyObject_CallMethodOneArg(packer, compress_name, raw)) == NULL) goto done;
    if ((tail = PyObject_CallMethodNoArgs(packer, flush_name)) == NULL) goto done;
    if (!PyBytes_Check(body) || !PyBytes_Check(tail)) {
        PyErr_SetString(PyExc_TypeError, "encode_payload: the compressor gave no bytes");
        goto done;
    }
    Py_ssize_t head = 1 + PyBytes_GET_SIZE(identity_bytes) + (digest != Py_None ? 8 : 0);
    if ((out = PyBytes_FromStringAndSize(NULL, head + PyBytes_GET_SIZE(body) + PyBytes_GET_SIZE(tail))) == NULL)
        goto done;
    char *p = PyBytes_AS_STRING(out);
    *p++ = (char)kind;
    memcpy(p, PyBytes_AS_STRING(identity_bytes), (size_t)PyBytes_GET_SIZE(identity_bytes));
    p += PyBytes_GET_SIZE(identity_bytes);
    if (digest != Py_None) {
        memcpy(p, digest_bytes, 8);
        p += 8;
    }
    memcpy(p, PyBytes_AS_STRING(body), (size_t)PyBytes_GET_SIZE(body));
    memcpy(p + PyBytes_GET_SIZE(body), PyBytes_AS_STRING(tail), (size_t)PyBytes_GET_SIZE(tail));
done:
    PyMem_Free(json.data);
    Py_XDECREF(raw);
    Py_XDECREF(packer);
    Py_XDECREF(body);
    Py_XDECREF(tail);
    return out;
}

/* pack_global_record(record) -> bytes, or NotImplemented;  parse_global_record(value, cls) -> cls, or NotImplemented
 * cluster_layout.pack_record and parse_record (their Python lines are the twins): a record of the global index as
 * ``cluster_layout`` describes it.  NotImplemented for what the fast path does not take (a field out of its range, a
 * value of another type, a record cut short): the Python lines then pack it, or raise, as before. */
#define REC_EXACT 1
#define REC_INDEXED 2
#define REC_MEMBER 4
#define REC_MOVED 8
#define REC_LAST 16
#define REC_OUTCOME_SHIFT 5
#define REC_HEAD 14

static void put_be(unsigned char *p, uint64_t value, int bytes) {
    for (int b = 0; b < bytes; b++) p[b] = (unsigned char)(value >> (8 * (bytes - 1 - b)));
}

static uint64_t get_be(const unsigned char *p, int bytes) {
    uint64_t value = 0;
    for (int b = 0; b < bytes; b++) value = value << 8 | p[b];
    return value;
}

/* A double as struct's ">d" writes it (IEEE 754: the platforms CPython builds on). */
static uint64_t double_bits(double x) {
    uint64_t bits;
    memcpy(&bits, &x, 8);
    return bits;
}

/* An int field in [low, high] as uint64 (``*ok`` 0: another type or out of range; -1: an error set). */
static uint64_t field_u64(PyObject *value, uint64_t high, int *ok) {
    *ok = 0;
    if (!PyLong_CheckExact(value)) return 0;
    unsigned long long number = PyLong_AsUnsignedLongLong(value);
    if (number == (unsigned long long)-1 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError)) {
            *ok = -1;
            return 0;
        }
        PyErr_Clear(); /* (negative, or beyond 64 bits) */
        return 0;
    }
    if (number > high) return 0;
    *ok = 1;
    return number;
}

static PyObject *pack_global_record(PyObject *module, PyObject *record) {
    if (!PyTuple_Check(record) || PyTuple_GET_SIZE(record) != 11) {
        PyErr_SetString(PyExc_TypeError, "pack_global_record: a GlobalRecord");
        return NULL;
    }
    /* seq, fingerprint, exact, indexed, outcome, distance, canonical_seq, first_seen, last_seen, payload, indexed_fp */
    PyObject *f[11];
    for (int i = 0; i < 11; i++) f[i] = PyTuple_GET_ITEM(record, i);
    int ok1, ok2, ok3, ok4 = 1, ok5 = 1;
    uint64_t seq = field_u64(f[0], 0xFFFFFFFFu, &ok1);
    uint64_t fp = field_u64(f[1], UINT64_MAX, &ok2);
    uint64_t outcome = field_u64(f[4], 255 >> REC_OUTCOME_SHIFT, &ok3);
    if (ok1 < 0 || ok2 < 0 || ok3 < 0) return NULL;
    if (!ok1 || !ok2 || !ok3 || !PyLong_CheckExact(f[5]) || !PyBytes_Check(f[9]) || !PyFloat_CheckExact(f[7]) ||
        !PyFloat_CheckExact(f[8]))
        Py_RETURN_NOTIMPLEMENTED;
    int exact = PyObject_IsTrue(f[2]), indexed = PyObject_IsTrue(f[3]);
    if (exact < 0 || indexed < 0) return NULL;
    long distance = PyLong_AsLong(f[5]);
    if (distance == -1 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError)) return NULL;
        PyErr_Clear();
        Py_RETURN_NOTIMPLEMENTED;
    }
    if (distance < 0) distance = 0;
    if (distance > 255) Py_RETURN_NOTIMPLEMENTED;
    unsigned flags = (unsigned)(outcome << REC_OUTCOME_SHIFT) | (exact ? REC_EXACT : 0) | (indexed ? REC_INDEXED : 0);
    uint64_t member = 0, moved = 0;
    if (f[6] != Py_None) {
        member = field_u64(f[6], 0xFFFFFFFFu, &ok4);
        flags |= REC_MEMBER;
    }
    if (indexed && f[10] != Py_None) {
        moved = field_u64(f[10], UINT64_MAX, &ok5);
        if (ok5 > 0 && moved != fp) flags |= REC_MOVED;
    }
    if (ok4 < 0 || ok5 < 0) return NULL;
    if (!ok4 || !ok5) Py_RETURN_NOTIMPLEMENTED;
    uint64_t first = double_bits(PyFloat_AS_DOUBLE(f[7])), last = double_bits(PyFloat_AS_DOUBLE(f[8]));
    if (last != first) flags |= REC_LAST;
    Py_ssize_t payload = PyBytes_GET_SIZE(f[9]);
    Py_ssize_t size = REC_HEAD + (flags & REC_MEMBER ? 4 : 0) + (flags & REC_MOVED ? 8 : 0) + 8 +
                      (flags & REC_LAST ? 8 : 0) + payload;
    PyObject *out = PyBytes_FromStringAndSize(NULL, size);
    if (out == NULL) return NULL;
    unsigned char *p = (unsigned char *)PyBytes_AS_STRING(out);
    put_be(p, seq, 4);
    put_be(p + 4, fp, 8);
    p[12] = (unsigned char)flags;
    p[13] = (unsigned char)distance;
    p += REC_HEAD;
    if (flags & REC_MEMBER) put_be(p, member, 4), p += 4;
    if (flags & REC_MOVED) put_be(p, moved, 8), p += 8;
    put_be(p, first, 8), p += 8;
    if (flags & REC_LAST) put_be(p, last, 8), p += 8;
    memcpy(p, PyBytes_AS_STRING(f[9]), (size_t)payload);
    return out;
}

static PyObject *parse_global_record(PyObject *module, PyObject *args) {
    PyObject *value, *cls;
    if (!PyArg_ParseTuple(args, "OO!:parse_global_record", &value, &PyType_Type, &cls)) return NULL;
    if (!PyBytes_Check(value) || !PyType_IsSubtype((PyTypeObject *)cls, &PyTuple_Type)) Py_RETURN_NOTIMPLEMENTED;
    const unsigned char *v = (const unsigned char *)PyBytes_AS_STRING(value);
    Py_ssize_t n = PyBytes_GET_SIZE(value);
    if (n < REC_HEAD) Py_RETURN_NOTIMPLEMENTED;
    unsigned flags = v[12], distance = v[13];
    Py_ssize_t p = REC_HEAD;
    Py_ssize_t need = p + (flags & REC_MEMBER ? 4 : 0) + (flags & REC_MOVED ? 8 : 0) + 8 + (flags & REC_LAST ? 8 : 0);
    if (n < need) Py_RETURN_NOTIMPLEMENTED;
    uint64_t fp = get_be(v + 4, 8), member = 0, indexed_fp = fp;
    if (flags & REC_MEMBER) member = get_be(v + p, 4), p += 4;
    if (flags & REC_MOVED) indexed_fp = get_be(v + p, 8), p += 8;
    uint64_t first_bits = get_be(v + p, 8), last_bits = first_bits;
    p += 8;
    if (flags & REC_LAST) last_bits = get_be(v + p, 8), p += 8;
    double first, last;
    memcpy(&first, &first_bits, 8);
    memcpy(&last, &last_bits, 8);
    PyObject *items = PyTuple_New(11);
    if (items == NULL) return NULL;
    PyObject *fields[11] = {
        PyLong_FromUnsignedLongLong(get_be(v, 4)),
        PyLong_FromUnsignedLongLong(fp),
        Py_NewRef(flags & REC_EXACT ? Py_True : Py_False),
        Py_NewRef(flags & REC_INDEXED ? Py_True : Py_False),
        PyLong_FromLong((long)(flags >> REC_OUTCOME_SHIFT)),
        PyLong_FromLong(flags & REC_MEMBER ? (long)distance : -1L),
        flags & REC_MEMBER ? PyLong_FromUnsignedLongLong(member) : Py_NewRef(Py_None),
        PyFloat_FromDouble(first),
        PyFloat_FromDouble(last),
        PyBytes_FromStringAndSize((const char *)v + p, n - p),
        flags & REC_INDEXED || flags & REC_MOVED ? PyLong_FromUnsignedLongLong(indexed_fp) : Py_NewRef(Py_None),
    };
    int failed = 0;
    for (int i = 0; i < 11; i++) {
        if (fields[i] == NULL) failed = 1;
        else PyTuple_SET_ITEM(items, i, fields[i]);
    }
    if (failed) {
        Py_DECREF(items); /* (a NULL item is skipped by the tuple's dealloc) */
        return NULL;
    }
    PyObject *pack = PyTuple_Pack(1, items);
    Py_DECREF(items);
    if (pack == NULL) return NULL;
    PyObject *out = PyTuple_Type.tp_new((PyTypeObject *)cls, pack, NULL);
    Py_DECREF(pack);
    return out;
}

/* bucket_names(base, spans, fingerprints) -> [str, ...]
 * cluster_layout.GlobalKeys.buckets_many: the bucket key of each fingerprint in each table, f"{base}.t{t}.{b:x}}}"
 * with b = (fingerprint >> shift) & mask of the table's (shift, mask) in ``spans``; table after table for each
 * fingerprint in turn. */
static PyObject *bucket_names(PyObject *module, PyObject *args) {
    PyObject *base, *spans, *fps;
    if (!PyArg_ParseTuple(args, "UO!O!:bucket_names", &base, &PyList_Type, &spans, &PyList_Type, &fps)) return NULL;
    Py_ssize_t tables = PyList_GET_SIZE(spans), count = PyList_GET_SIZE(fps);
    unsigned long long shifts[64], masks[64];
    if (tables > 64) {
        PyErr_SetString(PyExc_ValueError, "bucket_names: at most 64 tables");
        return NULL;
    }
    for (Py_ssize_t t = 0; t < tables; t++) {
        PyObject *span = PyList_GET_ITEM(spans, t);
        if (!PyTuple_Check(span) || PyTuple_GET_SIZE(span) != 2) {
            PyErr_SetString(PyExc_TypeError, "bucket_names: each span a (shift, mask)");
            return NULL;
        }
        shifts[t] = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(span, 0));
        masks[t] = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(span, 1));
        if (PyErr_Occurred()) return NULL;
        if (shifts[t] > 63 || masks[t] > 0xFFFFFFFFULL) { /* ("%x": an unsigned int) */
            PyErr_SetString(PyExc_ValueError, "bucket_names: a shift is from 0 to 63, a mask of 32 bits at most");
            return NULL;
        }
    }
    /* An ASCII base (the usual scope name): each name written into a buffer, the ".t<table>." part made once a
     * table (PyUnicode_FromFormat parses its format for every name: ~4x the time); any other base, formatted. */
    char heads[64][24];
    int head_len[64];
    const char *ascii = NULL;
    Py_ssize_t base_len = 0;
    if (PyUnicode_IS_ASCII(base) && PyUnicode_GET_LENGTH(base) <= 4096) {
        ascii = (const char *)PyUnicode_1BYTE_DATA(base);
        base_len = PyUnicode_GET_LENGTH(base);
        for (Py_ssize_t t = 0; t < tables; t++) head_len[t] = snprintf(heads[t], sizeof heads[t], ".t%zd.", t);
    }
    PyObject *out = PyList_New(tables * count);
    for (Py_ssize_t i = 0; out != NULL && i < count; i++) {
        unsigned long long fp = PyLong_AsUnsignedLongLong(PyList_GET_ITEM(fps, i));
        if (fp == (unsigned long long)-1 && PyErr_Occurred()) {
            Py_CLEAR(out);
            break;
        }
        for (Py_ssize_t t = 0; t < tables; t++) {
            unsigned int bits = (unsigned int)((fp >> shifts[t]) & masks[t]);
            PyObject *name;
            if (ascii != NULL) {
                char hex[9];
                int digits = 0;
                do {
                    hex[8 - digits++] = "0123456789abcdef"[bits & 15]; /* ("%x": lowercase, no leading zeros) */
                    bits >>= 4;
                } while (bits);
                name = PyUnicode_New(base_len + head_len[t] + digits + 1, 127);
                if (name != NULL) {
                    char *to = (char *)PyUnicode_1BYTE_DATA(name);
                    memcpy(to, ascii, (size_t)base_len);
                    memcpy(to + base_len, heads[t], (size_t)head_len[t]);
                    memcpy(to + base_len + head_len[t], hex + 9 - digits, (size_t)digits);
                    to[base_len + head_len[t] + digits] = '}';
                }
            } else {
                name = PyUnicode_FromFormat("%U.t%zd.%x}", base, t, bits);
            }
            if (name == NULL) {
                Py_CLEAR(out);
                break;
            }
            PyList_SET_ITEM(out, i * tables + t, name);
        }
    }
    return out;
}

/* place_replies(indexes, answer, replies, error_type) -> [positions in indexes of the errors]
 * node_link's Batch._send for one node: each reply of ``answer`` put at ``replies[indexes[n]]``, in turn; the ``n``
 * of each reply that is an ``error_type`` (a redirect to send again, or an error to raise) returned, in order. */
static PyObject *place_replies(PyObject *module, PyObject *args) {
    PyObject *indexes, *answer, *replies, *error_type;
    if (!PyArg_ParseTuple(args, "O!O!O!O!:place_replies", &PyList_Type, &indexes, &PyList_Type, &answer, &PyList_Type,
                          &replies, &PyType_Type, &error_type))
        return NULL;
    Py_ssize_t count = PyList_GET_SIZE(indexes), size = PyList_GET_SIZE(replies);
    if (PyList_GET_SIZE(answer) < count) count = PyList_GET_SIZE(answer); /* (zip's length) */
    for (Py_ssize_t n = 0; n < count; n++) { /* every position first: nothing placed when one is wrong */
        Py_ssize_t i = PyLong_AsSsize_t(PyList_GET_ITEM(indexes, n));
        if (i == -1 && PyErr_Occurred()) return NULL;
        if (i < 0 || i >= size) {
            PyErr_SetString(PyExc_IndexError, "place_replies: a position out of the replies' range");
            return NULL;
        }
    }
    PyObject *errors = PyList_New(0);
    if (errors == NULL) return NULL;
    for (Py_ssize_t n = 0; n < count; n++) {
        PyObject *reply = PyList_GET_ITEM(answer, n);
        if (PyObject_TypeCheck(reply, (PyTypeObject *)error_type)) {
            PyObject *at = PyLong_FromSsize_t(n);
            if (at == NULL || PyList_Append(errors, at) < 0) {
                Py_XDECREF(at);
                Py_DECREF(errors);
                return NULL;
            }
            Py_DECREF(at);
        }
        Py_INCREF(reply);
        PyList_SetItem(replies, PyLong_AsSsize_t(PyList_GET_ITEM(indexes, n)), reply); /* (steals; drops the old) */
    }
    return errors;
}

/* near_replies(replies, start, keys, group, fingerprints, lengths) -> {seq: [fingerprint, ...]}
 * cluster_backend's reading of the SIMHASH.NEAR replies (a list: the bucket's length, then the seqs near the fold),
 * one a key of ``keys`` from ``replies[start]`` on: each key's length into ``lengths``; each seq a reply names, with
 * ``fingerprints[i // group]`` of each reply ``i`` that names it (seqs in the order first named). */
static PyObject *near_replies(PyObject *module, PyObject *args) {
    PyObject *replies, *keys, *fps, *lengths;
    Py_ssize_t start, group;
    if (!PyArg_ParseTuple(args, "O!nO!nO!O!:near_replies", &PyList_Type, &replies, &start, &PyList_Type, &keys, &group,
                          &PyList_Type, &fps, &PyDict_Type, &lengths))
        return NULL;
    Py_ssize_t count = PyList_GET_SIZE(keys);
    if (group < 1 || PyList_GET_SIZE(fps) * group != count || start < 0 || start + count > PyList_GET_SIZE(replies)) {
        PyErr_SetString(PyExc_ValueError, "near_replies: group >= 1 keys for each fingerprint, a reply for each key");
        return NULL;
    }
    PyObject *out = PyDict_New();
    for (Py_ssize_t i = 0; out != NULL && i < count; i++) {
        PyObject *reply = PyList_GET_ITEM(replies, start + i);
        if (!PyList_Check(reply) || PyList_GET_SIZE(reply) < 1) {
            PyErr_Format(PyExc_TypeError, "SIMHASH.NEAR answered %.100s, not a list of a length and seqs",
                         Py_TYPE(reply)->tp_name);
            Py_CLEAR(out);
            break;
        }
        if (PyDict_SetItem(lengths, PyList_GET_ITEM(keys, i), PyList_GET_ITEM(reply, 0)) < 0) {
            Py_CLEAR(out);
            break;
        }
        PyObject *fp = PyList_GET_ITEM(fps, i / group);
        for (Py_ssize_t j = 1; out != NULL && j < PyList_GET_SIZE(reply); j++) {
            PyObject *seq = PyList_GET_ITEM(reply, j);
            PyObject *had = PyDict_GetItemWithError(out, seq);
            if (had != NULL) {
                if (PyList_Append(had, fp) < 0) Py_CLEAR(out);
            } else if (PyErr_Occurred()) {
                Py_CLEAR(out);
            } else {
                PyObject *first = PyList_New(1);
                if (first == NULL) {
                    Py_CLEAR(out);
                    break;
                }
                Py_INCREF(fp);
                PyList_SET_ITEM(first, 0, fp);
                if (PyDict_SetItem(out, seq, first) < 0) Py_CLEAR(out);
                Py_DECREF(first);
            }
        }
    }
    return out;
}
/* ------------------------------------------------ end of Redis Cluster commands */

/* ----------------------------------------------------------- features */

/* vote(features, weights) -> int or None
 * fingerprint.simhash_from_features's bit vote: bit j is set when sum_i w_i * (+1 if bit j of
 * features[i] else -1) > 0.  numpy sums in its own order (einsum, then a pairwise sum), and a sum
 * of floats depends on the order only by rounding: each sum here and numpy's differs from the
 * exact one by at most 2 * (n + 258) * eps * sum(w) (n + 258 bounds the additions a term goes
 * through, in either order), so when every bit's sum here is further than twice that from zero
 * (four times, for room), numpy finds the same signs.  Otherwise (a near tie), or for a weight that is not a finite number >= 0,
 * None: the caller lets numpy decide.  With many features each weight is added to one bin per
 * byte of its hash (8 additions, not 64), and each bit's sum is then the bins whose byte has it. */
static PyObject *vote(PyObject *module, PyObject *args) {
    Py_buffer fv, wv;
    if (!PyArg_ParseTuple(args, "y*y*:vote", &fv, &wv)) return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = fv.len / (Py_ssize_t)sizeof(uint64_t);
    if (fv.len % (Py_ssize_t)sizeof(uint64_t) != 0 || wv.len != n * (Py_ssize_t)sizeof(double)) {
        PyErr_SetString(PyExc_ValueError, "vote: features must be uint64 and weights float64 of the same length");
        goto done;
    }
    const unsigned char *fb = fv.buf, *wb = wv.buf;
    double sums[64] = {0}, total = 0.0;
    double (*bins)[256] = NULL;
    if (n >= 128) {
        bins = PyMem_Calloc(8, sizeof(*bins));
        if (bins == NULL) {
            PyErr_NoMemory();
            goto done;
        }
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        uint64_t h;
        double w;
        memcpy(&h, fb + i * 8, 8);
        memcpy(&w, wb + i * 8, 8);
        if (!(w >= 0.0 && w <= DBL_MAX)) { /* NaN, infinite or negative */
            PyMem_Free(bins);
            result = Py_NewRef(Py_None);
            goto done;
        }
        total += w;
        if (bins != NULL) {
            for (int b = 0; b < 8; b++) bins[b][(h >> (8 * b)) & 0xFF] += w;
        } else {
            for (int j = 0; j < 64; j++)
                if ((h >> j) & 1) sums[j] += w;
        }
    }
    if (bins != NULL) {
        for (int b = 0; b < 8; b++)
            for (int k = 0; k < 8; k++) {
                double sum = 0.0;
                for (int v = 0; v < 256; v++)
                    if ((v >> k) & 1) sum += bins[b][v];
                sums[8 * b + k] = sum;
            }
        PyMem_Free(bins);
    }
    double margin = 2.0 * ((double)n + 258.0) * DBL_EPSILON * total * 4.0;
    uint64_t fingerprint = 0;
    for (int j = 0; j < 64; j++) {
        double votes = 2.0 * sums[j] - total;
        if (!(votes > margin || votes < -margin)) {
            result = Py_NewRef(Py_None);
            goto done;
        }
        if (votes > 0) fingerprint |= (uint64_t)1 << j;
    }
    result = PyLong_FromUnsignedLongLong(fingerprint);
done:
    PyBuffer_Release(&fv);
    PyBuffer_Release(&wv);
    return result;
}

/* count_distinct(hashes) -> (features, counts)
 * np.unique(hashes, return_counts=True) for a uint64 buffer: the distinct values in ascending
 * order and how often each occurs (int64), as two bytearrays (writable: numpy wraps them as they
 * are).  The values are counted in a hash table (token hashes are well mixed: their low bits
 * index it), then only the distinct ones are sorted, by an LSD radix sort (one byte a pass).
 * None when the values collide in the table far more than hashes do by chance (values chosen to,
 * by a hostile page): the caller then uses np.unique, never a quadratic count. */
static PyObject *count_distinct(PyObject *module, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    if (view.len % (Py_ssize_t)sizeof(uint64_t) != 0) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "count_distinct: the buffer must hold uint64 values");
        return NULL;
    }
    const uint64_t *values = view.buf;
    size_t n = (size_t)view.len / sizeof(uint64_t);
    size_t size = 16;
    while (size < 2 * n) size *= 2;
    uint64_t *keys = PyMem_Malloc(size * sizeof(uint64_t));
    int64_t *tally = PyMem_Calloc(size, sizeof(int64_t)); /* 0: empty slot */
    uint64_t *key_b = NULL;
    int64_t *tally_b = NULL;
    PyObject *features = NULL, *tallies = NULL, *result = NULL;
    if (keys == NULL || tally == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    size_t mask = size - 1, distinct = 0, probes = 0, probe_limit = 32 * n + 1024;
    for (size_t i = 0; i < n; i++) {
        uint64_t v;
        memcpy(&v, values + i, sizeof v);
        size_t slot = (size_t)(v ^ (v >> 29)) & mask;
        while (tally[slot] != 0 && keys[slot] != v) {
            slot = (slot + 1) & mask;
            if (++probes > probe_limit) { /* values chosen to collide (a hostile page): let numpy sort them */
                result = Py_NewRef(Py_None);
                goto done;
            }
        }
        if (tally[slot] == 0) {
            keys[slot] = v;
            distinct++;
        }
        tally[slot]++;
    }
    /* The occupied slots to the front, then sorted by value (LSD radix, counts carried along). */
    size_t k = 0;
    for (size_t slot = 0; slot < size; slot++) {
        if (tally[slot] != 0) {
            keys[k] = keys[slot];
            tally[k] = tally[slot];
            k++;
        }
    }
    key_b = PyMem_Malloc((distinct ? distinct : 1) * sizeof(uint64_t));
    tally_b = PyMem_Malloc((distinct ? distinct : 1) * sizeof(int64_t));
    if (key_b == NULL || tally_b == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    uint64_t *ka = keys, *kb = key_b;
    int64_t *ta = tally, *tb = tally_b;
    for (int d = 0; d < 8 && k > 1; d++) {
        size_t offsets[256] = {0};
        for (size_t i = 0; i < k; i++) offsets[(ka[i] >> (8 * d)) & 0xFF]++;
        if (offsets[(ka[0] >> (8 * d)) & 0xFF] == k) continue; /* the same byte everywhere: order kept */
        size_t total = 0;
        for (int b = 0; b < 256; b++) {
            size_t c = offsets[b];
            offsets[b] = total;
            total += c;
        }
        for (size_t i = 0; i < k; i++) {
            size_t to = offsets[(ka[i] >> (8 * d)) & 0xFF]++;
            kb[to] = ka[i];
            tb[to] = ta[i];
        }
        uint64_t *kt = ka;
        ka = kb;
        kb = kt;
        int64_t *tt = ta;
        ta = tb;
        tb = tt;
    }
    features = PyByteArray_FromStringAndSize((const char *)ka, (Py_ssize_t)(k * sizeof(uint64_t)));
    tallies = PyByteArray_FromStringAndSize((const char *)ta, (Py_ssize_t)(k * sizeof(int64_t)));
    if (features != NULL && tallies != NULL) result = PyTuple_Pack(2, features, tallies);
done:
    Py_XDECREF(features);
    Py_XDECREF(tallies);
    PyMem_Free(keys);
    PyMem_Free(tally);
    PyMem_Free(key_b);
    PyMem_Free(tally_b);
    PyBuffer_Release(&view);
    return result;
}

/* Whether the "ed on" / "ed at" at ``s[hit]`` comes after a date label: the ``window`` bytes before
 * its "ed" end end in a token that, lower-cased (ASCII), ends with one of ``labels`` (lower-case
 * bytes, each ending in "ed").  features._drop_dates accepts a match only when the last token of
 * at most ``window`` bytes before its "ed" end (a suffix of that token when an earlier match ends
 * inside the window) lower-cased is a label: such a token ends with the label.  So without one,
 * _drop_dates has nothing to drop. */
static int date_label_before(const unsigned char *s, Py_ssize_t hit, PyObject *labels, Py_ssize_t window) {
    Py_ssize_t end = hit + 2, start = end > window ? end - window : 0, begin = end;
    /* the last token of s[start:end] (bytes.split()'s whitespace) */
    while (begin > start && !(s[begin - 1] == ' ' || (s[begin - 1] >= '\t' && s[begin - 1] <= '\r'))) begin--;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(labels); i++) {
        PyObject *label = PyTuple_GET_ITEM(labels, i);
        Py_ssize_t len = PyBytes_GET_SIZE(label);
        const unsigned char *word = (const unsigned char *)PyBytes_AS_STRING(label);
        if (end - begin < len) continue;
        Py_ssize_t j = 0;
        for (; j < len; j++) {
            unsigned char c = s[end - len + j];
            if ((c >= 'A' && c <= 'Z' ? c + 32 : c) != word[j]) break;
        }
        if (j == len) return 1;
    }
    return 0;
}

enum { RULE_FOOTNOTE = 1, RULE_URL = 2, RULE_DATE = 4, RULE_FROM = 8, RULE_LINKS = 16 };

/* Of RULE_DATE and RULE_FROM in ``want``, the ones the "d" at ``s[p]`` (followed by " o", " a" or
 * " f") starts: "ed on" / "ed at" after a date label, "etrieved from". */
static long ed_rules_at(const unsigned char *s, Py_ssize_t n, Py_ssize_t p, PyObject *labels, Py_ssize_t window,
                        long want) {
    if (p < 1 || s[p - 1] != 'e') return 0;
    long found = 0;
    if ((want & RULE_DATE) && p + 3 < n && ((s[p + 2] == 'o' && s[p + 3] == 'n') || (s[p + 2] == 'a' && s[p + 3] == 't')) &&
        date_label_before(s, p - 1, labels, window))
        found |= RULE_DATE;
    if ((want & RULE_FROM) && p >= 7 && p + 5 < n && memcmp(s + p - 7, "etrieved from", 13) == 0) found |= RULE_FROM;
    return found;
}

/* RULE_DATE and RULE_FROM (of ``want``) found in ``s``: every "d" followed by " o", " a" or " f" is
 * looked at (sixteen bytes a step with SSE2), found in one pass for both rules. */
static long ed_rules(const unsigned char *s, Py_ssize_t n, PyObject *labels, Py_ssize_t window, long want) {
    long found = 0;
    Py_ssize_t i = 0;
#if defined(__SSE2__) && (defined(__GNUC__) || defined(__clang__))
    const __m128i d = _mm_set1_epi8('d'), space = _mm_set1_epi8(' ');
    const __m128i o = _mm_set1_epi8('o'), a = _mm_set1_epi8('a'), f = _mm_set1_epi8('f');
    for (; i + 18 <= n && found != want; i += 16) {
        __m128i at0 = _mm_loadu_si128((const __m128i *)(s + i));
        __m128i at1 = _mm_loadu_si128((const __m128i *)(s + i + 1));
        __m128i at2 = _mm_loadu_si128((const __m128i *)(s + i + 2));
        __m128i next = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(at2, o), _mm_cmpeq_epi8(at2, a)), _mm_cmpeq_epi8(at2, f));
        __m128i hits = _mm_and_si128(_mm_and_si128(_mm_cmpeq_epi8(at0, d), _mm_cmpeq_epi8(at1, space)), next);
        unsigned mask = (unsigned)_mm_movemask_epi8(hits);
        while (mask != 0) {
            found |= ed_rules_at(s, n, i + __builtin_ctz(mask), labels, window, want & ~found);
            mask &= mask - 1;
        }
    }
#endif
    for (; i + 2 < n && found != want; i++)
        if (s[i] == 'd' && s[i + 1] == ' ' && (s[i + 2] == 'o' || s[i + 2] == 'a' || s[i + 2] == 'f'))
            found |= ed_rules_at(s, n, i, labels, window, want & ~found);
    return found;
}

/* Whether ``s`` holds "URL", at most one ASCII whitespace byte (bytes regex \s), then ":". */
static int has_url_colon(const unsigned char *s, Py_ssize_t n) {
    const unsigned char *at = s, *stop = s + n;
    while (at < stop) {
        const unsigned char *hit = memchr(at, 'U', (size_t)(stop - at));
        if (hit == NULL || stop - hit < 4) return 0;
        at = hit + 1;
        if (hit[1] != 'R' || hit[2] != 'L') continue;
        const unsigned char *next = hit + 3;
        if (*next == ':') return 1;
        if ((*next == ' ' || (*next >= '\t' && *next <= '\r')) && next + 1 < stop && next[1] == ':') return 1;
    }
    return 0;
}

/* Whether some ``last`` byte in ``s`` comes right after ``before`` (``before_len`` bytes). */
static int has_before_byte(const unsigned char *s, Py_ssize_t n, unsigned char last, const char *before,
                           Py_ssize_t before_len) {
    const unsigned char *at = s + before_len, *stop = s + n;
    while (at < stop) {
        const unsigned char *hit = memchr(at, last, (size_t)(stop - at));
        if (hit == NULL) return 0;
        if (memcmp(hit - before_len, before, (size_t)before_len) == 0) return 1;
        at = hit + 1;
    }
    return 0;
}

/* not_content_rules(data, labels, window, rules) -> int: the bits of ``rules`` whose regex may match
 * ``data`` (see the top of this file); a bit left out means the rule certainly changes nothing. */
static PyObject *not_content_rules(PyObject *module, PyObject *args) {
    Py_buffer view;
    PyObject *labels;
    Py_ssize_t window;
    long rules;
    if (!PyArg_ParseTuple(args, "y*O!nl:not_content_rules", &view, &PyTuple_Type, &labels, &window, &rules))
        return NULL;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(labels); i++) {
        if (!PyBytes_Check(PyTuple_GET_ITEM(labels, i))) {
            PyBuffer_Release(&view);
            PyErr_SetString(PyExc_TypeError, "not_content_rules: labels must be a tuple of bytes");
            return NULL;
        }
    }
    const unsigned char *s = view.buf;
    Py_ssize_t n = view.len;
    long found = 0;
    if (rules & RULE_FOOTNOTE) { /* \[\d */
        const unsigned char *at = s, *stop = s + n;
        while (at < stop) {
            const unsigned char *hit = memchr(at, '[', (size_t)(stop - at));
            if (hit == NULL || hit + 1 >= stop) break;
            if (hit[1] >= '0' && hit[1] <= '9') {
                found |= RULE_FOOTNOTE;
                break;
            }
            at = hit + 1;
        }
    }
    if ((rules & RULE_URL) && has_url_colon(s, n)) found |= RULE_URL;
    if (rules & (RULE_DATE | RULE_FROM)) found |= ed_rules(s, n, labels, window, rules & (RULE_DATE | RULE_FROM));
    if ((rules & RULE_LINKS) && has_before_byte(s, n, ':', "Links", 5)) found |= RULE_LINKS;
    PyBuffer_Release(&view);
    return PyLong_FromLong(found);
}

/* set_separators(code_points): the sorted non-ASCII code points hash_tokens splits pieces at. */
static PyObject *set_separators(PyObject *module, PyObject *arg) {
    PyObject *seq = PySequence_Fast(arg, "code points must be a sequence of int");
    if (seq == NULL) return NULL;
    Py_ssize_t m = PySequence_Fast_GET_SIZE(seq);
    if (m > MAX_SEPARATORS) {
        Py_DECREF(seq);
        return PyErr_Format(PyExc_ValueError, "at most %d separators, got %zd", MAX_SEPARATORS, m);
    }
    uint32_t values[MAX_SEPARATORS];
    for (Py_ssize_t k = 0; k < m; k++) {
        unsigned long v = PyLong_AsUnsignedLong(PySequence_Fast_GET_ITEM(seq, k));
        if (PyErr_Occurred()) {
            Py_DECREF(seq);
            return NULL;
        }
        if (v < 0x80 || v > 0x10FFFF || (k > 0 && v <= values[k - 1])) {
            Py_DECREF(seq);
            return PyErr_Format(PyExc_ValueError, "separators must be sorted non-ASCII code points, got %lu", v);
        }
        values[k] = (uint32_t)v;
    }
    Py_DECREF(seq);
    memcpy(separators, values, (size_t)m * sizeof(uint32_t));
    separator_count = m;
    Py_RETURN_NONE;
}

/* -------------------------------------------------------------- index */

typedef struct {
    int shift;
    uint64_t mask;
    int width;
} Span;

typedef struct {
    Py_buffer order, bounds; /* uint32 row numbers sorted by bucket; bucket offsets (uint32) */
    Py_buffer filter;        /* (errors > 0) each row's 16-bit filter (index.py: filter_values), in ``order``'s order */
    int has_filter;
    Py_ssize_t entry_count;
    Span spans[64];
    int span_count;
    int drop_bits; /* key >> drop_bits is the bucket */
    int errors;    /* bits the key of a match may differ in */
    int dir_bits;  /* bits of the bucket number */
    int low_bits;  /* the filter: key bits below the bucket (low), then sample_width fingerprint bits */
    int sample_shift, sample_width;
} TableView;

#define MAX_KEY_ERRORS 2

static int parse_table(PyObject *spec, TableView *t) {
    PyObject *order, *bounds, *spans, *filter;
    if (!PyArg_ParseTuple(spec, "OOOiiiOiii:table", &order, &bounds, &spans, &t->drop_bits, &t->errors, &t->dir_bits,
                          &filter, &t->low_bits, &t->sample_shift, &t->sample_width))
        return -1;
    if (t->errors > 0 && filter == Py_None) {
        PyErr_SetString(PyExc_ValueError, "a table whose keys may differ needs its key filter");
        return -1;
    }
    if (t->errors < 0 || t->errors > MAX_KEY_ERRORS || t->dir_bits < 0 || t->dir_bits > 24 /* 64 - ITEM_BUCKET */ || t->drop_bits < 0 ||
        t->drop_bits > 64 || t->low_bits < 0 || t->low_bits > 8 || t->sample_width < 0 ||
        t->low_bits + t->sample_width > 16 || t->sample_shift < 0 || t->sample_shift + t->sample_width > 64) {
        PyErr_SetString(PyExc_ValueError, "bad table layout");
        return -1;
    }
    PyObject *seq = PySequence_Fast(spans, "spans must be a sequence");
    if (seq == NULL) return -1;
    t->span_count = (int)PySequence_Fast_GET_SIZE(seq);
    if (t->span_count > 64) {
        Py_DECREF(seq);
        PyErr_SetString(PyExc_ValueError, "too many spans");
        return -1;
    }
    for (int i = 0; i < t->span_count; i++) {
        unsigned long long mask;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "iKi:span", &t->spans[i].shift, &mask, &t->spans[i].width)) {
            Py_DECREF(seq);
            return -1;
        }
        t->spans[i].mask = mask;
    }
    Py_DECREF(seq);
    if (PyObject_GetBuffer(order, &t->order, PyBUF_SIMPLE) < 0) return -1;
    if (PyObject_GetBuffer(bounds, &t->bounds, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&t->order);
        return -1;
    }
    t->entry_count = t->order.len / (Py_ssize_t)sizeof(uint32_t);
    t->has_filter = t->errors > 0;
    if (t->has_filter) {
        if (PyObject_GetBuffer(filter, &t->filter, PyBUF_SIMPLE) < 0) {
            PyBuffer_Release(&t->order);
            PyBuffer_Release(&t->bounds);
            return -1;
        }
        if (t->filter.len / 2 < t->entry_count) t->entry_count = t->filter.len / 2;
    }
    return 0;
}

static void release_table(TableView *t) {
    PyBuffer_Release(&t->order);
    PyBuffer_Release(&t->bounds);
    if (t->has_filter) PyBuffer_Release(&t->filter);
}

#define LANES_0001 0x0001000100010001ULL
#define LANES_8000 0x8000800080008000ULL

/* For 4 filters of 16 bits at once (SWAR, as a popcount per lane): bit 15 of lane i set when lane i of ``x`` has at most
 * ``limit`` - 1 bits set (``limit`` repeated in each lane, at most 17). */
static inline uint64_t lanes_within(uint64_t x, uint64_t limit) {
    x = x - ((x >> 1) & 0x5555555555555555ULL);
    x = (x & 0x3333333333333333ULL) + ((x >> 2) & 0x3333333333333333ULL);
    x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0FULL;
    x = (x + (x >> 8)) & 0x001F001F001F001FULL; /* bits set per lane, 0..16 */
    return ~((x | LANES_8000) - limit) & LANES_8000;
}

typedef struct {
    int64_t query;
    uint32_t row;
    int distance;
} Pair;

typedef struct {
    Pair *data;
    size_t len, cap;
} Pairs;

/* Runs without the GIL: the raw allocator only. */
static int add_pair(Pairs *v, int64_t query, uint32_t row, int distance) {
    if (v->len == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 256;
        Pair *grown = PyMem_RawRealloc(v->data, cap * sizeof(Pair));
        if (grown == NULL) return -1;
        v->data = grown;
        v->cap = cap;
    }
    v->data[v->len].query = query;
    v->data[v->len].row = row;
    v->data[v->len].distance = distance;
    v->len++;
    return 0;
}

static int pair_order(const void *a, const void *b) {
    const Pair *x = a, *y = b;
    if (x->query != y->query) return x->query < y->query ? -1 : 1;
    if (x->distance != y->distance) return x->distance < y->distance ? -1 : 1;
    return (x->row > y->row) - (x->row < y->row);
}

/* Sorts one chunk's pairs (queries first .. first + m - 1) by (query, distance, row): a counting
 * sort by query, then each query's few pairs in place by insertion (qsort's comparator calls
 * cost more than the search around them; qsort for a query with many).  ``starts`` has room for m + 1 offsets. */
static int sort_pairs(Pair *pairs, size_t count, int64_t first, Py_ssize_t m, size_t *starts) {
    Pair *sorted = PyMem_RawMalloc(count * sizeof(Pair));
    if (sorted == NULL) return -1;
    memset(starts, 0, sizeof(size_t) * (size_t)(m + 1));
    for (size_t a = 0; a < count; a++) starts[pairs[a].query - first + 1]++;
    for (Py_ssize_t i = 0; i < m; i++) starts[i + 1] += starts[i];
    for (size_t a = 0; a < count; a++) sorted[starts[pairs[a].query - first]++] = pairs[a];
    /* starts[i] is now the end of query i's run (the start of query i + 1's) */
    size_t begin = 0;
    for (Py_ssize_t i = 0; i < m; i++) {
        size_t end = starts[i];
        if (end - begin > 32) { /* a query with many matches (many equal pages stored): no quadratic sort */
            qsort(sorted + begin, end - begin, sizeof(Pair), pair_order);
            begin = end;
            continue;
        }
        for (size_t a = begin + 1; a < end; a++) {
            Pair item = sorted[a];
            size_t b = a;
            for (; b > begin && pair_order(&sorted[b - 1], &item) > 0; b--) sorted[b] = sorted[b - 1];
            sorted[b] = item;
        }
        begin = end;
    }
    memcpy(pairs, sorted, count * sizeof(Pair));
    PyMem_RawFree(sorted);
    return 0;
}

/* x86-64 before 2008 has no POPCNT instruction: GCC builds both and picks one at load time. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define POPCNT_CLONES __attribute__((target_clones("popcnt", "default")))
#else
#define POPCNT_CLONES
#endif

/* Queries are searched by chunks of this many (bounds the candidate buffers). */
#define SEARCH_CHUNK 32768
/* A work item is one uint64: the bucket (at most 22 bits) from bit ITEM_BUCKET, the query's
 * 16-bit filter from bit ITEM_FILTER, the query's index in its chunk in the low 24 bits. */
#define ITEM_BUCKET 40
#define ITEM_FILTER 24
#define ITEM_QUERY 0xFFFFFFULL
/* Loads are requested this many items ahead of their use (software prefetch). */
#define AHEAD 32

#if defined(__GNUC__)
#define PREFETCH(address) __builtin_prefetch(address)
#else
#define PREFETCH(address) ((void)0)
#endif

/* Sorts ``items`` (bucket << ITEM_BUCKET | filter << ITEM_FILTER | query) by bucket, ``bucket_bits`` wide: LSD radix, 11 bits a pass. */
static void sort_by_bucket(uint64_t *items, uint64_t *scratch, size_t n, int bucket_bits) {
    size_t counts[2048];
    for (int shift = ITEM_BUCKET; shift < ITEM_BUCKET + bucket_bits; shift += 11) {
        memset(counts, 0, sizeof counts);
        for (size_t i = 0; i < n; i++) counts[(items[i] >> shift) & 2047]++;
        size_t sum = 0;
        for (int v = 0; v < 2048; v++) {
            size_t c = counts[v];
            counts[v] = sum;
            sum += c;
        }
        for (size_t i = 0; i < n; i++) scratch[counts[(items[i] >> shift) & 2047]++] = items[i];
        memcpy(items, scratch, n * sizeof(uint64_t));
    }
}

/* The candidates of one chunk: (row, query) pairs still to verify. */
typedef struct {
    uint32_t *row, *query;
    size_t len, cap;
} Candidates;

static int candidates_room(Candidates *c, size_t more) {
    if (c->len + more <= c->cap) return 0;
    size_t cap = c->cap ? c->cap : 256;
    while (cap < c->len + more) cap *= 2;
    uint32_t *row = PyMem_RawRealloc(c->row, cap * sizeof(uint32_t));
    if (row == NULL) return -1;
    c->row = row;
    uint32_t *query = PyMem_RawRealloc(c->query, cap * sizeof(uint32_t));
    if (query == NULL) return -1;
    c->query = query;
    c->cap = cap;
    return 0;
}

/* A position in a table's work: probe pattern, then query (in bucket order). */
typedef struct {
    size_t pattern;
    Py_ssize_t query;
} ProbeCursor;

static void cursor_next(ProbeCursor *c, Py_ssize_t m) {
    if (++c->query == m) {
        c->query = 0;
        c->pattern++;
    }
}

/* The buckets of one table a query reads: XOR masks and the key bits each spends. */
static size_t table_probes(const TableView *tv, uint32_t *masks, int *spent, size_t room) {
    size_t n = 0;
    masks[n] = 0;
    spent[n++] = 0;
    for (int a = 0; a < tv->dir_bits && tv->errors >= 1; a++) {
        if (n < room) {
            masks[n] = 1u << a;
            spent[n++] = 1;
        }
        for (int b = a + 1; b < tv->dir_bits && tv->errors >= 2; b++) {
            if (n < room) {
                masks[n] = (1u << a) | (1u << b);
                spent[n++] = 2;
            }
        }
    }
    return n;
}

/* Every row of one table within reach of the chunk's queries, appended to ``cands``.
 * Queries go in bucket order, one probe pattern at a time, so the table's directory and
 * entries are read from low addresses to high: neighbouring queries share cache lines and
 * pages; and each load is requested AHEAD work items before it is used (for a single
 * query too: its buckets are the work items then). */
static int table_candidates(const TableView *tv, const uint64_t *q, Py_ssize_t m, int max_distance, uint64_t *items,
                            uint64_t *scratch, Candidates *cands) {
    const uint32_t *bounds = tv->bounds.buf;
    Py_ssize_t bucket_count = tv->bounds.len / (Py_ssize_t)sizeof(uint32_t) - 1;
    if (bucket_count <= 0) return 0;
    const uint64_t low_mask = (1ULL << tv->low_bits) - 1, sample_mask = (1ULL << tv->sample_width) - 1;
    for (Py_ssize_t i = 0; i < m; i++) {
        uint64_t fp = q[i], key = 0;
        for (int s = 0; s < tv->span_count; s++) {
            uint64_t part = (fp >> tv->spans[s].shift) & tv->spans[s].mask;
            key = tv->spans[s].width >= 64 ? part : (key << tv->spans[s].width) | part; /* no shift by 64 */
        }
        uint64_t bucket = tv->drop_bits >= 64 ? 0 : key >> tv->drop_bits;
        uint64_t want = (((fp >> tv->sample_shift) & sample_mask) << tv->low_bits) | (key & low_mask);
        /* bucket, the query's filter (index.py: filter_values), the query's index in the chunk */
        items[i] = (bucket << ITEM_BUCKET) | (want << ITEM_FILTER) | (uint64_t)i;
    }
    if (m > 1) sort_by_bucket(items, scratch, (size_t)m, tv->dir_bits);
    uint32_t masks[1 + 64 + 64 * 63 / 2];
    int spent[1 + 64 + 64 * 63 / 2];
    size_t patterns = table_probes(tv, masks, spent, sizeof masks / sizeof masks[0]);
    const uint16_t *filter = tv->has_filter ? tv->filter.buf : NULL;
    const size_t first_candidate = cands->len;
    const Py_ssize_t filter_len = tv->has_filter ? tv->filter.len / 2 : 0;
    const uint32_t *order = tv->order.buf;
    /* Work items are (pattern, query) in that order; a cursor AHEAD items ahead of the one at
     * work requests the entries (the bounds are read in address order: the caches follow). */
    ProbeCursor far = {0, 0}, near = {0, 0};
    if ((size_t)m * patterns <= 8 * AHEAD) {
        /* Little work (a single query): request every bucket's bounds, then every bucket's
         * entries, before reading any, so the loads overlap. */
        for (; far.pattern < patterns; cursor_next(&far, m)) {
            uint64_t bucket = (items[far.query] >> ITEM_BUCKET) ^ masks[far.pattern];
            if ((Py_ssize_t)bucket < bucket_count) PREFETCH(bounds + bucket);
        }
        for (; near.pattern < patterns; cursor_next(&near, m)) {
            uint64_t bucket = (items[near.query] >> ITEM_BUCKET) ^ masks[near.pattern];
            if ((Py_ssize_t)bucket < bucket_count) {
                uint32_t first = bounds[bucket];
                PREFETCH(filter ? (const void *)(filter + first) : (const void *)(order + first));
            }
        }
    }
    for (size_t pt = 0; pt < patterns; pt++) {
        const uint64_t flip = (uint64_t)masks[pt] << ITEM_BUCKET;
        const int budget = tv->errors - spent[pt];
        /* a lane passes with at most ``budget`` key bits and at most k - spent bits in all differing */
        const uint64_t key_limit = (uint64_t)(budget + 1) * LANES_0001, key_lanes = low_mask * LANES_0001;
        const int all_budget = max_distance - spent[pt] > 16 ? 16 : max_distance - spent[pt];
        const uint64_t all_limit = (uint64_t)(all_budget + 1) * LANES_0001;
        for (Py_ssize_t s = 0; s < m; s++) {
            /* Two steps ahead: the bucket's bounds 2 * AHEAD items before use, its entries (which
             * need the bounds) AHEAD items before: the bounds are in cache by then. */
            if (s + 2 * AHEAD < m) {
                uint64_t farther = (items[s + 2 * AHEAD] ^ flip) >> ITEM_BUCKET;
                if ((Py_ssize_t)farther < bucket_count) PREFETCH(bounds + farther);
            }
            if (s + AHEAD < m) {
                uint64_t later = (items[s + AHEAD] ^ flip) >> ITEM_BUCKET;
                if ((Py_ssize_t)later < bucket_count) {
                    uint32_t first = bounds[later];
                    PREFETCH(filter ? (const void *)(filter + first) : (const void *)(order + first));
                }
            }
            uint64_t item = items[s] ^ flip;
            uint64_t bucket = item >> ITEM_BUCKET;
            if ((Py_ssize_t)bucket >= bucket_count) continue;
            uint32_t lo = bounds[bucket], hi = bounds[bucket + 1];
            if ((Py_ssize_t)hi > tv->entry_count) hi = (uint32_t)tv->entry_count;
            if (hi <= lo) continue;
            if (candidates_room(cands, hi - lo) < 0) return -1;
            uint32_t query = (uint32_t)(item & ITEM_QUERY);
            uint32_t *row_out = cands->row + cands->len, *query_out = cands->query + cands->len;
            size_t j = 0;
            if (!tv->errors) {
                for (uint32_t p = lo; p < hi; p++, j++) {
                    row_out[j] = order[p];
                    query_out[j] = query;
                }
            } else {
                const uint64_t wanted = (item >> ITEM_FILTER) & 0xFFFF, want4 = wanted * LANES_0001;
                for (uint32_t p = lo; p < hi; p += 4) {
                    uint32_t left = hi - p;
                    uint64_t pass;
                    if ((Py_ssize_t)p + 4 <= filter_len) {
                        /* four filters, lane i in bits 16i..16i+15 (one load where the compiler can) */
                        uint64_t lanes = (uint64_t)filter[p] | (uint64_t)filter[p + 1] << 16 |
                                         (uint64_t)filter[p + 2] << 32 | (uint64_t)filter[p + 3] << 48;
                        uint64_t differ = lanes ^ want4;
                        pass = lanes_within(differ & key_lanes, key_limit) & lanes_within(differ, all_limit);
                        if (left < 4) pass &= (1ULL << (16 * left)) - 1; /* filters of the next buckets */
                    } else { /* the last filters of a table without its spare room: one at a time */
                        pass = 0;
                        for (uint32_t b = 0; b < left && b < 4; b++) {
                            unsigned differ = filter[p + b] ^ (unsigned)wanted;
                            if (__builtin_popcount(differ & (unsigned)low_mask) <= budget &&
                                __builtin_popcount(differ) <= all_budget)
                                pass |= 0x8000ULL << (16 * b);
                        }
                    }
                    while (pass) { /* the few rows whose filter is within reach: their positions */
                        int lane = __builtin_ctzll(pass) >> 4;
                        row_out[j] = p + (uint32_t)lane;
                        query_out[j] = query;
                        j++;
                        pass &= pass - 1;
                    }
                }
            }
            cands->len += j;
        }
    }
    if (filter) {
        /* The filtered tables' candidates hold positions: their row numbers, loads requested ahead. */
        for (size_t c = first_candidate; c < cands->len; c++) {
            if (c + AHEAD < cands->len) PREFETCH(order + cands->row[c + AHEAD]);
            cands->row[c] = order[cands->row[c]];
        }
    }
    return 0;
}

/* The search, without the GIL: per chunk of queries, every table's candidates, then each
 * verified with a popcount (fingerprints requested AHEAD candidates before use), then the
 * rows not in the tables yet, then the pairs sorted and deduplicated. */
POPCNT_CLONES
static int search(const uint64_t *q, Py_ssize_t nq, const uint64_t *f, Py_ssize_t nf, const unsigned char *live,
                  const TableView *tables, Py_ssize_t table_count, int max_distance, Py_ssize_t tail_start,
                  Pairs *out) {
    /* Exact buckets (errors == 0) give many candidates a query (~60 at k = 3): smaller chunks
     * keep their buffers in cache.  Key-filtered tables give few (~25 at k = 4, B = 3) and
     * gain from the denser sweep of larger chunks. */
    Py_ssize_t chunk_size = SEARCH_CHUNK / 8;
    for (Py_ssize_t t = 0; t < table_count; t++)
        if (tables[t].errors) chunk_size = SEARCH_CHUNK;
    Py_ssize_t chunk = nq < chunk_size ? nq : chunk_size;
    uint64_t *items = PyMem_RawMalloc(sizeof(uint64_t) * (size_t)(chunk ? chunk : 1));
    uint64_t *scratch = PyMem_RawMalloc(sizeof(uint64_t) * (size_t)(chunk ? chunk : 1));
    size_t *query_starts = PyMem_RawMalloc(sizeof(size_t) * (size_t)(chunk + 1));
    Candidates cands = {NULL, NULL, 0, 0};
    int failed = items == NULL || scratch == NULL || query_starts == NULL;
    if (tail_start < 0) tail_start = 0;
    for (Py_ssize_t c0 = 0; c0 < nq && !failed; c0 += chunk) {
        Py_ssize_t m = nq - c0 < chunk ? nq - c0 : chunk;
        cands.len = 0;
        for (Py_ssize_t t = 0; t < table_count && !failed; t++)
            failed = table_candidates(&tables[t], q + c0, m, max_distance, items, scratch, &cands) < 0;
        if (failed) break;
        /* verify each candidate with a popcount */
        size_t first = out->len;
        for (size_t c = 0; c < cands.len && !failed; c++) {
            if (c + AHEAD < cands.len && (Py_ssize_t)cands.row[c + AHEAD] < nf) PREFETCH(f + cands.row[c + AHEAD]);
            uint32_t row = cands.row[c];
            if ((Py_ssize_t)row >= nf) continue;
            int d = __builtin_popcountll(f[row] ^ q[c0 + cands.query[c]]);
            if (d <= max_distance && (live == NULL || live[row]) && add_pair(out, c0 + cands.query[c], row, d) < 0)
                failed = 1;
        }
        /* rows not in the tables yet (the unsorted tail) */
        for (Py_ssize_t i = 0; i < m && !failed; i++) {
            uint64_t fp = q[c0 + i];
            for (Py_ssize_t row = tail_start; row < nf; row++) {
                int d = __builtin_popcountll(f[row] ^ fp);
                if (d <= max_distance && (live == NULL || live[row]) && add_pair(out, c0 + i, (uint32_t)row, d) < 0) {
                    failed = 1;
                    break;
                }
            }
        }
        if (failed) break;
        /* sort this chunk's pairs by (query, distance, row) and keep each pair once
         * (a fingerprint close to the query in several tables' keys is found in each). */
        Pair *found = out->data + first;
        size_t count = out->len - first;
        if (count > 1 && sort_pairs(found, count, c0, m, query_starts) < 0) {
            failed = 1;
            break;
        }
        size_t kept = 0;
        for (size_t a = 0; a < count; a++) {
            if (kept > 0 && found[kept - 1].query == found[a].query && found[kept - 1].row == found[a].row) continue;
            found[kept++] = found[a];
        }
        out->len = first + kept;
    }
    PyMem_RawFree(items);
    PyMem_RawFree(scratch);
    PyMem_RawFree(query_starts);
    PyMem_RawFree(cands.row);
    PyMem_RawFree(cands.query);
    return failed ? -1 : 0;
}

/* Tables parsed once (prepare_tables), kept in a capsule until the index's tables change:
 * a single query then skips parsing the specs and taking the buffers again. */
#define TABLES_CAPSULE "simhash_scrapy.core._speedups.tables"

typedef struct {
    Py_ssize_t count;
    TableView tables[];
} TableSet;

static void free_table_set(PyObject *capsule) {
    TableSet *set = PyCapsule_GetPointer(capsule, TABLES_CAPSULE);
    if (set == NULL) return;
    for (Py_ssize_t t = 0; t < set->count; t++) release_table(&set->tables[t]);
    PyMem_Free(set);
}

/* prepare_tables(tables) -> capsule: the table specs as query_tables reads them. */
static PyObject *prepare_tables(PyObject *module, PyObject *tables_obj) {
    PyObject *seq = PySequence_Fast(tables_obj, "tables must be a sequence");
    if (seq == NULL) return NULL;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(seq);
    TableSet *set = PyMem_Calloc(1, sizeof(TableSet) + (size_t)count * sizeof(TableView));
    if (set == NULL) {
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    for (; set->count < count; set->count++) {
        if (parse_table(PySequence_Fast_GET_ITEM(seq, set->count), &set->tables[set->count]) < 0) {
            for (Py_ssize_t t = 0; t < set->count; t++) release_table(&set->tables[t]);
            PyMem_Free(set);
            Py_DECREF(seq);
            return NULL;
        }
    }
    Py_DECREF(seq);
    PyObject *capsule = PyCapsule_New(set, TABLES_CAPSULE, free_table_set);
    if (capsule == NULL) {
        for (Py_ssize_t t = 0; t < set->count; t++) release_table(&set->tables[t]);
        PyMem_Free(set);
    }
    return capsule;
}

static PyObject *query_tables(PyObject *module, PyObject *args) {
    PyObject *queries_obj, *fps_obj, *alive_obj, *tables_obj;
    int max_distance;
    Py_ssize_t tail_start;
    if (!PyArg_ParseTuple(args, "OOOOin:query_tables", &queries_obj, &fps_obj, &alive_obj, &tables_obj, &max_distance,
                          &tail_start))
        return NULL;
    Py_buffer queries, fps, alive;
    int have_alive = alive_obj != Py_None;
    if (PyObject_GetBuffer(queries_obj, &queries, PyBUF_SIMPLE) < 0) return NULL;
    if (PyObject_GetBuffer(fps_obj, &fps, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&queries);
        return NULL;
    }
    if (have_alive && PyObject_GetBuffer(alive_obj, &alive, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&queries);
        PyBuffer_Release(&fps);
        return NULL;
    }
    PyObject *result = NULL;
    PyObject *tables_seq = NULL;
    TableView *tables = NULL;
    Py_ssize_t table_count = 0, parsed = 0;
    Pairs pairs = {0};
    int failed = 0;
    if (PyCapsule_IsValid(tables_obj, TABLES_CAPSULE)) { /* prepared: nothing to parse or release here */
        TableSet *set = PyCapsule_GetPointer(tables_obj, TABLES_CAPSULE);
        tables = set->tables;
        table_count = set->count;
    } else {
        tables_seq = PySequence_Fast(tables_obj, "tables must be a sequence or prepare_tables()'s capsule");
        if (tables_seq == NULL) goto done;
        table_count = PySequence_Fast_GET_SIZE(tables_seq);
        tables = PyMem_Calloc((size_t)(table_count ? table_count : 1), sizeof(TableView));
        if (tables == NULL) goto done;
        for (; parsed < table_count; parsed++) {
            if (parse_table(PySequence_Fast_GET_ITEM(tables_seq, parsed), &tables[parsed]) < 0) goto done;
        }
    }
    Py_BEGIN_ALLOW_THREADS
    failed = search(queries.buf, queries.len / (Py_ssize_t)sizeof(uint64_t), fps.buf,
                    fps.len / (Py_ssize_t)sizeof(uint64_t), have_alive ? alive.buf : NULL, tables, table_count,
                    max_distance, tail_start, &pairs);
    Py_END_ALLOW_THREADS
    if (failed) {
        PyErr_NoMemory();
        goto done;
    }
    PyObject *columns[3];
    for (int c = 0; c < 3; c++) {
        columns[c] = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(pairs.len * sizeof(int64_t)));
        if (columns[c] == NULL) {
            for (int b = 0; b < c; b++) Py_DECREF(columns[b]);
            goto done;
        }
    }
    int64_t *out_q = (int64_t *)PyBytes_AS_STRING(columns[0]);
    int64_t *out_r = (int64_t *)PyBytes_AS_STRING(columns[1]);
    int64_t *out_d = (int64_t *)PyBytes_AS_STRING(columns[2]);
    for (size_t a = 0; a < pairs.len; a++) {
        out_q[a] = pairs.data[a].query;
        out_r[a] = pairs.data[a].row;
        out_d[a] = pairs.data[a].distance;
    }
    result = Py_BuildValue("(NNN)", columns[0], columns[1], columns[2]);
done:
    if (tables_seq != NULL) { /* parsed here (not a capsule) */
        for (Py_ssize_t t = 0; t < parsed; t++) release_table(&tables[t]);
        PyMem_Free(tables);
        Py_DECREF(tables_seq);
    }
    PyMem_RawFree(pairs.data);
    PyBuffer_Release(&queries);
    PyBuffer_Release(&fps);
    if (have_alive) PyBuffer_Release(&alive);
    return result;
}

/* insert_sorted(buffer, count, at, values): np.insert(buffer[:count], at, values) written into
 * buffer[:count + len(at)] in place, ``at`` (int64) sorted; ``values`` holds len(at) items of
 * the buffer's item size.  The index's tables grow this way without a new array per merge. */
static PyObject *insert_sorted(PyObject *module, PyObject *args) {
    PyObject *buffer_obj, *at_obj, *values_obj;
    Py_ssize_t count;
    if (!PyArg_ParseTuple(args, "OnOO:insert_sorted", &buffer_obj, &count, &at_obj, &values_obj)) return NULL;
    Py_buffer buffer, at, values;
    if (PyObject_GetBuffer(buffer_obj, &buffer, PyBUF_WRITABLE) < 0) return NULL;
    if (PyObject_GetBuffer(at_obj, &at, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&buffer);
        return NULL;
    }
    if (PyObject_GetBuffer(values_obj, &values, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&buffer);
        PyBuffer_Release(&at);
        return NULL;
    }
    PyObject *result = NULL;
    Py_ssize_t m = at.len / (Py_ssize_t)sizeof(int64_t);
    const int64_t *where = at.buf;
    Py_ssize_t item = m ? values.len / m : 1;
    if (m == 0) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    if (item <= 0 || values.len != item * m || count < 0 || (count + m) * item > buffer.len) {
        PyErr_SetString(PyExc_ValueError, "insert_sorted: sizes do not fit the buffer");
        goto done;
    }
    for (Py_ssize_t j = 0; j < m; j++) {
        if (where[j] < 0 || where[j] > count || (j > 0 && where[j] < where[j - 1])) {
            PyErr_SetString(PyExc_ValueError, "insert_sorted: positions must be sorted and within the items");
            goto done;
        }
    }
    char *base = buffer.buf;
    const char *new_items = values.buf;
    Py_ssize_t end = count;
    for (Py_ssize_t j = m - 1; j >= 0; j--) { /* from the back: every move goes right, into moved-out room */
        Py_ssize_t start = where[j];
        memmove(base + (start + j + 1) * item, base + start * item, (size_t)((end - start) * item));
        memcpy(base + (start + j) * item, new_items + j * item, (size_t)item);
        end = start;
    }
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&buffer);
    PyBuffer_Release(&at);
    PyBuffer_Release(&values);
    return result;
}

/* ================================================================ sentences (clustering step 7)
 *
 *   sentence_hashes(data, min_words) -> list[int]
 *       core/cluster/containment.py's sentence_hashes of UTF-8 ``data`` (its pure-Python twin gives the same list):
 *       ASCII letters lower-cased; pieces between line breaks, ". " "! " "? " and the full-width
 *       U+3002/U+FF01/U+FF1F; a piece with at least min_words - 1 spaces and min_words runs of
 *       [0-9a-z_] or non-ASCII bytes is those runs joined by a space; else a non-ASCII piece of at least
 *       3 * min_words bytes is its Unicode words (a CJK character alone, or a run of other \w characters,
 *       as Python's re finds them in the piece decoded with errors="replace"), when min_words or more;
 *       each such sentence hashed as features.stable_hash64 (mix64(polynomial hash + length), the
 *       tokeniser's hash_run); the distinct hashes, ascending.
 */
typedef struct {
    uint64_t *data;
    size_t len, cap;
} HashList;

static int hash_list_push(HashList *list, uint64_t value) {
    if (list->len == list->cap) {
        size_t cap = list->cap ? 2 * list->cap : 64;
        uint64_t *grown = PyMem_Realloc(list->data, cap * sizeof(uint64_t));
        if (grown == NULL) return -1;
        list->data = grown;
        list->cap = cap;
    }
    list->data[list->len++] = value;
    return 0;
}

/* containment.py's _CJK: scripts written without spaces, each character a word */
static inline int sentence_cjk(uint32_t cp) {
    return (cp >= 0x3040 && cp <= 0x30FF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x4E00 && cp <= 0x9FFF) ||
           (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0xAC00 && cp <= 0xD7AF);
}

static inline unsigned char ascii_lower(unsigned char b) { return (b >= 'A' && b <= 'Z') ? (unsigned char)(b + 32) : b; }

/* A non-ASCII piece [start, end) the ASCII runs did not make a sentence of: its Unicode words (a CJK
 * character alone, or a run of other characters re's \w matches; invalid UTF-8 is a non-word
 * character, as errors="replace" decodes it) joined by a space into ``key``; their number. */
static Py_ssize_t sentence_unicode_key(const unsigned char *s, Py_ssize_t start, Py_ssize_t end, unsigned char *key,
                                       Py_ssize_t *key_len) {
    Py_ssize_t words = 0, k = 0;
    int in_word = 0;
    for (Py_ssize_t j = start; j < end;) {
        uint32_t cp = s[j];
        int len = 1;
        if (cp >= 0x80) {
            len = utf8_sequence(s + j, end - j, &cp);
            if (len == 0) cp = 0xFFFD, len = 1;
        }
        int cjk = sentence_cjk(cp);
        if (cjk || cp == '_' || Py_UNICODE_ISALNUM(cp)) {
            if (cjk || !in_word) {
                if (words++) key[k++] = ' ';
            }
            for (int b = 0; b < len; b++) key[k++] = ascii_lower(s[j + b]);
            in_word = !cjk;
        } else {
            in_word = 0;
        }
        j += len;
    }
    *key_len = k;
    return words;
}

/* The lower-cased byte of an ASCII word run ([0-9A-Za-z_]), 0 for other bytes (non-ASCII bytes are in runs
 * too, but also mark the piece as not ASCII: the scan handles them on their own). */
static unsigned char sentence_run_byte[256];

static void sentence_tables(void) {
    for (int b = 0; b < 256; b++) {
        int run = (b >= '0' && b <= '9') || (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') || b == '_';
        sentence_run_byte[b] = run ? ascii_lower((unsigned char)b) : 0;
    }
}

static int compare_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

#define COUNT_AHEAD 16

/* count_hashes(low, high, hashes, bits): containment.SentenceCounts.add_many's counting: for each uint64 hash
 * (native byte order), the saturating 8-bit counters low[h & mask] and high[(h >> bits) & mask] go up by one. */
static PyObject *count_hashes(PyObject *module, PyObject *args) {
    PyObject *low_obj, *high_obj, *hashes_obj;
    int bits;
    if (!PyArg_ParseTuple(args, "OOOi:count_hashes", &low_obj, &high_obj, &hashes_obj, &bits)) return NULL;
    if (bits <= 0 || bits > 32) {
        PyErr_SetString(PyExc_ValueError, "count_hashes: bits must be in 1..32");
        return NULL;
    }
    Py_buffer low, high, hashes;
    if (PyObject_GetBuffer(low_obj, &low, PyBUF_WRITABLE) < 0) return NULL;
    if (PyObject_GetBuffer(high_obj, &high, PyBUF_WRITABLE) < 0) {
        PyBuffer_Release(&low);
        return NULL;
    }
    if (PyObject_GetBuffer(hashes_obj, &hashes, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&low);
        PyBuffer_Release(&high);
        return NULL;
    }
    PyObject *result = NULL;
    uint64_t mask = ((uint64_t)1 << bits) - 1;
    if (low.len != (Py_ssize_t)(mask + 1) || high.len != (Py_ssize_t)(mask + 1) || hashes.len % 8) {
        PyErr_SetString(PyExc_ValueError, "count_hashes: tables of 2**bits bytes and whole uint64 hashes");
        goto done;
    }
    unsigned char *lo = low.buf, *hi = high.buf;
    const unsigned char *raw = hashes.buf;
    Py_ssize_t count = hashes.len / 8;
    for (Py_ssize_t j = 0; j < count; j++) {
        uint64_t h;
#if defined(__GNUC__)
        /* The counters are random bytes of two 2 MB tables: ask for the ones a few hashes ahead now, so their
         * cache misses overlap (the same counts). */
        if (j + COUNT_AHEAD < count) {
            memcpy(&h, raw + 8 * (j + COUNT_AHEAD), 8);
            __builtin_prefetch(lo + (h & mask), 1);
            __builtin_prefetch(hi + ((h >> bits) & mask), 1);
        }
#endif
        memcpy(&h, raw + 8 * j, 8);
        uint64_t a = h & mask, b = (h >> bits) & mask;
        if (lo[a] < 255) lo[a]++;
        if (hi[b] < 255) hi[b]++;
    }
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&low);
    PyBuffer_Release(&high);
    PyBuffer_Release(&hashes);
    return result;
}

static PyObject *sentence_hashes(PyObject *module, PyObject *args) {
    Py_buffer view;
    Py_ssize_t min_words;
    if (!PyArg_ParseTuple(args, "y*n:sentence_hashes", &view, &min_words)) return NULL;
    if (min_words < 0) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "sentence_hashes: min_words must not be negative");
        return NULL;
    }
    if (sentence_run_byte['a'] == 0) sentence_tables();
    const unsigned char *s = view.buf;
    Py_ssize_t n = view.len;
    HashList out = {NULL, 0, 0};
    PyObject *result = NULL;
    /* One pass: the piece's ASCII-run key is built as its bytes are read (never longer than the piece; a
     * Unicode key adds a space to a CJK character's three bytes at most: 4/3 of the piece). */
    unsigned char *key = PyMem_Malloc(2 * (size_t)n + 1);
    if (key == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t i = 0, start = 0, spaces = 0, words = 0, k = 0;
    int high = 0, in_word = 0;
    for (;;) {
        int cut = 0; /* bytes of the sentence end at i, 0 when none */
        if (i < n) {
            unsigned char b = s[i], v = sentence_run_byte[b];
            if (v != 0) { /* most bytes: a run of ASCII letters and digits, copied at once */
                if (!in_word) {
                    if (words++) key[k++] = ' ';
                    in_word = 1;
                }
                do {
                    key[k++] = v;
                    i++;
                } while (i < n && (v = sentence_run_byte[s[i]]) != 0);
                continue;
            }
            if (b == '\n') cut = 1;
            else if ((b == '.' || b == '!' || b == '?') && i + 1 < n && s[i + 1] == ' ') cut = 2;
            else if (b >= 0x80 && i + 2 < n &&
                     ((b == 0xE3 && s[i + 1] == 0x80 && s[i + 2] == 0x82) ||
                      (b == 0xEF && s[i + 1] == 0xBC && (s[i + 2] == 0x81 || s[i + 2] == 0x9F))))
                cut = 3;
            if (!cut) {
                if (b >= 0x80) { /* part of a run, and the piece is not ASCII */
                    high = 1;
                    if (!in_word) {
                        if (words++) key[k++] = ' ';
                        in_word = 1;
                    }
                    key[k++] = b;
                } else {
                    spaces += b == ' ';
                    in_word = 0;
                }
                i++;
                continue;
            }
        }
        Py_ssize_t end = i < n ? i : n;
        if (!(spaces >= min_words - 1 && words >= min_words)) { /* else the ASCII runs make the sentence */
            words = 0;
            if (high && end - start >= 3 * min_words) words = sentence_unicode_key(s, start, end, key, &k);
        }
        if (words >= min_words && hash_list_push(&out, hash_run(key, 0, k)) < 0) {
            PyErr_NoMemory();
            goto done;
        }
        if (i >= n) break;
        i += cut;
        start = i;
        spaces = words = k = 0;
        high = in_word = 0;
    }
    if (out.len > 1) qsort(out.data, out.len, sizeof(uint64_t), compare_u64);
    size_t distinct = 0;
    for (size_t j = 0; j < out.len; j++)
        if (distinct == 0 || out.data[j] != out.data[distinct - 1]) out.data[distinct++] = out.data[j];
    result = PyList_New((Py_ssize_t)distinct);
    if (result == NULL) goto done;
    for (size_t j = 0; j < distinct; j++) {
        PyObject *value = PyLong_FromUnsignedLongLong(out.data[j]);
        if (value == NULL) {
            Py_CLEAR(result);
            goto done;
        }
        PyList_SET_ITEM(result, (Py_ssize_t)j, value);
    }
done:
    PyMem_Free(key);
    PyMem_Free(out.data);
    PyBuffer_Release(&view);
    return result;
}
/* ============================================================ end of sentences (clustering step 7) */

/* ----------------------------------------------------- template lines */
/* (simhash_scrapy/core/cluster/sitetemplate.py: the learner's pass over a page's lines; its pure-Python twin
 * is sitetemplate._template_lines_py, and the tests compare both.)
 *
 * template_lines(data, known, article, room) -> (kept, added)
 *     ``data`` (UTF-8 bytes) is split at "\n"; each line is stripped of ASCII whitespace as
 *     bytes.strip() does (space, \t, \n, \r, \v, \f) and blank lines are dropped.  Each line's digest
 *     is hash_run (features.stable_hash64 of its bytes).  ``known`` (dict: digest -> first article
 *     * 2**32 + second article + 1, or + 0 without a second) is updated in line order: a line not
 *     in it is kept and, while fewer than ``room`` lines were added, added as seen in ``article``
 *     alone; a line seen in no article other than ``article`` is kept; a line seen in another
 *     article is the host's template (dropped), and gets ``article`` as its second article when it
 *     had none.  ``kept``: the kept lines joined by "\n" (bytes), or None when every line was kept;
 *     ``added``: the number of lines added to ``known``. */

static inline int line_space(unsigned char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

static PyObject *template_lines(PyObject *module, PyObject *args) {
    Py_buffer view;
    PyObject *known;
    unsigned long long article;
    Py_ssize_t room;
    if (!PyArg_ParseTuple(args, "y*O!Kn:template_lines", &view, &PyDict_Type, &known, &article, &room)) return NULL;
    const unsigned char *s = view.buf;
    Py_ssize_t n = view.len, lines = 0, kept = 0, kept_bytes = 0, added = 0, cap = 0;
    Py_ssize_t *spans = NULL; /* start, end of each kept line */
    PyObject *result = NULL, *out = NULL, *first_seen = NULL;
    Py_ssize_t pos = 0;
    for (;;) {
        const unsigned char *newline = pos < n ? memchr(s + pos, '\n', (size_t)(n - pos)) : NULL;
        Py_ssize_t end = newline != NULL ? newline - s : n, a = pos, b = end;
        while (a < b && line_space(s[a])) a++;
        while (b > a && line_space(s[b - 1])) b--;
        if (a < b) {
            lines++;
            int keep = 1;
            PyObject *digest = PyLong_FromUnsignedLongLong(hash_run(s, a, b));
            if (digest == NULL) goto done;
            PyObject *seen = PyDict_GetItemWithError(known, digest); /* borrowed */
            if (seen == NULL) {
                if (PyErr_Occurred()) {
                    Py_DECREF(digest);
                    goto done;
                }
                if (added < room) {
                    /* (one value object for all the lines this page adds: they share it) */
                    if (first_seen == NULL) first_seen = PyLong_FromUnsignedLongLong(article << 32);
                    if (first_seen == NULL || PyDict_SetItem(known, digest, first_seen) < 0) {
                        Py_DECREF(digest);
                        goto done;
                    }
                    added++;
                }
            } else {
                unsigned long long packed = PyLong_AsUnsignedLongLong(seen);
                if (packed == (unsigned long long)-1 && PyErr_Occurred()) {
                    Py_DECREF(digest);
                    goto done;
                }
                unsigned long long second = packed & 0xFFFFFFFFULL; /* second article + 1, 0: none */
                if ((packed >> 32) != article || (second != 0 && second - 1 != article)) {
                    keep = 0; /* seen in another article: the host's template */
                    if (second == 0) {
                        PyObject *value = PyLong_FromUnsignedLongLong(packed | (article + 1));
                        int failed = value == NULL || PyDict_SetItem(known, digest, value) < 0;
                        Py_XDECREF(value);
                        if (failed) {
                            Py_DECREF(digest);
                            goto done;
                        }
                    }
                }
            }
            Py_DECREF(digest);
            if (keep) {
                if (kept == cap) {
                    Py_ssize_t *more = PyMem_Realloc(spans, (size_t)(cap ? 2 * cap : 64) * 2 * sizeof(Py_ssize_t));
                    if (more == NULL) {
                        PyErr_NoMemory();
                        goto done;
                    }
                    spans = more;
                    cap = cap ? 2 * cap : 64;
                }
                spans[2 * kept] = a;
                spans[2 * kept + 1] = b;
                kept++;
                kept_bytes += b - a;
            }
        }
        if (newline == NULL) break;
        pos = end + 1;
    }
    if (kept == lines) {
        out = Py_NewRef(Py_None);
    } else {
        out = PyBytes_FromStringAndSize(NULL, kept ? kept_bytes + kept - 1 : 0);
        if (out == NULL) goto done;
        char *to = PyBytes_AS_STRING(out);
        for (Py_ssize_t i = 0; i < kept; i++) {
            if (i) *to++ = '\n';
            memcpy(to, s + spans[2 * i], (size_t)(spans[2 * i + 1] - spans[2 * i]));
            to += spans[2 * i + 1] - spans[2 * i];
        }
    }
    result = Py_BuildValue("(On)", out, added);
done:
    Py_XDECREF(out);
    Py_XDECREF(first_seen);
    PyMem_Free(spans);
    PyBuffer_Release(&view);
    return result;
}
/* ------------------------------------------------ end of template lines */

/* ------------------------------------------------ near folds */
#include "near_scan.h"

/* The header's readers, under their own names for the code below that is not a bucket scan (extras records, the
   related pages' bit counts). */
static inline unsigned long be32(const unsigned char *p) { return near_be32(p); }
static inline unsigned int bits32(uint32_t x) { return near_bits32(x); }

/* near_folds(buckets, fingerprints, k): for each bucket (bytes, bytearray, or None) -- a header (>I4: the bytes
   of its entries; >I4: its mark), then 8-byte entries (a 32-bit fold >I4, a seq >I4), then spare room -- the seqs of the entries whose
   fold is within k bits of the fingerprint's fold (its two 32-bit halves XORed), in the bucket's order: one list a
   bucket.  ``backends.redis.cluster_layout.near_entries_many`` (numpy) is the same rule. */
static PyObject *near_folds(PyObject *module, PyObject *args) {
    PyObject *buckets_obj, *fps_obj;
    int k;
    if (!PyArg_ParseTuple(args, "OOi", &buckets_obj, &fps_obj, &k)) return NULL;
    PyObject *buckets = PySequence_Fast(buckets_obj, "buckets must be a sequence");
    if (buckets == NULL) return NULL;
    PyObject *fps = PySequence_Fast(fps_obj, "fingerprints must be a sequence");
    if (fps == NULL) { Py_DECREF(buckets); return NULL; }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(buckets);
    PyObject *out = NULL;
    if (PySequence_Fast_GET_SIZE(fps) != n) {
        PyErr_SetString(PyExc_ValueError, "one fingerprint a bucket");
        goto done;
    }
    out = PyList_New(n);
    if (out == NULL) goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *hits = PyList_New(0);
        if (hits == NULL) goto fail;
        PyList_SET_ITEM(out, i, hits);
        PyObject *item = PySequence_Fast_GET_ITEM(buckets, i);
        unsigned long long fp = PyLong_AsUnsignedLongLong(PySequence_Fast_GET_ITEM(fps, i));
        if (fp == (unsigned long long)-1 && PyErr_Occurred()) goto fail;
        if (item == Py_None) continue;
        unsigned int fold = (unsigned int)((fp >> 32) ^ (fp & 0xFFFFFFFFULL));
        Py_buffer view;
        if (PyObject_GetBuffer(item, &view, PyBUF_SIMPLE) < 0) goto fail;
        const unsigned char *data = (const unsigned char *)view.buf;
        ptrdiff_t count = near_entry_count(data, (size_t)view.len);
        uint32_t fold_mem = near_fold_mem(fold);
        const unsigned char *entries = data + NEAR_BUCKET_HEAD;
        for (ptrdiff_t j = near_next(entries, 0, count, fold_mem, k); j < count;
             j = near_next(entries, j + 1, count, fold_mem, k)) {
            PyObject *seq = PyLong_FromUnsignedLong(near_seq(entries, j));
            if (seq == NULL || PyList_Append(hits, seq) < 0) {
                Py_XDECREF(seq);
                PyBuffer_Release(&view);
                goto fail;
            }
            Py_DECREF(seq);
        }
        PyBuffer_Release(&view);
    }
    goto done;
fail:
    Py_CLEAR(out);
done:
    Py_DECREF(buckets);
    Py_DECREF(fps);
    return out;
}
/* scan_rows(fingerprints, fingerprint, k): the rows of ``fingerprints`` (a buffer of native uint64: an
   ``array('Q')``) within k bits of ``fingerprint``, each as ``distance << 32 | row``, sorted: nearest first, ties the
   lowest row first (``core.index.scan.ScanIndex.query``; its pure path is the same rule).  A counting sort by
   distance: two passes over the rows, no comparison. */
static PyObject *scan_rows(PyObject *module, PyObject *args) {
    Py_buffer view;
    PyObject *fp_obj;
    int k;
    if (!PyArg_ParseTuple(args, "y*Oi:scan_rows", &view, &fp_obj, &k)) return NULL;
    PyObject *out = NULL;
    unsigned long long fp = PyLong_AsUnsignedLongLong(fp_obj);
    if (fp == (unsigned long long)-1 && PyErr_Occurred()) goto done;
    if (k < 0 || k > 64 || view.len % 8 != 0 || view.len / 8 > 0xFFFFFFFFLL) {
        PyErr_SetString(PyExc_ValueError,
                        "k must be 0..64 and the rows a buffer of at most 2**32 - 1 8-byte fingerprints");
        goto done;
    }
    const unsigned long long *rows = (const unsigned long long *)view.buf;
    Py_ssize_t n = view.len / 8;
    Py_ssize_t at[66] = {0}; /* at[d + 1]: rows found at distance d, then where distance d starts */
    for (Py_ssize_t i = 0; i < n; i++) {
        int d = __builtin_popcountll(rows[i] ^ fp);
        if (d <= k) at[d + 1]++;
    }
    for (int d = 1; d <= k + 1; d++) at[d] += at[d - 1];
    out = PyList_New(at[k + 1]);
    if (out == NULL || at[k + 1] == 0) goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        int d = __builtin_popcountll(rows[i] ^ fp);
        if (d > k) continue;
        PyObject *hit = PyLong_FromUnsignedLongLong(((unsigned long long)d << 32) | (unsigned long long)i);
        if (hit == NULL) {
            Py_CLEAR(out);
            goto done;
        }
        PyList_SET_ITEM(out, at[d]++, hit);
    }
done:
    PyBuffer_Release(&view);
    return out;
}
/* near_popcnt([use]): whether ``near_folds`` scans with the popcnt instruction; ``use`` False makes it take the
   portable copy, True the popcnt one again where the CPU has it (the tests run both on the same buckets). */
static PyObject *near_popcnt(PyObject *module, PyObject *args) {
    int use = -1;
    if (!PyArg_ParseTuple(args, "|p", &use)) return NULL;
#ifdef HAVE_NEAR_POPCNT
    if (use >= 0) near_popcnt_ok = use && __builtin_cpu_supports("popcnt");
#endif
    return PyBool_FromLong(near_popcnt_ok);
}
/* ------------------------------------------------ end of near folds */

/* ------------------------------------------------------------- extras records */

/* extras_records(data, start, names): backends.redis.mirror's records of steps 5-7 (``record_of``'s layout, each
 * behind a ">IH" head: log position or 0xFFFFFFFF, body length), the whole ones from byte ``start``, in columns.
 * Returns (bytes used, then one list each, of the records with a log position: positions, template-free
 * simhashes (or None), second simhashes (or None), sentence counts (-1: no sketch), packed sketch hashes (bytes
 * or None), hosts (str or None; made one object a name through the dict ``names`` when it is one), addresses
 * (str or None); and the sketch hashes of every record, native uint64 bytes).  A field past its record's end
 * is a ValueError, as in ``mirror._records_python`` (the pure-Python twin). */
#define EXTRAS_ALSO 1
#define EXTRAS_SECOND 2
#define EXTRAS_SKETCH 4
#define EXTRAS_ADDRESS 8

static uint64_t be64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = (v << 8) | p[i];
    return v;
}

static int append_new(PyObject *list, PyObject *item) {
    if (item == NULL) return -1;
    int failed = PyList_Append(list, item);
    Py_DECREF(item);
    return failed;
}

static PyObject *extras_u64(const unsigned char *p, int present) {
    if (!present) return Py_NewRef(Py_None);
    return PyLong_FromUnsignedLongLong(be64(p));
}

static PyObject *extras_text(const unsigned char *p, Py_ssize_t n, PyObject *names) {
    PyObject *text = PyUnicode_DecodeUTF8((const char *)p, n, "surrogatepass");
    if (text == NULL || names == NULL) return text;
    PyObject *kept = PyDict_SetDefault(names, text, text); /* borrowed */
    Py_XINCREF(kept);
    Py_DECREF(text);
    return kept;
}

/* One record's body [b, e): its fields appended to the columns (cols[0..6]), its hashes to ``hashes``. */
static int extras_record(const unsigned char *b, const unsigned char *e, int positioned, PyObject **cols,
                         PyObject *names, uint64_t *hashes, Py_ssize_t *counted) {
    if (b >= e) return -1;
    int flags = *b++;
    const unsigned char *also = b, *second, *sketch = NULL, *address = NULL;
    Py_ssize_t n = 0, alen = 0;
    if (flags & EXTRAS_ALSO) b += 8;
    second = b;
    if (flags & EXTRAS_SECOND) b += 8;
    if (flags & EXTRAS_SKETCH) {
        if (e - b < 5) return -1;
        sketch = b;
        n = b[4];
        b += 5 + 8 * n;
    }
    if (b > e) return -1;
    if (flags & EXTRAS_ADDRESS) {
        if (e - b < 2) return -1;
        alen = ((Py_ssize_t)b[0] << 8) | b[1];
        address = b + 2;
        b += 2 + alen;
        if (b > e) return -1;
    }
    for (Py_ssize_t j = 0; j < n; j++) hashes[*counted + j] = be64(sketch + 5 + 8 * j);
    *counted += n;
    if (!positioned) return 0;
    if (append_new(cols[0], extras_u64(also, flags & EXTRAS_ALSO)) < 0) return -2;
    if (append_new(cols[1], extras_u64(second, flags & EXTRAS_SECOND)) < 0) return -2;
    if (append_new(cols[2], PyLong_FromLongLong(sketch ? (long long)be32(sketch) : -1)) < 0) return -2;
    PyObject *packed = sketch ? PyBytes_FromStringAndSize((const char *)sketch + 5, 8 * n) : Py_NewRef(Py_None);
    if (append_new(cols[3], packed) < 0) return -2;
    if (append_new(cols[4], b < e ? extras_text(b, e - b, names) : Py_NewRef(Py_None)) < 0) return -2;
    PyObject *place = address ? extras_text(address, alen, NULL) : Py_NewRef(Py_None);
    if (append_new(cols[5], place) < 0) return -2;
    return 0;
}

static PyObject *extras_records(PyObject *module, PyObject *args) {
    Py_buffer view;
    Py_ssize_t start;
    PyObject *names;
    if (!PyArg_ParseTuple(args, "y*nO:extras_records", &view, &start, &names)) return NULL;
    if (names == Py_None) names = NULL;
    else if (!PyDict_Check(names)) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_TypeError, "extras_records: names must be a dict or None");
        return NULL;
    }
    const unsigned char *data = view.buf;
    if (start < 0) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "extras_records: start must not be negative");
        return NULL;
    }
    Py_ssize_t size = view.len, first = start, at = start, counted = 0;
    PyObject *positions = PyList_New(0), *cols[6] = {NULL}, *out = NULL;
    /* at most 255 hashes a record of at most 65535 bytes: fewer than (bytes left) / 8 in all */
    uint64_t *hashes = PyMem_Malloc(((size > at ? size - at : 0) / 8 + 1) * sizeof(uint64_t));
    int failed = positions == NULL || hashes == NULL;
    for (int c = 0; c < 6 && !failed; c++) failed = (cols[c] = PyList_New(0)) == NULL;
    while (!failed && at + 6 <= size) {
        unsigned long pos = be32(data + at);
        Py_ssize_t length = ((Py_ssize_t)data[at + 4] << 8) | data[at + 5];
        if (at + 6 + length > size) break;
        int positioned = pos != 0xFFFFFFFFUL;
        int bad = extras_record(data + at + 6, data + at + 6 + length, positioned, cols, names, hashes, &counted);
        if (bad == -1) PyErr_Format(PyExc_ValueError, "malformed extras record at byte %zd", at);
        if (bad || (positioned && append_new(positions, PyLong_FromUnsignedLong(pos)) < 0)) failed = 1;
        at += 6 + length;
    }
    if (!failed) {
        PyObject *used = PyLong_FromSsize_t(at - first), *raw = NULL;
        if (used != NULL) raw = PyBytes_FromStringAndSize((const char *)hashes, counted * 8);
        if (raw != NULL) out = PyTuple_New(9);
        if (out != NULL) {
            PyObject *items[9] = {used, positions, cols[0], cols[1], cols[2], cols[3], cols[4], cols[5], raw};
            for (int c = 0; c < 9; c++) PyTuple_SET_ITEM(out, c, items[c]);
            used = raw = positions = cols[0] = cols[1] = cols[2] = cols[3] = cols[4] = cols[5] = NULL;
        }
        Py_XDECREF(used);
        Py_XDECREF(raw);
    }
    if (hashes == NULL && !PyErr_Occurred()) PyErr_NoMemory();
    PyMem_Free(hashes);
    Py_XDECREF(positions);
    for (int c = 0; c < 6; c++) Py_XDECREF(cols[c]);
    PyBuffer_Release(&view);
    return out;
}
/* ------------------------------------------------ end of extras records */
/* ------------------------------------------------ a batch's related pages (backends.redis.mirror) */
static inline unsigned int bits64(uint64_t x) { return bits32((uint32_t)x) + bits32((uint32_t)(x >> 32)); }

/* A sequence of n ints (or None: ``fallback[i]``, and ``has[i]`` cleared when given) as uint64 values. */
static int read_u64s(PyObject *seq, Py_ssize_t n, uint64_t *out, const uint64_t *fallback, unsigned char *has) {
    PyObject *fast = PySequence_Fast(seq, "a sequence of ints or None");
    if (fast == NULL) return -1;
    if (PySequence_Fast_GET_SIZE(fast) != n) {
        Py_DECREF(fast);
        PyErr_SetString(PyExc_ValueError, "batch_related: one value a page");
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(fast, i);
        if (has != NULL) has[i] = item != Py_None;
        if (item == Py_None) {
            out[i] = fallback != NULL ? fallback[i] : 0;
            continue;
        }
        unsigned long long v = PyLong_AsUnsignedLongLong(item);
        if (v == (unsigned long long)-1 && PyErr_Occurred()) {
            Py_DECREF(fast);
            return -1;
        }
        out[i] = (uint64_t)v;
    }
    Py_DECREF(fast);
    return 0;
}

/* The first page (index > 0) whose sketch (a tuple or list of ints, or None) shares a hash with an earlier page's,
 * else n; -1 on error.  (The pages' hashes go into an open-addressing table in page order, each with its page.) */
static Py_ssize_t first_shared(PyObject *sketches) {
    Py_ssize_t n = PySequence_Fast_GET_SIZE(sketches), total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(sketches, i);
        if (item == Py_None) continue;
        if (!PyTuple_Check(item) && !PyList_Check(item)) {
            PyErr_SetString(PyExc_TypeError, "batch_related: a sketch's hashes are a tuple or a list");
            return -1;
        }
        total += PySequence_Fast_GET_SIZE(item);
    }
    size_t size = 16;
    while (size < 2 * (size_t)total) size <<= 1;
    uint64_t *keys = PyMem_Malloc(sizeof(uint64_t) * size);
    Py_ssize_t *owners = PyMem_Malloc(sizeof(Py_ssize_t) * size);
    if (keys == NULL || owners == NULL) {
        PyMem_Free(keys);
        PyMem_Free(owners);
        PyErr_NoMemory();
        return -1;
    }
    for (size_t j = 0; j < size; j++) owners[j] = -1;
    Py_ssize_t first = n;
    for (Py_ssize_t i = 0; i < n && first == n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(sketches, i);
        if (item == Py_None) continue;
        for (Py_ssize_t j = 0; j < PySequence_Fast_GET_SIZE(item); j++) {
            unsigned long long v = PyLong_AsUnsignedLongLong(PySequence_Fast_GET_ITEM(item, j));
            if (v == (unsigned long long)-1 && PyErr_Occurred()) {
                first = -1;
                break;
            }
            size_t slot = (size_t)((v * 0x9E3779B97F4A7C15ULL) >> 32) & (size - 1);
            while (owners[slot] >= 0 && keys[slot] != v) slot = (slot + 1) & (size - 1);
            if (owners[slot] < 0) {
                keys[slot] = v;
                owners[slot] = i;
            } else if (owners[slot] != i) {
                first = i; /* (the rest of this page's hashes are not read: the answer is this page) */
                break;
            }
        }
    }
    PyMem_Free(keys);
    PyMem_Free(owners);
    return first;
}

/* batch_related(fingerprints, alsos, seconds, sketches, k) -> (related, shared): ``mirror.first_related``'s
 * two questions of a batch's n simhash pages, in order.  ``related``: the ascending indices i > 0 of the pages
 * within k of an earlier page j < i by any pair of their rows (the fingerprint, and the template-free simhash in
 * ``alsos``, None: none), or by their second simhashes when both have one (``seconds``, None: none).
 * ``shared``: the first index i > 0 whose sketch hashes (``sketches``: a tuple or list each, or None) share one with an
 * earlier page's, else None.  (numpy in ``mirror._related_numpy``: the same answers.) */
static PyObject *batch_related(PyObject *module, PyObject *args) {
    PyObject *fps_obj, *alsos_obj, *seconds_obj, *sketches_obj;
    int k;
    if (!PyArg_ParseTuple(args, "OOOOi:batch_related", &fps_obj, &alsos_obj, &seconds_obj, &sketches_obj, &k))
        return NULL;
    PyObject *sketches = PySequence_Fast(sketches_obj, "sketches must be a sequence");
    if (sketches == NULL) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(sketches);
    PyObject *result = NULL, *related = NULL;
    uint64_t *values = PyMem_Malloc(sizeof(uint64_t) * 3 * (size_t)(n ? n : 1));
    unsigned char *has = PyMem_Malloc((size_t)(n ? n : 1));
    if (values == NULL || has == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    uint64_t *fps = values, *alsos = values + n, *seconds = values + 2 * n;
    if (read_u64s(fps_obj, n, fps, NULL, NULL) < 0 || read_u64s(alsos_obj, n, alsos, fps, NULL) < 0 ||
        read_u64s(seconds_obj, n, seconds, NULL, has) < 0)
        goto done;
    related = PyList_New(0);
    if (related == NULL) goto done;
    for (Py_ssize_t i = 1; i < n; i++) {
        int near = 0;
        for (Py_ssize_t j = 0; j < i && !near; j++) {
            near = (int)bits64(fps[i] ^ fps[j]) <= k || (int)bits64(fps[i] ^ alsos[j]) <= k ||
                   (int)bits64(alsos[i] ^ fps[j]) <= k || (int)bits64(alsos[i] ^ alsos[j]) <= k ||
                   (has[i] && has[j] && (int)bits64(seconds[i] ^ seconds[j]) <= k);
        }
        if (near) {
            PyObject *index = PyLong_FromSsize_t(i);
            if (index == NULL || PyList_Append(related, index) < 0) {
                Py_XDECREF(index);
                goto done;
            }
            Py_DECREF(index);
        }
    }
    Py_ssize_t shared = first_shared(sketches);
    if (shared < 0) goto done;
    if (shared >= n) result = Py_BuildValue("(OO)", related, Py_None);
    else result = Py_BuildValue("(On)", related, shared);
done:
    Py_XDECREF(related);
    PyMem_Free(values);
    PyMem_Free(has);
    Py_DECREF(sketches);
    return result;
}
/* ------------------------------------------------ end of a batch's related pages */

static PyMethodDef methods[] = {
    {"hash_tokens", hash_tokens, METH_O, "hash_tokens(chunk) -> (hashes, specials)"},
    {"hash_text", hash_text, METH_VARARGS, "hash_text(data, table) -> (hashes, specials)"},
    {"set_separators", set_separators, METH_O, "set_separators(code_points) -> None"},
    {"is_utf8", is_utf8, METH_O, "is_utf8(data) -> bool"},
    {"key_slot", key_slot, METH_O, "key_slot(key) -> Redis Cluster hash slot"},
    {"route_commands", route_commands, METH_VARARGS, "route_commands(commands, table, nodes) -> per node (indexes, RESP2)"},
    {"bucket_commands", bucket_commands, METH_VARARGS,
     "bucket_commands(commands, keys, group, per, verb, tail, tail_count[, lengths, step, sent]) -> expected lengths or None"},
    {"encode_payload", (PyCFunction)(void (*)(void))encode_payload, METH_FASTCALL,
     "encode_payload(primed, kind, identity_bytes, digest, url, identity, referer, depth, text, etag, last_modified, "
     "canonical_link) -> bytes or NotImplemented"},
    {"pack_global_record", pack_global_record, METH_O, "pack_global_record(record) -> bytes or NotImplemented"},
    {"parse_global_record", parse_global_record, METH_VARARGS,
     "parse_global_record(value, cls) -> cls or NotImplemented"},
    {"bucket_names", bucket_names, METH_VARARGS, "bucket_names(base, spans, fingerprints) -> each one's bucket keys"},
    {"place_replies", place_replies, METH_VARARGS,
     "place_replies(indexes, answer, replies, error_type) -> positions of the errors"},
    {"near_replies", near_replies, METH_VARARGS,
     "near_replies(replies, start, keys, group, fingerprints, lengths) -> {seq: [fingerprint, ...]}"},
    {"count_distinct", count_distinct, METH_O, "count_distinct(hashes) -> (features, counts)"},
    {"vote", vote, METH_VARARGS, "vote(features, weights) -> int or None"},
    {"not_content_rules", not_content_rules, METH_VARARGS, "not_content_rules(data, labels, window, rules) -> int"},
    {"query_tables", query_tables, METH_VARARGS,
     "query_tables(queries, fingerprints, alive, tables, max_distance, tail_start) -> (query, row, distance)"},
    {"insert_sorted", insert_sorted, METH_VARARGS, "insert_sorted(buffer, count, at, values) -> None"},
    {"prepare_tables", prepare_tables, METH_O, "prepare_tables(tables) -> capsule for query_tables"},
    {"sentence_hashes", sentence_hashes, METH_VARARGS, "sentence_hashes(data, min_words) -> sorted distinct hashes"},
    {"count_hashes", count_hashes, METH_VARARGS, "count_hashes(low, high, hashes, bits) -> None"},
    {"template_lines", template_lines, METH_VARARGS, "template_lines(data, known, article, room) -> (kept, added)"},
    {"near_folds", near_folds, METH_VARARGS, "near_folds(buckets, fingerprints, k) -> one list of seqs a bucket"},
    {"scan_rows", scan_rows, METH_VARARGS, "scan_rows(fingerprints, fingerprint, k) -> sorted distance << 32 | row"},
    {"near_popcnt", near_popcnt, METH_VARARGS, "near_popcnt([use]) -> whether near_folds uses the popcnt instruction"},
    {"extras_records", extras_records, METH_VARARGS,
     "extras_records(data, start, names) -> (used, positions, alsos, seconds, sentences, packed, hosts, addresses, hashes)"},
    {"batch_related", batch_related, METH_VARARGS,
     "batch_related(fingerprints, alsos, seconds, sketches, k) -> (related indices, first shared sketch or None)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "simhash_scrapy.core._speedups", NULL, -1, methods};

PyMODINIT_FUNC PyInit__speedups(void) {
    fill_tables();
    near_scan_init();
    return PyModule_Create(&module_def);
}
