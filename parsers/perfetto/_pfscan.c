/* The common case of a Perfetto TrackEvent trace, transcoded to Chrome trace events in C.
 *
 * gapscope.parsers.perfetto.loader calls two functions:
 *
 *   descriptor_spans(data) -> list of (start, end): the byte spans of the packets that
 *       hold a track_descriptor (field 60), for the loader to decode with the generated
 *       classes; None when the top-level framing is broken.
 *   transcode(data, tracks, n_tracks, fd=-1, on_flush=None, flush_bytes=FLUSH_BYTES)
 *       -> (bytearray, bytes) or None: ``tracks`` maps a track uuid to (index <
 *       n_tracks, b'"pid":P,"tid":T'); returns the text '{"traceEvents":[' and a line
 *       break, then the Chrome events, one a line, each line ending ",\n", and the
 *       packet number of each event as native int64 bytes. Two passes: the first
 *       (``pair_slices``) pairs each slice begin with its end for its duration, the
 *       second writes each slice whole, so text once written never changes. With
 *       ``fd`` (a file open for writing at offset 0) the text is written there in
 *       pieces of about ``flush_bytes`` and the bytearray comes back empty; after each
 *       piece but the last, ``on_flush(written_bytes, consumed_bytes)``: the text's
 *       first ``written_bytes`` are in the file, final, and ``consumed_bytes`` of
 *       ``data`` are read (so that forked decoders can read the text while it grows);
 *       an exception it raises ends the call with it.
 *
 * It writes what loader._Decoder writes for the same packets (same keys in the same
 * order, ts/dur as exact decimal microseconds, doubles as Python's repr) and returns
 * None on anything outside the subset below; the loader then decodes the file with the
 * generated classes, so the result never depends on which path ran:
 *
 *   TracePacket: timestamp, trusted_packet_sequence_id, sequence_flags,
 *     incremental_state_cleared, first_packet_on_sequence, previous_packet_dropped,
 *     interned_data (event_categories, event_names, debug_annotation_names), track_event,
 *     track_descriptor (skipped: the loader read it), trace_config, trace_stats,
 *     trace_uuid, synchronization_marker, clock_snapshot (skipped);
 *   TrackEvent: type (slice begin/end, instant), track_uuid, name, name_iid,
 *     categories, category_iids, debug_annotations, flow_ids, terminating_flow_ids;
 *   DebugAnnotation: name, name_iid, bool/uint/int/double/string/legacy_json values.
 *
 * Also None: an interned id its sequence does not define, a slice end with no open
 * slice, a slice left open at the end, an unknown track, a non-finite double, text that
 * is not UTF-8, more than MAX_SEQS sequences, an iid past MAX_IID; and always on a
 * big-endian host (fixed64 values are read as little-endian words). POSIX only
 * (write): where it does not build, the package installs without it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#define MAX_SEQS 64
#define MAX_IID (1 << 22)

typedef struct { const uint8_t *p; Py_ssize_t n; int plain; } span; /* plain: ``put_plain`` may write it */
typedef struct { span *v; Py_ssize_t cap; } table;
typedef struct { uint64_t id; int used; table t[3]; } seqstate; /* names, cats, arg names */

typedef struct {
    PyObject *out; /* bytearray: the text not yet written to ``fd`` */
    Py_ssize_t len;
    int fd;             /* -1: all of the text stays in ``out`` */
    Py_ssize_t flushed; /* bytes written to ``fd`` before out[0] */
    Py_ssize_t flush_bytes; /* written out once the buffer holds more than this */
} buf;

#define FLUSH_BYTES (8 << 20)

/* write the whole buffer to the file (at an event's end only, so no placeholder is cut) */
static int flush(buf *b) {
    const char *p = PyByteArray_AS_STRING(b->out);
    Py_ssize_t done = 0;
    while (done < b->len) {
        Py_ssize_t n = write(b->fd, p + done, (size_t)(b->len - done));
        if (n < 0) {
            if (errno == EINTR) continue;
            PyErr_SetFromErrno(PyExc_OSError);
            return -1;
        }
        done += n;
    }
    b->flushed += b->len;
    b->len = 0;
    return 0;
}

static int grow(buf *b, Py_ssize_t more) {
    Py_ssize_t cap = PyByteArray_GET_SIZE(b->out);
    if (b->len + more <= cap) return 0;
    Py_ssize_t want = cap * 2 > b->len + more ? cap * 2 : b->len + more + 4096;
    return PyByteArray_Resize(b->out, want);
}
static int put(buf *b, const char *s, Py_ssize_t n) {
    if (grow(b, n)) return -1;
    memcpy(PyByteArray_AS_STRING(b->out) + b->len, s, n);
    b->len += n;
    return 0;
}
#define PUTS(b, s) put(b, s, (Py_ssize_t)(sizeof(s) - 1))

static int utf8_ok(const uint8_t *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) { i++; continue; }
        int k;
        uint32_t cp;
        if ((c & 0xE0) == 0xC0) { k = 1; cp = c & 0x1F; }
        else if ((c & 0xF0) == 0xE0) { k = 2; cp = c & 0x0F; }
        else if ((c & 0xF8) == 0xF0) { k = 3; cp = c & 0x07; }
        else return 0;
        if (i + k >= n) return 0;
        for (int j = 1; j <= k; j++) {
            if ((s[i + j] & 0xC0) != 0x80) return 0;
            cp = (cp << 6) | (s[i + j] & 0x3F);
        }
        if ((k == 1 && cp < 0x80) || (k == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
            (k == 3 && (cp < 0x10000 || cp > 0x10FFFF)))
            return 0;
        i += k + 1;
    }
    return 1;
}

/* bytes a JSON string holds as they are: printable ASCII but '"' and '\\' */
static uint8_t is_plain[256];
static void init_plain(void) {
    for (int c = 0x20; c < 0x80; c++) is_plain[c] = c != '"' && c != '\\';
}
static int all_plain(const uint8_t *s, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++)
        if (!is_plain[s[i]]) return 0;
    return 1;
}
/* a JSON string of bytes known to be plain (``all_plain``) */
static int put_plain(buf *b, const uint8_t *s, Py_ssize_t n) {
    if (grow(b, n + 2)) return -1;
    char *o = PyByteArray_AS_STRING(b->out) + b->len;
    o[0] = '"';
    memcpy(o + 1, s, n);
    o[n + 1] = '"';
    b->len += n + 2;
    return 0;
}

/* a JSON string; -2: not UTF-8 */
static int put_str(buf *b, const uint8_t *s, Py_ssize_t n) {
    if (all_plain(s, n)) return put_plain(b, s, n); /* the common case: printable ASCII, copied as it is */
    if (!utf8_ok(s, n)) return -2;
    if (grow(b, n * 6 + 2)) return -1;
    char *o = PyByteArray_AS_STRING(b->out) + b->len;
    char *start = o;
    *o++ = '"';
    for (Py_ssize_t i = 0; i < n; i++) {
        uint8_t c = s[i];
        if (c == '"' || c == '\\') { *o++ = '\\'; *o++ = (char)c; }
        else if (c < 0x20) {
            static const char hex[] = "0123456789abcdef";
            switch (c) {
            case '\n': *o++ = '\\'; *o++ = 'n'; break;
            case '\r': *o++ = '\\'; *o++ = 'r'; break;
            case '\t': *o++ = '\\'; *o++ = 't'; break;
            case '\b': *o++ = '\\'; *o++ = 'b'; break;
            case '\f': *o++ = '\\'; *o++ = 'f'; break;
            default: *o++ = '\\'; *o++ = 'u'; *o++ = '0'; *o++ = '0'; *o++ = hex[c >> 4]; *o++ = hex[c & 15];
            }
        } else *o++ = (char)c;
    }
    *o++ = '"';
    b->len += o - start;
    return 0;
}

/* decimal digits of ``v`` ending at ``end`` (written backwards); returns the first */
static const char pairs[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";
static char *digits(char *end, uint64_t v) {
    while (v >= 100) { /* two at a time: half the divisions */
        uint64_t q = v / 100;
        memcpy(end -= 2, pairs + 2 * (v - q * 100), 2);
        v = q;
    }
    if (v >= 10) memcpy(end -= 2, pairs + 2 * v, 2);
    else *--end = (char)('0' + v);
    return end;
}
static int put_u64(buf *b, uint64_t v, int negative) {
    char tmp[24];
    char *p = digits(tmp + sizeof tmp, v);
    if (negative) *--p = '-';
    return put(b, p, tmp + sizeof tmp - p);
}
/* ns as exact decimal µs ("-1234.567") at ``o``; returns its length (at most 25) */
static int ns_text(char *o, int64_t v) {
    char tmp[32];
    uint64_t a = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    char *end = tmp + sizeof tmp;
    uint64_t r = a % 1000;
    *--end = (char)('0' + r % 10);
    *--end = (char)('0' + r / 10 % 10);
    *--end = (char)('0' + r / 100);
    *--end = '.';
    char *p = digits(end, a / 1000);
    if (v < 0) *--p = '-';
    int n = (int)(tmp + sizeof tmp - p);
    memcpy(o, p, n);
    return n;
}
static int put_ns(buf *b, int64_t v) {
    if (grow(b, 32)) return -1;
    b->len += ns_text(PyByteArray_AS_STRING(b->out) + b->len, v);
    return 0;
}

/* wire reading; all return -1 past ``end`` */
static inline Py_ssize_t varint(const uint8_t *d, Py_ssize_t at, Py_ssize_t end, uint64_t *v) {
    if (at < end && d[at] < 0x80) { *v = d[at]; return at + 1; } /* one byte: most tags and small values */
    uint64_t r = 0;
    for (int s = 0; s < 70 && at < end; s += 7) {
        uint8_t c = d[at++];
        r |= (uint64_t)(c & 0x7F) << s;
        if (c < 0x80) { *v = r; return at; }
    }
    return -1;
}
/* one field: tag, and for wire 2 its span, for 0/1/5 its value; returns the next offset */
static inline Py_ssize_t field(const uint8_t *d, Py_ssize_t at, Py_ssize_t end, uint32_t *num, int *wire, uint64_t *val,
                        Py_ssize_t *body) {
    uint64_t tag;
    at = varint(d, at, end, &tag);
    if (at < 0) return -1;
    *num = (uint32_t)(tag >> 3);
    *wire = (int)(tag & 7);
    switch (*wire) {
    case 0: return varint(d, at, end, val);
    case 1: if (at + 8 > end) return -1; memcpy(val, d + at, 8); return at + 8; /* little-endian hosts */
    case 5: { uint32_t x; if (at + 4 > end) return -1; memcpy(&x, d + at, 4); *val = x; return at + 4; }
    case 2:
        at = varint(d, at, end, val);
        if (at < 0 || *val > (uint64_t)(end - at)) return -1;
        *body = at;
        return at + (Py_ssize_t)*val;
    }
    return -1;
}

static int tset(table *t, uint64_t iid, const uint8_t *p, Py_ssize_t n) {
    if (iid >= MAX_IID) return -1;
    if ((Py_ssize_t)iid >= t->cap) {
        Py_ssize_t cap = t->cap ? t->cap : 64;
        while (cap <= (Py_ssize_t)iid) cap *= 2;
        span *v = PyMem_Realloc(t->v, cap * sizeof(span));
        if (!v) return -1;
        for (Py_ssize_t i = t->cap; i < cap; i++) v[i].n = -1;
        t->v = v;
        t->cap = cap;
    }
    t->v[iid].p = p;
    t->v[iid].n = n;
    t->v[iid].plain = all_plain(p, n);
    return 0;
}
static span *tget(table *t, uint64_t iid) {
    if ((Py_ssize_t)iid >= t->cap || t->v[iid].n < 0) return NULL;
    return &t->v[iid];
}

/* interned_data: 1 categories, 2 names, 3 debug annotation names, each {1 iid, 2 name} */
static int intern(seqstate *s, const uint8_t *d, Py_ssize_t at, Py_ssize_t end) {
    while (at < end) {
        uint32_t num; int wire; uint64_t val; Py_ssize_t body = 0;
        Py_ssize_t next = field(d, at, end, &num, &wire, &val, &body);
        if (next < 0 || wire != 2 || num < 1 || num > 3) return -1;
        table *t = &s->t[num == 2 ? 0 : num == 1 ? 1 : 2];
        uint64_t iid = 0; const uint8_t *p = NULL; Py_ssize_t n = 0; int have = 0;
        Py_ssize_t a = body, e = next;
        while (a < e) {
            uint32_t f2; int w2; uint64_t v2; Py_ssize_t b2 = 0;
            a = field(d, a, e, &f2, &w2, &v2, &b2);
            if (a < 0) return -1;
            if (f2 == 1 && w2 == 0) iid = v2;
            else if (f2 == 2 && w2 == 2) { p = d + b2; n = (Py_ssize_t)v2; have = 1; }
            else return -1;
        }
        if (!have) { p = d; n = 0; }
        if (tset(t, iid, p, n)) return -1;
        at = next;
    }
    return 0;
}

typedef struct {
    int64_t *ts; Py_ssize_t *begin; Py_ssize_t n, cap; /* the open slices: start, ordinal among the begins */
} stack;

/* the tracks: uuid → (lane text, open slices), open addressing */
typedef struct { uint64_t uuid; PyObject *lane; stack open; int used; } track;
typedef struct { track *v; size_t mask; } trackmap;

typedef struct {
    const uint8_t *d;
    Py_ssize_t at; /* end of the packet being read: the input consumed */
    buf b;
    uint64_t *seen; /* the flow ids seen (open addressing; 0 is ``seen_zero``) */
    size_t seen_mask, seen_n;
    int seen_zero;
    PyObject *on_flush; /* None, or called with (final bytes, input bytes consumed) after a flush */
    seqstate seqs[MAX_SEQS];
    int nseqs;
    trackmap tracks;
    int64_t *dur;           /* each slice begin's duration, in packet order (``pair_slices``) */
    Py_ssize_t nbegins, begins_cap, next_begin;
    Py_ssize_t packet_of_len, packet_of_cap;
    int64_t *pk;
} state;

static size_t mix(uint64_t x);
/* whether flow id ``id`` was seen before; adds it. -1: no memory */
static int seen_before(state *st, uint64_t id) {
    if (id == 0) { int was = st->seen_zero; st->seen_zero = 1; return was; }
    if (st->seen_n * 2 >= st->seen_mask) { /* grow (and make the first table) at half full */
        size_t cap = st->seen ? (st->seen_mask + 1) * 2 : 1024;
        uint64_t *v = PyMem_Calloc(cap, sizeof(uint64_t));
        if (!v) { PyErr_NoMemory(); return -1; }
        if (st->seen)
            for (size_t i = 0; i <= st->seen_mask; i++)
                if (st->seen[i]) {
                    size_t j = mix(st->seen[i]) & (cap - 1);
                    while (v[j]) j = (j + 1) & (cap - 1);
                    v[j] = st->seen[i];
                }
        PyMem_Free(st->seen);
        st->seen = v;
        st->seen_mask = cap - 1;
    }
    size_t i = mix(id) & st->seen_mask;
    for (; st->seen[i]; i = (i + 1) & st->seen_mask)
        if (st->seen[i] == id) return 1;
    st->seen[i] = id;
    st->seen_n++;
    return 0;
}

static size_t mix(uint64_t x) {
    x ^= x >> 33; x *= 0xff51afd7ed558ccdULL; x ^= x >> 33;
    return (size_t)x;
}
static track *track_of(trackmap *m, uint64_t uuid) {
    for (size_t i = mix(uuid) & m->mask;; i = (i + 1) & m->mask) {
        if (!m->v[i].used) return NULL;
        if (m->v[i].uuid == uuid) return &m->v[i];
    }
}
/* the map of ``tracks`` (uuid → (index, lane text)); -1 with an exception set */
static int tracks_from(trackmap *m, PyObject *tracks) {
    size_t cap = 16;
    while (cap < (size_t)PyDict_GET_SIZE(tracks) * 2 + 1) cap *= 2;
    m->v = PyMem_Calloc(cap, sizeof(track));
    if (!m->v) { PyErr_NoMemory(); return -1; }
    m->mask = cap - 1;
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(tracks, &pos, &key, &value)) {
        uint64_t uuid = PyLong_AsUnsignedLongLong(key);
        if (uuid == (uint64_t)-1 && PyErr_Occurred()) return -1;
        if (!PyTuple_Check(value) || PyTuple_GET_SIZE(value) != 2 || !PyBytes_Check(PyTuple_GET_ITEM(value, 1))) {
            PyErr_SetString(PyExc_TypeError, "tracks: uuid -> (index, bytes)");
            return -1;
        }
        size_t i = mix(uuid) & m->mask;
        while (m->v[i].used && m->v[i].uuid != uuid) i = (i + 1) & m->mask;
        if (m->v[i].used) continue;
        m->v[i].used = 1;
        m->v[i].uuid = uuid;
        m->v[i].lane = PyTuple_GET_ITEM(value, 1);
        Py_INCREF(m->v[i].lane);
    }
    return 0;
}
static void tracks_free(trackmap *m) {
    if (!m->v) return;
    for (size_t i = 0; i <= m->mask; i++)
        if (m->v[i].used) {
            Py_XDECREF(m->v[i].lane);
            PyMem_Free(m->v[i].open.ts);
            PyMem_Free(m->v[i].open.begin);
        }
    PyMem_Free(m->v);
}

static int note_packet(state *st, int64_t k) {
    if (st->packet_of_len == st->packet_of_cap) {
        Py_ssize_t cap = st->packet_of_cap ? st->packet_of_cap * 2 : 4096;
        int64_t *v = PyMem_Realloc(st->pk, cap * sizeof(int64_t));
        if (!v) return -1;
        st->pk = v;
        st->packet_of_cap = cap;
    }
    st->pk[st->packet_of_len++] = k;
    return 0;
}

static seqstate *seq_of(state *st, uint64_t id, int clear) {
    for (int i = 0; i < st->nseqs; i++)
        if (st->seqs[i].id == id) {
            if (clear)
                for (int j = 0; j < 3; j++)
                    for (Py_ssize_t x = 0; x < st->seqs[i].t[j].cap; x++) st->seqs[i].t[j].v[x].n = -1;
            return &st->seqs[i];
        }
    if (st->nseqs == MAX_SEQS) return NULL;
    seqstate *s = &st->seqs[st->nseqs++];
    memset(s, 0, sizeof *s);
    s->id = id;
    s->used = 1;
    return s;
}

/* debug annotation → "name":value; 1: outside the subset */
static int annotation(state *st, seqstate *s, Py_ssize_t at, Py_ssize_t end) {
    const uint8_t *d = st->d;
    const uint8_t *name = NULL; Py_ssize_t name_n = 0; int have_name = 0, name_plain = 0;
    int vwire = -1; uint32_t vnum = 0; uint64_t v = 0; Py_ssize_t vbody = 0;
    while (at < end) {
        uint32_t num; int wire; uint64_t val; Py_ssize_t body = 0;
        at = field(d, at, end, &num, &wire, &val, &body);
        if (at < 0) return 1;
        if (num == 1 && wire == 0) {
            span *sp = tget(&s->t[2], val);
            if (!sp) return 1;
            name = sp->p; name_n = sp->n; have_name = 1; name_plain = sp->plain;
        } else if (num == 10 && wire == 2) { name = d + body; name_n = (Py_ssize_t)val; have_name = 1; name_plain = 0; }
        else if ((num == 2 || num == 3 || num == 4) && wire == 0) { vnum = num; vwire = 0; v = val; }
        else if (num == 5 && wire == 1) { vnum = num; vwire = 1; v = val; }
        else if ((num == 6 || num == 9) && wire == 2) { vnum = num; vwire = 2; v = val; vbody = body; }
        else return 1;
    }
    if (!have_name || vwire < 0) return 1;
    int r = name_plain ? put_plain(&st->b, name, name_n) : put_str(&st->b, name, name_n);
    if (r == -2) return 1;
    if (r || PUTS(&st->b, ":")) return -1;
    switch (vnum) {
    case 2: return v ? PUTS(&st->b, "true") : PUTS(&st->b, "false");
    case 3: return put_u64(&st->b, v, 0);
    case 4: return (int64_t)v < 0 ? put_u64(&st->b, (uint64_t)0 - v, 1) : put_u64(&st->b, v, 0);
    case 5: {
        double x; memcpy(&x, &v, 8);
        if (!isfinite(x)) return 1;
        char *repr = PyOS_double_to_string(x, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
        if (!repr) return -1;
        r = put(&st->b, repr, (Py_ssize_t)strlen(repr));
        PyMem_Free(repr);
        return r;
    }
    case 6: r = put_str(&st->b, d + vbody, (Py_ssize_t)v); return r == -2 ? 1 : r;
    case 9: /* legacy JSON: as it is, when it holds no line break (one event a line) */
        if (v == 0 || memchr(d + vbody, '\n', v) || memchr(d + vbody, '\r', v) || !utf8_ok(d + vbody, (Py_ssize_t)v))
            return 1;
        return put(&st->b, (const char *)d + vbody, (Py_ssize_t)v);
    }
    return 1;
}

static int flow(state *st, const char *ph, uint64_t id, int64_t ts, PyObject *lane, int64_t k) {
    if (PUTS(&st->b, "{\"ph\":\"") || put(&st->b, ph, 1) || PUTS(&st->b, "\",\"id\":") || put_u64(&st->b, id, 0) ||
        PUTS(&st->b, ",\"cat\":\"ac2g\",\"name\":\"ac2g\",\"ts\":") || put_ns(&st->b, ts))
        return -1;
    if (ph[0] == 'f' && PUTS(&st->b, ",\"bp\":\"e\"")) return -1;
    if (PUTS(&st->b, ",") || put(&st->b, PyBytes_AS_STRING(lane), PyBytes_GET_SIZE(lane)) || PUTS(&st->b, "},\n"))
        return -1;
    return note_packet(st, k);
}

/* write the buffer out and tell ``on_flush``: the text written is final (durations
 * are known from ``pair_slices`` before their slice is written) */
static int flushed(state *st) {
    if (flush(&st->b)) return -1;
    if (st->on_flush == Py_None) return 0;
    PyObject *r = PyObject_CallFunction(st->on_flush, "nn", st->b.flushed, st->at);
    Py_XDECREF(r);
    return r ? 0 : -1;
}

/* one track_event; 1: outside the subset */
static int track_event(state *st, seqstate *s, int64_t ts, Py_ssize_t at, Py_ssize_t end, int64_t k) {
    const uint8_t *d = st->d;
    uint64_t type = 0, track_uuid = 0; int have_track = 0;
    const uint8_t *name = NULL; Py_ssize_t name_n = 0; int name_plain = 0;
    Py_ssize_t ann[64]; Py_ssize_t ann_end[64]; int nann = 0;
    Py_ssize_t cats[16]; int ncats = 0; int cat_strings = 0; /* iids, or offsets of strings */
    uint64_t cat_iid[16];
    uint64_t fl[16]; int nfl = 0; uint64_t tfl[16]; int ntfl = 0;
    while (at < end) {
        uint32_t num; int wire; uint64_t val; Py_ssize_t body = 0;
        Py_ssize_t next = field(d, at, end, &num, &wire, &val, &body);
        if (next < 0) return 1;
        if (num == 9 && wire == 0) type = val;
        else if (num == 11 && wire == 0) { track_uuid = val; have_track = 1; }
        else if (num == 10 && wire == 0) {
            span *sp = tget(&s->t[0], val);
            if (!sp) return 1;
            name = sp->p; name_n = sp->n; name_plain = sp->plain;
        } else if (num == 23 && wire == 2) { name = d + body; name_n = (Py_ssize_t)val; name_plain = 0; }
        else if (num == 3 && wire == 0) { if (ncats == 16 || cat_strings) return 1; cat_iid[ncats++] = val; }
        else if (num == 3 && wire == 2) {
            Py_ssize_t a = body;
            while (a < next) {
                uint64_t x; a = varint(d, a, next, &x);
                if (a < 0 || ncats == 16 || cat_strings) return 1;
                cat_iid[ncats++] = x;
            }
        } else if (num == 22 && wire == 2) {
            if (ncats == 16 || (ncats && !cat_strings)) return 1;
            cat_strings = 1; cats[ncats] = body; cat_iid[ncats++] = val;
        } else if (num == 4 && wire == 2) { if (nann == 64) return 1; ann[nann] = body; ann_end[nann++] = next; }
        else if ((num == 47 || num == 48) && (wire == 1 || wire == 2)) {
            uint64_t *dst = num == 47 ? fl : tfl; int *nd = num == 47 ? &nfl : &ntfl;
            if (wire == 1) { if (*nd == 16) return 1; dst[(*nd)++] = val; }
            else {
                if (val % 8) return 1;
                for (Py_ssize_t a = body; a < next; a += 8) { if (*nd == 16) return 1; memcpy(&dst[(*nd)++], d + a, 8); }
            }
        } else return 1;
        at = next;
    }
    if (!have_track) return 1;
    track *tr = track_of(&st->tracks, track_uuid);
    if (!tr) return 1;
    PyObject *lane = tr->lane;
    if (type == 2) return 0; /* an end: its slice's duration was written with it */
    if (type != 1 && type != 3) return 1;
    buf *b = &st->b;
    if (type == 1 ? PUTS(b, "{\"ph\":\"X\",\"name\":") : PUTS(b, "{\"ph\":\"i\",\"s\":\"t\",\"name\":")) return -1;
    int r = !name ? PUTS(b, "\"\"") : name_plain ? put_plain(b, name, name_n) : put_str(b, name, name_n);
    if (r) return r == -2 ? 1 : -1;
    span *one = ncats == 1 && !cat_strings ? tget(&s->t[1], cat_iid[0]) : NULL;
    if (one && one->plain) { /* the common case: one interned category */
        if (PUTS(b, ",\"cat\":") || put_plain(b, one->p, one->n)) return -1;
    } else if (ncats) {
        if (PUTS(b, ",\"cat\":")) return -1;
        /* the categories joined by commas, as one string */
        Py_ssize_t total = 0;
        span parts[16];
        for (int i = 0; i < ncats; i++) {
            if (cat_strings) { parts[i].p = d + cats[i]; parts[i].n = (Py_ssize_t)cat_iid[i]; }
            else {
                span *sp = tget(&s->t[1], cat_iid[i]);
                if (!sp) return 1;
                parts[i] = *sp;
            }
            total += parts[i].n + 1;
        }
        uint8_t *joined = PyMem_Malloc(total + 1);
        if (!joined) return -1;
        Py_ssize_t o = 0;
        for (int i = 0; i < ncats; i++) {
            if (i) joined[o++] = ',';
            memcpy(joined + o, parts[i].p, parts[i].n);
            o += parts[i].n;
        }
        r = put_str(b, joined, o);
        PyMem_Free(joined);
        if (r) return r == -2 ? 1 : -1;
    }
    if (PUTS(b, ",\"ts\":") || put_ns(b, ts)) return -1;
    if (nann) {
        if (PUTS(b, ",\"args\":{")) return -1;
        for (int i = 0; i < nann; i++) {
            if (i && PUTS(b, ",")) return -1;
            r = annotation(st, s, ann[i], ann_end[i]);
            if (r) return r;
        }
        if (PUTS(b, "}")) return -1;
    }
    if (PUTS(b, ",") || put(b, PyBytes_AS_STRING(lane), PyBytes_GET_SIZE(lane))) return -1;
    if (type == 1) {
        if (st->next_begin >= st->nbegins) return 1; /* not as ``pair_slices`` saw it */
        if (PUTS(b, ",\"dur\":") || put_ns(b, st->dur[st->next_begin++])) return -1;
    }
    if (PUTS(b, "},\n") || note_packet(st, k)) return -1;
    for (int i = 0; i < nfl; i++) {
        int was = seen_before(st, fl[i]);
        if (was < 0 || flow(st, was ? "t" : "s", fl[i], ts, lane, k)) return -1;
    }
    for (int i = 0; i < ntfl; i++)
        if (flow(st, "f", tfl[i], ts, lane, k)) return -1;
    if (b->fd >= 0 && b->len > b->flush_bytes) return flushed(st);
    return 0;
}

/* one packet; 1: outside the subset */
static int packet(state *st, Py_ssize_t at, Py_ssize_t end, int64_t k) {
    const uint8_t *d = st->d;
    uint64_t ts = 0, seq = 0, flags = 0, cleared = 0;
    Py_ssize_t te = -1, te_end = 0, in = -1, in_end = 0;
    while (at < end) {
        uint32_t num; int wire; uint64_t val; Py_ssize_t body = 0;
        Py_ssize_t next = field(d, at, end, &num, &wire, &val, &body);
        if (next < 0) return 1;
        if (num == 8 && wire == 0) ts = val;
        else if (num == 10 && wire == 0) seq = val;
        else if (num == 13 && wire == 0) flags = val;
        else if (num == 41 && wire == 0) cleared = val;
        else if ((num == 87 || num == 42) && wire == 0) {}
        else if (num == 11 && wire == 2) { te = body; te_end = next; }
        else if (num == 12 && wire == 2) { in = body; in_end = next; }
        else if ((num == 60 || num == 33 || num == 35 || num == 89 || num == 36 || num == 6) && wire == 2) {}
        else return 1;
        at = next;
    }
    seqstate *s = seq_of(st, seq, (flags & 1) || cleared);
    if (!s) return 1;
    if (in >= 0 && intern(s, d, in, in_end)) return 1;
    if (te >= 0) return track_event(st, s, (int64_t)ts, te, te_end, k);
    return 0;
}

/* The first pass: each slice begin's duration (``st->dur``, in packet order), from its
 * end (the innermost open slice of the end's track), so that the second pass writes a
 * slice whole, never going back: the text it has written is final, and the loader's
 * decoders can read it while it grows. Reads only the packets' timestamp and their
 * track events' type and track. 1: outside the subset (a track event with no or an
 * unknown track, of another type, an end with no open slice, a slice left open,
 * broken framing), which the second pass would meet too. */
static int pair_slices(state *st, Py_ssize_t end) {
    const uint8_t *d = st->d;
    Py_ssize_t at = 0;
    while (at < end) {
        uint32_t num; int wire; uint64_t val; Py_ssize_t body = 0;
        Py_ssize_t next = field(d, at, end, &num, &wire, &val, &body);
        if (next < 0 || num != 1 || wire != 2) return 1;
        uint64_t ts = 0;
        Py_ssize_t te = -1, te_end = 0;
        for (Py_ssize_t a = body; a < next;) {
            uint32_t n2; int w2; uint64_t v2; Py_ssize_t b2 = 0;
            a = field(d, a, next, &n2, &w2, &v2, &b2);
            if (a < 0) return 1;
            if (n2 == 8 && w2 == 0) ts = v2;
            else if (n2 == 11 && w2 == 2) { te = b2; te_end = a; }
        }
        at = next;
        if (te < 0) continue;
        uint64_t type = 0, uuid = 0; int have_track = 0;
        for (Py_ssize_t a = te; a < te_end;) {
            uint32_t n2; int w2; uint64_t v2; Py_ssize_t b2 = 0;
            a = field(d, a, te_end, &n2, &w2, &v2, &b2);
            if (a < 0) return 1;
            if (n2 == 9 && w2 == 0) type = v2;
            else if (n2 == 11 && w2 == 0) { uuid = v2; have_track = 1; }
        }
        if (type == 3) continue;
        if (!have_track || (type != 1 && type != 2)) return 1;
        track *tr = track_of(&st->tracks, uuid);
        if (!tr) return 1;
        stack *sk = &tr->open;
        if (type == 2) {
            if (sk->n == 0) return 1;
            sk->n--;
            st->dur[sk->begin[sk->n]] = (int64_t)(ts - (uint64_t)sk->ts[sk->n]);
            continue;
        }
        if (sk->n == sk->cap) {
            Py_ssize_t cap = sk->cap ? sk->cap * 2 : 16;
            int64_t *t2 = PyMem_Realloc(sk->ts, cap * sizeof(int64_t));
            if (!t2) { PyErr_NoMemory(); return -1; }
            sk->ts = t2;
            Py_ssize_t *b2 = PyMem_Realloc(sk->begin, cap * sizeof(Py_ssize_t));
            if (!b2) { PyErr_NoMemory(); return -1; }
            sk->begin = b2;
            sk->cap = cap;
        }
        if (st->nbegins == st->begins_cap) {
            Py_ssize_t cap = st->begins_cap ? st->begins_cap * 2 : 4096;
            int64_t *v = PyMem_Realloc(st->dur, cap * sizeof(int64_t));
            if (!v) { PyErr_NoMemory(); return -1; }
            st->dur = v;
            st->begins_cap = cap;
        }
        sk->ts[sk->n] = (int64_t)ts;
        sk->begin[sk->n++] = st->nbegins++;
    }
    for (size_t i = 0; i <= st->tracks.mask; i++)
        if (st->tracks.v[i].used && st->tracks.v[i].open.n) return 1; /* a slice left open: the loader names it */
    return 0;
}

static PyObject *transcode(PyObject *self, PyObject *args) {
    Py_buffer view;
    PyObject *tracks;
    Py_ssize_t ntracks;
    int fd = -1;
    PyObject *on_flush = Py_None;
    Py_ssize_t flush_bytes = FLUSH_BYTES;
    if (!PyArg_ParseTuple(args, "y*O!n|iOn", &view, &PyDict_Type, &tracks, &ntracks, &fd, &on_flush, &flush_bytes))
        return NULL;
    if (on_flush != Py_None && !PyCallable_Check(on_flush)) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_TypeError, "on_flush must be callable or None");
        return NULL;
    }
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    PyBuffer_Release(&view); /* fixed64 fields are read as little-endian words: not here */
    Py_RETURN_NONE;
#endif
    state st;
    memset(&st, 0, sizeof st);
    st.b.fd = fd;
    st.b.flush_bytes = flush_bytes < 1 ? 1 : flush_bytes > (1 << 30) ? (1 << 30) : flush_bytes;
    st.on_flush = on_flush;
    st.d = view.buf;
    PyObject *result = NULL;
    int r = 0;
    if (ntracks < PyDict_GET_SIZE(tracks) || tracks_from(&st.tracks, tracks)) {
        if (!PyErr_Occurred()) r = 1;
        goto done;
    }
    r = pair_slices(&st, view.len);
    if (r) goto done;
    st.b.out = PyByteArray_FromStringAndSize(NULL, fd >= 0 ? st.b.flush_bytes * 2 : view.len * 4 + 4096);
    if (!st.b.out) { r = -1; goto done; }
    if (PUTS(&st.b, "{\"traceEvents\":[\n")) { r = -1; goto done; }
    Py_ssize_t at = 0, end = view.len;
    int64_t k = 0;
    while (at < end) {
        uint32_t num; int wire; uint64_t val; Py_ssize_t body = 0;
        Py_ssize_t next = field(st.d, at, end, &num, &wire, &val, &body);
        if (next < 0 || num != 1 || wire != 2) { r = 1; break; }
        st.at = next;
        r = packet(&st, body, next, k);
        if (r) break;
        at = next;
        k++;
    }
    if (r == 0 && st.next_begin != st.nbegins) r = 1; /* not as ``pair_slices`` saw it */
    if (r) goto done;
    if (fd >= 0 && flush(&st.b)) { r = -1; goto done; }
    if (PyByteArray_Resize(st.b.out, st.b.len)) { r = -1; goto done; }
    PyObject *pk = PyBytes_FromStringAndSize((const char *)st.pk, st.packet_of_len * (Py_ssize_t)sizeof(int64_t));
    if (!pk) { r = -1; goto done; }
    result = PyTuple_Pack(2, st.b.out, pk);
    Py_DECREF(pk);
done:
    if (r > 0 && !result) { result = Py_None; Py_INCREF(result); }
    for (int i = 0; i < st.nseqs; i++)
        for (int j = 0; j < 3; j++) PyMem_Free(st.seqs[i].t[j].v);
    tracks_free(&st.tracks);
    PyMem_Free(st.dur);
    PyMem_Free(st.pk);
    Py_XDECREF(st.b.out);
    PyMem_Free(st.seen);
    PyBuffer_Release(&view);
    return result;
}

static PyObject *descriptor_spans(PyObject *self, PyObject *args) {
    Py_buffer view;
    if (!PyArg_ParseTuple(args, "y*", &view)) return NULL;
    const uint8_t *d = view.buf;
    PyObject *out = PyList_New(0);
    Py_ssize_t at = 0, end = view.len;
    while (out && at < end) {
        uint32_t num; int wire; uint64_t val; Py_ssize_t body = 0;
        Py_ssize_t next = field(d, at, end, &num, &wire, &val, &body);
        if (next < 0 || num != 1 || wire != 2) { Py_DECREF(out); out = Py_None; Py_INCREF(out); break; }
        Py_ssize_t a = body;
        while (a < next) {
            uint32_t f2; int w2; uint64_t v2; Py_ssize_t b2 = 0;
            a = field(d, a, next, &f2, &w2, &v2, &b2);
            if (a < 0) break;
            if (f2 == 60 && w2 == 2) {
                PyObject *t = Py_BuildValue("(nn)", body, next);
                if (!t || PyList_Append(out, t)) { Py_XDECREF(t); Py_DECREF(out); out = NULL; }
                Py_XDECREF(t);
                break;
            }
        }
        at = next;
    }
    PyBuffer_Release(&view);
    return out;
}

static PyMethodDef methods[] = {
    {"transcode", transcode, METH_VARARGS, "Chrome events of the common TrackEvent subset, or None."},
    {"descriptor_spans", descriptor_spans, METH_VARARGS, "Spans of the track_descriptor packets, or None."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_pfscan", NULL, -1, methods};

PyMODINIT_FUNC PyInit__pfscan(void) {
    init_plain();
    return PyModule_Create(&module);
}
