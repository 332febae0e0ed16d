/*
 * simhash_scrapy.core.extract._walker: optional C walks over lxml's trees (the lxml walker).
 *
 * Every function here has a pure-Python twin that gives the same result (the
 * tests run both); the package works without this module, only slower.  The
 * C helpers that never touch lxml (tokeniser hashes, UTF-8 check, index
 * queries) are in _speedups.c, a separate module: an lxml/libxml2 version
 * mismatch turns off only this one (simhash_scrapy/core/_native.py).
 *
 * Text: the pure-Python path (simhash_scrapy/core/extract/text.py) removes non-rendered
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
 *   configure(not_rendered_tags, block_tags, hidden_style, aria_hidden)
 *       the tag sets and the Python checks for non-ASCII attribute values
 *       (text.py calls it once at import).
 *
 * Main content (simhash_scrapy/core/extract/boilerplate.py):
 *
 *   scan(root, tags, classify, cache) -> [(flags, element), ...]
 *       the elements of ``root.iter(*tags)`` that ``classify(tag, class, id, role, itemprop)``
 *       flags, with their flags, verdicts cached per distinct five values (main-content mode
 *       looks for content markers, boilerplate names and article bodies with it).
 *   text_length(element, within) -> int
 *       XPath's string-length(normalize-space(.)) of the element (``within`` None), or of the
 *       text inside its ``within`` descendants (``str:concat(.//a//text())``), without the string.
 *   text_count(element, limit) -> int
 *       the characters other than " " and "\n" of ``element.itertext()``, counted up to ``limit``.
 *
 * Depth (simhash_scrapy/core/extract/text.py, for the crawl's shared-parse checks):
 *
 *   deeper_than(element, depth) -> bool
 *       whether the element's document has an element ``depth`` levels deep (text.deeper_than's
 *       XPath, an absolute path of ``depth`` "*" steps), with an early stop.
 *
 * The rules are the Python path's, and the tests compare both on real pages.
 * Style and aria-hidden values with non-ASCII characters are handed to the
 * Python functions (Unicode whitespace and case rules), so the two paths can
 * never disagree on them.  Nothing here depends on Scrapy.
 *
 * lxml: only its public C API (the headers from ``lxml.get_include()``; module
 * init calls ``import_lxml__etree()``, which checks each function's capsule
 * signature).  The lxml and libxml2 versions compiled in are exported as
 * BUILT_LXML_VERSION / BUILT_LIBXML_VERSION; simhash_scrapy.core._native uses this
 * module only when they are the running ones.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include <libxml/tree.h>
#include <libxml/xmlversion.h>

/* lxml's public C API, from the headers lxml ships (``lxml.get_include()``):
 * lxml.etree.h declares ``struct LxmlElement`` (``_doc``, ``_c_node``: the
 * fields lxml's etreepublic.pxd documents); lxml.etree_api.h declares the API
 * functions and ``import_lxml__etree()``, which takes each of them from
 * ``lxml.etree.__pyx_capi__`` after checking the capsule's signature. */
#include "lxml.etree_api.h"
#include "lxml-version.h"

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
        PyErr_SetString(PyExc_RuntimeError, "simhash_scrapy.core.extract._walker: attribute checkers not set");
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

/* tag_kind of the names one walk meets, kept by address: libxml2's parser keeps each distinct name
 * once (its dictionary), so a page's few tag names are hashed once each, not once an element.  The
 * tree does not change during a walk, so an address names one string throughout; a name not from
 * the dictionary only misses the cache.  All zero is a valid start: tag_kind(NULL) is TAG_OTHER. */
#define KIND_SLOTS 64
typedef struct {
    const xmlChar *name;
    int kind;
} KindSlot;

static int cached_tag_kind(KindSlot *cache, const xmlChar *name) {
    KindSlot *slot = &cache[((uintptr_t)name >> 4) & (KIND_SLOTS - 1)];
    if (slot->name != name) {
        slot->name = name;
        slot->kind = tag_kind(name);
    }
    return slot->kind;
}

/* Depth-first over the subtree of ``root`` (iterative: trees can be 2048 levels deep).
 * With ``out`` set, writes the visible text; with ``found`` set, collects invisible elements. */
static int walk(PyObject *root_object, xmlNode *root, const char *marker, size_t marker_len, Buffer *out,
                PyObject *found) {
    KindSlot kinds[KIND_SLOTS];
    memset(kinds, 0, sizeof(kinds));
    int root_block = tag_kind(root->name) == TAG_BLOCK;
    if (out && root_block && buffer_add(out, marker, marker_len) < 0) return -1;
    xmlNode *parent = root;
    xmlNode *child = root->children;
    for (;;) {
        if (child == NULL) {
            if (parent == root) break;
            /* Leaving ``parent``: close its block, go on with its next sibling. */
            if (out && cached_tag_kind(kinds, parent->name) == TAG_BLOCK && buffer_add(out, marker, marker_len) < 0) return -1;
            child = parent->next;
            parent = parent->parent;
            continue;
        }
        switch (child->type) {
            case XML_ELEMENT_NODE: {
                int kind = cached_tag_kind(kinds, child->name);
                int hide = invisible(child, kind);
                if (hide < 0) return -1;
                if (hide) {
                    if (found) {
                        PyObject *element =
                            (PyObject *)elementFactory(((struct LxmlElement *)root_object)->_doc, child);
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
    PyObject *found = PyList_New(0);
    if (found == NULL) return NULL;
    if (walk(element, root, "", 0, NULL, found) < 0) {
        Py_DECREF(found);
        return NULL;
    }
    return found;
}

/* ------------------------------------------------------- block scan */

/* scan(root, tags, classify, cache) -> [(flags, element), ...]
 *
 * The elements of ``root``'s subtree (``root`` included, document order) whose tag is one of
 * ``tags`` (a tuple of str; elements in no namespace, as ``root.iter(*tags)``), each with the
 * non-zero flags ``classify(tag, class, id, role, itemprop)`` gives it (str, or None for an
 * absent attribute: the values ``element.get`` returns).  Verdicts are kept in ``cache`` (a dict,
 * cleared past SCAN_CACHE_MAX entries), keyed by the five values: templates repeat a few, so
 * Python is asked about each once, and only the elements it flags get a Python object. */

#define SCAN_SLOTS 128
#define SCAN_CACHE_MAX 4096
static const char *scan_attrs[4] = {"class", "id", "role", "itemprop"};

typedef struct {
    const char *name[SCAN_SLOTS];
    size_t len[SCAN_SLOTS];
} ScanTags;

static int scan_tags_fill(ScanTags *t, PyObject *tags) {
    memset(t, 0, sizeof(*t));
    if (!PyTuple_Check(tags) || PyTuple_GET_SIZE(tags) >= SCAN_SLOTS / 2) {
        PyErr_SetString(PyExc_TypeError, "scan: tags must be a tuple of fewer than 64 str");
        return -1;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(tags); i++) {
        Py_ssize_t n;
        const char *name = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(tags, i), &n);
        if (name == NULL) return -1;
        unsigned int slot = tag_hash((const unsigned char *)name, (size_t)n) % SCAN_SLOTS;
        while (t->name[slot] != NULL && !(t->len[slot] == (size_t)n && memcmp(t->name[slot], name, n) == 0))
            slot = (slot + 1) % SCAN_SLOTS;
        t->name[slot] = name;
        t->len[slot] = (size_t)n;
    }
    return 0;
}

static int scan_tags_has(const ScanTags *t, const xmlChar *name) {
    if (name == NULL) return 0;
    size_t n = strlen((const char *)name);
    unsigned int slot = tag_hash(name, n) % SCAN_SLOTS;
    while (t->name[slot] != NULL) {
        if (t->len[slot] == n && memcmp(t->name[slot], name, n) == 0) return 1;
        slot = (slot + 1) % SCAN_SLOTS;
    }
    return 0;
}

/* The element's verdict: cached, else asked of ``classify``; -1 on error. */
static long scan_flags(xmlNode *node, PyObject *classify, PyObject *cache) {
    AttrValue values[4];
    int present[4] = {0, 0, 0, 0};
    long flags = -1;
    for (xmlAttr *attr = node->properties; attr != NULL; attr = attr->next) {
        if (attr->ns != NULL || attr->name == NULL) continue;
        for (int i = 0; i < 4; i++) {
            if (!present[i] && strcmp((const char *)attr->name, scan_attrs[i]) == 0) {
                if (attr_value(attr, &values[i]) < 0) goto done;
                present[i] = 1;
            }
        }
    }
    /* key: the tag, then each attribute as \x01 (absent) or \x02 value \x00 (values hold no NUL) */
    size_t tag_len = strlen((const char *)node->name);
    size_t key_len = tag_len + 1;
    for (int i = 0; i < 4; i++) key_len += present[i] ? (size_t)values[i].len + 2 : 1;
    PyObject *key = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)key_len);
    if (key == NULL) goto done;
    char *k = PyBytes_AS_STRING(key);
    memcpy(k, node->name, tag_len);
    k += tag_len;
    *k++ = '\0';
    for (int i = 0; i < 4; i++) {
        if (!present[i]) {
            *k++ = '\x01';
            continue;
        }
        *k++ = '\x02';
        memcpy(k, values[i].data, (size_t)values[i].len);
        k += values[i].len;
        *k++ = '\0';
    }
    PyObject *known = PyDict_GetItemWithError(cache, key);
    if (known != NULL) {
        flags = PyLong_AsLong(known);
        Py_DECREF(key);
        goto done;
    }
    if (PyErr_Occurred()) {
        Py_DECREF(key);
        goto done;
    }
    PyObject *args[5] = {NULL, NULL, NULL, NULL, NULL};
    args[0] = PyUnicode_DecodeUTF8((const char *)node->name, (Py_ssize_t)tag_len, NULL);
    int ok = args[0] != NULL;
    for (int i = 0; ok && i < 4; i++) {
        if (present[i]) {
            args[i + 1] = PyUnicode_DecodeUTF8((const char *)values[i].data, values[i].len, NULL);
            ok = args[i + 1] != NULL;
        } else {
            args[i + 1] = Py_NewRef(Py_None);
        }
    }
    PyObject *verdict = ok ? PyObject_Vectorcall(classify, args, 5, NULL) : NULL;
    for (int i = 0; i < 5; i++) Py_XDECREF(args[i]);
    if (verdict != NULL) {
        flags = PyLong_AsLong(verdict);
        if (!(flags == -1 && PyErr_Occurred())) {
            if (PyDict_GET_SIZE(cache) >= SCAN_CACHE_MAX) PyDict_Clear(cache);
            if (PyDict_SetItem(cache, key, verdict) < 0) flags = -1;
        }
        Py_DECREF(verdict);
    }
    Py_DECREF(key);
done:
    for (int i = 0; i < 4; i++)
        if (present[i]) PyMem_Free(values[i].owned);
    if (flags < 0 && !PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "scan: classify gave a negative verdict");
    return flags;
}

static PyObject *scan(PyObject *module, PyObject *args) {
    PyObject *root_object, *tags, *classify, *cache;
    if (!PyArg_ParseTuple(args, "OO!OO!:scan", &root_object, &PyTuple_Type, &tags, &classify, &PyDict_Type, &cache))
        return NULL;
    xmlNode *root = node_of(root_object);
    if (root == NULL) return NULL;
    ScanTags table;
    if (scan_tags_fill(&table, tags) < 0) return NULL;
    PyObject *found = PyList_New(0);
    if (found == NULL) return NULL;
    xmlNode *node = root;
    while (node != NULL) {
        if (node->type == XML_ELEMENT_NODE && node->ns == NULL && scan_tags_has(&table, node->name)) {
            long flags = scan_flags(node, classify, cache);
            if (flags < 0) goto fail;
            if (flags) {
                PyObject *element = (PyObject *)elementFactory(((struct LxmlElement *)root_object)->_doc, node);
                if (element == NULL) goto fail;
                PyObject *pair = Py_BuildValue("(lN)", flags, element);
                if (pair == NULL) goto fail;
                int failed = PyList_Append(found, pair);
                Py_DECREF(pair);
                if (failed < 0) goto fail;
            }
        }
        /* next in document order: first child element, else next sibling, else up */
        xmlNode *next = node->type == XML_ELEMENT_NODE ? node->children : NULL;
        while (next != NULL && next->type != XML_ELEMENT_NODE) next = next->next;
        if (next == NULL) {
            while (node != root) {
                next = node->next;
                while (next != NULL && next->type != XML_ELEMENT_NODE) next = next->next;
                if (next != NULL) break;
                node = node->parent;
            }
        }
        node = next;
    }
    return found;
fail:
    Py_DECREF(found);
    return NULL;
}

/* ------------------------------------------------------ text lengths */

static int is_named(const xmlNode *node, const char *name) {
    return name != NULL && node->type == XML_ELEMENT_NODE && node->ns == NULL && node->name != NULL &&
           strcmp((const char *)node->name, name) == 0;
}

/* text_length(element, within) -> int
 * XPath's string-length(normalize-space(...)) of the text below ``element`` (``within`` None: all of
 * it, the element's string value) or of the text nodes inside ``within`` elements below it
 * (``within`` "a": ``str:concat(.//a//text())``).  One walk; no string is built. */
static PyObject *text_length(PyObject *module, PyObject *args) {
    PyObject *element;
    const char *within = NULL;
    if (!PyArg_ParseTuple(args, "Oz:text_length", &element, &within)) return NULL;
    xmlNode *root = node_of(element);
    if (root == NULL) return NULL;
    long long count = 0;
    int seen = 0, pending = 0; /* a non-blank character seen; blanks after it, not yet counted */
    long inside = 0;           /* ``within`` elements open below ``root`` */
    xmlNode *node = root->children;
    if (node == NULL) return PyLong_FromLong(0);
    for (;;) {
        if (node->type == XML_ELEMENT_NODE) {
            if (node->children != NULL) {
                if (is_named(node, within)) inside++;
                node = node->children;
                continue;
            }
        } else if ((node->type == XML_TEXT_NODE || node->type == XML_CDATA_SECTION_NODE) && node->content != NULL &&
                   (within == NULL || inside > 0)) {
            for (const unsigned char *c = node->content; *c; c++) {
                unsigned char b = *c;
                if (b == ' ' || b == '\t' || b == '\n' || b == '\r') {
                    pending = seen;
                } else if ((b & 0xC0) != 0x80) {
                    count += 1 + pending;
                    pending = 0;
                    seen = 1;
                }
            }
        }
        /* next: the sibling, else up (closing ``within`` elements) */
        while (node->next == NULL) {
            node = node->parent;
            if (node == root || node == NULL) return PyLong_FromLongLong(count);
            if (is_named(node, within)) inside--;
        }
        node = node->next;
    }
}

/* text_count(element, limit) -> int
 * The characters other than " " and "\n" in the text below ``element`` (its ``itertext()``), counted
 * up to ``limit`` (the walk stops there). */
static PyObject *text_count(PyObject *module, PyObject *args) {
    PyObject *element;
    long long limit;
    if (!PyArg_ParseTuple(args, "OL:text_count", &element, &limit)) return NULL;
    xmlNode *root = node_of(element);
    if (root == NULL) return NULL;
    long long count = 0;
    xmlNode *node = root->children;
    while (node != NULL && count < limit) {
        if (node->type == XML_ELEMENT_NODE) {
            if (node->children != NULL) {
                node = node->children;
                continue;
            }
        } else if ((node->type == XML_TEXT_NODE || node->type == XML_CDATA_SECTION_NODE) && node->content != NULL) {
            for (const unsigned char *c = node->content; *c; c++)
                if (*c != ' ' && *c != '\n' && (*c & 0xC0) != 0x80) count++;
        }
        while (node != NULL && node->next == NULL) {
            node = node->parent;
            if (node == root) node = NULL;
        }
        if (node != NULL) node = node->next;
    }
    return PyLong_FromLongLong(count < limit ? count : limit);
}


/* ------------------------------------------------------------- depth */

/* deeper_than(element, depth) -> bool
 * text.deeper_than's XPath (an absolute path of ``depth`` "*" steps, as a boolean) on ``element``'s
 * document: whether an element sits ``depth`` levels deep (the root element is level 1; only
 * elements count).  A walk that stops at the first such element and never goes below ``depth``. */
static PyObject *deeper_than(PyObject *module, PyObject *args) {
    PyObject *element;
    long depth;
    if (!PyArg_ParseTuple(args, "Ol:deeper_than", &element, &depth)) return NULL;
    xmlNode *start = node_of(element);
    if (start == NULL) return NULL;
    if (depth <= 0) Py_RETURN_TRUE; /* (no step: the document node itself) */
    xmlDoc *doc = start->doc;
    if (doc == NULL) Py_RETURN_FALSE;
    xmlNode *parent = (xmlNode *)doc;
    xmlNode *node = doc->children;
    long level = 1; /* of ``node`` */
    for (;;) {
        if (node == NULL) {
            if (parent == (xmlNode *)doc) Py_RETURN_FALSE;
            node = parent->next;
            parent = parent->parent;
            level--;
            continue;
        }
        if (node->type == XML_ELEMENT_NODE) {
            if (level >= depth) Py_RETURN_TRUE;
            if (node->children != NULL) {
                parent = node;
                node = node->children;
                level++;
                continue;
            }
        }
        node = node->next;
    }
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
    {"configure", configure, METH_VARARGS, "configure(not_rendered_tags, block_tags, hidden_style, aria_hidden)"},
    {"scan", scan, METH_VARARGS, "scan(root, tags, classify, cache) -> [(flags, element), ...]"},
    {"text_length", text_length, METH_VARARGS, "text_length(element, within) -> int"},
    {"text_count", text_count, METH_VARARGS, "text_count(element, limit) -> int"},
    {"deeper_than", deeper_than, METH_VARARGS, "deeper_than(element, depth) -> bool"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "simhash_scrapy.core.extract._walker", NULL, -1, methods};

PyMODINIT_FUNC PyInit__walker(void) {
    /* lxml's C API with its signature checks (lxml.etree_api.h): an lxml whose
     * API differs from the one this module was compiled against fails here. */
    if (import_lxml__etree() < 0) {
        PyObject *type, *value, *traceback;
        PyErr_Fetch(&type, &value, &traceback);
        PyErr_Format(PyExc_ImportError, "lxml's C API does not match the one simhash_scrapy.core.extract._walker was built with: %S",
                     value ? value : Py_None);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(traceback);
        return NULL;
    }
    PyObject *etree = PyImport_ImportModule("lxml.etree");
    if (etree == NULL) return NULL;
    element_type = (PyTypeObject *)PyObject_GetAttrString(etree, "_Element");
    Py_DECREF(etree);
    if (element_type == NULL) return NULL;
    if (!PyType_Check(element_type)) {
        Py_CLEAR(element_type);
        PyErr_SetString(PyExc_ImportError, "lxml.etree._Element is not a type");
        return NULL;
    }
    PyObject *module = PyModule_Create(&module_def);
    if (module == NULL) return NULL;
    /* The versions this module was compiled against: simhash_scrapy.core._native
     * compares them with the running lxml at import and falls back to the
     * pure-Python path when they differ. */
    if (PyModule_AddStringConstant(module, "BUILT_LXML_VERSION", LXML_VERSION_STRING) < 0 ||
        PyModule_AddStringConstant(module, "BUILT_LIBXML_VERSION", LIBXML_DOTTED_VERSION) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
