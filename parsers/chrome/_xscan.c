/* One pass over a JSON array of Chrome-trace events into the columns of its X events.
 *
 * gapscope.parsers.chrome.fastscan calls scan(text, raw_ts) on one part of the events
 * array (framed as its own JSON array) and builds the same EventColumns that
 * msgspec's typed decode followed by chrome.scan.scan_events gives. This file takes
 * only a strict subset of JSON and of the X event schema; on anything else (a syntax
 * error, an escaped key, a known key given twice, a field of the wrong type, a
 * surrogate escape, a number over 40 characters or with an exponent beyond 250, a
 * time whose exact nanosecond needs the decimal text) it returns None and the caller
 * decodes the part with msgspec as before, so the result never differs. It reads
 * the text only inside its bounds and never writes it.
 *
 * What it returns for each X event: raw value spans of name, cat and (pid, tid),
 * interned by their bytes (the caller decodes each unique span once with msgspec and
 * merges spellings Python finds equal, such as 1 and 1.0); ts and dur in int64 ns
 * with a status (0 OK, 1 missing), by the rules of chrome/times.py; the integer args
 * ids (correlation, device, stream, External id, external id; -1 when absent or
 * null) with an "odd" flag when one is not a plain int64 literal; and the span of
 * args, which the caller decodes for copies and odd events. Flow events (ph s, t, f)
 * are checked as msgspec checks their struct's fields (cat, pid, tid, ts, id: a
 * scalar; bp: a string or null) and returned as one JSON array of compact objects of
 * those fields alone, with each one's category interned: the caller counts them by
 * category and decodes them only when asked. Other events are returned as one JSON
 * array of their texts (each distinct M text once), for msgspec, and the index in it
 * of each. And the offset of every event's '{' (the lines of warnings and an event's
 * args are read there later, without a second scan of the text).
 *
 * device_events and device_scan find the events of some categories without reading
 * the rest, by searching for their "cat" key; device_scan reads each one found with
 * the same parser where it lies (the device preview's read).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__linux__)
#include <sys/mman.h>
#endif

#define BAIL (-1)
#define MAX_DEPTH 64
#define MAX_NUMBER_CHARS 40
#define MAX_EXPONENT 250
#define EXACT_LIMIT_US 8796093022208.0 /* 2**43 */
#define MAX_INT_US 9000000000000000ULL /* below times.py's 9.2e15 */

/* ---------- growable arrays ---------- */

/* On Linux each buffer is an anonymous map of its own, grown by mremap (no copy),
 * asked for transparent huge pages once it is large, and handed to Python as it is
 * (Block): the columns of a million events are never copied, and faulted in 2 MiB at
 * a time rather than 4 KiB (the scanner's system time was a third of its time).
 * Elsewhere malloc and realloc. */
#define HUGE_BYTES (2u << 20)

static void *region_grow(void *p, size_t old_cap, size_t cap) {
#if defined(__linux__)
    void *q = p ? mremap(p, old_cap, cap, MREMAP_MAYMOVE)
                : mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (q == MAP_FAILED)
        return NULL;
#if defined(MADV_HUGEPAGE)
    if (cap >= HUGE_BYTES && old_cap < HUGE_BYTES)
        madvise(q, cap, MADV_HUGEPAGE); /* advice: its failure changes nothing */
#endif
    return q;
#else
    (void)old_cap;
    return realloc(p, cap);
#endif
}

static void region_free(void *p, size_t cap) {
    if (!p)
        return;
#if defined(__linux__)
    munmap(p, cap);
#else
    (void)cap;
    free(p);
#endif
}

typedef struct {
    char *data;
    size_t len, cap;
} Buf;

static int buf_grow(Buf *b, size_t extra) {
    if (b->len + extra <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + extra) {
        if (cap > SIZE_MAX / 2)
            return BAIL;
        cap *= 2;
    }
    char *d = region_grow(b->data, b->cap, cap);
    if (!d)
        return BAIL;
    b->data = d;
    b->cap = cap;
    return 0;
}

static void buf_free(Buf *b) {
    region_free(b->data, b->cap);
    b->data = NULL;
    b->len = b->cap = 0;
}

/* ---------- Block: a buffer handed to Python without a copy ---------- */

typedef struct {
    PyObject_HEAD char *data;
    size_t len, cap;
} Block;

static char EMPTY[1];

static int block_getbuffer(PyObject *self, Py_buffer *view, int flags) {
    Block *b = (Block *)self;
    return PyBuffer_FillInfo(view, self, b->data ? b->data : EMPTY, (Py_ssize_t)b->len, 0, flags);
}

static void block_dealloc(PyObject *self) {
    Block *b = (Block *)self;
    region_free(b->data, b->cap);
    Py_TYPE(self)->tp_free(self);
}

static Py_ssize_t block_len(PyObject *self) { return (Py_ssize_t)((Block *)self)->len; }

static PyBufferProcs block_buffer = {block_getbuffer, NULL};
static PySequenceMethods block_sequence = {.sq_length = block_len};

static PyTypeObject BlockType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "gapscope.parsers.chrome._xscan.Block",
    .tp_basicsize = sizeof(Block),
    .tp_dealloc = block_dealloc,
    .tp_as_sequence = &block_sequence,
    .tp_as_buffer = &block_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Bytes the scanner wrote, as a writable buffer (its memory, not a copy).",
};

/* The Block of b's bytes, which it takes over (b is left empty); NULL on error. */
static PyObject *as_block(Buf *b) {
    Block *o = PyObject_New(Block, &BlockType);
    if (!o)
        return NULL;
    o->data = b->data;
    o->len = b->len;
    o->cap = b->cap;
    b->data = NULL;
    b->len = b->cap = 0;
    return (PyObject *)o;
}

static int push(Buf *b, const void *v, size_t size) {
    if (buf_grow(b, size))
        return BAIL;
    memcpy(b->data + b->len, v, size);
    b->len += size;
    return 0;
}

/* ---------- interning of raw spans ---------- */

typedef struct {
    int64_t s1, e1, s2, e2; /* spans into the text; s < 0: absent */
} Key;

typedef struct {
    int32_t *slots; /* id + 1; 0 = empty */
    uint64_t *hashes;
    size_t mask;
    Buf keys; /* Key[] */
    size_t n;
} Table;

static inline uint64_t load64(const unsigned char *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* Eight bytes a step (a byte a step cost a multiply per byte of every name); the
 * tail and the length go into the last step. mix64 finishes it (span_hash). */
static uint64_t hash_bytes(uint64_t h, const unsigned char *p, int64_t n) {
    const uint64_t k = 0x9e3779b97f4a7c15ULL;
    for (; n >= 8; p += 8, n -= 8) {
        h = (h ^ load64(p)) * k;
        h ^= h >> 29;
    }
    uint64_t t = 0;
    memcpy(&t, p, (size_t)n);
    h = (h ^ t ^ ((uint64_t)n << 59)) * k;
    return h ^ (h >> 29);
}

static int table_init(Table *t) {
    memset(t, 0, sizeof(*t));
    t->mask = 1023;
    t->slots = calloc(t->mask + 1, sizeof(int32_t));
    t->hashes = calloc(t->mask + 1, sizeof(uint64_t));
    return (t->slots && t->hashes) ? 0 : BAIL;
}

static void table_free(Table *t) {
    free(t->slots);
    free(t->hashes);
    buf_free(&t->keys);
}

static int span_eq(const unsigned char *base, int64_t s1, int64_t e1, int64_t s2, int64_t e2) {
    if (s1 < 0 || s2 < 0)
        return s1 < 0 && s2 < 0;
    return e1 - s1 == e2 - s2 && memcmp(base + s1, base + s2, (size_t)(e1 - s1)) == 0;
}

static int table_rehash(Table *t) {
    size_t cap = (t->mask + 1) * 2;
    int32_t *slots = calloc(cap, sizeof(int32_t));
    uint64_t *hashes = calloc(cap, sizeof(uint64_t));
    if (!slots || !hashes) {
        free(slots);
        free(hashes);
        return BAIL;
    }
    for (size_t i = 0; i <= t->mask; i++) {
        if (!t->slots[i])
            continue;
        size_t j = t->hashes[i] & (cap - 1);
        while (slots[j])
            j = (j + 1) & (cap - 1);
        slots[j] = t->slots[i];
        hashes[j] = t->hashes[i];
    }
    free(t->slots);
    free(t->hashes);
    t->slots = slots;
    t->hashes = hashes;
    t->mask = cap - 1;
    return 0;
}

/* Probes before giving up: a text built so that many keys collide would otherwise
 * make interning quadratic; past this the scanner refuses the text, and msgspec
 * (Python's dicts, with their seeded hash) reads it. At most half full, a table of
 * honest keys stays well below it: an attacker measured the longest run of 1M honest
 * keys at 36-62 probes (so 64 could refuse a part by chance); 128 colliding lookups
 * still cost a bounded, linear amount. */
#define MAX_PROBES 128

/* murmur3's 64-bit finaliser: every output bit depends on every input bit. FNV-1a's
 * low bits depend only on the low bits of the input, so keys that differ in step (a
 * pid and a tid that are the same number, thread after thread) would share slots. */
static inline uint64_t mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

static uint64_t span_hash(const unsigned char *base, int64_t s, int64_t e, uint64_t seed) {
    return s < 0 ? seed : mix64(hash_bytes(0xcbf29ce484222325ULL ^ seed, base + s, e - s));
}

/* Dense id of the key (first seen first), or -1 on memory failure or too many probes. */
static int32_t intern(Table *t, const unsigned char *base, Key k) {
    uint64_t h = mix64(span_hash(base, k.s1, k.e1, 1) ^ (span_hash(base, k.s2, k.e2, 2) + 0x9e3779b97f4a7c15ULL));
    size_t j = h & t->mask;
    const Key *keys = (const Key *)t->keys.data;
    int probes = 0;
    while (t->slots[j]) {
        if (t->hashes[j] == h) {
            const Key *o = &keys[t->slots[j] - 1];
            if (span_eq(base, o->s1, o->e1, k.s1, k.e1) && span_eq(base, o->s2, o->e2, k.s2, k.e2))
                return t->slots[j] - 1;
        }
        if (++probes > MAX_PROBES)
            return -1;
        j = (j + 1) & t->mask;
    }
    if (t->n >= INT32_MAX - 1 || push(&t->keys, &k, sizeof(k)))
        return -1;
    int32_t id = (int32_t)t->n++;
    t->slots[j] = id + 1;
    t->hashes[j] = h;
    if (t->n * 2 > t->mask && table_rehash(t))
        return -1;
    return id;
}

/* ---------- the parser ---------- */

typedef struct {
    const unsigned char *base, *p, *end;
} P;

static inline void ws(P *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\n' || *c->p == '\r' || *c->p == '\t'))
        c->p++;
}

static inline int hexval(unsigned char ch) {
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* Length of the valid UTF-8 sequence at p (a byte >= 0x80), 0 when invalid. */
static int utf8_len(const unsigned char *p, const unsigned char *end) {
    unsigned char b0 = p[0];
    int n;
    unsigned char lo = 0x80, hi = 0xBF;
    if (b0 >= 0xC2 && b0 <= 0xDF)
        n = 2;
    else if (b0 >= 0xE0 && b0 <= 0xEF) {
        n = 3;
        if (b0 == 0xE0)
            lo = 0xA0;
        else if (b0 == 0xED)
            hi = 0x9F;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        n = 4;
        if (b0 == 0xF0)
            lo = 0x90;
        else if (b0 == 0xF4)
            hi = 0x8F;
    } else
        return 0;
    if (end - p < n)
        return 0;
    if (p[1] < lo || p[1] > hi)
        return 0;
    for (int k = 2; k < n; k++)
        if (p[k] < 0x80 || p[k] > 0xBF)
            return 0;
    return n;
}

/* Bytes that a string holds as themselves: printable ASCII but '"' and '\\'. */
static unsigned char PLAIN[256];

static void init_plain(void) {
    for (int b = 0x20; b < 0x80; b++)
        PLAIN[b] = b != '"' && b != '\\';
}

/* Nonzero when one of the eight bytes of w is not PLAIN: below 0x20, '"', '\\' or
 * 0x80 and above (the "has a byte less than n" and "has a zero byte" word tests:
 * exact for whether any byte matches). */
static inline uint64_t special8(uint64_t w) {
    const uint64_t ones = 0x0101010101010101ULL, high = 0x8080808080808080ULL;
    uint64_t q = w ^ (ones * '"'), b = w ^ (ones * '\\');
    return (((w - ones * 0x20) & ~w) | ((q - ones) & ~q) | ((b - ones) & ~b) | w) & high;
}

/* The first byte at or after p that is not PLAIN (or end): eight bytes a step, the
 * lowest flagged byte of the word being the first (a little-endian load; the word
 * tests flag false bytes only above a true one). */
static inline const unsigned char *plain_run(const unsigned char *p, const unsigned char *end) {
#if defined(__SSE2__)
    /* sixteen at a time first: a signed compare below 0x20 flags the controls and the
     * bytes from 0x80 (negative as signed) at once */
    const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\'), space = _mm_set1_epi8(0x20);
    for (; end - p >= 16; p += 16) {
        __m128i w = _mm_loadu_si128((const __m128i *)p);
        __m128i odd = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(w, quote), _mm_cmpeq_epi8(w, backslash)),
                                   _mm_cmplt_epi8(w, space));
        unsigned mask = (unsigned)_mm_movemask_epi8(odd);
        if (mask)
            return p + __builtin_ctz(mask);
    }
#endif
#if defined(__GNUC__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    for (; end - p >= 8; p += 8) {
        uint64_t m = special8(load64(p));
        if (m)
            return p + (__builtin_ctzll(m) >> 3);
    }
#endif
    while (p < end && PLAIN[*p])
        p++;
    return p;
}

/* A string at c->p (its opening quote). Sets [*s, *e) to the whole literal, quotes
 * included, and *esc when it holds an escape. */
static int str_(P *c, int64_t *s, int64_t *e, int *esc) {
    const unsigned char *p = c->p + 1, *end = c->end;
    *esc = 0;
    for (;;) {
        p = plain_run(p, end);
        if (p >= end)
            return BAIL;
        unsigned char ch = *p;
        if (ch == '"') {
            *s = c->p - c->base;
            *e = p + 1 - c->base;
            c->p = p + 1;
            return 0;
        }
        if (ch == '\\') {
            *esc = 1;
            if (end - p < 2)
                return BAIL;
            unsigned char x = p[1];
            if (x == '"' || x == '\\' || x == '/' || x == 'b' || x == 'f' || x == 'n' || x == 'r' || x == 't') {
                p += 2;
                continue;
            }
            if (x != 'u' || end - p < 6)
                return BAIL;
            unsigned v = 0;
            for (int k = 2; k < 6; k++) {
                int h = hexval(p[k]);
                if (h < 0)
                    return BAIL;
                v = v * 16 + (unsigned)h;
            }
            if (v >= 0xD800 && v <= 0xDFFF) /* surrogates: left to msgspec */
                return BAIL;
            p += 6;
            continue;
        }
        if (ch < 0x20)
            return BAIL;
        int n = utf8_len(p, end);
        if (!n)
            return BAIL;
        p += n;
    }
}

typedef struct {
    int64_t s, e; /* the literal */
    int neg, is_int, nfrac, has_exp, zero;
} Num;

static inline int is_digit(unsigned char ch) { return ch >= '0' && ch <= '9'; }

static int num_(P *c, Num *n) {
    const unsigned char *p = c->p, *end = c->end, *start = c->p;
    n->neg = n->nfrac = n->has_exp = 0;
    n->is_int = n->zero = 1;
    if (p < end && *p == '-') {
        n->neg = 1;
        p++;
    }
    if (p >= end)
        return BAIL;
    if (*p == '0')
        p++;
    else if (*p >= '1' && *p <= '9') {
        n->zero = 0;
        while (p < end && is_digit(*p))
            p++;
    } else
        return BAIL;
    if (p < end && *p == '.') {
        n->is_int = 0;
        const unsigned char *f = ++p;
        while (p < end && is_digit(*p)) {
            if (*p != '0')
                n->zero = 0;
            p++;
        }
        if (p == f)
            return BAIL;
        n->nfrac = (int)(p - f);
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        n->is_int = 0;
        n->has_exp = 1;
        p++;
        if (p < end && (*p == '+' || *p == '-'))
            p++;
        const unsigned char *d = p;
        int x = 0;
        while (p < end && is_digit(*p)) {
            if (x <= MAX_EXPONENT)
                x = x * 10 + (*p - '0');
            p++;
        }
        if (p == d || x > MAX_EXPONENT)
            return BAIL;
    }
    if (p - start > MAX_NUMBER_CHARS)
        return BAIL;
    n->s = start - c->base;
    n->e = p - c->base;
    c->p = p;
    return 0;
}

static int skip(P *c, int depth);

static int lit(P *c, const char *word, size_t len) {
    if ((size_t)(c->end - c->p) < len || memcmp(c->p, word, len) != 0)
        return BAIL;
    c->p += len;
    return 0;
}

/* Any JSON value at c->p, checked and passed over. */
static int skip(P *c, int depth) {
    if (c->p >= c->end)
        return BAIL;
    int64_t s, e;
    int esc;
    Num n;
    switch (*c->p) {
    case '"':
        return str_(c, &s, &e, &esc);
    case '{':
    case '[': {
        unsigned char close = *c->p == '{' ? '}' : ']';
        int obj = close == '}';
        if (depth >= MAX_DEPTH)
            return BAIL;
        c->p++;
        ws(c);
        if (c->p < c->end && *c->p == close) {
            c->p++;
            return 0;
        }
        for (;;) {
            if (obj) {
                if (c->p >= c->end || *c->p != '"' || str_(c, &s, &e, &esc))
                    return BAIL;
                ws(c);
                if (c->p >= c->end || *c->p != ':')
                    return BAIL;
                c->p++;
                ws(c);
            }
            if (skip(c, depth + 1))
                return BAIL;
            ws(c);
            if (c->p >= c->end)
                return BAIL;
            if (*c->p == ',') {
                c->p++;
                ws(c);
                continue;
            }
            if (*c->p == close) {
                c->p++;
                return 0;
            }
            return BAIL;
        }
    }
    case 't':
        return lit(c, "true", 4);
    case 'f':
        return lit(c, "false", 5);
    case 'n':
        return lit(c, "null", 4);
    default:
        return num_(c, &n);
    }
}

/* Value types of a scalar field. */
enum { V_ABSENT, V_NULL, V_NUM, V_STR, V_OTHER };

typedef struct {
    int type;
    int64_t s, e; /* literal span */
    Num num;
} Val;

/* A value of a field typed int | float | str | None: its type and span; other
 * values are passed over as V_OTHER. */
static int scalar(P *c, Val *v) {
    if (c->p >= c->end)
        return BAIL;
    unsigned char ch = *c->p;
    if (ch == '"') {
        int esc;
        v->type = V_STR;
        return str_(c, &v->s, &v->e, &esc);
    }
    if (ch == 'n') {
        v->type = V_NULL;
        v->s = c->p - c->base;
        if (lit(c, "null", 4))
            return BAIL;
        v->e = c->p - c->base;
        return 0;
    }
    if (ch == '-' || is_digit(ch)) {
        v->type = V_NUM;
        if (num_(c, &v->num))
            return BAIL;
        v->s = v->num.s;
        v->e = v->num.e;
        return 0;
    }
    v->type = V_OTHER;
    return skip(c, 1);
}

static int num_int64(const unsigned char *base, const Num *n, int64_t *out) {
    const unsigned char *p = base + n->s + n->neg, *end = base + n->e;
    uint64_t v = 0;
    for (; p < end; p++) {
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10)
            return BAIL;
        v = v * 10 + d;
    }
    if (n->neg) {
        if (v > (uint64_t)INT64_MAX + 1)
            return BAIL;
        *out = (int64_t)(0 - v);
    } else {
        if (v > (uint64_t)INT64_MAX)
            return BAIL;
        *out = (int64_t)v;
    }
    return 0;
}

/* int64 ns of a ts/dur number as chrome/times.py's float path gives it
 * (floor(v) * 1000 + rint(frac(v) * 1000) below 2**43 µs; integers exact below
 * 9e15 µs); BAIL where that path needs the decimal text or flags the value. */
static int num_ns(const unsigned char *base, const Num *n, int64_t *ns) {
    if (!n->has_exp && n->nfrac <= 3) {
        const unsigned char *p = base + n->s + n->neg, *end = base + n->e;
        uint64_t whole = 0;
        for (; p < end && *p != '.'; p++) {
            whole = whole * 10 + (uint64_t)(*p - '0');
            if (whole >= MAX_INT_US)
                return BAIL;
        }
        if (!n->is_int && (double)whole >= EXACT_LIMIT_US)
            return BAIL; /* times.py: NEED_EXACT */
        int64_t frac = 0;
        if (p < end) { /* '.' then 1-3 digits (checked again: the text is not ours) */
            int k = 0;
            for (p++; p < end; p++, k++) {
                if (k >= 3 || !is_digit(*p))
                    return BAIL;
                frac = frac * 10 + (*p - '0');
            }
            for (; k < 3; k++)
                frac *= 10;
        }
        int64_t v = (int64_t)whole * 1000 + frac;
        *ns = n->neg ? -v : v;
        return 0;
    }
    char tmp[MAX_NUMBER_CHARS + 1];
    size_t len = (size_t)(n->e - n->s);
    memcpy(tmp, base + n->s, len);
    tmp[len] = 0;
    /* Python's own correctly rounded, locale-independent parser (as msgspec's) */
    PyGILState_STATE gil = PyGILState_Ensure();
    double d = PyOS_string_to_double(tmp, NULL, NULL);
    int failed = d == -1.0 && PyErr_Occurred();
    if (failed)
        PyErr_Clear();
    PyGILState_Release(gil);
    if (failed)
        return BAIL;
    if (!(fabs(d) < EXACT_LIMIT_US))
        return BAIL;
    double fl = floor(d);
    *ns = (int64_t)fl * 1000 + (int64_t)nearbyint((d - fl) * 1000.0);
    return 0;
}

/* Exact int64 ns of a ts kept as text (times.py raw_to_ns / _parse_fixed: at most
 * 16 integer digits and 32 characters, the rest rounded half to even). */
static int raw_ns(const unsigned char *base, const Num *n, int64_t *ns) {
    if (n->has_exp || n->e - n->s > 32)
        return BAIL;
    const unsigned char *p = base + n->s + n->neg, *end = base + n->e;
    uint64_t whole = 0;
    int digits = 0;
    for (; p < end && *p != '.'; p++, digits++)
        whole = whole * 10 + (uint64_t)(*p - '0');
    if (digits > 16 || whole >= MAX_INT_US)
        return BAIL;
    int64_t f3 = 0, d4 = 0;
    int k = 0, rest = 0;
    if (p < end)
        for (p++; p < end; p++, k++) {
            int d = *p - '0';
            if (k < 3)
                f3 = f3 * 10 + d;
            else if (k == 3)
                d4 = d;
            else if (d)
                rest = 1;
        }
    for (int j = k; j < 3; j++)
        f3 *= 10;
    int64_t b = (int64_t)whole * 1000 + f3;
    b += (d4 > 5) || (d4 == 5 && (rest || (b & 1)));
    *ns = n->neg ? -b : b;
    return 0;
}

/* The fields of one event that the X columns need. */
enum { K_PH, K_NAME, K_CAT, K_PID, K_TID, K_TS, K_DUR, K_BIND, K_FIN, K_FOUT, K_ARGS, K_ID, K_BP };
/* The fields of a flow event's struct (chrome/schema.py _FlowEvent): an object or
 * array in one makes msgspec refuse the event, and so does a number or a boolean in
 * bp (str | None). */
#define FLOW_FIELDS ((1u << K_CAT) | (1u << K_PID) | (1u << K_TID) | (1u << K_TS) | (1u << K_ID) | (1u << K_BP))
enum { A_CORR, A_DEV, A_STREAM, A_EXT, A_EXT_OLD, A_BYTES, A_SIZE, A_MK, A_KIND, A_SRC, A_DST };

typedef struct {
    int is_x, is_m, bad;
    char flow; /* 's', 't' or 'f' for a flow event, else 0 */
    unsigned seen, seen_args;
    unsigned other_vals; /* bit K_*: that field held an object, an array or a boolean */
    Val name, cat, pid, tid, ts, dur, bind, id, bp;
    int64_t ids[5];
    int odd;
    int64_t args_s, args_e;
} Ev;

static int key_of(const unsigned char *k, int64_t n) {
    switch (n) {
    case 2:
        if (!memcmp(k, "ph", 2))
            return K_PH;
        if (!memcmp(k, "ts", 2))
            return K_TS;
        if (!memcmp(k, "id", 2))
            return K_ID;
        if (!memcmp(k, "bp", 2))
            return K_BP;
        break;
    case 3:
        if (!memcmp(k, "cat", 3))
            return K_CAT;
        if (!memcmp(k, "pid", 3))
            return K_PID;
        if (!memcmp(k, "tid", 3))
            return K_TID;
        if (!memcmp(k, "dur", 3))
            return K_DUR;
        break;
    case 4:
        if (!memcmp(k, "name", 4))
            return K_NAME;
        if (!memcmp(k, "args", 4))
            return K_ARGS;
        break;
    case 7:
        if (!memcmp(k, "bind_id", 7))
            return K_BIND;
        if (!memcmp(k, "flow_in", 7))
            return K_FIN;
        break;
    case 8:
        if (!memcmp(k, "flow_out", 8))
            return K_FOUT;
        break;
    }
    return -1;
}

static int arg_key_of(const unsigned char *k, int64_t n) {
    switch (n) {
    case 4:
        if (!memcmp(k, "size", 4))
            return A_SIZE;
        if (!memcmp(k, "kind", 4))
            return A_KIND;
        break;
    case 5:
        if (!memcmp(k, "bytes", 5))
            return A_BYTES;
        break;
    case 6:
        if (!memcmp(k, "device", 6))
            return A_DEV;
        if (!memcmp(k, "stream", 6))
            return A_STREAM;
        break;
    case 8:
        if (!memcmp(k, "src kind", 8))
            return A_SRC;
        if (!memcmp(k, "dst kind", 8))
            return A_DST;
        break;
    case 11:
        if (!memcmp(k, "correlation", 11))
            return A_CORR;
        if (!memcmp(k, "External id", 11))
            return A_EXT;
        if (!memcmp(k, "external id", 11))
            return A_EXT_OLD;
        if (!memcmp(k, "memcpy kind", 11))
            return A_MK;
        break;
    }
    return -1;
}

/* A key at c->p, then its colon: *k, *n the key's text (no escapes allowed). */
static int key_(P *c, const unsigned char **k, int64_t *n) {
    int64_t s, e;
    int esc;
    if (c->p >= c->end || *c->p != '"' || str_(c, &s, &e, &esc) || esc)
        return BAIL;
    *k = c->base + s + 1;
    *n = e - s - 2;
    ws(c);
    if (c->p >= c->end || *c->p != ':')
        return BAIL;
    c->p++;
    ws(c);
    return 0;
}

/* After a member: ',' (more: 1) or the closing brace (0). */
static int next_member(P *c) {
    ws(c);
    if (c->p < c->end && *c->p == ',') {
        c->p++;
        ws(c);
        return 1;
    }
    if (c->p < c->end && *c->p == '}') {
        c->p++;
        return 0;
    }
    return BAIL;
}

static int args_(P *c, Ev *ev) {
    ev->args_s = c->p - c->base;
    c->p++;
    ws(c);
    if (c->p < c->end && *c->p == '}') {
        c->p++;
        ev->args_e = c->p - c->base;
        return 0;
    }
    for (;;) {
        const unsigned char *k;
        int64_t n;
        if (key_(c, &k, &n))
            return BAIL;
        int a = arg_key_of(k, n);
        if (a < 0) {
            if (skip(c, 2))
                return BAIL;
        } else {
            Val v;
            if (ev->seen_args & (1u << a))
                ev->bad = 1;
            ev->seen_args |= 1u << a;
            if (scalar(c, &v))
                return BAIL;
            if (v.type == V_OTHER)
                ev->bad = 1;
            if (a <= A_EXT_OLD) {
                if (v.type == V_NUM && v.num.is_int) {
                    if (num_int64(c->base, &v.num, &ev->ids[a]))
                        ev->odd = 1;
                } else if (v.type != V_NULL)
                    ev->odd = 1;
            }
        }
        int more = next_member(c);
        if (more < 0)
            return BAIL;
        if (!more)
            break;
    }
    ev->args_e = c->p - c->base;
    return 0;
}

static int event_(P *c, Ev *ev) {
    memset(ev, 0, sizeof(*ev));
    for (int i = 0; i < 5; i++)
        ev->ids[i] = -1;
    ev->args_s = ev->args_e = -1;
    c->p++; /* '{' */
    ws(c);
    if (c->p < c->end && *c->p == '}') {
        c->p++;
        return 0;
    }
    for (;;) {
        const unsigned char *k;
        int64_t n;
        if (key_(c, &k, &n))
            return BAIL;
        int f = key_of(k, n);
        if (f >= 0) {
            if (ev->seen & (1u << f))
                return BAIL; /* a known key twice: which one msgspec keeps is its business */
            ev->seen |= 1u << f;
        }
        Val *slot = NULL;
        switch (f) {
        case K_PH:
            if (c->p < c->end && *c->p == '"') {
                int64_t s, e;
                int esc;
                if (str_(c, &s, &e, &esc) || esc)
                    return BAIL;
                unsigned char ph = e - s == 3 ? c->base[s + 1] : 0;
                ev->is_x = ph == 'X';
                ev->is_m = ph == 'M';
                ev->flow = (ph == 's' || ph == 't' || ph == 'f') ? (char)ph : 0;
            } else if (skip(c, 1))
                return BAIL;
            break;
        case K_NAME:
            slot = &ev->name;
            break;
        case K_CAT:
            slot = &ev->cat;
            break;
        case K_PID:
            slot = &ev->pid;
            break;
        case K_TID:
            slot = &ev->tid;
            break;
        case K_TS:
            slot = &ev->ts;
            break;
        case K_DUR:
            slot = &ev->dur;
            break;
        case K_BIND:
            slot = &ev->bind;
            break;
        case K_ID:
            slot = &ev->id;
            break;
        case K_BP:
            slot = &ev->bp;
            break;
        case K_FIN:
        case K_FOUT:
            if (c->p < c->end && *c->p == 't') {
                if (lit(c, "true", 4))
                    return BAIL;
            } else if (c->p < c->end && *c->p == 'f') {
                if (lit(c, "false", 5))
                    return BAIL;
            } else if (c->p < c->end && *c->p == 'n') {
                if (lit(c, "null", 4))
                    return BAIL;
            } else {
                ev->bad = 1;
                if (skip(c, 1))
                    return BAIL;
            }
            break;
        case K_ARGS:
            if (c->p < c->end && *c->p == '{') {
                if (args_(c, ev))
                    return BAIL;
            } else {
                ev->bad = 1;
                if (skip(c, 1))
                    return BAIL;
            }
            break;
        default:
            if (skip(c, 1))
                return BAIL;
        }
        if (slot) {
            if (scalar(c, slot))
                return BAIL;
            if (slot->type == V_OTHER) {
                ev->other_vals |= 1u << f;
                if (f != K_ID && f != K_BP) /* an X event has neither field: any value passes */
                    ev->bad = 1;
            }
        }
        int more = next_member(c);
        if (more < 0)
            return BAIL;
        if (!more)
            return 0;
    }
}

/* Truthiness of a bind_id as Python sees the decoded value. */
static int truthy(const Val *v) {
    if (v->type == V_STR)
        return v->e - v->s > 2;
    if (v->type == V_NUM)
        return !v->num.zero;
    return 0;
}

static int time_of(const unsigned char *base, const Val *v, int raw, int64_t *ns, int8_t *status) {
    *ns = 0;
    *status = 0;
    if (v->type == V_ABSENT || v->type == V_NULL) {
        *status = 1; /* MISSING */
        return 0;
    }
    if (v->type != V_NUM)
        return BAIL;
    return raw ? raw_ns(base, &v->num, ns) : num_ns(base, &v->num, ns);
}

static Key span_key(const Val *a, const Val *b) {
    Key k = {-1, -1, -1, -1};
    if (a->type != V_ABSENT) {
        k.s1 = a->s;
        k.e1 = a->e;
    }
    if (b && b->type != V_ABSENT) {
        k.s2 = b->s;
        k.e2 = b->e;
    }
    return k;
}

enum {
    C_ISX,
    C_OTHER,
    C_OTHER_ID,
    C_NAME,
    C_CAT,
    C_LANE,
    C_TS,
    C_TS_ST,
    C_DUR,
    C_DUR_ST,
    C_CORR,
    C_DEV,
    C_STREAM,
    C_EXT,
    C_EXT_OLD,
    C_ODD,
    C_ARGS,
    C_FLOW,
    C_FLOW_CAT,
    C_START,
    N_COLS
};

/* Tables: names, categories and lanes of X events; distinct M texts; categories of
 * flow events. */
#define N_TABS 5

static int push_val(Buf *o, const unsigned char *base, const char *key, const Val *v) {
    if (v->type == V_ABSENT)
        return 0;
    return push(o, key, strlen(key)) || push(o, base + v->s, (size_t)(v->e - v->s));
}

/* A flow event as the JSON object of the fields its struct reads (ph, cat, pid, tid,
 * ts, id, bp: the same values, none of the rest), appended to the array in o. */
static int flow_text(const unsigned char *base, const Ev *ev, Buf *o) {
    char head[10] = "{\"ph\":\"s\"";
    head[7] = ev->flow;
    return push(o, o->len ? "," : "[", 1) || push(o, head, 9) || push_val(o, base, ",\"cat\":", &ev->cat) ||
           push_val(o, base, ",\"pid\":", &ev->pid) || push_val(o, base, ",\"tid\":", &ev->tid) ||
           push_val(o, base, ",\"ts\":", &ev->ts) || push_val(o, base, ",\"id\":", &ev->id) ||
           push_val(o, base, ",\"bp\":", &ev->bp) || push(o, "}", 1);
}

/* One event parsed by event_ from text[start, stop) into the columns: an X event's
 * values, or another event's text (each distinct M text once). */
static int emit(const unsigned char *base, const Ev *ev, int64_t start, int64_t stop, int raw, Buf *cols, Table *tabs,
                Buf *m_texts, int32_t *n_texts, int *has_bind) {
    uint8_t isx = ev->is_x ? 1 : ev->flow ? 2 : 0;
    if (push(&cols[C_ISX], &isx, 1) || push(&cols[C_START], &start, 8))
        return BAIL;
    if (ev->flow) {
        /* kept as a compact text, decoded only if a flow is asked for; its category
         * interned now (the loader counts flows by category) */
        if ((ev->other_vals & FLOW_FIELDS) || ev->bp.type == V_NUM)
            return BAIL;
        int32_t cat = intern(&tabs[4], base, span_key(&ev->cat, NULL));
        if (cat < 0 || push(&cols[C_FLOW_CAT], &cat, 4) || flow_text(base, ev, &cols[C_FLOW]))
            return BAIL;
    } else if (!ev->is_x) {
        /* in one JSON array for msgspec; each distinct M text once (metadata-heavy
         * traces repeat a few M events hundreds of thousands of times; flow events,
         * the bulk of the others, are all distinct) */
        int32_t id = *n_texts;
        int fresh = 1;
        if (ev->is_m) {
            Key k = {start, stop, -1, -1};
            size_t known = tabs[3].n;
            int32_t m = intern(&tabs[3], base, k);
            if (m < 0)
                return BAIL;
            if (tabs[3].n > known) { /* a new text: remember where it goes */
                if (push(m_texts, &id, 4))
                    return BAIL;
            } else {
                id = ((const int32_t *)m_texts->data)[m];
                fresh = 0;
            }
        }
        if (push(&cols[C_OTHER_ID], &id, 4))
            return BAIL;
        Buf *o = &cols[C_OTHER];
        if (fresh) {
            if (push(o, o->len ? "," : "[", 1) || push(o, base + start, (size_t)(stop - start)))
                return BAIL;
            if (*n_texts == INT32_MAX)
                return BAIL;
            (*n_texts)++;
        }
    } else {
        if (ev->bad || ev->bind.type == V_OTHER)
            return BAIL;
        int64_t ts, dur;
        int8_t ts_st, dur_st;
        if (time_of(base, &ev->ts, raw, &ts, &ts_st) || time_of(base, &ev->dur, 0, &dur, &dur_st))
            return BAIL;
        int32_t ids[3] = {
            intern(&tabs[0], base, span_key(&ev->name, NULL)),
            intern(&tabs[1], base, span_key(&ev->cat, NULL)),
            intern(&tabs[2], base, span_key(&ev->pid, &ev->tid)),
        };
        if (ids[0] < 0 || ids[1] < 0 || ids[2] < 0)
            return BAIL;
        uint8_t odd = (uint8_t)ev->odd;
        int64_t args[2] = {ev->args_s, ev->args_e};
        if (push(&cols[C_NAME], &ids[0], 4) || push(&cols[C_CAT], &ids[1], 4) ||
            push(&cols[C_LANE], &ids[2], 4) || push(&cols[C_TS], &ts, 8) || push(&cols[C_TS_ST], &ts_st, 1) ||
            push(&cols[C_DUR], &dur, 8) || push(&cols[C_DUR_ST], &dur_st, 1) ||
            push(&cols[C_CORR], &ev->ids[A_CORR], 8) || push(&cols[C_DEV], &ev->ids[A_DEV], 8) ||
            push(&cols[C_STREAM], &ev->ids[A_STREAM], 8) || push(&cols[C_EXT], &ev->ids[A_EXT], 8) ||
            push(&cols[C_EXT_OLD], &ev->ids[A_EXT_OLD], 8) || push(&cols[C_ODD], &odd, 1) ||
            push(&cols[C_ARGS], args, sizeof(args)))
            return BAIL;
        if (truthy(&ev->bind))
            *has_bind = 1;
    }
    return 0;
}

/* The closing brackets of the arrays of texts (other events, flows). */
static int close_arrays(Buf *cols) {
    return push(&cols[C_OTHER], cols[C_OTHER].len ? "]" : "[]", cols[C_OTHER].len ? 1 : 2) ||
           push(&cols[C_FLOW], cols[C_FLOW].len ? "]" : "[]", cols[C_FLOW].len ? 1 : 2);
}

/* The whole array. m_texts: for each distinct M text (tabs[3] id), its index among
 * the texts in cols[C_OTHER]. */
static int run(P *c, int raw, Buf *cols, Table *tabs, Buf *m_texts, int *has_bind) {
    int32_t n_texts = 0;
    ws(c);
    if (c->p >= c->end || *c->p != '[')
        return BAIL;
    c->p++;
    ws(c);
    if (c->p < c->end && *c->p == ']') {
        c->p++;
    } else {
        for (;;) {
            if (c->p >= c->end || *c->p != '{')
                return BAIL;
            int64_t start = c->p - c->base;
            Ev ev;
            if (event_(c, &ev))
                return BAIL;
            int64_t stop = c->p - c->base;
            if (emit(c->base, &ev, start, stop, raw, cols, tabs, m_texts, &n_texts, has_bind))
                return BAIL;
            ws(c);
            if (c->p < c->end && *c->p == ',') {
                c->p++;
                ws(c);
                continue;
            }
            if (c->p < c->end && *c->p == ']') {
                c->p++;
                break;
            }
            return BAIL;
        }
    }
    ws(c);
    if (c->p != c->end)
        return BAIL;
    return close_arrays(cols);
}

/* The tuple scan returns for the columns and tables filled (see PyMethodDef), with
 * extra (a new reference, or NULL for none) appended; NULL on a Python error. */
static PyObject *scan_tuple(Buf *cols, Table *tabs, int has_bind, PyObject *extra) {
    Py_ssize_t n = N_COLS + 5 + (extra != NULL);
    PyObject *out = PyTuple_New(n);
    if (!out) {
        Py_XDECREF(extra);
        return NULL;
    }
    for (int i = 0; i < N_COLS; i++)
        PyTuple_SET_ITEM(out, i, as_block(&cols[i]));
    for (int i = 0; i < 3; i++)
        PyTuple_SET_ITEM(out, N_COLS + i, as_block(&tabs[i].keys));
    PyTuple_SET_ITEM(out, N_COLS + 3, PyBool_FromLong(has_bind));
    PyTuple_SET_ITEM(out, N_COLS + 4, as_block(&tabs[4].keys));
    if (extra)
        PyTuple_SET_ITEM(out, N_COLS + 5, extra);
    for (Py_ssize_t i = 0; i < n; i++)
        if (!PyTuple_GET_ITEM(out, i)) {
            Py_CLEAR(out);
            break;
        }
    return out;
}

static void scan_free(Buf *cols, Table *tabs, Buf *m_texts) {
    for (int i = 0; i < N_COLS; i++)
        buf_free(&cols[i]);
    for (int i = 0; i < N_TABS; i++)
        table_free(&tabs[i]);
    buf_free(m_texts);
}

static PyObject *scan(PyObject *self, PyObject *args) {
    Py_buffer view;
    int raw;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*p", &view, &raw))
        return NULL;
    Buf cols[N_COLS], m_texts = {NULL, 0, 0};
    Table tabs[N_TABS];
    memset(cols, 0, sizeof(cols));
    int ok = 1, has_bind = 0;
    for (int i = 0; i < N_TABS; i++)
        if (table_init(&tabs[i]))
            ok = 0;
    P c = {(const unsigned char *)view.buf, (const unsigned char *)view.buf,
           (const unsigned char *)view.buf + view.len};
    if (ok) {
        Py_BEGIN_ALLOW_THREADS;
        ok = run(&c, raw, cols, tabs, &m_texts, &has_bind) == 0;
        Py_END_ALLOW_THREADS;
    }
    PyObject *out = ok ? scan_tuple(cols, tabs, has_bind, NULL) : Py_NewRef(Py_None);
    scan_free(cols, tabs, &m_texts);
    PyBuffer_Release(&view);
    return out;
}

/* ---------- device-op events found without parsing the rest ---------- */

/* Where a "cat" string token is in [p, end): sixteen bytes a step with SSE2 (x86-64's
 * baseline), testing the three bytes '"', 'c' and the closing '"' at once and the rest of
 * each candidate afterwards (JSON is full of quotes, so a search led by one byte stops
 * at nearly every key: memmem was about 3x slower on a Kineto trace); memmem, or
 * memchr and memcmp, for the tail and elsewhere. */
static const unsigned char *find_cat(const unsigned char *p, const unsigned char *end) {
#if defined(__SSE2__)
    const __m128i quote = _mm_set1_epi8('"'), c = _mm_set1_epi8('c');
    for (; end - p >= 16 + 4; p += 16) {
        __m128i at0 = _mm_loadu_si128((const __m128i *)p);
        __m128i at1 = _mm_loadu_si128((const __m128i *)(p + 1));
        __m128i at4 = _mm_loadu_si128((const __m128i *)(p + 4));
        __m128i hit = _mm_and_si128(_mm_and_si128(_mm_cmpeq_epi8(at0, quote), _mm_cmpeq_epi8(at1, c)),
                                    _mm_cmpeq_epi8(at4, quote));
        unsigned mask = (unsigned)_mm_movemask_epi8(hit);
        while (mask) {
            int i = __builtin_ctz(mask);
            if (p[i + 2] == 'a' && p[i + 3] == 't')
                return p + i;
            mask &= mask - 1;
        }
    }
#endif
#if defined(__GLIBC__) || defined(__APPLE__) || defined(__FreeBSD__)
    return end - p >= 5 ? (const unsigned char *)memmem(p, (size_t)(end - p), "\"cat\"", 5) : NULL;
#else
    for (; end - p >= 5; p++) {
        p = memchr(p, '"', (size_t)(end - p - 4));
        if (!p)
            return NULL;
        if (memcmp(p, "\"cat\"", 5) == 0)
            return p;
    }
    return NULL;
#endif
}

#define BACK_LIMIT (1 << 16)

/* The '{' opening the object whose member starts at q, read backwards over the
 * members before it (strings by their unescaped quotes, nested values by depth);
 * NULL when not found within BACK_LIMIT bytes or when an array opens first. */
static const unsigned char *object_start(const unsigned char *lo, const unsigned char *q) {
    const unsigned char *p = q - 1;
    int depth = 0;
    while (p >= lo && q - p < BACK_LIMIT) {
        unsigned char ch = *p;
        if (ch == '"') { /* a string's closing quote: go to its opening one */
            for (p--;; p--) {
                while (p >= lo && *p != '"')
                    p--;
                if (p < lo)
                    return NULL;
                const unsigned char *b = p - 1;
                while (b >= lo && *b == '\\')
                    b--;
                if (((p - 1) - b) % 2 == 0)
                    break;
            }
        } else if (ch == '}' || ch == ']') {
            depth++;
        } else if (ch == '[') {
            if (depth == 0)
                return NULL;
            depth--;
        } else if (ch == '{') {
            if (depth == 0)
                return p;
            depth--;
        }
        p--;
    }
    return NULL;
}

/* One past the '}' closing the object that opens at o, by its brackets alone (strings
 * passed over by their unescaped quotes), or NULL when the object is not closed before
 * hi or nests deeper than MAX_DEPTH. Not a check of JSON: the events found are decoded
 * afterwards, which refuses what is not. */
static const unsigned char *object_end(const unsigned char *o, const unsigned char *hi) {
    int depth = 0;
    for (const unsigned char *p = o; p < hi; p++) {
        switch (*p) {
        case '"': /* to its closing quote, eight plain bytes a step */
            for (p = plain_run(p + 1, hi); p < hi && *p != '"'; p = plain_run(p + 1, hi))
                if (*p == '\\' && ++p >= hi)
                    return NULL;
            if (p >= hi)
                return NULL;
            break;
        case '{':
        case '[':
            if (++depth > MAX_DEPTH)
                return NULL;
            break;
        case '}':
        case ']':
            if (--depth == 0)
                return *p == '}' ? p + 1 : NULL;
            break;
        default:
            break;
        }
    }
    return NULL;
}

/* The categories device_events and device_scan look for: the bytes of a tuple. */
typedef struct {
    const char *p[64];
    Py_ssize_t n[64];
    Py_ssize_t count;
} Cats;

/* Checks a device search's bounds and categories (fn names the function in the error):
 * 0, or -1 with a Python error set. */
static int search_args(const char *fn, const Py_buffer *view, Py_ssize_t begin, Py_ssize_t end, PyObject *cats,
                       Cats *out) {
    out->count = PyTuple_GET_SIZE(cats);
    if (begin < 1 || end < begin || end > view->len || out->count > 64) {
        PyErr_Format(PyExc_ValueError, "%s: bad bounds or too many categories", fn);
        return -1;
    }
    for (Py_ssize_t i = 0; i < out->count; i++) {
        PyObject *b = PyTuple_GET_ITEM(cats, i);
        if (!PyBytes_Check(b)) {
            PyErr_Format(PyExc_TypeError, "%s: categories must be bytes", fn);
            return -1;
        }
        out->p[i] = PyBytes_AS_STRING(b);
        out->n[i] = PyBytes_GET_SIZE(b);
    }
    return 0;
}

/* The next object in [*p, hi) whose "cat" key holds one of cats, as an element of the
 * events array whose inside begins at lo: 1 with *o at its '{' and *q at its "cat" key
 * (*p moved past the key's value), 0 when there is none left, -1 when one cannot be
 * placed (an escaped category, no '{' found, or not preceded by '[' or ','): the
 * search gives up then. */
static int next_device_object(const unsigned char *base, const unsigned char *lo, const unsigned char *hi,
                              const unsigned char **p, const Cats *cats, const unsigned char **o,
                              const unsigned char **q) {
    while (*p < hi) {
        const unsigned char *key = find_cat(*p, hi);
        if (!key)
            return 0;
        *p = key + 5;
        if (key > lo && key[-1] == '\\') /* inside a string */
            continue;
        P k = {base, *p, hi}; /* after the key: blanks, ':', blanks, the value's '"' */
        ws(&k);
        if (k.p >= hi || *k.p != ':') /* a value, not a key */
            continue;
        k.p++;
        ws(&k);
        if (k.p >= hi || *k.p != '"')
            continue;
        const unsigned char *r = k.p + 1, *vs = r;
        while (r < hi && *r != '"' && *r != '\\')
            r++;
        if (r >= hi || *r == '\\') /* an escaped category: left to the full read */
            return -1;
        Py_ssize_t vn = r - vs;
        int hit = 0;
        for (Py_ssize_t i = 0; i < cats->count && !hit; i++)
            hit = cats->n[i] == vn && memcmp(cats->p[i], vs, (size_t)vn) == 0;
        *p = r + 1;
        if (!hit)
            continue;
        const unsigned char *start = object_start(lo, key);
        if (!start)
            return -1;
        const unsigned char *b = start - 1; /* an element of the events array follows '[' or ',' */
        while (b >= lo && (*b == ' ' || *b == '\n' || *b == '\r' || *b == '\t'))
            b--;
        if (b >= lo && *b != ',')
            return -1;
        *o = start;
        *q = key;
        return 1;
    }
    return 0;
}

/* device_events(text, begin, end, cats, spans=False) -> bytes | (bytes, bytes) | None:
   see PyMethodDef. */
static PyObject *device_events(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t begin, end;
    PyObject *cats;
    int want_spans = 0;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*nnO!|p", &view, &begin, &end, &PyTuple_Type, &cats, &want_spans))
        return NULL;
    Cats want;
    if (search_args("device_events", &view, begin, end, cats, &want)) {
        PyBuffer_Release(&view);
        return NULL;
    }
    const unsigned char *base = (const unsigned char *)view.buf;
    const unsigned char *lo = base + begin, *hi = base + end;
    Buf out = {NULL, 0, 0}; /* int64 (start, end) of each event found */
    size_t total = 1;          /* bytes of the array: "[", each event and the "," or "]" after it */
    int ok = 1;
    Py_BEGIN_ALLOW_THREADS;
    const unsigned char *p = lo, *o, *q;
    for (int found; (found = next_device_object(base, lo, hi, &p, &want, &o, &q));) {
        const unsigned char *obj_end = found > 0 ? object_end(o, hi) : NULL;
        if (!obj_end || obj_end <= q) { /* not placed, not closed, or ending before its key: damaged text */
            ok = 0;
            break;
        }
        int64_t span[2] = {o - base, obj_end - base};
        if (push(&out, span, sizeof(span))) {
            ok = 0;
            break;
        }
        total += (size_t)(obj_end - o) + 1;
        p = obj_end;
    }
    Py_END_ALLOW_THREADS;
    PyObject *res;
    size_t n = out.len / sizeof(int64_t[2]);
    if (!ok) {
        res = Py_NewRef(Py_None);
    } else if (!n) {
        res = PyBytes_FromStringAndSize("[]", 2);
    } else if ((res = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total))) {
        /* "[" span "," span ... "]": one copy of each event's text into the array */
        char *w = PyBytes_AS_STRING(res);
        const int64_t *sp = (const int64_t *)out.data;
        Py_BEGIN_ALLOW_THREADS;
        for (size_t i = 0; i < n; i++) {
            *w++ = i ? ',' : '[';
            memcpy(w, base + sp[2 * i], (size_t)(sp[2 * i + 1] - sp[2 * i]));
            w += sp[2 * i + 1] - sp[2 * i];
        }
        *w = ']';
        Py_END_ALLOW_THREADS;
    }
    if (res && res != Py_None && want_spans) {
        /* (doc, the int64 (start, end) offsets in text of each event, in doc order) */
        PyObject *sp = PyBytes_FromStringAndSize(out.data ? (const char *)out.data : "", (Py_ssize_t)out.len);
        PyObject *pair = sp ? PyTuple_Pack(2, res, sp) : NULL;
        Py_XDECREF(sp);
        Py_DECREF(res);
        res = pair;
    }
    buf_free(&out);
    PyBuffer_Release(&view);
    return res;
}

/* device_scan(text, begin, end, cats, raw_ts) -> tuple | None: see PyMethodDef. The
 * search of device_events, each object found read by the scanner's own parser from its
 * '{' (which finds its end), so the events are read once, in place. */
static PyObject *device_scan(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t begin, end;
    PyObject *cats;
    int raw;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*nnO!p", &view, &begin, &end, &PyTuple_Type, &cats, &raw))
        return NULL;
    Cats want;
    if (search_args("device_scan", &view, begin, end, cats, &want)) {
        PyBuffer_Release(&view);
        return NULL;
    }
    const unsigned char *base = (const unsigned char *)view.buf;
    const unsigned char *lo = base + begin, *hi = base + end;
    Buf spans = {NULL, 0, 0}; /* int64 (start, end) of each event found */
    Buf cols[N_COLS], m_texts = {NULL, 0, 0};
    Table tabs[N_TABS];
    memset(cols, 0, sizeof(cols));
    int ok = 1, has_bind = 0;
    int32_t n_texts = 0;
    for (int i = 0; i < N_TABS; i++)
        if (table_init(&tabs[i]))
            ok = 0;
    Py_BEGIN_ALLOW_THREADS;
    const unsigned char *p = lo, *o, *q;
    for (int found; ok && (found = next_device_object(base, lo, hi, &p, &want, &o, &q));) {
        if (found < 0) { /* not placed */
            ok = 0;
            break;
        }
        P c = {base, o, hi};
        Ev ev;
        if (event_(&c, &ev) || c.p <= q) { /* outside the subset, or ending before its key */
            ok = 0;
            break;
        }
        int64_t span[2] = {o - base, c.p - base};
        if (push(&spans, span, sizeof(span)) ||
            emit(base, &ev, span[0], span[1], raw, cols, tabs, &m_texts, &n_texts, &has_bind)) {
            ok = 0;
            break;
        }
        p = c.p;
    }
    if (ok)
        ok = close_arrays(cols) == 0;
    Py_END_ALLOW_THREADS;
    PyObject *out;
    if (ok) {
        PyObject *sp = PyBytes_FromStringAndSize(spans.data ? (const char *)spans.data : "", (Py_ssize_t)spans.len);
        out = sp ? scan_tuple(cols, tabs, has_bind, sp) : NULL;
    } else {
        out = Py_NewRef(Py_None);
    }
    buf_free(&spans);
    scan_free(cols, tabs, &m_texts);
    PyBuffer_Release(&view);
    return out;
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS,
     "scan(text, raw_ts) -> tuple | None: the X-event columns of a JSON array of trace events "
     "(see gapscope.parsers.chrome.fastscan), or None outside the subset this scanner takes."},
    {"device_events", device_events, METH_VARARGS,
     "device_events(text, begin, end, cats, spans=False) -> bytes | (bytes, bytes) | None: a JSON "
     "array of the texts of the objects in text[begin:end] (the inside of an events array, or a "
     "run of its elements) whose \"cat\" key holds one of the bytes in the tuple cats, in text "
     "order, found by searching for the key; with spans true, also the int64 (start, end) offsets "
     "in text of each of them (end: one past its closing brace). None when one such object cannot "
     "be told to be an element of the array or is not closed, or a category is escaped. Each "
     "object's end is found by its brackets and quotes alone: decode the array to check it."},
    {"device_scan", device_scan, METH_VARARGS,
     "device_scan(text, begin, end, cats, raw_ts) -> tuple | None: what scan gives for the JSON "
     "array of device_events(text, begin, end, cats), with its spans appended (bytes of int64 "
     "(start, end) pairs); every offset in it (values, args) is one in text. The objects are "
     "found as device_events finds them and read where they lie. None where device_events gives "
     "None or where scan would (an object outside the subset this scanner takes)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_xscan", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__xscan(void) {
    init_plain();
    if (PyType_Ready(&BlockType) < 0)
        return NULL;
    return PyModule_Create(&module);
}
