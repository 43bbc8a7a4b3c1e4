/* The fast path of the Prometheus text reader (sources/prometheus_scan.py): sample
 * lines of a buffer of bytes as Arrow-ready columns.
 *
 * Rules: scan() takes a strict subset of what the Python parser
 * (sources/prometheus.py) reads: a sample line `name[{labels}] value [timestamp]`
 * of valid UTF-8, label values without control bytes, a decimal value that is
 * finite, a timestamp of at most 15 digits in the years 1 to 9999, no line
 * longer than the limit. It stops at the first line outside that subset (a
 * comment, a NaN, anything malformed) and leaves it, and the rules that depend
 * on the families (types, `le` and `quantile`), to Python: what C reads, it
 * reads as Python would, and everything else Python reads itself. Values are read with the C library's
 * strtod in the "C" locale, correctly rounded as Python's float() is. Each row
 * also gets a 64-bit hash of its series and time (row_hash gives the same for a
 * row Python read) for the check of repeated samples, which Python does. The
 * GIL is released while the buffer is read.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <locale.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LABELS 64
#define MAX_VALUE_TOKEN 64
#define MAX_STAMP_DIGITS 15 /* milliseconds * 1000 stays inside int64 */
/* Timestamps Python reads (prometheus.STAMP_MS_MIN/MAX: years 1 to 9999); others it refuses. */
#define STAMP_MS_MIN INT64_C(-62135596800000)
#define STAMP_MS_MAX INT64_C(253402300799999)

enum { STOP_MORE = 0, STOP_PYTHON = 1, STOP_ROOM = 2 };
enum { FLAG_BAD_LE = 1, FLAG_BAD_QUANTILE = 2 };

typedef struct {
    char *p;
    size_t n, cap;
} Buf;

static int
buf_reserve(Buf *b, size_t extra)
{
    if (b->n + extra <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 1 << 16;
    while (cap < b->n + extra)
        cap *= 2;
    char *q = realloc(b->p, cap);
    if (!q)
        return -1;
    b->p = q;
    b->cap = cap;
    return 0;
}

static int
buf_put(Buf *b, const void *s, size_t n)
{
    if (buf_reserve(b, n))
        return -1;
    memcpy(b->p + b->n, s, n);
    b->n += n;
    return 0;
}

/* The columns of one scan, in Arrow's layout (int32 offsets, native order). */
enum { NAME_OFF, NAME_DATA, MAP_OFF, KEY_OFF, KEY_DATA, VAL_OFF, VAL_DATA, TIMES, VALUES,
       FLAGS, HASHES, LINES, STARTS, NBUFS };

/* --- the series hash: FNV-1a over name, pairs and time, then a final mix ----------------- */

#define FNV_OFFSET 0xcbf29ce484222325ULL
#define FNV_PRIME 0x100000001b3ULL

static inline uint64_t
fnv(uint64_t h, const uint8_t *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * FNV_PRIME;
    return h;
}

/* 0xfe and 0xff never occur in UTF-8, so they frame the parts unambiguously. */
static const uint8_t SEP_KEY = 0xfe, SEP_END = 0xff;

static inline uint64_t
finish_hash(uint64_t h, int64_t ts)
{
    uint64_t u = (uint64_t)ts;
    for (int i = 0; i < 8; i++)
        h = (h ^ ((u >> (8 * i)) & 0xff)) * FNV_PRIME;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h;
}

/* --- UTF-8 as Python's strict decoder takes it -------------------------------------------- */

static int
valid_utf8(const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t len;
        uint32_t cp;
        if (c >= 0xc2 && c <= 0xdf) {
            len = 2;
            cp = c & 0x1f;
        } else if (c >= 0xe0 && c <= 0xef) {
            len = 3;
            cp = c & 0x0f;
        } else if (c >= 0xf0 && c <= 0xf4) {
            len = 4;
            cp = c & 0x07;
        } else {
            return 0;
        }
        if (i + len > n)
            return 0;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xc0) != 0x80)
                return 0;
            cp = (cp << 6) | (s[i + k] & 0x3f);
        }
        if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
            return 0;
        if (cp >= 0xd800 && cp <= 0xdfff)
            return 0;
        i += len;
    }
    return 1;
}

/* --- tokens ------------------------------------------------------------------------------- */

static inline int
is_blank(uint8_t c)
{
    return c == ' ' || c == '\t';
}

static inline int
is_digit(uint8_t c)
{
    return c >= '0' && c <= '9';
}

static inline int
is_alpha_(uint8_t c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

/* Length of the decimal float at s (sign, digits, point, exponent) as Go's ParseFloat
 * and the Python parser's _FLOAT read it, without the special values; 0 if none. */
static size_t
decimal_len(const uint8_t *s, size_t n)
{
    size_t i = 0, digits = 0;
    if (i < n && (s[i] == '+' || s[i] == '-'))
        i++;
    while (i < n && is_digit(s[i]))
        i++, digits++;
    if (i < n && s[i] == '.') {
        i++;
        while (i < n && is_digit(s[i]))
            i++, digits++;
    }
    if (!digits)
        return 0;
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        size_t j = i + 1, exp = 0;
        if (j < n && (s[j] == '+' || s[j] == '-'))
            j++;
        while (j < n && is_digit(s[j]))
            j++, exp++;
        if (exp)
            i = j;
    }
    return i;
}

static int
ieq(const uint8_t *s, size_t n, const char *word)
{
    size_t m = strlen(word);
    if (n != m)
        return 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t c = s[i];
        if (c >= 'A' && c <= 'Z')
            c += 'a' - 'A';
        if (c != (uint8_t)word[i])
            return 0;
    }
    return 1;
}

/* Whether the whole of s is a Go float, special values included (``parse_float``). */
static int
is_go_float(const uint8_t *s, size_t n)
{
    if (n && decimal_len(s, n) == n)
        return 1;
    if (n && (s[0] == '+' || s[0] == '-'))
        s++, n--;
    return ieq(s, n, "inf") || ieq(s, n, "infinity") || ieq(s, n, "nan");
}

#ifdef __GLIBC__
static locale_t c_locale;
#define STRTOD(s, end) strtod_l((s), (end), c_locale)
#else
#define STRTOD(s, end) strtod((s), (end))
#endif

/* --- one line ----------------------------------------------------------------------------- */

typedef struct {
    const uint8_t *key;
    size_t key_len;
    size_t val_at, val_len; /* in the scratch buffer */
} Pair;

typedef struct {
    Buf out[NBUFS];
    Buf scratch;
    int64_t default_us;
} Scan;

static int
pair_less(const uint8_t *a, size_t an, const uint8_t *b, size_t bn)
{
    int c = memcmp(a, b, an < bn ? an : bn);
    return c < 0 || (c == 0 && an < bn);
}

#define ROW_FAILS -2
#define ROW_PYTHON -1
#define ROW_BLANK 1
#define ROW_OK 0

/* The labels of s[*at] == '{'; ROW_PYTHON when outside the subset. */
static int
read_labels(Scan *sc, const uint8_t *s, size_t n, size_t *at, Pair *pairs, int *np,
            uint8_t *flags)
{
    size_t i = *at + 1;
    Buf *scr = &sc->scratch;
    for (;;) {
        while (i < n && is_blank(s[i]))
            i++;
        if (i < n && s[i] == '}') {
            *at = i + 1;
            return ROW_OK;
        }
        size_t k0 = i;
        if (!(i < n && is_alpha_(s[i])))
            return ROW_PYTHON;
        while (i < n && (is_alpha_(s[i]) || is_digit(s[i])))
            i++;
        size_t klen = i - k0;
        if (klen == 8 && memcmp(s + k0, "__name__", 8) == 0)
            return ROW_PYTHON;
        if (*np == MAX_LABELS)
            return ROW_PYTHON;
        for (int p = 0; p < *np; p++)
            if (pairs[p].key_len == klen && memcmp(pairs[p].key, s + k0, klen) == 0)
                return ROW_PYTHON;
        while (i < n && is_blank(s[i]))
            i++;
        if (!(i < n && s[i] == '='))
            return ROW_PYTHON;
        i++;
        while (i < n && is_blank(s[i]))
            i++;
        if (!(i < n && s[i] == '"'))
            return ROW_PYTHON;
        i++;
        size_t v0 = scr->n;
        for (;;) {
            if (i >= n)
                return ROW_PYTHON;
            uint8_t c = s[i++];
            if (c == '"')
                break;
            if (c < 0x20 || c == 0x7f)
                return ROW_PYTHON;
            if (c == '\\') {
                uint8_t e = i < n ? s[i] : 0;
                i++;
                if (e == '\\' || e == '"')
                    c = e;
                else if (e == 'n')
                    c = '\n';
                else
                    return ROW_PYTHON;
            }
            if (buf_put(scr, &c, 1))
                return ROW_FAILS;
        }
        Pair *pr = &pairs[(*np)++];
        pr->key = s + k0;
        pr->key_len = klen;
        pr->val_at = v0;
        pr->val_len = scr->n - v0;
        const uint8_t *val = (const uint8_t *)scr->p + v0;
        if (klen == 2 && memcmp(s + k0, "le", 2) == 0 && !is_go_float(val, pr->val_len))
            *flags |= FLAG_BAD_LE;
        if (klen == 8 && memcmp(s + k0, "quantile", 8) == 0 && !is_go_float(val, pr->val_len))
            *flags |= FLAG_BAD_QUANTILE;
        while (i < n && is_blank(s[i]))
            i++;
        if (i < n && s[i] == ',')
            i++;
        else if (!(i < n && s[i] == '}'))
            return ROW_PYTHON;
    }
}

/* The value and timestamp after the labels; ROW_PYTHON when outside the subset. */
static int
read_value_time(Scan *sc, const uint8_t *s, size_t n, size_t i, double *value, int64_t *ts)
{
    size_t vlen = decimal_len(s + i, n - i);
    if (!vlen || vlen >= MAX_VALUE_TOKEN || (i + vlen < n && !is_blank(s[i + vlen])))
        return ROW_PYTHON;
    char tok[MAX_VALUE_TOKEN];
    memcpy(tok, s + i, vlen);
    tok[vlen] = 0;
    char *end;
    *value = STRTOD(tok, &end);
    if (end != tok + vlen || !isfinite(*value))
        return ROW_PYTHON;
    i += vlen;
    while (i < n && is_blank(s[i]))
        i++;
    *ts = sc->default_us;
    if (i == n)
        return ROW_OK;
    int neg = 0;
    if (s[i] == '+' || s[i] == '-')
        neg = s[i++] == '-';
    size_t d0 = i;
    int64_t ms = 0;
    while (i < n && is_digit(s[i])) {
        if (i - d0 == MAX_STAMP_DIGITS)
            return ROW_PYTHON;
        ms = ms * 10 + (s[i++] - '0');
    }
    if (i == d0 || (i < n && !is_blank(s[i])))
        return ROW_PYTHON;
    while (i < n && is_blank(s[i]))
        i++;
    if (i != n)
        return ROW_PYTHON;
    ms = neg ? -ms : ms;
    if (ms < STAMP_MS_MIN || ms > STAMP_MS_MAX)
        return ROW_PYTHON;
    *ts = ms * 1000;
    return ROW_OK;
}

static int
put_i32(Buf *b, size_t v)
{
    if (v > INT32_MAX)
        return -1;
    int32_t x = (int32_t)v;
    return buf_put(b, &x, 4);
}

/* One line s[0:n] (without its end of line) as a row; ROW_BLANK for a blank line. */
static int
read_line(Scan *sc, const uint8_t *s, size_t n, int64_t lineno, int64_t start)
{
    size_t i = 0;
    while (i < n && is_blank(s[i]))
        i++;
    if (i == n)
        return ROW_BLANK;
    if (!is_alpha_(s[i]) && s[i] != ':')
        return ROW_PYTHON;
    for (size_t k = i; k < n; k++)
        if (s[k] >= 0x80) {
            if (!valid_utf8(s + k, n - k))
                return ROW_PYTHON;
            break;
        }
    size_t name0 = i;
    while (i < n && (is_alpha_(s[i]) || is_digit(s[i]) || s[i] == ':'))
        i++;
    size_t name_len = i - name0;
    if (i == n || !(s[i] == '{' || is_blank(s[i])))
        return ROW_PYTHON;
    while (i < n && is_blank(s[i]))
        i++;
    Pair pairs[MAX_LABELS];
    int np = 0;
    uint8_t flags = 0;
    sc->scratch.n = 0;
    if (i < n && s[i] == '{') {
        int r = read_labels(sc, s, n, &i, pairs, &np, &flags);
        if (r != ROW_OK)
            return r;
        while (i < n && is_blank(s[i]))
            i++;
    }
    double value;
    int64_t ts;
    int r = read_value_time(sc, s, n, i, &value, &ts);
    if (r != ROW_OK)
        return r;
    for (int a = 1; a < np; a++) { /* keys ascending (they are distinct) */
        Pair p = pairs[a];
        int b = a - 1;
        while (b >= 0 && pair_less(p.key, p.key_len, pairs[b].key, pairs[b].key_len)) {
            pairs[b + 1] = pairs[b];
            b--;
        }
        pairs[b + 1] = p;
    }
    Buf *o = sc->out;
    const uint8_t *scr = (const uint8_t *)sc->scratch.p;
    uint64_t h = fnv(FNV_OFFSET, s + name0, name_len);
    h = fnv(h, &SEP_END, 1);
    if (buf_put(&o[NAME_DATA], s + name0, name_len))
        return ROW_FAILS;
    for (int p = 0; p < np; p++) {
        const uint8_t *val = scr + pairs[p].val_at;
        if (buf_put(&o[KEY_DATA], pairs[p].key, pairs[p].key_len) ||
            buf_put(&o[VAL_DATA], val, pairs[p].val_len) ||
            put_i32(&o[KEY_OFF], o[KEY_DATA].n) || put_i32(&o[VAL_OFF], o[VAL_DATA].n))
            return ROW_FAILS;
        h = fnv(h, pairs[p].key, pairs[p].key_len);
        h = fnv(h, &SEP_KEY, 1);
        h = fnv(h, val, pairs[p].val_len);
        h = fnv(h, &SEP_END, 1);
    }
    int64_t hash = (int64_t)finish_hash(h, ts);
    size_t pairs_so_far = o[KEY_OFF].n / 4 - 1;
    if (put_i32(&o[NAME_OFF], o[NAME_DATA].n) || put_i32(&o[MAP_OFF], pairs_so_far) ||
        buf_put(&o[TIMES], &ts, 8) || buf_put(&o[VALUES], &value, 8) ||
        buf_put(&o[FLAGS], &flags, 1) || buf_put(&o[HASHES], &hash, 8) ||
        buf_put(&o[LINES], &lineno, 8) || buf_put(&o[STARTS], &start, 8))
        return ROW_FAILS;
    return ROW_OK;
}

static void
sizes(Scan *sc, size_t *at)
{
    for (int k = 0; k < NBUFS; k++)
        at[k] = sc->out[k].n;
}

static PyObject *
scan(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer view;
    Py_ssize_t pos, max_rows, line_limit;
    long long lineno, default_us;
    if (!PyArg_ParseTuple(args, "y*nLnLn", &view, &pos, &lineno, &max_rows, &default_us,
                          &line_limit))
        return NULL;
    const uint8_t *buf = view.buf;
    size_t len = (size_t)view.len;
    if (pos < 0 || (size_t)pos > len) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "position outside the buffer");
        return NULL;
    }
    Scan sc;
    memset(&sc, 0, sizeof sc);
    sc.default_us = default_us;
    int failed = 0, stop = STOP_MORE;
    Py_ssize_t rows = 0;
    size_t at = (size_t)pos;
    Py_BEGIN_ALLOW_THREADS
    failed = put_i32(&sc.out[NAME_OFF], 0) || put_i32(&sc.out[MAP_OFF], 0) ||
             put_i32(&sc.out[KEY_OFF], 0) || put_i32(&sc.out[VAL_OFF], 0);
    while (!failed) {
        if (rows >= max_rows) {
            stop = STOP_ROOM;
            break;
        }
        const uint8_t *nl = memchr(buf + at, '\n', len - at);
        if (!nl) {
            stop = STOP_MORE;
            break;
        }
        size_t end = (size_t)(nl - buf);
        if (line_limit > 0 && end - at + 1 > (size_t)line_limit) {
            stop = STOP_PYTHON;
            break;
        }
        size_t text_end = end > at && buf[end - 1] == '\r' ? end - 1 : end;
        size_t before[NBUFS];
        sizes(&sc, before);
        int r = read_line(&sc, buf + at, text_end - at, lineno, (int64_t)at);
        if (r == ROW_FAILS) {
            failed = 1;
            break;
        }
        if (r == ROW_PYTHON) {
            for (int k = 0; k < NBUFS; k++)
                sc.out[k].n = before[k];
            stop = STOP_PYTHON;
            break;
        }
        rows += r == ROW_OK;
        at = end + 1;
        lineno++;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    PyObject *result = NULL;
    if (failed) {
        PyErr_NoMemory();
    } else {
        PyObject *bufs = PyTuple_New(NBUFS);
        for (int k = 0; bufs && k < NBUFS; k++) {
            PyObject *b = PyBytes_FromStringAndSize(sc.out[k].p ? sc.out[k].p : "", sc.out[k].n);
            if (!b) {
                Py_CLEAR(bufs);
                break;
            }
            PyTuple_SET_ITEM(bufs, k, b);
        }
        if (bufs)
            result = Py_BuildValue("nLinN", (Py_ssize_t)at, lineno, stop, rows, bufs);
    }
    for (int k = 0; k < NBUFS; k++)
        free(sc.out[k].p);
    free(sc.scratch.p);
    return result;
}

/* row_hash(name, labels, ts): scan()'s hash of a row Python read (labels: sorted pairs). */
static PyObject *
row_hash(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *name, *labels, *ts_obj;
    if (!PyArg_ParseTuple(args, "UOO", &name, &labels, &ts_obj))
        return NULL;
    Py_ssize_t n;
    const char *s = PyUnicode_AsUTF8AndSize(name, &n);
    if (!s)
        return NULL;
    uint64_t h = fnv(FNV_OFFSET, (const uint8_t *)s, n);
    h = fnv(h, &SEP_END, 1);
    PyObject *seq = PySequence_Fast(labels, "labels must be a sequence of pairs");
    if (!seq)
        return NULL;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
        PyObject *pair = PySequence_Fast_GET_ITEM(seq, i);
        PyObject *k, *v;
        if (!PyArg_ParseTuple(pair, "UU", &k, &v)) {
            Py_DECREF(seq);
            return NULL;
        }
        Py_ssize_t kn, vn;
        const char *ks = PyUnicode_AsUTF8AndSize(k, &kn);
        const char *vs = ks ? PyUnicode_AsUTF8AndSize(v, &vn) : NULL;
        if (!vs) {
            Py_DECREF(seq);
            return NULL;
        }
        h = fnv(h, (const uint8_t *)ks, kn);
        h = fnv(h, &SEP_KEY, 1);
        h = fnv(h, (const uint8_t *)vs, vn);
        h = fnv(h, &SEP_END, 1);
    }
    Py_DECREF(seq);
    /* A time beyond int64 (the batch will refuse it) hashes as its low 64 bits. */
    unsigned long long u = PyLong_AsUnsignedLongLongMask(ts_obj);
    if (u == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    return PyLong_FromLongLong((long long)finish_hash(h, (int64_t)u));
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS,
     "scan(buf, pos, lineno, max_rows, default_us, line_limit) -> "
     "(pos, lineno, stop, rows, buffers)"},
    {"row_hash", row_hash, METH_VARARGS, "row_hash(name, labels, time_us) -> int"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "_promtext",
    .m_doc = "Fast path of the Prometheus text reader.",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__promtext(void)
{
#ifdef __GLIBC__
    c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0);
    if (!c_locale)
        return PyErr_NoMemory();
#endif
    PyObject *m = PyModule_Create(&module);
    if (!m)
        return NULL;
    if (PyModule_AddIntConstant(m, "STOP_MORE", STOP_MORE) ||
        PyModule_AddIntConstant(m, "STOP_PYTHON", STOP_PYTHON) ||
        PyModule_AddIntConstant(m, "STOP_ROOM", STOP_ROOM) ||
        PyModule_AddIntConstant(m, "FLAG_BAD_LE", FLAG_BAD_LE) ||
        PyModule_AddIntConstant(m, "FLAG_BAD_QUANTILE", FLAG_BAD_QUANTILE)) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
