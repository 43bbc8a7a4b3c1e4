/* Numbering of byte keys in order of first appearance, across batches: the
 * merge of many profiles numbers its keys with it (analyses/_arrays.Numbering),
 * the store's digest cache finds content it has hashed before (store/digests.py).
 * Shared by both layers, so it sits at the package's top, below them.
 *
 * Rules: an Interner holds every distinct key it was given once (its bytes in
 * one arena) and numbers them 0, 1, ... in the order they first appeared. Keys
 * are equal when their bytes are equal: a hash only finds candidates, the bytes
 * decide, so two keys are never merged on a hash. The hash is keyed with 16
 * random bytes given at creation (keyed_hash), so keys crafted to collide cannot
 * be chosen in advance (they would only make probing slow, never wrong). The table
 * is open addressing with linear probing, at most half full. Python allocates
 * every array and passes it through the buffer protocol; C checks offsets
 * against the buffers' sizes before it reads a key. The GIL is held: an
 * Interner is not shared between threads.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define LITTLE_ENDIAN_HOST 1
#else
#define LITTLE_ENDIAN_HOST 0
#endif

static inline uint64_t
load_le64(const uint8_t *p)
{
#if LITTLE_ENDIAN_HOST
    uint64_t v; /* one load; the byte loop below is the portable form */
    memcpy(&v, p, 8);
    return v;
#else
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
#endif
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

/* --- the keyed hash -------------------------------------------------------------------- */

/* A folded multiply: the 128-bit product of a and b, its halves xored. */
static inline uint64_t
fold(uint64_t a, uint64_t b)
{
#if defined(__SIZEOF_INT128__)
    __uint128_t r = (__uint128_t)a * b;
    return (uint64_t)r ^ (uint64_t)(r >> 64);
#else
    uint64_t a0 = (uint32_t)a, a1 = a >> 32, b0 = (uint32_t)b, b1 = b >> 32;
    uint64_t lo = a0 * b0, m1 = a0 * b1, m2 = a1 * b0, hi = a1 * b1;
    uint64_t mid = (lo >> 32) + (uint32_t)m1 + (uint32_t)m2;
    return ((mid << 32) | (uint32_t)lo) ^ (hi + (m1 >> 32) + (m2 >> 32) + (mid >> 32));
#endif
}

static inline uint64_t
load_le32(const uint8_t *p)
{
    return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24;
}

/* The keys' hash: folded multiplies of 16 bytes at a time, three lanes of them
 * over long keys, every word xored with a secret before it is multiplied. It is
 * the scheme of Go's runtime map hash where AES is missing (hash64.go: a wyhash
 * variant), which Go relies on against crafted collisions when its seed is
 * random; here the secrets come from the Interner's random seed. Several times
 * faster than SipHash-1-3 on the 100-300 byte keys of rows (167 ns a function row
 * with SipHash), and a hash only proposes candidates: the bytes decide. */
typedef struct {
    uint64_t seed, s1, s2, s3;
} HashKey;

static uint64_t
keyed_hash(const HashKey *k, const uint8_t *p, size_t n)
{
    uint64_t seed = k->seed, a, b;
    if (n <= 16) {
        if (n >= 8) {
            a = load_le64(p);
            b = load_le64(p + n - 8);
        }
        else if (n >= 4) {
            a = load_le32(p);
            b = load_le32(p + n - 4);
        }
        else if (n > 0) {
            a = (uint64_t)p[0] << 16 | (uint64_t)p[n >> 1] << 8 | p[n - 1];
            b = 0;
        }
        else {
            a = b = 0;
        }
    }
    else {
        size_t left = n;
        if (left > 48) {
            uint64_t seed1 = seed, seed2 = seed;
            do {
                seed = fold(load_le64(p) ^ k->s1, load_le64(p + 8) ^ seed);
                seed1 = fold(load_le64(p + 16) ^ k->s2, load_le64(p + 24) ^ seed1);
                seed2 = fold(load_le64(p + 32) ^ k->s3, load_le64(p + 40) ^ seed2);
                p += 48;
                left -= 48;
            } while (left > 48);
            seed ^= seed1 ^ seed2;
        }
        while (left > 16) {
            seed = fold(load_le64(p) ^ k->s1, load_le64(p + 8) ^ seed);
            p += 16;
            left -= 16;
        }
        /* The last 16 bytes of the key, overlapping what came before. */
        a = load_le64(p + left - 16);
        b = load_le64(p + left - 8);
    }
    return fold(0x1d8e4e27c47d124fULL ^ (uint64_t)n, fold(a ^ k->s1, b ^ seed));
}

/* splitmix64: spreads the 16 bytes of seed over the four secrets. */
static uint64_t
splitmix(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static void
hash_key_init(HashKey *k, uint64_t k0, uint64_t k1)
{
    uint64_t state = k0;
    k->seed = splitmix(&state) ^ k1;
    k->s1 = splitmix(&state) | 1;
    state ^= k1;
    k->s2 = splitmix(&state) | 1;
    k->s3 = splitmix(&state) | 1;
}

/* --- the Interner ----------------------------------------------------------------------- */

/* A slot holds its key's hash beside its number: a probe compares hashes
 * without reading the key, and the table grows without hashing again. */
typedef struct {
    uint64_t hash;
    int64_t number1; /* key number + 1, or 0 for an empty slot */
} Slot;

typedef struct {
    PyObject_HEAD HashKey key;
    Slot *slots;
    Py_ssize_t mask;   /* slots - 1; slots is a power of two */
    Py_ssize_t n;      /* keys held */
    Py_ssize_t cap;    /* room in offsets (cap + 1) */
    uint8_t *arena;    /* the keys' bytes, in number order */
    size_t arena_len, arena_cap;
    int64_t *offsets;  /* key k is arena[offsets[k]:offsets[k+1]] */
} Interner;

static int
grow_slots(Interner *self)
{
    Py_ssize_t old = self->mask + 1, size = old * 2;
    Slot *slots = PyMem_Calloc((size_t)size, sizeof(Slot));
    if (slots == NULL)
        return -1;
    for (Py_ssize_t j = 0; j < old; j++) {
        if (!self->slots[j].number1)
            continue;
        Py_ssize_t i = (Py_ssize_t)(self->slots[j].hash & (uint64_t)(size - 1));
        while (slots[i].number1)
            i = (i + 1) & (size - 1);
        slots[i] = self->slots[j];
    }
    PyMem_Free(self->slots);
    self->slots = slots;
    self->mask = size - 1;
    return 0;
}

static int
grow_keys(Interner *self)
{
    Py_ssize_t cap = self->cap * 2;
    int64_t *offsets = PyMem_Realloc(self->offsets, (size_t)(cap + 1) * sizeof(int64_t));
    if (offsets == NULL)
        return -1;
    self->offsets = offsets;
    self->cap = cap;
    return 0;
}

static int
grow_arena(Interner *self, size_t need)
{
    size_t cap = self->arena_cap;
    while (cap - self->arena_len < need) {
        if (cap > SIZE_MAX / 2)
            return -1;
        cap *= 2;
    }
    uint8_t *arena = PyMem_Realloc(self->arena, cap);
    if (arena == NULL)
        return -1;
    self->arena = arena;
    self->arena_cap = cap;
    return 0;
}

/* The number of key p[0:len] (0-based), its hash h, added as the next number if
 * new (*added set to 1); -1 when memory ran out (nothing added). */
static Py_ssize_t
intern_hashed(Interner *self, const uint8_t *p, size_t len, uint64_t h, int *added)
{
    *added = 0;
    /* Grown before probing, so the table always has an empty slot to stop at. */
    if (2 * (self->n + 1) > self->mask + 1 && grow_slots(self) < 0)
        return -1;
    Py_ssize_t i = (Py_ssize_t)(h & (uint64_t)self->mask);
    for (;;) {
        Slot slot = self->slots[i];
        if (slot.number1 == 0)
            break;
        if (slot.hash == h) {
            Py_ssize_t k = (Py_ssize_t)slot.number1 - 1;
            size_t at = (size_t)self->offsets[k], klen = (size_t)(self->offsets[k + 1] - at);
            if (klen == len && memcmp(self->arena + at, p, len) == 0)
                return k;
        }
        i = (i + 1) & self->mask;
    }
    if (self->n == self->cap && grow_keys(self) < 0)
        return -1;
    if (self->arena_cap - self->arena_len < len && grow_arena(self, len) < 0)
        return -1;
    if (len)
        memcpy(self->arena + self->arena_len, p, len);
    Py_ssize_t k = self->n;
    self->arena_len += len;
    self->offsets[k + 1] = (int64_t)self->arena_len;
    self->slots[i] = (Slot){h, k + 1};
    self->n++;
    *added = 1;
    return k;
}

static Py_ssize_t
intern_one(Interner *self, const uint8_t *p, size_t len, int *added)
{
    return intern_hashed(self, p, len, keyed_hash(&self->key, p, len), added);
}

#if defined(__GNUC__)
#define PREFETCH(p) __builtin_prefetch(p)
#else
#define PREFETCH(p) ((void)(p))
#endif

/* Prefetching a group's lookups in three steps, each a step ahead of the next:
 * the slot a hash probes first, then the offsets of the key it holds (when its
 * hash matches), then that key's bytes. Hints only: nothing is decided here. */
static inline void
prefetch_slot(const Interner *self, uint64_t h)
{
    PREFETCH(&self->slots[h & (uint64_t)self->mask]);
}

static inline Py_ssize_t
first_candidate(const Interner *self, uint64_t h)
{
    Slot slot = self->slots[h & (uint64_t)self->mask];
    return slot.number1 && slot.hash == h ? (Py_ssize_t)slot.number1 - 1 : -1;
}

static inline void
prefetch_offsets(const Interner *self, uint64_t h)
{
    Py_ssize_t k = first_candidate(self, h);
    if (k >= 0)
        PREFETCH(&self->offsets[k]);
}

static inline void
prefetch_key(const Interner *self, uint64_t h)
{
    Py_ssize_t k = first_candidate(self, h);
    if (k < 0)
        return;
    const uint8_t *at = self->arena + self->offsets[k], *end = self->arena + self->offsets[k + 1];
    for (int line = 0; line < 4 && at + 64 * line < end; line++)
        PREFETCH(at + 64 * line);
}

static void
Interner_dealloc(Interner *self)
{
    PyMem_Free(self->slots);
    PyMem_Free(self->offsets);
    PyMem_Free(self->arena);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int
Interner_init(Interner *self, PyObject *args, PyObject *Py_UNUSED(kwds))
{
    Py_buffer seed;
    if (!PyArg_ParseTuple(args, "y*", &seed))
        return -1;
    if (seed.len != 16) {
        PyBuffer_Release(&seed);
        PyErr_SetString(PyExc_ValueError, "seed must be 16 bytes");
        return -1;
    }
    hash_key_init(&self->key, load_le64((const uint8_t *)seed.buf),
                  load_le64((const uint8_t *)seed.buf + 8));
    PyBuffer_Release(&seed);
    PyMem_Free(self->slots);
    PyMem_Free(self->offsets);
    PyMem_Free(self->arena);
    self->mask = 63;
    self->cap = 32;
    self->n = 0;
    self->arena_len = 0;
    self->arena_cap = 1024;
    self->slots = PyMem_Calloc(64, sizeof(Slot));
    self->offsets = PyMem_Malloc(33 * sizeof(int64_t));
    self->arena = PyMem_Malloc(self->arena_cap);
    if (!self->slots || !self->offsets || !self->arena) {
        PyErr_NoMemory();
        return -1;
    }
    self->offsets[0] = 0;
    return 0;
}

PyDoc_STRVAR(number_doc,
             "number(data, offsets, codes, new) -> int\n\n"
             "Key i is data[offsets[i]:offsets[i+1]] (offsets: int64, keys + 1 of them,\n"
             "non-decreasing, within data). Writes each key's number into codes (int64)\n"
             "and the positions of keys never seen before, in order, into new (int64);\n"
             "returns how many new keys there were.");

static PyObject *
Interner_number(Interner *self, PyObject *args)
{
    Py_buffer db, ob, cb, nb;
    if (!PyArg_ParseTuple(args, "y*y*w*w*", &db, &ob, &cb, &nb))
        return NULL;
    const char *err = NULL;
    Py_ssize_t m = ob.len / (Py_ssize_t)sizeof(int64_t) - 1;
    const int64_t *offs = (const int64_t *)ob.buf;
    if (ob.len % (Py_ssize_t)sizeof(int64_t) || m < 0)
        err = "offsets must be int64, one more than the keys";
    else if (cb.len < m * (Py_ssize_t)sizeof(int64_t) || nb.len < m * (Py_ssize_t)sizeof(int64_t))
        err = "codes or new shorter than the keys";
    else if (offs[0] < 0 || offs[m] > db.len)
        err = "offsets outside the data";
    for (Py_ssize_t i = 0; err == NULL && i < m; i++)
        if (offs[i] > offs[i + 1])
            err = "offsets decreasing";
    if (err == NULL && self->slots == NULL)
        err = "Interner not initialised";
    Py_ssize_t fresh = 0;
    if (err == NULL) {
        int64_t *codes = (int64_t *)cb.buf, *news = (int64_t *)nb.buf;
        const uint8_t *data = (const uint8_t *)db.buf;
        for (Py_ssize_t i = 0; i < m; i++) {
            int added;
            Py_ssize_t k = intern_one(self, data + offs[i], (size_t)(offs[i + 1] - offs[i]), &added);
            if (k < 0) {
                err = "";
                break;
            }
            codes[i] = k;
            if (added)
                news[fresh++] = i;
        }
    }
    PyBuffer_Release(&db);
    PyBuffer_Release(&ob);
    PyBuffer_Release(&cb);
    PyBuffer_Release(&nb);
    if (err != NULL) {
        if (*err)
            PyErr_SetString(PyExc_ValueError, err);
        else
            PyErr_NoMemory();
        return NULL;
    }
    return PyLong_FromSsize_t(fresh);
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

#define MAX_COLUMNS 8
#define ROW_GROUP 16

/* The columns of number_rows, their buffers held until columns_release. */
typedef struct {
    int n;
    Py_buffer data[MAX_COLUMNS], offsets[MAX_COLUMNS];
} Columns;

static void
columns_release(Columns *c)
{
    for (int i = 0; i < c->n; i++) {
        PyBuffer_Release(&c->data[i]);
        PyBuffer_Release(&c->offsets[i]);
    }
    c->n = 0;
}

/* Takes the (data, offsets) pairs of ``seq``; the rows they share in *rows.
 * NULL on success, else the reason (a Python error may be set: *rows is -2). */
static const char *
columns_get(Columns *c, PyObject *seq, Py_ssize_t *rows)
{
    PyObject *fast = PySequence_Fast(seq, "columns must be a sequence");
    c->n = 0;
    *rows = -1;
    if (fast == NULL)
        return "";
    const char *err = NULL;
    Py_ssize_t m = PySequence_Fast_GET_SIZE(fast);
    if (m < 1 || m > MAX_COLUMNS)
        err = "from 1 to 8 columns";
    for (Py_ssize_t i = 0; err == NULL && i < m; i++) {
        PyObject *pair = PySequence_Fast_GET_ITEM(fast, i);
        if (!PyArg_ParseTuple(pair, "y*y*", &c->data[i], &c->offsets[i])) {
            err = "";
            break;
        }
        c->n++;
        Py_ssize_t len = c->offsets[i].len;
        Py_ssize_t n = len / (Py_ssize_t)sizeof(int64_t) - 1;
        if (len % (Py_ssize_t)sizeof(int64_t) || n < 0 || (*rows >= 0 && n != *rows))
            err = "every column's offsets must be int64, rows + 1 of them";
        else if (!offsets_fit((const int64_t *)c->offsets[i].buf, n, c->data[i].len))
            err = "offsets outside their data or decreasing";
        *rows = n;
    }
    Py_DECREF(fast);
    return err;
}

/* Row k of the columns laid out as its key: each column's byte length (8 bytes,
 * little endian), then each column's bytes. Returns the key's length. */
static size_t
row_key(uint8_t *dst, const Columns *c, Py_ssize_t k)
{
    size_t at = 8 * (size_t)c->n;
    for (int i = 0; i < c->n; i++) {
        const int64_t *offs = (const int64_t *)c->offsets[i].buf;
        size_t len = (size_t)(offs[k + 1] - offs[k]);
        put_le64(dst + 8 * i, (uint64_t)len);
        memcpy(dst + at, (const uint8_t *)c->data[i].buf + offs[k], len);
        at += len;
    }
    return at;
}

/* The longest key of the rows (row_key). */
static size_t
widest_row(const Columns *c, Py_ssize_t rows)
{
    size_t widest = 0;
    for (Py_ssize_t k = 0; k < rows; k++) {
        size_t w = 8 * (size_t)c->n;
        for (int i = 0; i < c->n; i++) {
            const int64_t *offs = (const int64_t *)c->offsets[i].buf;
            w += (size_t)(offs[k + 1] - offs[k]);
        }
        widest = w > widest ? w : widest;
    }
    return widest;
}

PyDoc_STRVAR(number_rows_doc,
             "number_rows(columns, codes, new) -> int\n\n"
             "number() over rows of several columns: columns is a sequence of (data,\n"
             "offsets) pairs (offsets: int64 byte offsets, rows + 1 of them, the same\n"
             "rows in every column); row k's key is each column's byte length (8 bytes,\n"
             "little endian), then each column's bytes, so two rows are one key exactly\n"
             "when every column's bytes are equal. Writes codes and new as number() does\n"
             "and returns how many new keys there were.");

static PyObject *
Interner_number_rows(Interner *self, PyObject *args)
{
    PyObject *seq;
    Py_buffer cb, nb;
    Columns c;
    if (!PyArg_ParseTuple(args, "Ow*w*", &seq, &cb, &nb))
        return NULL;
    Py_ssize_t rows;
    const char *err = columns_get(&c, seq, &rows);
    if (err == NULL && (cb.len < rows * (Py_ssize_t)sizeof(int64_t) ||
                        nb.len < rows * (Py_ssize_t)sizeof(int64_t)))
        err = "codes or new shorter than the rows";
    if (err == NULL && self->slots == NULL)
        err = "Interner not initialised";
    /* Rows go in groups of ROW_GROUP: each group's keys are laid out and hashed and
     * their slots prefetched, then looked up in order (so numbers are handed out
     * as one by one); a lookup is otherwise mostly a wait for its slot. */
    size_t stride = err == NULL ? widest_row(&c, rows) + 1 : 0;
    uint8_t *keys = NULL;
    if (err == NULL && (keys = PyMem_Malloc(ROW_GROUP * stride)) == NULL)
        err = "";
    Py_ssize_t fresh = 0;
    int64_t *codes = (int64_t *)cb.buf, *news = (int64_t *)nb.buf;
    for (Py_ssize_t base = 0; err == NULL && base < rows; base += ROW_GROUP) {
        int m = rows - base < ROW_GROUP ? (int)(rows - base) : ROW_GROUP;
        size_t lens[ROW_GROUP];
        uint64_t hashes[ROW_GROUP];
        for (int j = 0; j < m; j++) {
            lens[j] = row_key(keys + j * stride, &c, base + j);
            hashes[j] = keyed_hash(&self->key, keys + j * stride, lens[j]);
            prefetch_slot(self, hashes[j]);
        }
        for (int j = 0; j < m; j++)
            prefetch_offsets(self, hashes[j]);
        for (int j = 0; j < m; j++)
            prefetch_key(self, hashes[j]);
        for (int j = 0; err == NULL && j < m; j++) {
            int added;
            Py_ssize_t code = intern_hashed(self, keys + j * stride, lens[j], hashes[j], &added);
            if (code < 0)
                err = "";
            codes[base + j] = code;
            if (added)
                news[fresh++] = base + j;
        }
    }
    PyMem_Free(keys);
    columns_release(&c);
    PyBuffer_Release(&cb);
    PyBuffer_Release(&nb);
    if (err != NULL) {
        if (*err)
            PyErr_SetString(PyExc_ValueError, err);
        else if (!PyErr_Occurred())
            PyErr_NoMemory();
        return NULL;
    }
    return PyLong_FromSsize_t(fresh);
}

static Py_ssize_t
Interner_len(Interner *self)
{
    return self->n;
}

/* The bytes the Interner holds: its key arena, key offsets and slots (allocated). */
static PyObject *
Interner_nbytes(Interner *self, void *Py_UNUSED(closure))
{
    if (self->slots == NULL)
        return PyLong_FromLong(0);
    size_t n = self->arena_cap + (size_t)(self->cap + 1) * sizeof(int64_t) +
               (size_t)(self->mask + 1) * sizeof(Slot);
    return PyLong_FromSize_t(n);
}

static PyGetSetDef Interner_getset[] = {
    {"nbytes", (getter)Interner_nbytes, NULL,
     "Bytes held: the keys' arena, their offsets and the slots.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef Interner_methods[] = {
    {"number", (PyCFunction)Interner_number, METH_VARARGS, number_doc},
    {"number_rows", (PyCFunction)Interner_number_rows, METH_VARARGS, number_rows_doc},
    {NULL, NULL, 0, NULL},
};

static PySequenceMethods Interner_as_sequence = {
    .sq_length = (lenfunc)Interner_len,
};

static PyTypeObject InternerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pyproflab._intern.Interner",
    .tp_doc = PyDoc_STR("Interner(seed: 16 bytes): byte keys numbered in order of first appearance."),
    .tp_basicsize = sizeof(Interner),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Interner_init,
    .tp_dealloc = (destructor)Interner_dealloc,
    .tp_methods = Interner_methods,
    .tp_getset = Interner_getset,
    .tp_as_sequence = &Interner_as_sequence,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    "_intern",
    "Byte keys numbered in order of first appearance (see _intern.c).",
    -1,
    NULL,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC
PyInit__intern(void)
{
    if (PyType_Ready(&InternerType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&InternerType);
    if (PyModule_AddObject(m, "Interner", (PyObject *)&InternerType) < 0) {
        Py_DECREF(&InternerType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
