/*
 * simhash_scrapy._speedups: optional C versions of the three hot loops.
 *
 * Every function here has a pure-Python twin that gives the same result (the
 * tests run both); the package works without this module, only slower.
 *
 * Text: the pure-Python path (simhash_scrapy/text.py) removes non-rendered
 * and hidden elements from the lxml tree, then lets an XSLT stylesheet print
 * the text with a marker around every block element.  Here one walk over the
 * libxml2 tree lxml already built gives the same words, without touching the
 * tree:
 *
 *   visible_text(element, marker) -> bytes
 *       the text of ``element``'s subtree; elements that are not rendered
 *       (script, style, head...) or hidden (hidden, aria-hidden="true",
 *       inline display:none / visibility:hidden) are skipped with their
 *       subtree, their tail text kept; ``marker`` is written before and after
 *       the content of every block element.  ``element`` itself is never
 *       skipped (as in the Python path).
 *   invisible_elements(element) -> list
 *       the outermost such elements below ``element``, in document order
 *       (main-content mode removes them before judging the page's layout).
 *
 *   hash_tokens(chunk) -> (hashes, specials)
 *       the tokeniser's hashes (features.py): ``chunk`` is text already put
 *       through features._ASCII_TABLE, tokens are the runs of bytes other
 *       than a space, each hashed as mix64(polynomial hash + length); tokens
 *       holding non-ASCII bytes are listed in ``specials`` as (index, start,
 *       end) for the Python side to re-tokenise with Unicode rules.
 *
 *   query_tables(queries, fingerprints, alive, tables, max_distance, tail_start)
 *       the index's queries (index.py): for every query, every table's
 *       bucket is read and each candidate verified with a popcount, and the
 *       rows from ``tail_start`` on (not in the tables yet) are scanned; pairs are
 *       returned once, sorted by query, distance, row, as three int64 arrays
 *       (bytes).  The loop runs without the GIL.
 *
 * The rules are the Python path's, and the tests compare both on real pages.
 * Style and aria-hidden values with non-ASCII characters are handed to the
 * Python functions (Unicode whitespace and case rules), so the two paths can
 * never disagree on them.  Nothing here depends on Scrapy.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include <libxml/tree.h>
#include "lxml.etree.h"

/* ------------------------------------------------------------------ tags */

enum { TAG_OTHER = 0, TAG_BLOCK = 1, TAG_NOT_RENDERED = 2 };

/* Filled from text.py's NOT_RENDERED_TAGS and BLOCK_TAGS at import (one source of truth). */
#define TAG_SLOTS 512
typedef struct {
    char name[16];
    unsigned char len;
    unsigned char kind;
} TagSlot;
static TagSlot tag_table[TAG_SLOTS];

static unsigned int tag_hash(const unsigned char *s, size_t n) {
    unsigned int h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 16777619u;
    return h;
}

static int tag_add(const char *name, size_t n, int kind) {
    if (n == 0 || n >= sizeof(tag_table[0].name)) {
        PyErr_Format(PyExc_ValueError, "tag name %s is empty or too long", name);
        return -1;
    }
    unsigned int slot = tag_hash((const unsigned char *)name, n) % TAG_SLOTS;
    for (int probes = 0; probes < TAG_SLOTS; probes++, slot = (slot + 1) % TAG_SLOTS) {
        TagSlot *t = &tag_table[slot];
        if (t->len == 0) {
            memcpy(t->name, name, n);
            t->len = (unsigned char)n;
            t->kind = (unsigned char)kind;
            return 0;
        }
        if (t->len == n && memcmp(t->name, name, n) == 0) {
            if (kind == TAG_NOT_RENDERED) t->kind = (unsigned char)kind; /* not rendered wins */
            return 0;
        }
    }
    PyErr_SetString(PyExc_ValueError, "tag table full");
    return -1;
}

static int tag_kind(const xmlChar *name) {
    if (name == NULL) return TAG_OTHER;
    size_t n = strlen((const char *)name);
    if (n == 0 || n >= sizeof(tag_table[0].name)) return TAG_OTHER;
    unsigned int slot = tag_hash(name, n) % TAG_SLOTS;
    for (;;) {
        TagSlot *t = &tag_table[slot];
        if (t->len == 0) return TAG_OTHER;
        if (t->len == n && memcmp(t->name, name, n) == 0) return t->kind;
        slot = (slot + 1) % TAG_SLOTS;
    }
}

/* ------------------------------------------------------------ attributes */

/* Python callables (set by text.py): hidden_style(str) -> bool, aria_hidden(str) -> bool. */
static PyObject *py_hidden_style = NULL;
static PyObject *py_aria_hidden = NULL;

/* Python's str.isspace() for ASCII (what re's \s and str.strip() use). */
static int ascii_space(unsigned char c) {
    return c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f);
}

static int ascii_word(unsigned char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static unsigned char lower(unsigned char c) {
    return (c >= 'A' && c <= 'Z') ? (unsigned char)(c + 32) : c;
}

/* Case-insensitive match of the lower-case ASCII word ``w`` at s[i..]; returns the end or -1. */
static Py_ssize_t match_word(const unsigned char *s, Py_ssize_t n, Py_ssize_t i, const char *w) {
    for (; *w; w++, i++) {
        if (i >= n || lower(s[i]) != (unsigned char)*w) return -1;
    }
    return i;
}

static Py_ssize_t skip_space(const unsigned char *s, Py_ssize_t n, Py_ssize_t i) {
    while (i < n && ascii_space(s[i])) i++;
    return i;
}

/* (?:^|;)\s*(?:display\s*:\s*none|visibility\s*:\s*hidden)\b, IGNORECASE, on ASCII text. */
static int ascii_hidden_style(const unsigned char *s, Py_ssize_t n) {
    static const char *props[2] = {"display", "visibility"};
    static const char *values[2] = {"none", "hidden"};
    for (Py_ssize_t start = 0; start <= n; start++) {
        if (start > 0 && s[start - 1] != ';') continue;
        Py_ssize_t i = skip_space(s, n, start);
        for (int p = 0; p < 2; p++) {
            Py_ssize_t j = match_word(s, n, i, props[p]);
            if (j < 0) continue;
            j = skip_space(s, n, j);
            if (j >= n || s[j] != ':') continue;
            j = match_word(s, n, skip_space(s, n, j + 1), values[p]);
            if (j < 0) continue;
            if (j == n || !ascii_word(s[j])) return 1;
        }
    }
    return 0;
}

/* str.strip().lower() == "true", on ASCII text. */
static int ascii_aria_true(const unsigned char *s, Py_ssize_t n) {
    Py_ssize_t a = 0, b = n;
    while (a < b && ascii_space(s[a])) a++;
    while (b > a && ascii_space(s[b - 1])) b--;
    return b - a == 4 && match_word(s, b, a, "true") == b;
}

/* The value of an attribute: its text children, concatenated (in ``owned`` when there are several). */
typedef struct {
    const unsigned char *data;
    Py_ssize_t len;
    int ascii;
    unsigned char *owned; /* PyMem buffer to free, or NULL */
} AttrValue;

static int attr_value(xmlAttr *attr, AttrValue *out) {
    xmlNode *child = attr->children;
    out->data = (const unsigned char *)"";
    out->len = 0;
    out->owned = NULL;
    if (child != NULL && child->next == NULL) {
        if (child->content != NULL) {
            out->data = child->content;
            out->len = (Py_ssize_t)strlen((const char *)child->content);
        }
    } else if (child != NULL) {
        size_t total = 0, used = 0;
        for (xmlNode *c = child; c != NULL; c = c->next)
            if (c->content != NULL) total += strlen((const char *)c->content);
        out->owned = PyMem_Malloc(total + 1);
        if (out->owned == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        for (xmlNode *c = child; c != NULL; c = c->next) {
            if (c->content == NULL) continue;
            size_t n = strlen((const char *)c->content);
            memcpy(out->owned + used, c->content, n);
            used += n;
        }
        out->data = out->owned;
        out->len = (Py_ssize_t)used;
    }
    out->ascii = 1;
    for (Py_ssize_t i = 0; i < out->len; i++) {
        if (out->data[i] >= 0x80) {
            out->ascii = 0;
            break;
        }
    }
    return 0;
}

/* Ask a Python predicate about a non-ASCII value: 1, 0, or -1 with an exception set. */
static int ask_python(PyObject *predicate, const unsigned char *data, Py_ssize_t len) {
    if (predicate == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "simhash_scrapy._speedups: attribute checkers not set");
        return -1;
    }
    PyObject *value = PyUnicode_DecodeUTF8((const char *)data, len, "replace");
    if (value == NULL) return -1;
    PyObject *result = PyObject_CallOneArg(predicate, value);
    Py_DECREF(value);
    if (result == NULL) return -1;
    int truth = PyObject_IsTrue(result);
    Py_DECREF(result);
    return truth;
}

static int attr_is(const xmlAttr *attr, const char *name) {
    return attr->ns == NULL && strcmp((const char *)attr->name, name) == 0;
}

/* 1 when the element is hidden by its attributes, 0 if not, -1 on error. */
static int hidden_by_attributes(xmlNode *node) {
    for (xmlAttr *attr = node->properties; attr != NULL; attr = attr->next) {
        const char *name = (const char *)attr->name;
        if (name == NULL) continue;
        int (*ascii_check)(const unsigned char *, Py_ssize_t);
        PyObject *python_check;
        if (name[0] == 'h' && attr_is(attr, "hidden")) {
            return 1;
        } else if (name[0] == 'a' && attr_is(attr, "aria-hidden")) {
            ascii_check = ascii_aria_true;
            python_check = py_aria_hidden;
        } else if (name[0] == 's' && attr_is(attr, "style")) {
            ascii_check = ascii_hidden_style;
            python_check = py_hidden_style;
        } else {
            continue;
        }
        AttrValue v;
        if (attr_value(attr, &v) < 0) return -1;
        int hidden = v.ascii ? ascii_check(v.data, v.len) : ask_python(python_check, v.data, v.len);
        PyMem_Free(v.owned);
        if (hidden != 0) return hidden;
    }
    return 0;
}

/* 1 when the element is not shown (not rendered or hidden), 0 if shown, -1 on error. */
static int invisible(xmlNode *node, int kind) {
    if (kind == TAG_NOT_RENDERED) return 1;
    if (node->properties == NULL) return 0;
    return hidden_by_attributes(node);
}

/* ---------------------------------------------------------------- output */

typedef struct {
    char *data;
    size_t len, cap;
} Buffer;

static int buffer_add(Buffer *b, const char *s, size_t n) {
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n) cap *= 2;
        char *grown = PyMem_Realloc(b->data, cap);
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        b->data = grown;
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    return 0;
}

/* ------------------------------------------------------------- the walks */

static PyTypeObject *element_type = NULL;
static struct LxmlElement *(*element_factory)(struct LxmlDocument *, xmlNode *) = NULL;

static xmlNode *node_of(PyObject *element) {
    if (element_type == NULL || !PyObject_TypeCheck(element, element_type)) {
        PyErr_Format(PyExc_TypeError, "expected an lxml element, got %.200s", Py_TYPE(element)->tp_name);
        return NULL;
    }
    xmlNode *node = ((struct LxmlElement *)element)->_c_node;
    if (node == NULL || node->type != XML_ELEMENT_NODE) {
        PyErr_SetString(PyExc_ValueError, "the element has no tree (or is not an element)");
        return NULL;
    }
    return node;
}

/* Depth-first over the subtree of ``root`` (iterative: trees can be 2048 levels deep).
 * With ``out`` set, writes the visible text; with ``found`` set, collects invisible elements. */
static int walk(PyObject *root_object, xmlNode *root, const char *marker, size_t marker_len, Buffer *out,
                PyObject *found) {
    int root_block = tag_kind(root->name) == TAG_BLOCK;
    if (out && root_block && buffer_add(out, marker, marker_len) < 0) return -1;
    xmlNode *parent = root;
    xmlNode *child = root->children;
    for (;;) {
        if (child == NULL) {
            if (parent == root) break;
            /* Leaving ``parent``: close its block, go on with its next sibling. */
            if (out && tag_kind(parent->name) == TAG_BLOCK && buffer_add(out, marker, marker_len) < 0) return -1;
            child = parent->next;
            parent = parent->parent;
            continue;
        }
        switch (child->type) {
            case XML_ELEMENT_NODE: {
                int kind = tag_kind(child->name);
                int hide = invisible(child, kind);
                if (hide < 0) return -1;
                if (hide) {
                    if (found) {
                        PyObject *element =
                            (PyObject *)element_factory(((struct LxmlElement *)root_object)->_doc, child);
                        if (element == NULL) return -1;
                        int failed = PyList_Append(found, element);
                        Py_DECREF(element);
                        if (failed < 0) return -1;
                    }
                    child = child->next;
                    continue;
                }
                if (out && kind == TAG_BLOCK && buffer_add(out, marker, marker_len) < 0) return -1;
                if (child->children != NULL) {
                    parent = child;
                    child = child->children;
                    continue;
                }
                if (out && kind == TAG_BLOCK && buffer_add(out, marker, marker_len) < 0) return -1;
                break;
            }
            case XML_TEXT_NODE:
            case XML_CDATA_SECTION_NODE:
                if (out && child->content != NULL &&
                    buffer_add(out, (const char *)child->content, strlen((const char *)child->content)) < 0)
                    return -1;
                break;
            default:
                break; /* comments, processing instructions: not text */
        }
        child = child->next;
    }
    if (out && root_block && buffer_add(out, marker, marker_len) < 0) return -1;
    return 0;
}

static PyObject *visible_text(PyObject *module, PyObject *args) {
    PyObject *element;
    const char *marker;
    Py_ssize_t marker_len;
    if (!PyArg_ParseTuple(args, "Oy#:visible_text", &element, &marker, &marker_len)) return NULL;
    xmlNode *root = node_of(element);
    if (root == NULL) return NULL;
    Buffer out = {NULL, 0, 0};
    if (walk(element, root, marker, (size_t)marker_len, &out, NULL) < 0) {
        PyMem_Free(out.data);
        return NULL;
    }
    PyObject *result = PyBytes_FromStringAndSize(out.data ? out.data : "", (Py_ssize_t)out.len);
    PyMem_Free(out.data);
    return result;
}

static PyObject *invisible_elements(PyObject *module, PyObject *element) {
    xmlNode *root = node_of(element);
    if (root == NULL) return NULL;
    if (element_factory == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "lxml's elementFactory is not available");
        return NULL;
    }
    PyObject *found = PyList_New(0);
    if (found == NULL) return NULL;
    if (walk(element, root, "", 0, NULL, found) < 0) {
        Py_DECREF(found);
        return NULL;
    }
    return found;
}

/* ------------------------------------------------------------- tokens */

/* The same constants as features.py (polynomial base, SplitMix64 finaliser). */
#define POLY_BASE 0x100000001B3ULL

static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static PyObject *hash_tokens(PyObject *module, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    const unsigned char *s = view.buf;
    Py_ssize_t n = view.len;
    /* At most one token per two bytes: the hashes never need more room than that. */
    PyObject *hashes = PyBytes_FromStringAndSize(NULL, ((n + 1) / 2) * (Py_ssize_t)sizeof(uint64_t));
    PyObject *specials = PyList_New(0);
    if (hashes == NULL || specials == NULL) goto fail;
    uint64_t *out = (uint64_t *)PyBytes_AS_STRING(hashes);
    Py_ssize_t count = 0, i = 0;
    while (i < n) {
        if (s[i] == ' ') {
            i++;
            continue;
        }
        Py_ssize_t start = i;
        uint64_t acc = 0, power = 1;
        unsigned char high = 0;
        for (; i < n && s[i] != ' '; i++) {
            acc += (uint64_t)s[i] * power; /* wraps modulo 2**64, as in numpy */
            power *= POLY_BASE;
            high |= s[i];
        }
        out[count] = mix64(acc + (uint64_t)(i - start));
        if (high & 0x80) {
            PyObject *item = Py_BuildValue("(nnn)", count, start, i);
            if (item == NULL || PyList_Append(specials, item) < 0) {
                Py_XDECREF(item);
                goto fail;
            }
            Py_DECREF(item);
        }
        count++;
    }
    PyBuffer_Release(&view);
    if (_PyBytes_Resize(&hashes, count * (Py_ssize_t)sizeof(uint64_t)) < 0) {
        Py_DECREF(specials);
        return NULL;
    }
    return Py_BuildValue("(NN)", hashes, specials);
fail:
    PyBuffer_Release(&view);
    Py_XDECREF(hashes);
    Py_XDECREF(specials);
    return NULL;
}

/* -------------------------------------------------------------- index */

typedef struct {
    int shift;
    uint64_t mask;
    int width;
} Span;

typedef struct {
    Py_buffer order, bounds; /* uint32 row numbers sorted by bucket; bucket offsets */
    Span spans[64];
    int span_count;
    int drop_bits; /* key >> drop_bits is the bucket */
} TableView;

static int parse_table(PyObject *spec, TableView *t) {
    PyObject *order, *bounds, *spans;
    if (!PyArg_ParseTuple(spec, "OOOi:table", &order, &bounds, &spans, &t->drop_bits)) return -1;
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
    return 0;
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

static int grow_u32(uint32_t **array, size_t *cap, size_t needed) {
    if (needed <= *cap) return 0;
    size_t size = *cap ? *cap : 4096;
    while (size < needed) size *= 2;
    uint32_t *grown = PyMem_RawRealloc(*array, size * sizeof(uint32_t));
    if (grown == NULL) return -1;
    *array = grown;
    *cap = size;
    return 0;
}

/* x86-64 before 2008 has no POPCNT instruction: GCC builds both and picks one at load time. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define POPCNT_CLONES __attribute__((target_clones("popcnt", "default")))
#else
#define POPCNT_CLONES
#endif

#define SEARCH_CHUNK 1024

/* The search, without the GIL.  Queries go by chunks, each in phases whose loops make
 * independent loads (bucket bounds, then row numbers, then fingerprints), so the CPU
 * overlaps the cache misses: one query at a time would wait for each in turn. */
POPCNT_CLONES
static int search(const uint64_t *q, Py_ssize_t nq, const uint64_t *f, Py_ssize_t nf, const unsigned char *live,
                  const TableView *tables, Py_ssize_t table_count, int max_distance, Py_ssize_t tail_start,
                  Pairs *out) {
    uint32_t *lo = PyMem_RawMalloc(sizeof(uint32_t) * SEARCH_CHUNK * (size_t)(table_count ? table_count : 1));
    uint32_t *hi = PyMem_RawMalloc(sizeof(uint32_t) * SEARCH_CHUNK * (size_t)(table_count ? table_count : 1));
    uint32_t *cand_row = NULL, *cand_query = NULL;
    size_t cand_cap = 0, query_cap = 0;
    int failed = lo == NULL || hi == NULL;
    if (tail_start < 0) tail_start = 0;
    for (Py_ssize_t c0 = 0; c0 < nq && !failed; c0 += SEARCH_CHUNK) {
        Py_ssize_t m = nq - c0 < SEARCH_CHUNK ? nq - c0 : SEARCH_CHUNK;
        size_t total = 0;
        /* 1. bucket bounds */
        for (Py_ssize_t i = 0; i < m; i++) {
            uint64_t fp = q[c0 + i];
            for (Py_ssize_t t = 0; t < table_count; t++) {
                const TableView *tv = &tables[t];
                uint64_t key = 0;
                for (int s = 0; s < tv->span_count; s++) {
                    uint64_t part = (fp >> tv->spans[s].shift) & tv->spans[s].mask;
                    key = tv->spans[s].width >= 64 ? part : (key << tv->spans[s].width) | part; /* no shift by 64 */
                }
                uint64_t bucket = key >> tv->drop_bits;
                size_t slot = (size_t)i * (size_t)table_count + (size_t)t;
                if ((Py_ssize_t)((bucket + 2) * sizeof(uint32_t)) > tv->bounds.len) {
                    lo[slot] = hi[slot] = 0;
                    continue;
                }
                const uint32_t *bounds = tv->bounds.buf;
                lo[slot] = bounds[bucket];
                hi[slot] = bounds[bucket + 1];
                total += hi[slot] > lo[slot] ? hi[slot] - lo[slot] : 0;
            }
        }
        if (grow_u32(&cand_row, &cand_cap, total + 1) < 0 || grow_u32(&cand_query, &query_cap, total + 1) < 0) {
            failed = 1;
            break;
        }
        /* 2. candidate rows */
        size_t j = 0;
        for (Py_ssize_t i = 0; i < m; i++) {
            for (Py_ssize_t t = 0; t < table_count; t++) {
                size_t slot = (size_t)i * (size_t)table_count + (size_t)t;
                const uint32_t *order = tables[t].order.buf;
                Py_ssize_t order_len = tables[t].order.len / (Py_ssize_t)sizeof(uint32_t);
                for (uint32_t p = lo[slot]; p < hi[slot] && (Py_ssize_t)p < order_len; p++) {
                    cand_row[j] = order[p];
                    cand_query[j] = (uint32_t)i;
                    j++;
                }
            }
        }
        /* 3. verify each candidate with a popcount */
        size_t first = out->len;
        for (size_t c = 0; c < j && !failed; c++) {
            uint32_t row = cand_row[c];
            if ((Py_ssize_t)row >= nf) continue;
            int d = __builtin_popcountll(f[row] ^ q[c0 + cand_query[c]]);
            if (d <= max_distance && (live == NULL || live[row]) && add_pair(out, c0 + cand_query[c], row, d) < 0)
                failed = 1;
        }
        /* 4. rows not in the tables yet (the unsorted tail) */
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
        /* 5. sort this chunk's pairs by (query, distance, row) and keep each pair once
         * (a fingerprint equal in more than B - k blocks is found in several tables). */
        Pair *chunk = out->data + first;
        size_t count = out->len - first;
        if (count > 1) qsort(chunk, count, sizeof(Pair), pair_order);
        size_t kept = 0;
        for (size_t a = 0; a < count; a++) {
            if (kept > 0 && chunk[kept - 1].query == chunk[a].query && chunk[kept - 1].row == chunk[a].row) continue;
            chunk[kept++] = chunk[a];
        }
        out->len = first + kept;
    }
    PyMem_RawFree(lo);
    PyMem_RawFree(hi);
    PyMem_RawFree(cand_row);
    PyMem_RawFree(cand_query);
    return failed ? -1 : 0;
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
    PyObject *tables_seq = PySequence_Fast(tables_obj, "tables must be a sequence");
    Py_ssize_t table_count = tables_seq ? PySequence_Fast_GET_SIZE(tables_seq) : 0;
    TableView *tables = tables_seq ? PyMem_Calloc((size_t)(table_count ? table_count : 1), sizeof(TableView)) : NULL;
    Py_ssize_t parsed = 0;
    Pairs pairs = {0};
    int failed = 0;
    if (tables == NULL) goto done;
    for (; parsed < table_count; parsed++) {
        if (parse_table(PySequence_Fast_GET_ITEM(tables_seq, parsed), &tables[parsed]) < 0) goto done;
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
    for (Py_ssize_t t = 0; t < parsed; t++) {
        PyBuffer_Release(&tables[t].order);
        PyBuffer_Release(&tables[t].bounds);
    }
    PyMem_Free(tables);
    Py_XDECREF(tables_seq);
    PyMem_RawFree(pairs.data);
    PyBuffer_Release(&queries);
    PyBuffer_Release(&fps);
    if (have_alive) PyBuffer_Release(&alive);
    return result;
}

/* configure(not_rendered_tags, block_tags, hidden_style, aria_hidden) */
static PyObject *configure(PyObject *module, PyObject *args) {
    PyObject *not_rendered, *blocks, *hidden_style, *aria_hidden;
    if (!PyArg_ParseTuple(args, "OOOO:configure", &not_rendered, &blocks, &hidden_style, &aria_hidden)) return NULL;
    memset(tag_table, 0, sizeof(tag_table));
    PyObject *groups[2] = {blocks, not_rendered};
    int kinds[2] = {TAG_BLOCK, TAG_NOT_RENDERED};
    for (int g = 0; g < 2; g++) {
        PyObject *seq = PySequence_Fast(groups[g], "tags must be a sequence of str");
        if (seq == NULL) return NULL;
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
            Py_ssize_t n;
            const char *name = PyUnicode_AsUTF8AndSize(PySequence_Fast_GET_ITEM(seq, i), &n);
            if (name == NULL || tag_add(name, (size_t)n, kinds[g]) < 0) {
                Py_DECREF(seq);
                return NULL;
            }
        }
        Py_DECREF(seq);
    }
    Py_XINCREF(hidden_style);
    Py_XSETREF(py_hidden_style, hidden_style);
    Py_XINCREF(aria_hidden);
    Py_XSETREF(py_aria_hidden, aria_hidden);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"visible_text", visible_text, METH_VARARGS, "visible_text(element, marker) -> bytes"},
    {"invisible_elements", invisible_elements, METH_O, "invisible_elements(element) -> list"},
    {"hash_tokens", hash_tokens, METH_O, "hash_tokens(chunk) -> (hashes, specials)"},
    {"query_tables", query_tables, METH_VARARGS,
     "query_tables(queries, fingerprints, alive, tables, max_distance, tail_start) -> (query, row, distance)"},
    {"configure", configure, METH_VARARGS, "configure(not_rendered_tags, block_tags, hidden_style, aria_hidden)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "simhash_scrapy.core._speedups", NULL, -1, methods};

PyMODINIT_FUNC PyInit__speedups(void) {
    PyObject *etree = PyImport_ImportModule("lxml.etree");
    if (etree == NULL) return NULL;
    element_type = (PyTypeObject *)PyObject_GetAttrString(etree, "_Element");
    /* elementFactory from lxml's public C-API table: a capsule named by its signature. */
    PyObject *capi = PyObject_GetAttrString(etree, "__pyx_capi__");
    Py_DECREF(etree);
    if (element_type == NULL || capi == NULL) {
        Py_XDECREF(capi);
        return NULL;
    }
    PyObject *capsule = PyDict_GetItemString(capi, "elementFactory");
    if (capsule != NULL && PyCapsule_CheckExact(capsule)) {
        element_factory = (struct LxmlElement * (*)(struct LxmlDocument *, xmlNode *))
            PyCapsule_GetPointer(capsule, PyCapsule_GetName(capsule));
    }
    Py_DECREF(capi);
    if (element_factory == NULL) {
        PyErr_Clear();
        PyErr_SetString(PyExc_ImportError, "lxml.etree has no elementFactory in its C-API");
        return NULL;
    }
    return PyModule_Create(&module_def);
}
