/* Numbering of byte keys in order of first appearance, across batches, for the
 * merge of many profiles (analyses/_arrays.Numbering).
 *
 * Rules: an Interner holds every distinct key it was given once (its bytes in
 * one arena) and numbers them 0, 1, ... in the order they first appeared. Keys
 * are equal when their bytes are equal: a hash only finds candidates, the bytes
 * decide, so two keys are never merged on a hash. The hash is SipHash-1-3 keyed
 * with 16 random bytes given at creation, so keys crafted to collide cannot be
 * chosen in advance (they would only make probing slow, never wrong). The table
 * is open addressing with linear probing, at most half full. Python allocates
 * every array and passes it through the buffer protocol; C checks offsets
 * against the buffers' sizes before it reads a key. The GIL is held: an
 * Interner is not shared between threads.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

/* --- SipHash-1-3 ------------------------------------------------------------------------ */

static inline uint64_t
rotl(uint64_t x, int b)
{
    return (x << b) | (x >> (64 - b));
}

static inline uint64_t
load_le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

#define SIPROUND                      \
    do {                              \
        v0 += v1;                     \
        v1 = rotl(v1, 13);            \
        v1 ^= v0;                     \
        v0 = rotl(v0, 32);            \
        v2 += v3;                     \
        v3 = rotl(v3, 16);            \
        v3 ^= v2;                     \
        v0 += v3;                     \
        v3 = rotl(v3, 21);            \
        v3 ^= v0;                     \
        v2 += v1;                     \
        v1 = rotl(v1, 17);            \
        v1 ^= v2;                     \
        v2 = rotl(v2, 32);            \
    } while (0)

static uint64_t
siphash13(uint64_t k0, uint64_t k1, const uint8_t *p, size_t n)
{
    uint64_t v0 = k0 ^ 0x736f6d6570736575ULL, v1 = k1 ^ 0x646f72616e646f6dULL;
    uint64_t v2 = k0 ^ 0x6c7967656e657261ULL, v3 = k1 ^ 0x7465646279746573ULL;
    uint64_t b = (uint64_t)n << 56;
    size_t whole = n & ~(size_t)7;
    for (size_t i = 0; i < whole; i += 8) {
        uint64_t m = load_le64(p + i);
        v3 ^= m;
        SIPROUND;
        v0 ^= m;
    }
    for (size_t i = whole; i < n; i++)
        b |= (uint64_t)p[i] << (8 * (i - whole));
    v3 ^= b;
    SIPROUND;
    v0 ^= b;
    v2 ^= 0xff;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    return v0 ^ v1 ^ v2 ^ v3;
}

/* --- the Interner ----------------------------------------------------------------------- */

/* A slot holds its key's hash beside its number: a probe compares hashes
 * without reading the key, and the table grows without hashing again. */
typedef struct {
    uint64_t hash;
    int64_t number1; /* key number + 1, or 0 for an empty slot */
} Slot;

typedef struct {
    PyObject_HEAD uint64_t k0, k1;
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

/* The number of key p[0:len] (0-based), added as the next number if new (*added
 * set to 1); -1 when memory ran out (nothing added). */
static Py_ssize_t
intern_one(Interner *self, const uint8_t *p, size_t len, int *added)
{
    *added = 0;
    /* Grown before probing, so the table always has an empty slot to stop at. */
    if (2 * (self->n + 1) > self->mask + 1 && grow_slots(self) < 0)
        return -1;
    uint64_t h = siphash13(self->k0, self->k1, p, len);
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
    self->k0 = load_le64((const uint8_t *)seed.buf);
    self->k1 = load_le64((const uint8_t *)seed.buf + 8);
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

static Py_ssize_t
Interner_len(Interner *self)
{
    return self->n;
}

static PyMethodDef Interner_methods[] = {
    {"number", (PyCFunction)Interner_number, METH_VARARGS, number_doc},
    {NULL, NULL, 0, NULL},
};

static PySequenceMethods Interner_as_sequence = {
    .sq_length = (lenfunc)Interner_len,
};

static PyTypeObject InternerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pyproflab.analyses._intern.Interner",
    .tp_doc = PyDoc_STR("Interner(seed: 16 bytes): byte keys numbered in order of first appearance."),
    .tp_basicsize = sizeof(Interner),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Interner_init,
    .tp_dealloc = (destructor)Interner_dealloc,
    .tp_methods = Interner_methods,
    .tp_as_sequence = &Interner_as_sequence,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    "_intern",
    "Byte keys numbered in order of first appearance (analyses/_arrays.Numbering).",
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
