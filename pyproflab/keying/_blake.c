/* BLAKE2b (RFC 7693) of many segments of one buffer in one call, for the
 * store's content ids (ids.py); and the comparison of many segments of two
 * buffers in one call (same_segments, for sent.py).
 *
 * Rules: segment k is data[bounds[k]:bounds[k+1]]; its hash is exactly what
 * hashlib.blake2b(segment, digest_size=8, person=person).digest() gives, read
 * as a little-endian uint64 (no key, no salt, sequential mode). So ids made here
 * equal the ids made by hashlib, and keep its resistance to chosen content.
 * Python allocates every array and passes it through the buffer protocol; C
 * checks the bounds against the buffers' sizes before it reads anything. The
 * loop runs without the GIL. Each hash_* takes an optional last argument
 * ``rows`` (int64 row numbers): only those rows are hashed and the others of
 * ``out`` are left as they are (ids.py's digest cache knows them already).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

static const uint64_t IV[8] = {
    0x6a09e667f3bcc908ULL, 0xbb67ae8584caa73bULL, 0x3c6ef372fe94f82bULL,
    0xa54ff53a5f1d36f1ULL, 0x510e527fade682d1ULL, 0x9b05688c2b3e6c1fULL,
    0x1f83d9abfb41bd6bULL, 0x5be0cd19137e2179ULL,
};

static const uint8_t SIGMA[12][16] = {
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
    {11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4},
    {7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8},
    {9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13},
    {2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9},
    {12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11},
    {13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10},
    {6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5},
    {10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0},
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
};

static inline uint64_t
rotr(uint64_t x, int n)
{
    return (x >> n) | (x << (64 - n));
}

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define LITTLE_ENDIAN_HOST 1
#else
#define LITTLE_ENDIAN_HOST 0
#endif

static inline uint64_t
load_le64(const uint8_t *p)
{
#if LITTLE_ENDIAN_HOST
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
#else
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
#endif
}

#define G(a, b, c, d, x, y)           \
    do {                              \
        a = a + b + (x);              \
        d = rotr(d ^ a, 32);          \
        c = c + d;                    \
        b = rotr(b ^ c, 24);          \
        a = a + b + (y);              \
        d = rotr(d ^ a, 16);          \
        c = c + d;                    \
        b = rotr(b ^ c, 63);          \
    } while (0)

/* One round with its message schedule as constants (SIGMA[r] is folded at
 * compile time): the state stays in the sixteen local variables v0..v15. */
#define ROUND(r)                                                      \
    do {                                                              \
        G(v0, v4, v8, v12, m[SIGMA[r][0]], m[SIGMA[r][1]]);           \
        G(v1, v5, v9, v13, m[SIGMA[r][2]], m[SIGMA[r][3]]);           \
        G(v2, v6, v10, v14, m[SIGMA[r][4]], m[SIGMA[r][5]]);          \
        G(v3, v7, v11, v15, m[SIGMA[r][6]], m[SIGMA[r][7]]);          \
        G(v0, v5, v10, v15, m[SIGMA[r][8]], m[SIGMA[r][9]]);          \
        G(v1, v6, v11, v12, m[SIGMA[r][10]], m[SIGMA[r][11]]);        \
        G(v2, v7, v8, v13, m[SIGMA[r][12]], m[SIGMA[r][13]]);         \
        G(v3, v4, v9, v14, m[SIGMA[r][14]], m[SIGMA[r][15]]);         \
    } while (0)

/* One compression of a 128-byte block; t is the byte count so far (< 2**64).
 * RFC 7693's F, its twelve rounds written out so that the compiler keeps the
 * working vector in registers and every message index is a constant. */
static void
compress(uint64_t h[8], const uint8_t block[128], uint64_t t, int last)
{
    uint64_t m[16];
    for (int i = 0; i < 16; i++)
        m[i] = load_le64(block + 8 * i);
    uint64_t v0 = h[0], v1 = h[1], v2 = h[2], v3 = h[3];
    uint64_t v4 = h[4], v5 = h[5], v6 = h[6], v7 = h[7];
    uint64_t v8 = IV[0], v9 = IV[1], v10 = IV[2], v11 = IV[3];
    uint64_t v12 = IV[4] ^ t, v13 = IV[5], v14 = last ? ~IV[6] : IV[6], v15 = IV[7];
    ROUND(0);
    ROUND(1);
    ROUND(2);
    ROUND(3);
    ROUND(4);
    ROUND(5);
    ROUND(6);
    ROUND(7);
    ROUND(8);
    ROUND(9);
    ROUND(10);
    ROUND(11);
    h[0] ^= v0 ^ v8;
    h[1] ^= v1 ^ v9;
    h[2] ^= v2 ^ v10;
    h[3] ^= v3 ^ v11;
    h[4] ^= v4 ^ v12;
    h[5] ^= v5 ^ v13;
    h[6] ^= v6 ^ v14;
    h[7] ^= v7 ^ v15;
}

/* The first 8 bytes of BLAKE2b-64 of data[0:n], as a little-endian integer;
 * start is the state after the parameter block (digest size 8, person). */
static uint64_t
hash64(const uint64_t start[8], const uint8_t *data, size_t n)
{
    uint64_t h[8];
    uint8_t block[128];
    uint64_t t = 0;
    memcpy(h, start, sizeof h);
    while (n > 128) { /* the last block, full or not, is compressed as last */
        t += 128;
        compress(h, data, t, 0);
        data += 128;
        n -= 128;
    }
    memset(block, 0, sizeof block);
    if (n)
        memcpy(block, data, n);
    t += n;
    compress(h, block, t, 1);
    return h[0];
}

static inline void
put_le64(uint8_t *p, uint64_t v)
{
#if LITTLE_ENDIAN_HOST
    memcpy(p, &v, 8);
#else
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
#endif
}

/* The state after the parameter block: digest size 8, no key, fanout and depth
 * 1 (sequential), ``person`` (16 bytes, zero-padded) in words 6 and 7. */
static void
start_state(uint64_t start[8], const uint8_t person[16])
{
    memcpy(start, IV, 8 * sizeof(uint64_t));
    start[0] ^= 0x01010000ULL ^ 8;
    start[6] ^= load_le64(person);
    start[7] ^= load_le64(person + 8);
}

/* The rows to hash: all n (rows->buf NULL) or the int64 row numbers in ``rows``,
 * each checked to be below n. */
typedef struct {
    const int64_t *at;
    Py_ssize_t n;
} RowSet;

static int
row_set(RowSet *set, const Py_buffer *rows, Py_ssize_t n)
{
    set->at = NULL;
    set->n = n;
    if (rows->buf == NULL)
        return 1;
    if (rows->len % (Py_ssize_t)sizeof(int64_t))
        return 0;
    set->at = (const int64_t *)rows->buf;
    set->n = rows->len / (Py_ssize_t)sizeof(int64_t);
    for (Py_ssize_t i = 0; i < set->n; i++)
        if (set->at[i] < 0 || set->at[i] >= n)
            return 0;
    return 1;
}

static inline Py_ssize_t
row_at(const RowSet *set, Py_ssize_t i)
{
    return set->at ? (Py_ssize_t)set->at[i] : i;
}

/* hash_segments(data, bounds, person, out[, rows]): out[k] = BLAKE2b-64 of
 * data[bounds[k]:bounds[k+1]] with ``person`` (at most 16 bytes); bounds are
 * int64 byte offsets, non-decreasing, within data; out is uint64 with at least
 * len(bounds) - 1 entries. Returns None; ValueError when the arrays do not fit. */
static PyObject *
hash_segments(PyObject *self, PyObject *args)
{
    Py_buffer db, bb, pb, ob, rb = {0};
    RowSet set;
    if (!PyArg_ParseTuple(args, "y*y*y*w*|y*", &db, &bb, &pb, &ob, &rb))
        return NULL;
    const char *err = NULL;
    Py_ssize_t nb = bb.len / (Py_ssize_t)sizeof(int64_t);
    Py_ssize_t n = nb > 0 ? nb - 1 : 0;
    const int64_t *bounds = (const int64_t *)bb.buf;
    if (pb.len > 16)
        err = "person longer than 16 bytes";
    else if (bb.len % (Py_ssize_t)sizeof(int64_t) || ob.len < n * (Py_ssize_t)sizeof(uint64_t))
        err = "bounds or out of the wrong size";
    for (Py_ssize_t k = 0; err == NULL && k < n; k++)
        if (bounds[k] < 0 || bounds[k] > bounds[k + 1] || bounds[k + 1] > db.len)
            err = "bounds outside the data or decreasing";
    if (err == NULL && !row_set(&set, &rb, n))
        err = "rows outside the segments";
    if (err == NULL && n > 0) {
        uint8_t person[16] = {0};
        uint64_t start[8];
        memcpy(person, pb.buf, (size_t)pb.len);
        start_state(start, person);
        const uint8_t *data = (const uint8_t *)db.buf;
        uint64_t *out = (uint64_t *)ob.buf;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < set.n; i++) {
            Py_ssize_t k = row_at(&set, i);
            out[k] = hash64(start, data + bounds[k], (size_t)(bounds[k + 1] - bounds[k]));
        }
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&rb);
    PyBuffer_Release(&db);
    PyBuffer_Release(&bb);
    PyBuffer_Release(&pb);
    PyBuffer_Release(&ob);
    if (err != NULL) {
        PyErr_SetString(PyExc_ValueError, err);
        return NULL;
    }
    Py_RETURN_NONE;
}

/* True when offs (n+1 int64) are non-decreasing from 0 and end within len. */
static int
offsets_fit(const int64_t *offs, Py_ssize_t n, Py_ssize_t len)
{
    if (offs[0] < 0)
        return 0;
    for (Py_ssize_t k = 0; k < n; k++)
        if (offs[k] > offs[k + 1])
            return 0;
    return offs[n] <= len;
}

/* hash_lists(values, offsets, person, out[, rows]): out[k] = BLAKE2b-64 with ``person``
 * of list k written as its length then its values, each an 8-byte little-endian
 * word (ids.stack_ids); values are uint64, offsets int64 (n+1) into them. */
static PyObject *
hash_lists(PyObject *self, PyObject *args)
{
    Py_buffer vb, ob, pb, outb, rb = {0};
    RowSet set;
    if (!PyArg_ParseTuple(args, "y*y*y*w*|y*", &vb, &ob, &pb, &outb, &rb))
        return NULL;
    Py_ssize_t n = ob.len / (Py_ssize_t)sizeof(int64_t) - 1;
    const int64_t *off = (const int64_t *)ob.buf;
    int ok = pb.len <= 16 && n >= 0 && ob.len % (Py_ssize_t)sizeof(int64_t) == 0 &&
             vb.len % (Py_ssize_t)sizeof(uint64_t) == 0 &&
             outb.len >= n * (Py_ssize_t)sizeof(uint64_t) &&
             offsets_fit(off, n, vb.len / (Py_ssize_t)sizeof(uint64_t)) && row_set(&set, &rb, n);
    int64_t longest = 0;
    for (Py_ssize_t k = 0; ok && k < n; k++)
        longest = off[k + 1] - off[k] > longest ? off[k + 1] - off[k] : longest;
    uint8_t *row = ok ? PyMem_RawMalloc(8 * (size_t)(longest + 1)) : NULL;
    if (row != NULL) {
        uint8_t person[16] = {0};
        uint64_t start[8];
        const uint64_t *values = (const uint64_t *)vb.buf;
        uint64_t *out = (uint64_t *)outb.buf;
        memcpy(person, pb.buf, (size_t)pb.len);
        start_state(start, person);
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < set.n; i++) {
            Py_ssize_t k = row_at(&set, i);
            size_t len = (size_t)(off[k + 1] - off[k]);
            put_le64(row, (uint64_t)len);
            for (size_t i = 0; i < len; i++)
                put_le64(row + 8 * (i + 1), values[off[k] + (int64_t)i]);
            out[k] = hash64(start, row, 8 * (len + 1));
        }
        Py_END_ALLOW_THREADS
        PyMem_RawFree(row);
    }
    PyBuffer_Release(&rb);
    PyBuffer_Release(&vb);
    PyBuffer_Release(&ob);
    PyBuffer_Release(&pb);
    PyBuffer_Release(&outb);
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "list arrays do not fit together");
        return NULL;
    }
    if (row == NULL)
        return PyErr_NoMemory();
    Py_RETURN_NONE;
}

/* Row k's function encoding (ids._function_id): b"F1", the lengths of its three
 * strings and its start_line as 8-byte little-endian words, then the strings. */
static size_t
function_row(uint8_t *dst, const int64_t *off[3], const uint8_t *data[3], int64_t line,
             Py_ssize_t k)
{
    size_t at = 2;
    dst[0] = 'F';
    dst[1] = '1';
    for (int c = 0; c < 4; c++, at += 8)
        put_le64(dst + at, c < 3 ? (uint64_t)(off[c][k + 1] - off[c][k]) : (uint64_t)line);
    for (int c = 0; c < 3; c++) {
        size_t len = (size_t)(off[c][k + 1] - off[c][k]);
        memcpy(dst + at, data[c] + off[c][k], len);
        at += len;
    }
    return at;
}

/* hash_functions(off0, data0, off1, data1, off2, data2, start_line, out[, rows]):
 * out[k] = BLAKE2b-64 (no person) of function row k as ids._function_id encodes
 * it; offsets are int64 (n+1 each) into their data, start_line int64 (n). */
static PyObject *
hash_functions(PyObject *self, PyObject *args)
{
    Py_buffer ob_[3], db_[3], lb, outb, rb = {0};
    RowSet set;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*y*y*w*|y*", &ob_[0], &db_[0], &ob_[1], &db_[1],
                          &ob_[2], &db_[2], &lb, &outb, &rb))
        return NULL;
    Py_ssize_t n = lb.len / (Py_ssize_t)sizeof(int64_t);
    const int64_t *off[3];
    const uint8_t *data[3];
    size_t widest = 0;
    int ok = lb.len % (Py_ssize_t)sizeof(int64_t) == 0 &&
             outb.len >= n * (Py_ssize_t)sizeof(uint64_t);
    for (int c = 0; c < 3 && ok; c++) {
        off[c] = (const int64_t *)ob_[c].buf;
        data[c] = (const uint8_t *)db_[c].buf;
        ok = ob_[c].len == (n + 1) * (Py_ssize_t)sizeof(int64_t) && offsets_fit(off[c], n, db_[c].len);
    }
    ok = ok && row_set(&set, &rb, n);
    for (Py_ssize_t k = 0; ok && k < n; k++) {
        size_t w = 34;
        for (int c = 0; c < 3; c++)
            w += (size_t)(off[c][k + 1] - off[c][k]);
        widest = w > widest ? w : widest;
    }
    uint8_t *row = ok ? PyMem_RawMalloc(widest ? widest : 1) : NULL;
    if (row != NULL) {
        uint8_t person[16] = {0};
        uint64_t start[8];
        const int64_t *line = (const int64_t *)lb.buf;
        uint64_t *out = (uint64_t *)outb.buf;
        start_state(start, person);
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < set.n; i++) {
            Py_ssize_t k = row_at(&set, i);
            out[k] = hash64(start, row, function_row(row, off, data, line[k], k));
        }
        Py_END_ALLOW_THREADS
        PyMem_RawFree(row);
    }
    PyBuffer_Release(&rb);
    for (int c = 0; c < 3; c++) {
        PyBuffer_Release(&ob_[c]);
        PyBuffer_Release(&db_[c]);
    }
    PyBuffer_Release(&lb);
    PyBuffer_Release(&outb);
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "function arrays do not fit together");
        return NULL;
    }
    if (row == NULL)
        return PyErr_NoMemory();
    Py_RETURN_NONE;
}

/* same_segments(a, a_starts, b, b_starts, lengths, out): out[k] = 1 when the
 * lengths[k] bytes at a + a_starts[k] equal the lengths[k] bytes at
 * b + b_starts[k], else 0 (sent.py drops a row as sent before only when its bytes
 * are equal). Starts and lengths are int64 byte counts, out one byte per k; every
 * segment is checked to lie inside its buffer before anything is read. */
static PyObject *
same_segments(PyObject *self, PyObject *args)
{
    Py_buffer ab, asb, bb, bsb, lb, outb;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*w*", &ab, &asb, &bb, &bsb, &lb, &outb))
        return NULL;
    Py_ssize_t n = lb.len / (Py_ssize_t)sizeof(int64_t);
    const int64_t *as = (const int64_t *)asb.buf, *bs = (const int64_t *)bsb.buf;
    const int64_t *len = (const int64_t *)lb.buf;
    int ok = lb.len % (Py_ssize_t)sizeof(int64_t) == 0 && asb.len == lb.len &&
             bsb.len == lb.len && outb.len >= n;
    for (Py_ssize_t k = 0; ok && k < n; k++)
        ok = len[k] >= 0 && as[k] >= 0 && bs[k] >= 0 && len[k] <= ab.len && len[k] <= bb.len &&
             as[k] <= ab.len - len[k] && bs[k] <= bb.len - len[k];
    if (ok) {
        const uint8_t *a = (const uint8_t *)ab.buf, *b = (const uint8_t *)bb.buf;
        uint8_t *out = (uint8_t *)outb.buf;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t k = 0; k < n; k++)
            out[k] = memcmp(a + as[k], b + bs[k], (size_t)len[k]) == 0;
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&ab);
    PyBuffer_Release(&asb);
    PyBuffer_Release(&bb);
    PyBuffer_Release(&bsb);
    PyBuffer_Release(&lb);
    PyBuffer_Release(&outb);
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "segments do not fit their buffers");
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"hash_segments", hash_segments, METH_VARARGS,
     "BLAKE2b-64 of each data[bounds[k]:bounds[k+1]] into out[k]."},
    {"hash_lists", hash_lists, METH_VARARGS,
     "BLAKE2b-64 of each list of uint64 as (length, values...) into out[k]."},
    {"hash_functions", hash_functions, METH_VARARGS,
     "BLAKE2b-64 of each function row as ids._function_id encodes it."},
    {"same_segments", same_segments, METH_VARARGS,
     "out[k] = whether two byte segments (a + a_starts[k], b + b_starts[k]) are equal."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_blake", "BLAKE2b of many segments (see _blake.c).", -1, methods,
};

PyMODINIT_FUNC
PyInit__blake(void)
{
    return PyModule_Create(&module);
}
