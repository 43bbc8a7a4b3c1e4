/* The hot loops of the fast decoder (fast.py), in C: the top level's fields
 * (lite.py), varints of many messages, fields of many messages, runs of packed
 * varints.
 *
 * Rules: each function gives exactly what its numpy counterpart in fast.py
 * gives (split_top: what upb gives, see lite.py), and says "hand over" (a
 * negative code, mapped to _HandToReference in fast.py) under the same
 * conditions. Python allocates every array and passes it through the buffer
 * protocol (only join, known_fields and split_top return new bytes); C checks
 * every index it reads or writes against the buffers' sizes, whatever the
 * arrays hold, segments of a buffer included. Values wrap modulo 2**64 as in
 * upb. The loops run without the GIL.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

#define MAX_VARINT_BYTES 10

/* Hand-over codes (fast.py maps them to messages: keep the two lists alike). */
#define HAND_VARINT_TOO_LONG (-1)
#define HAND_ENDS_INSIDE_VARINT (-2)
#define HAND_TRUNCATED_FIELD (-3)
#define HAND_FIELD_NUMBER_ZERO (-4)
#define HAND_WIRE_TYPE (-5)
#define HAND_FIELD_TOO_LONG (-6)
#define HAND_FIELD_ENDS_INSIDE_VARINT (-7)
/* Not hand-overs: the field arrays are full (call again with larger ones); the
 * arrays passed in do not fit together (a bug in fast.py: ValueError). */
#define FIELDS_FULL (-99)
#define BAD_ARRAYS (-100)

/* A tuple of bytes objects: a snapshot of the sequence, so the bytes stay alive
 * (and unchanged: bytes are immutable) while the GIL is released. */
static PyObject *
bytes_tuple(PyObject *seq)
{
    PyObject *t = PySequence_Tuple(seq);
    if (t == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(t); i++) {
        if (!PyBytes_Check(PyTuple_GET_ITEM(t, i))) {
            Py_DECREF(t);
            PyErr_SetString(PyExc_TypeError, "messages must be bytes");
            return NULL;
        }
    }
    return t;
}

static PyObject *
bad_arrays(void)
{
    PyErr_SetString(PyExc_ValueError, "arrays of inconsistent sizes or indexes out of range");
    return NULL;
}

/* --- messages: bytes objects, or segments of one buffer --------------------------------- */

/* The messages count_ends, split and join read: either a tuple of bytes objects
 * (tuple != NULL), or segments of one buffer, message i being
 * buf[start[i] : start[i] + length[i]] (what split_top finds). */
typedef struct {
    PyObject *tuple;
    const unsigned char *buf;
    Py_ssize_t size;
    const int64_t *start, *length;
    Py_ssize_t count;
} Messages;

/* Message i (0 <= i < ms->count): its first byte and size. -1 when a segment
 * lies outside the buffer (the arrays hold anything: checked on every read). */
static int
message_at(const Messages *ms, Py_ssize_t i, const unsigned char **p, Py_ssize_t *len)
{
    if (ms->tuple != NULL) {
        PyObject *item = PyTuple_GET_ITEM(ms->tuple, i);
        *p = (const unsigned char *)PyBytes_AS_STRING(item);
        *len = PyBytes_GET_SIZE(item);
        return 0;
    }
    int64_t s = ms->start[i], n = ms->length[i];
    if (s < 0 || n < 0 || s > ms->size || n > ms->size - s)
        return -1;
    *p = ms->buf + s;
    *len = (Py_ssize_t)n;
    return 0;
}

/* Messages from a Python sequence of bytes (a new tuple in ms->tuple: the caller
 * releases it with messages_release). */
static int
messages_from_sequence(PyObject *seq, Messages *ms)
{
    *ms = (Messages){0};
    ms->tuple = bytes_tuple(seq);
    if (ms->tuple == NULL)
        return -1;
    ms->count = PyTuple_GET_SIZE(ms->tuple);
    return 0;
}

/* Messages from a buffer and its start and length arrays (int64, of one size),
 * held in b[0..2] (the caller releases them). */
static int
messages_from_segments(Py_buffer *b, Messages *ms)
{
    *ms = (Messages){0};
    if (b[1].len % 8 || b[1].len != b[2].len) {
        bad_arrays();
        return -1;
    }
    ms->buf = b[0].buf;
    ms->size = b[0].len;
    ms->start = b[1].buf;
    ms->length = b[2].buf;
    ms->count = b[1].len / 8;
    return 0;
}

static void
messages_release(Messages *ms)
{
    Py_CLEAR(ms->tuple);
}

/* --- count_ends ---------------------------------------------------------------------- */

/* The bytes below 0x80 in p[0:len]: each ends a varint. */
static long long
count_low_bytes(const unsigned char *p, Py_ssize_t len)
{
    long long c = 0;
    Py_ssize_t j = 0;
    /* Eight bytes at a time: the high bit of each, inverted, summed by a multiply
     * (each byte of `low` is 0 or 1, so the sum fits in the top byte). */
    for (; j + 8 <= len; j += 8) {
        uint64_t x;
        memcpy(&x, p + j, 8);
        uint64_t low = (~x & UINT64_C(0x8080808080808080)) >> 7;
        c += (long long)((low * UINT64_C(0x0101010101010101)) >> 56);
    }
    for (; j < len; j++)
        c += (p[j] >> 7) ^ 1;
    return c;
}

/* Total size and varint ends of the messages; BAD_ARRAYS for a segment outside
 * its buffer. */
static int
count_ends_core(const Messages *ms, long long *size, long long *ends)
{
    *size = *ends = 0;
    for (Py_ssize_t i = 0; i < ms->count; i++) {
        const unsigned char *p;
        Py_ssize_t len;
        if (message_at(ms, i, &p, &len) < 0)
            return BAD_ARRAYS;
        *size += len;
        *ends += count_low_bytes(p, len);
    }
    return 0;
}

static PyObject *
counted(Messages *ms)
{
    long long size, ends;
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = count_ends_core(ms, &size, &ends);
    Py_END_ALLOW_THREADS
    messages_release(ms);
    if (status)
        return bad_arrays();
    return Py_BuildValue("LL", size, ends);
}

PyDoc_STRVAR(count_ends_doc,
             "count_ends(messages) -> (bytes, ends)\n\n"
             "Total size of the messages, and how many of their bytes are below 0x80\n"
             "(each ends a varint): the size of tokenize's arrays.");

static PyObject *
count_ends(PyObject *self, PyObject *messages)
{
    (void)self;
    Messages ms;
    if (messages_from_sequence(messages, &ms) < 0)
        return NULL;
    return counted(&ms);
}

PyDoc_STRVAR(count_ends_at_doc,
             "count_ends_at(buf, start, length) -> (bytes, ends)\n\n"
             "count_ends of the messages buf[start[i] : start[i] + length[i]] (int64\n"
             "arrays). ValueError when a segment lies outside buf.");

static PyObject *
count_ends_at(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer b[3];
    Messages ms;
    PyObject *result = NULL;
    if (!PyArg_ParseTuple(args, "y*y*y*", &b[0], &b[1], &b[2]))
        return NULL;
    if (messages_from_segments(b, &ms) == 0)
        result = counted(&ms);
    for (int i = 0; i < 3; i++)
        PyBuffer_Release(&b[i]);
    return result;
}

/* --- walking messages ----------------------------------------------------------------- */

typedef struct {
    int64_t *message;
    uint64_t *number;
    int8_t *wire;
    int64_t *tag;
    int64_t *next;
    Py_ssize_t cap;
} FieldsOut;

/* The first index k in [lo, hi) with ends[k] >= x, or hi. */
static Py_ssize_t
lower_bound(const int64_t *ends, Py_ssize_t lo, Py_ssize_t hi, int64_t x)
{
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (ends[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The fields of message m, varints [cur, stop) (0 <= cur, stop <= the varints in
 * values and ends), stop_byte the byte after it, written at out[*k...] in order.
 * Returns 0, FIELDS_FULL (out has no room: *k is left as it was), or a hand-over,
 * under the conditions of fast.py's numpy walk. */
static int
walk_message(const uint64_t *values, const int64_t *ends, int64_t m, int64_t cur, int64_t stop,
             int64_t stop_byte, FieldsOut *out, Py_ssize_t *k)
{
    Py_ssize_t at = *k;
    /* Unsigned: wrapping is defined. Indexes are checked against cur and stop
     * only, so a nonsensical stop_byte gives nonsense, never a read out of bounds. */
    uint64_t limit = (uint64_t)stop_byte;
    while (cur < stop) {
        if (cur + 1 >= stop)
            return HAND_TRUNCATED_FIELD;
        uint64_t tag = values[cur];
        uint64_t number = tag >> 3;
        int wire = (int)(tag & 7);
        int64_t next;
        if (number == 0)
            return HAND_FIELD_NUMBER_ZERO;
        if (wire == 0) {
            next = cur + 2;
        }
        else if (wire == 2) {
            uint64_t length = values[cur + 1];
            uint64_t payload_start = (uint64_t)ends[cur + 1] + 1;
            if (length > limit - payload_start)
                return HAND_FIELD_TOO_LONG;
            uint64_t payload_end = payload_start + length;
            if ((int64_t)payload_end < (int64_t)limit) {
                /* The varint that starts at payload_end: each varint has at least
                 * one byte, so it is at most `length` varints on. */
                int64_t lo = cur + 2;
                int64_t hi = length < (uint64_t)(stop - lo) ? lo + (int64_t)length + 1 : stop;
                int64_t found = lower_bound(ends, lo, hi, (int64_t)payload_end);
                if (found >= hi || (uint64_t)ends[found - 1] + 1 != payload_end)
                    return HAND_FIELD_ENDS_INSIDE_VARINT;
                next = found;
            }
            else {
                next = stop;
            }
        }
        else {
            return HAND_WIRE_TYPE;
        }
        if (at >= out->cap)
            return FIELDS_FULL;
        out->message[at] = m;
        out->number[at] = number;
        out->wire[at] = (int8_t)wire;
        out->tag[at] = cur;
        out->next[at] = next;
        at++;
        cur = next;
    }
    *k = at;
    return 0;
}

static int
fields_out(Py_buffer *o, FieldsOut *out)
{
    *out = (FieldsOut){o[0].buf, o[1].buf, o[2].buf, o[3].buf, o[4].buf, o[2].len};
    return o[0].len / 8 == out->cap && o[1].len / 8 == out->cap && o[3].len / 8 == out->cap &&
           o[4].len / 8 == out->cap;
}

/* What split and walk return: (fields written, the message to resume at), or
 * (hand-over code, message) when it is negative. */
static PyObject *
walked(int status, Py_ssize_t k, Py_ssize_t m)
{
    if (status == BAD_ARRAYS)
        return bad_arrays();
    return Py_BuildValue("nn", status < 0 && status != FIELDS_FULL ? (Py_ssize_t)status : k, m);
}

/* --- split: tokenize and walk top-level sub-messages ------------------------------------ */

/* Messages m0...: tokenized as if joined (values, ends: the varints, ends[k] the
 * joined buffer's index of its last byte, cap entries each; first[i]: the index
 * of message i's first varint; offsets[i]: of its first byte, offsets[n] = the
 * size), each walked right after (its varints still in cache) into out from *k
 * on; *ntok: the varints so far. Resuming at m0 > 0 reads first[m0] and
 * offsets[m0] as a previous call left them. A message that ends inside a varint
 * is handed over: the next one would start inside it (numpy's index_at refuses
 * that) or the buffer would end inside it. */
static int
split_core(const Messages *ms, Py_ssize_t m0, uint64_t *values, int64_t *ends, Py_ssize_t cap,
           int64_t *first, int64_t *offsets, FieldsOut *out, Py_ssize_t *k, Py_ssize_t *m,
           Py_ssize_t *ntok)
{
    Py_ssize_t count = ms->count;
    Py_ssize_t n = m0 ? first[m0] : 0;
    int64_t base = m0 ? offsets[m0] : 0;
    if (n < 0 || n > cap || base < 0)
        return BAD_ARRAYS;
    for (*m = m0; *m < count; (*m)++) {
        const unsigned char *p;
        Py_ssize_t size;
        if (message_at(ms, *m, &p, &size) < 0)
            return BAD_ARRAYS;
        Py_ssize_t start = n;
        first[*m] = n;
        offsets[*m] = base;
        uint64_t acc = 0;   /* the varint in progress: its value so far */
        uint64_t shift = 0; /* and 7 times its bytes so far */
        /* Branch-free per byte (varints of one and two bytes mix unpredictably):
         * every byte writes the varint in progress at n, and a last byte moves n on. */
        for (Py_ssize_t j = 0; j < size; j++) {
            if (n == cap) {
                /* cap is at least the number of last bytes (count_ends): only
                 * continuation bytes are left, or cap is short of it. */
                return HAND_ENDS_INSIDE_VARINT;
            }
            uint64_t b = p[j];
            uint64_t more = b >> 7; /* 1: the varint goes on */
            acc |= (b & 0x7F) << shift;
            values[n] = acc;
            ends[n] = base + j;
            n += more ^ 1;
            acc &= -more;
            shift = (shift + 7) & -more;
            if (shift == 7 * MAX_VARINT_BYTES) {
                /* Ten bytes and more to come: numpy's tokenize refuses it too. */
                return HAND_VARINT_TOO_LONG;
            }
        }
        if (shift)
            return HAND_ENDS_INSIDE_VARINT;
        base += size;
        *ntok = n;
        int status = walk_message(values, ends, *m, start, n, base, out, k);
        if (status)
            return status;
    }
    offsets[count] = base;
    return 0;
}

/* split's work once the messages are known: b[0..3] the token and offset arrays,
 * o[0..4] the field arrays (all held by the caller). */
static PyObject *
split_messages(const Messages *ms, Py_buffer *b, Py_buffer *o, Py_ssize_t m0, Py_ssize_t k0)
{
    Py_ssize_t count = ms->count;
    Py_ssize_t cap = b[0].len / 8;
    FieldsOut out;
    if (!fields_out(o, &out) || b[1].len / 8 != cap || b[2].len / 8 != count ||
        b[3].len / 8 != count + 1 || m0 < 0 || m0 > count || k0 < 0 || k0 > out.cap)
        return bad_arrays();
    Py_ssize_t k = k0, m = m0, ntok = m0 < count ? ((int64_t *)b[2].buf)[m0] : 0;
    int status = 0;
    if (m0 < count) {
        Py_BEGIN_ALLOW_THREADS
        status = split_core(ms, m0, b[0].buf, b[1].buf, cap, b[2].buf, b[3].buf, &out, &k, &m,
                            &ntok);
        Py_END_ALLOW_THREADS
    }
    else if (m0 == 0) {
        ((int64_t *)b[3].buf)[0] = 0; /* no messages */
    }
    if (status == BAD_ARRAYS)
        return bad_arrays();
    return Py_BuildValue("nnn", status < 0 && status != FIELDS_FULL ? (Py_ssize_t)status : k, m,
                         ntok);
}

PyDoc_STRVAR(split_doc,
             "split(messages, values, ends, first, offsets, message, number, wire, tag, next,\n"
             "      m, k) -> (k, m, tokens)\n\n"
             "Tokenize the messages (bytes) as if joined, into values (uint64) and ends\n"
             "(int64) of one size, at least count_ends' (the bytes will do), first (int64,\n"
             "a message's first varint) and offsets (int64, where each starts; messages +\n"
             "1), and walk each into the five field arrays (int64, uint64, int8, int64,\n"
             "int64) from field k on, message by message. Returns the fields written,\n"
             "len(messages) and the varints written, or, when the field arrays are full,\n"
             "the fields written before message m: call again with larger arrays, m and k.\n"
             "k < 0: hand over.");

static PyObject *
split(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *messages;
    Py_buffer b[4], o[5];
    Py_ssize_t m0, k0;
    Messages ms;
    if (!PyArg_ParseTuple(args, "Ow*w*w*w*w*w*w*w*w*nn", &messages, &b[0], &b[1], &b[2], &b[3],
                          &o[0], &o[1], &o[2], &o[3], &o[4], &m0, &k0))
        return NULL;
    PyObject *result = NULL;
    if (messages_from_sequence(messages, &ms) == 0) {
        result = split_messages(&ms, b, o, m0, k0);
        messages_release(&ms);
    }
    for (int i = 0; i < 5; i++) {
        if (i < 4)
            PyBuffer_Release(&b[i]);
        PyBuffer_Release(&o[i]);
    }
    return result;
}

PyDoc_STRVAR(split_at_doc,
             "split_at(buf, start, length, values, ends, first, offsets, message, number,\n"
             "         wire, tag, next, m, k) -> (k, m, tokens)\n\n"
             "split of the messages buf[start[i] : start[i] + length[i]] (int64 arrays),\n"
             "read in place. ValueError when a segment lies outside buf.");

static PyObject *
split_at(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer s[3], b[4], o[5];
    Py_ssize_t m0, k0;
    Messages ms;
    if (!PyArg_ParseTuple(args, "y*y*y*w*w*w*w*w*w*w*w*w*nn", &s[0], &s[1], &s[2], &b[0], &b[1],
                          &b[2], &b[3], &o[0], &o[1], &o[2], &o[3], &o[4], &m0, &k0))
        return NULL;
    PyObject *result = NULL;
    if (messages_from_segments(s, &ms) == 0)
        result = split_messages(&ms, b, o, m0, k0);
    for (int i = 0; i < 5; i++) {
        if (i < 3)
            PyBuffer_Release(&s[i]);
        if (i < 4)
            PyBuffer_Release(&b[i]);
        PyBuffer_Release(&o[i]);
    }
    return result;
}

/* --- walk: nested messages ------------------------------------------------------------- */

PyDoc_STRVAR(walk_doc,
             "walk(values, ends, first, end, end_byte, message, number, wire, tag, next,\n"
             "     m, k) -> (k, m)\n\n"
             "Walk messages [first, end) (varint indexes; end_byte: the byte after each)\n"
             "into the five field arrays, from message m and field k on, as split does.");

static PyObject *
walk(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer in[5], o[5];
    Py_ssize_t m0, k0;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*w*w*w*w*w*nn", &in[0], &in[1], &in[2], &in[3],
                          &in[4], &o[0], &o[1], &o[2], &o[3], &o[4], &m0, &k0))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t ntok = in[0].len / 8, nmsg = in[2].len / 8;
    FieldsOut out;
    if (!fields_out(o, &out) || in[1].len / 8 != ntok || in[3].len / 8 != nmsg ||
        in[4].len / 8 != nmsg || m0 < 0 || m0 > nmsg || k0 < 0 || k0 > out.cap) {
        bad_arrays();
        goto done;
    }
    const uint64_t *values = in[0].buf;
    const int64_t *ends = in[1].buf, *first = in[2].buf, *end = in[3].buf, *end_byte = in[4].buf;
    Py_ssize_t k = k0, m;
    int status = 0;
    Py_BEGIN_ALLOW_THREADS
    for (m = m0; m < nmsg; m++) {
        int64_t cur = first[m], stop = end[m];
        if (cur >= stop)
            continue;
        if (cur < 0 || stop > ntok) {
            status = BAD_ARRAYS;
            break;
        }
        status = walk_message(values, ends, m, cur, stop, end_byte[m], &out, &k);
        if (status)
            break;
    }
    Py_END_ALLOW_THREADS
    result = walked(status, k, m);
done:
    for (int i = 0; i < 5; i++) {
        PyBuffer_Release(&in[i]);
        PyBuffer_Release(&o[i]);
    }
    return result;
}

/* --- join ------------------------------------------------------------------------------ */

/* The messages joined into a new bytes object; offsets (count + 1) filled. */
static PyObject *
join_messages(const Messages *ms, Py_buffer *ob)
{
    Py_ssize_t n = ms->count;
    if (ob->len / 8 != n + 1)
        return bad_arrays();
    int64_t *offsets = ob->buf;
    Py_ssize_t size = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        const unsigned char *p;
        Py_ssize_t len;
        if (message_at(ms, i, &p, &len) < 0)
            return bad_arrays();
        offsets[i] = size;
        if (len > PY_SSIZE_T_MAX - size)
            return PyErr_NoMemory();
        size += len;
    }
    offsets[n] = size;
    PyObject *result = PyBytes_FromStringAndSize(NULL, size);
    if (result == NULL)
        return NULL;
    char *out = PyBytes_AS_STRING(result);
    int status = 0;
    Py_BEGIN_ALLOW_THREADS
    /* Positions recounted, not read back from offsets, which another thread could
     * change; each copy checked against the room left, since a buffer's segment
     * arrays could change too. */
    Py_ssize_t pos = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        const unsigned char *p;
        Py_ssize_t len;
        if (message_at(ms, i, &p, &len) < 0 || len > size - pos) {
            status = -1;
            break;
        }
        if (len)
            memcpy(out + pos, p, (size_t)len);
        pos += len;
    }
    Py_END_ALLOW_THREADS
    if (status != 0) {
        Py_DECREF(result);
        return bad_arrays();
    }
    return result;
}

PyDoc_STRVAR(join_doc,
             "join(messages, offsets) -> bytes\n\n"
             "The messages joined; offsets (int64, messages + 1) filled with where each\n"
             "starts (offsets[-1] = the size).");

static PyObject *
join(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *messages;
    Py_buffer ob;
    Messages ms;
    if (!PyArg_ParseTuple(args, "Ow*", &messages, &ob))
        return NULL;
    PyObject *result = NULL;
    if (messages_from_sequence(messages, &ms) == 0) {
        result = join_messages(&ms, &ob);
        messages_release(&ms);
    }
    PyBuffer_Release(&ob);
    return result;
}

PyDoc_STRVAR(join_at_doc,
             "join_at(buf, start, length, offsets) -> bytes\n\n"
             "join of the messages buf[start[i] : start[i] + length[i]] (int64 arrays).\n"
             "ValueError when a segment lies outside buf.");

static PyObject *
join_at(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer s[3], ob;
    Messages ms;
    if (!PyArg_ParseTuple(args, "y*y*y*w*", &s[0], &s[1], &s[2], &ob))
        return NULL;
    PyObject *result = NULL;
    if (messages_from_segments(s, &ms) == 0)
        result = join_messages(&ms, &ob);
    for (int i = 0; i < 3; i++)
        PyBuffer_Release(&s[i]);
    PyBuffer_Release(&ob);
    return result;
}

/* --- last_values ---------------------------------------------------------------------- */

PyDoc_STRVAR(last_values_doc,
             "last_values(values, message, number, wire, tag, numbers, out) -> status\n\n"
             "For each field number numbers[r] (1 to 255), out[r, m] (uint64, zeroed by\n"
             "the caller) = the varint value of message m's last field of that number.\n"
             "status < 0: hand over (one of them is not a varint field).");

static PyObject *
last_values(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer b[7];
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*y*w*", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5],
                          &b[6]))
        return NULL;
    PyObject *result = NULL;
    const uint64_t *values = b[0].buf, *number = b[2].buf;
    const int64_t *message = b[1].buf, *tag = b[4].buf, *numbers = b[5].buf;
    const int8_t *wire = b[3].buf;
    uint64_t *out = b[6].buf;
    Py_ssize_t ntok = b[0].len / 8, nfields = b[1].len / 8, nrows = b[5].len / 8;
    Py_ssize_t count = nrows ? b[6].len / 8 / nrows : 0;
    /* row + 1 of each wanted field number, 0 for the others */
    unsigned char row[256] = {0};
    if (b[2].len / 8 != nfields || b[3].len != nfields || b[4].len / 8 != nfields ||
        nrows > 255 || b[6].len / 8 != nrows * count) {
        bad_arrays();
        goto done;
    }
    for (Py_ssize_t r = 0; r < nrows; r++) {
        if (numbers[r] < 1 || numbers[r] > 255) {
            bad_arrays();
            goto done;
        }
        row[numbers[r]] = (unsigned char)(r + 1);
    }
    int status = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < nfields; i++) {
        if (number[i] > 255 || !row[number[i]])
            continue;
        int64_t m = message[i], t = tag[i];
        if (wire[i] != 0) {
            status = HAND_WIRE_TYPE;
            break;
        }
        if (m < 0 || m >= count || t < 0 || t >= ntok - 1) {
            status = BAD_ARRAYS;
            break;
        }
        out[(row[number[i]] - 1) * count + m] = values[t + 1];
    }
    Py_END_ALLOW_THREADS
    if (status == BAD_ARRAYS)
        bad_arrays();
    else
        result = PyLong_FromLong(status);
done:
    for (int i = 0; i < 7; i++)
        PyBuffer_Release(&b[i]);
    return result;
}

/* --- gather ---------------------------------------------------------------------------- */

/* out = the runs values[first[i]:first[i]+count[i]] in order; offsets[j] = where the
 * runs of owner j start (owners must not decrease). Returns the values written, or
 * BAD_ARRAYS (also for decreasing owners). */
static Py_ssize_t
gather_core(const uint64_t *values, Py_ssize_t nvalues, const int64_t *owner,
            const int64_t *first, const int64_t *count, Py_ssize_t nruns, int64_t *offsets,
            Py_ssize_t nowners, uint64_t *out, Py_ssize_t cap)
{
    Py_ssize_t total = 0, filled = 0; /* offsets[0..filled] are written */
    offsets[0] = 0;
    for (Py_ssize_t i = 0; i < nruns; i++) {
        int64_t o = owner[i], f = first[i], c = count[i];
        if (o < filled || o >= nowners || f < 0 || c < 0 || f > nvalues || c > nvalues - f ||
            c > cap - total)
            return BAD_ARRAYS;
        while (filled < o)
            offsets[++filled] = total;
        if (c)
            memcpy(out + total, values + f, (size_t)c * sizeof *out);
        total += c;
    }
    while (filled < nowners)
        offsets[++filled] = total;
    return total;
}

PyDoc_STRVAR(gather_doc,
             "gather(values, owner, first, count, offsets, out) -> written\n\n"
             "Concatenate the runs values[first:first+count] (owner not decreasing) into\n"
             "out (uint64), and fill offsets (int64, owners + 1) with where each owner's\n"
             "runs start. ValueError when the arrays do not fit.");

static PyObject *
gather(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer vb, ob, fb, cb, offb, outb;
    if (!PyArg_ParseTuple(args, "y*y*y*y*w*w*", &vb, &ob, &fb, &cb, &offb, &outb))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t nruns = ob.len / 8, nowners = offb.len / 8 - 1;
    if (fb.len / 8 != nruns || cb.len / 8 != nruns || nowners < 0) {
        bad_arrays();
        goto done;
    }
    Py_ssize_t n;
    Py_BEGIN_ALLOW_THREADS
    n = gather_core(vb.buf, vb.len / 8, ob.buf, fb.buf, cb.buf, nruns, offb.buf, nowners,
                    outb.buf, outb.len / 8);
    Py_END_ALLOW_THREADS
    if (n == BAD_ARRAYS) {
        bad_arrays();
        goto done;
    }
    result = PyLong_FromSsize_t(n);
done:
    PyBuffer_Release(&vb);
    PyBuffer_Release(&ob);
    PyBuffer_Release(&fb);
    PyBuffer_Release(&cb);
    PyBuffer_Release(&offb);
    PyBuffer_Release(&outb);
    return result;
}

/* --- repeated: a repeated varint field, gathered ------------------------------------- */

/* The values of field `field` (packed, unpacked or mixed) of each message, fields
 * in message order: offsets[j] = where message j's start in out (nowners + 1);
 * out (cap) written only when cap > 0. Returns the values in all, a hand-over
 * (a field of that number that is neither a varint nor length-delimited) or
 * BAD_ARRAYS (messages decreasing, runs past the values, out too small). */
static Py_ssize_t
repeated_core(const uint64_t *values, Py_ssize_t ntok, const FieldsOut *f, Py_ssize_t nfields,
              uint64_t field, int64_t *offsets, Py_ssize_t nowners, uint64_t *out, Py_ssize_t cap)
{
    Py_ssize_t total = 0, filled = 0; /* offsets[0..filled] are written */
    offsets[0] = 0;
    for (Py_ssize_t i = 0; i < nfields; i++) {
        if (f->number[i] != field)
            continue;
        int64_t m = f->message[i], t = f->tag[i], first, count;
        if (f->wire[i] == 0) {
            first = t + 1;
            count = 1;
        }
        else if (f->wire[i] == 2) {
            first = t + 2;
            count = f->next[i] - first;
        }
        else {
            return HAND_WIRE_TYPE;
        }
        if (m < filled || m >= nowners || t < 0 || t > ntok || first > ntok || count < 0 ||
            count > ntok - first || total > PY_SSIZE_T_MAX - count)
            return BAD_ARRAYS;
        while (filled < m)
            offsets[++filled] = total;
        if (cap > 0) {
            if (count > cap - total)
                return BAD_ARRAYS;
            memcpy(out + total, values + first, (size_t)count * sizeof *out);
        }
        total += count;
    }
    while (filled < nowners)
        offsets[++filled] = total;
    return total;
}

PyDoc_STRVAR(repeated_doc,
             "repeated(values, message, number, wire, tag, next, field, offsets, out) -> n\n\n"
             "The repeated varint field `field` (packed, unpacked or mixed) of every\n"
             "message, from the five field arrays (messages not decreasing, as split and\n"
             "walk give them): offsets (int64, messages + 1) filled with where each\n"
             "message's values start, and the values written to out (uint64) unless it is\n"
             "empty: call with an empty one for n, then with one of n. n < 0: hand over.\n"
             "ValueError when the arrays do not fit.");

static PyObject *
repeated(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer v, o[5], offb, outb;
    unsigned long long field;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*y*Kw*w*", &v, &o[0], &o[1], &o[2], &o[3], &o[4],
                          &field, &offb, &outb))
        return NULL;
    PyObject *result = NULL;
    FieldsOut f;
    Py_ssize_t nowners = offb.len / 8 - 1;
    if (!fields_out(o, &f) || nowners < 0) {
        bad_arrays();
        goto done;
    }
    Py_ssize_t n;
    Py_BEGIN_ALLOW_THREADS
    n = repeated_core(v.buf, v.len / 8, &f, f.cap, field, offb.buf, nowners, outb.buf,
                      outb.len / 8);
    Py_END_ALLOW_THREADS
    if (n == BAD_ARRAYS || (n >= 0 && outb.len > 0 && n != outb.len / 8)) {
        bad_arrays();
        goto done;
    }
    result = PyLong_FromSsize_t(n);
done:
    PyBuffer_Release(&v);
    for (int i = 0; i < 5; i++)
        PyBuffer_Release(&o[i]);
    PyBuffer_Release(&offb);
    PyBuffer_Release(&outb);
    return result;
}

/* --- top-level field scan -------------------------------------------------------------- */

PyDoc_STRVAR(scan_fields_doc,
"scan_fields(buf, allowed) -> None or (field_number, wire_type)\n\n"
"Walk the fields of one well-formed message (upb parsed it already) without\n"
"creating an object per field: allowed[n] (n < len(allowed)) is the bitmask of\n"
"wire types field n may use; a field number past the table may use any wire\n"
"type but groups (3, 4). Returns the first field breaking that, or (-1, -1)\n"
"if the buffer ends inside a field, else None.");

static PyObject *
scan_fields(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer b, a;
    if (!PyArg_ParseTuple(args, "y*y*", &b, &a))
        return NULL;
    const uint8_t *p = b.buf, *end = p + b.len;
    const uint8_t *allowed = a.buf;
    Py_ssize_t nallowed = a.len;
    int64_t bad_number = 0, bad_wire = 0;
    int found = 0;
    Py_BEGIN_ALLOW_THREADS
    while (p < end) {
        uint64_t tag = 0, len = 0;
        int shift = 0;
        while (p < end && shift < 64) {
            tag |= (uint64_t)(*p & 0x7F) << shift;
            shift += 7;
            if (!(*p++ & 0x80))
                goto tag_done;
        }
        found = -1;
        break;
    tag_done:;
        uint64_t number = tag >> 3;
        int wire = (int)(tag & 7);
        int mask = number < (uint64_t)nallowed ? allowed[number] : 0x27; /* 0,1,2,5 */
        if (!(mask >> wire & 1)) {
            bad_number = (int64_t)(number > INT64_MAX ? INT64_MAX : number);
            bad_wire = wire;
            found = 1;
            break;
        }
        if (wire == 0) {
            int n = 0;
            while (p < end && n < MAX_VARINT_BYTES && (*p++ & 0x80))
                n++;
        } else if (wire == 1 || wire == 5) {
            Py_ssize_t w = wire == 1 ? 8 : 4;
            if (end - p < w) {
                found = -1;
                break;
            }
            p += w;
        } else if (wire == 2) {
            shift = 0;
            while (p < end && shift < 64) {
                len |= (uint64_t)(*p & 0x7F) << shift;
                shift += 7;
                if (!(*p++ & 0x80))
                    goto len_done;
            }
            found = -1;
            break;
        len_done:
            if (len > (uint64_t)(end - p)) {
                found = -1;
                break;
            }
            p += len;
        } else {
            found = -1;
            break;
        }
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&b);
    PyBuffer_Release(&a);
    if (found == 1)
        return Py_BuildValue("(LL)", (long long)bad_number, (long long)bad_wire);
    if (found == -1)
        return Py_BuildValue("(ii)", -1, -1);
    Py_RETURN_NONE;
}

/* --- top-level unknown fields ----------------------------------------------------------- */

/* One field at p: its number, wire type, payload (after the tag, and after the
 * length for wire type 2) and the byte after it. 0 when the field is one upb and
 * pprof read alike (a tag and payload inside the buffer, a wire type of 0, 1, 2
 * or 5, a number protobuf allows), -1 otherwise. */
static int
next_field(const uint8_t *p, const uint8_t *end, uint64_t *number, int *wire,
           const uint8_t **payload, const uint8_t **after)
{
    uint64_t tag = 0, len = 0;
    int n = 0;
    /* The common field first: a one-byte tag, and a one-byte varint or length
     * (the same answer as the loops below, without them). */
    if (end - p >= 2 && p[0] < 0x80 && p[1] < 0x80 && ((p[0] & 7) == 0 || (p[0] & 7) == 2)) {
        *number = p[0] >> 3;
        *wire = p[0] & 7;
        *payload = p + 1 + (*wire == 2);
        if (*wire == 2 && p[1] > end - p - 2)
            return -1;
        *after = *wire == 2 ? p + 2 + p[1] : p + 2;
        return 0;
    }
    for (;; n++) {
        if (p >= end || n >= MAX_VARINT_BYTES)
            return -1;
        tag |= (uint64_t)(*p & 0x7F) << (7 * n);
        if (!(*p++ & 0x80))
            break;
    }
    *number = tag >> 3;
    *wire = (int)(tag & 7);
    *payload = p;
    if (*number > 0x1FFFFFFF)
        return -1;
    if (*wire == 0) {
        for (n = 0;; n++) {
            if (p >= end || n >= MAX_VARINT_BYTES)
                return -1;
            if (!(*p++ & 0x80))
                break;
        }
    } else if (*wire == 1 || *wire == 5) {
        Py_ssize_t w = *wire == 1 ? 8 : 4;
        if (end - p < w)
            return -1;
        p += w;
    } else if (*wire == 2) {
        for (n = 0;; n++) {
            if (p >= end || n >= MAX_VARINT_BYTES)
                return -1;
            len |= (uint64_t)(*p & 0x7F) << (7 * n);
            if (!(*p++ & 0x80))
                break;
        }
        if (len > (uint64_t)(end - p))
            return -1;
        *payload = p;
        p += len;
    } else {
        return -1;
    }
    *after = p;
    return 0;
}

PyDoc_STRVAR(known_fields_doc,
"known_fields(buf, allowed) -> None, buf or bytes\n\n"
"The fields of one message whose numbers the table knows (0 < n < len(allowed)\n"
"and allowed[n] != 0), in order, without the others: so that upb, which keeps\n"
"every unknown field it parses, never holds them. buf itself when it has no\n"
"other field. None when anything is unusual (a truncated field, a group or wire\n"
"type 6 or 7, a known number with a wire type allowed[n] does not permit, a\n"
"number past 2**29 - 1): the caller then parses buf itself and reports what it\n"
"finds.");

static PyObject *
known_fields(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer b, a;
    PyObject *buf, *table;
    if (!PyArg_ParseTuple(args, "OO", &buf, &table))
        return NULL;
    if (PyObject_GetBuffer(buf, &b, PyBUF_SIMPLE) < 0)
        return NULL;
    if (PyObject_GetBuffer(table, &a, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&b);
        return NULL;
    }
    const uint8_t *start = b.buf, *end = start + b.len, *p, *payload, *after;
    const uint8_t *allowed = a.buf;
    Py_ssize_t nallowed = a.len, kept = 0, unknown = 0;
    uint64_t number;
    int wire, status = 0;
    PyObject *out = NULL;
    Py_BEGIN_ALLOW_THREADS
    for (p = start; p < end; p = after) {
        if (next_field(p, end, &number, &wire, &payload, &after) != 0) {
            status = -1;
            break;
        }
        int known = number > 0 && number < (uint64_t)nallowed && allowed[number] != 0;
        if (known && !(allowed[number] >> wire & 1)) {
            status = -1;
            break;
        }
        if (known)
            kept += after - p;
        else
            unknown += after - p;
    }
    Py_END_ALLOW_THREADS
    if (status != 0 || unknown == 0) {
        PyBuffer_Release(&b);
        PyBuffer_Release(&a);
        if (status != 0)
            Py_RETURN_NONE;
        Py_INCREF(buf);
        return buf;
    }
    out = PyBytes_FromStringAndSize(NULL, kept);
    if (out != NULL) {
        uint8_t *q = (uint8_t *)PyBytes_AS_STRING(out), *qend = q + kept;
        Py_BEGIN_ALLOW_THREADS
        for (p = start; p < end; p = after) {
            /* Checked in the first pass; checked again, with the room left, so that
             * nothing is written out of bounds whatever the buffer holds now. */
            if (next_field(p, end, &number, &wire, &payload, &after) != 0) {
                status = -1;
                break;
            }
            if (number > 0 && number < (uint64_t)nallowed && allowed[number] != 0) {
                if (after - p > qend - q) {
                    status = -1;
                    break;
                }
                memcpy(q, p, (size_t)(after - p));
                q += after - p;
            }
        }
        Py_END_ALLOW_THREADS
        if (status != 0 || q != qend)
            Py_CLEAR(out);
        if (out == NULL && !PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "buffer changed while it was read");
    }
    PyBuffer_Release(&b);
    PyBuffer_Release(&a);
    return out;
}

/* --- split_top: the top level in one pass ------------------------------------------- */

#define MAX_SLOTS 16

/* What split_top's passes share: the tables, and per slot the fields found. */
typedef struct {
    const uint8_t *allowed, *slots;
    Py_ssize_t nallowed, nslots;
    Py_ssize_t count[MAX_SLOTS]; /* fields of each slot */
    Py_ssize_t bytes[MAX_SLOTS]; /* and their payloads' bytes */
    Py_ssize_t rest;             /* bytes of the known fields without a slot */
    /* top_field_kind of each one-byte tag of wire type 0 or 2, TOP_SLOW for the
     * other one-byte tags (see top_next). */
    int8_t kind1[128];
} TopTables;

#define TOP_SLOW 127

/* How split_top takes one field: -1 refuse the message (the caller parses it
 * with upb), 0 drop it (an unknown field: pprof skips it), 1 keep it in the rest,
 * 2 + s a segment of slot s. The rules of known_fields, plus: a slot's field is
 * length-delimited. */
static int
top_field_kind(const TopTables *t, uint64_t number, int wire)
{
    int known = number > 0 && number < (uint64_t)t->nallowed && t->allowed[number] != 0;
    if (!known)
        return 0;
    if (!(t->allowed[number] >> wire & 1))
        return -1;
    int slot = number < (uint64_t)t->nslots ? t->slots[number] : 0;
    if (slot == 0)
        return 1;
    return wire == 2 ? 1 + slot : -1;
}

/* The field at p as split_top takes it: its kind (top_field_kind, -1 when
 * refused), payload and the byte after it. Exactly next_field then
 * top_field_kind; why a path of its own: every field a profile writer emits has
 * a one-byte tag of wire type 0 or 2 and a varint or length of one or two bytes,
 * and both passes run it once per field (~100k fields in a 2 MB profile), so
 * that case takes a table and two byte tests, the rest next_field. */
static inline __attribute__((always_inline)) int
top_next(const uint8_t *p, const uint8_t *end, const TopTables *t, const uint8_t **payload,
         const uint8_t **after)
{
    if (end - p >= 3 && p[0] < 0x80 && t->kind1[p[0]] != TOP_SLOW) {
        int kind = t->kind1[p[0]];
        if (!(p[0] & 2)) { /* wire type 0: a varint of one byte, else the long way */
            if (p[1] < 0x80) {
                *payload = p + 1;
                *after = p + 2;
                return kind;
            }
        }
        else {
            uint64_t len;
            const uint8_t *q;
            if (p[1] < 0x80) {
                len = p[1];
                q = p + 2;
            }
            else if (p[2] < 0x80) {
                len = (uint64_t)(p[1] & 0x7F) | (uint64_t)p[2] << 7;
                q = p + 3;
            }
            else {
                goto slow;
            }
            if (len > (uint64_t)(end - q))
                return -1;
            *payload = q;
            *after = q + len;
            return kind;
        }
    }
slow:;
    uint64_t number;
    int wire;
    if (next_field(p, end, &number, &wire, payload, after) != 0)
        return -1;
    return top_field_kind(t, number, wire);
}

/* Pass one: count each slot's fields and payload bytes, and the rest's bytes.
 * -1: refused. */
static int
top_count(const uint8_t *p, const uint8_t *end, TopTables *t)
{
    const uint8_t *payload, *after;
    for (; p < end; p = after) {
        int kind = top_next(p, end, t, &payload, &after);
        if (kind < 0)
            return -1;
        if (kind == 1) {
            t->rest += after - p;
        }
        else if (kind >= 2) {
            t->count[kind - 2]++;
            t->bytes[kind - 2] += after - payload;
        }
    }
    return 0;
}

/* Where pass two writes: per slot, the next field's index and data offset, and
 * the ends pass one set for them. */
typedef struct {
    Py_ssize_t at[MAX_SLOTS], stop[MAX_SLOTS], byte[MAX_SLOTS], stop_byte[MAX_SLOTS];
} TopCursor;

static void
top_cursor(const TopTables *t, TopCursor *c)
{
    Py_ssize_t fields = 0, bytes = 0;
    for (int s = 0; s < MAX_SLOTS; s++) {
        c->at[s] = fields;
        c->byte[s] = bytes;
        fields += t->count[s];
        bytes += t->bytes[s];
        c->stop[s] = fields;
        c->stop_byte[s] = bytes;
    }
}

/* Pass two: copy each slot field's payload into data (slot by slot, each slot's
 * in order: a copy of only the known payloads, so the caller can free buf at
 * once, as it freed upb's input), its start there and length into start and
 * length, and the other known fields into rest. Every write is checked against
 * the room pass one found, so a buffer that changed in between gives -1, never
 * a write out of bounds. */
static int
top_fill(const uint8_t *begin, const uint8_t *end, const TopTables *t, uint8_t *data,
         int64_t *start, int64_t *length, uint8_t *rest)
{
    TopCursor c;
    top_cursor(t, &c);
    Py_ssize_t used = 0;
    const uint8_t *p, *payload, *after;
    for (p = begin; p < end; p = after) {
        int kind = top_next(p, end, t, &payload, &after);
        if (kind < 0)
            return -1;
        if (kind == 1) {
            if (after - p > t->rest - used)
                return -1;
            memcpy(rest + used, p, (size_t)(after - p));
            used += after - p;
        }
        else if (kind >= 2) {
            int s = kind - 2;
            Py_ssize_t len = after - payload;
            if (c.at[s] >= c.stop[s] || len > c.stop_byte[s] - c.byte[s])
                return -1;
            /* Short payloads (most) as one fixed 32-byte copy, which the
             * compiler inlines: the bytes past len are read inside buf and land
             * inside the slot's own room still to fill, all of which the slot's
             * later payloads overwrite (pass one sized it to their sum). */
            if (len <= 32 && end - payload >= 32 && c.stop_byte[s] - c.byte[s] >= 32)
                memcpy(data + c.byte[s], payload, 32);
            else if (len)
                memcpy(data + c.byte[s], payload, (size_t)len);
            start[c.at[s]] = c.byte[s];
            length[c.at[s]] = len;
            c.at[s]++;
            c.byte[s] += len;
        }
    }
    return used == t->rest ? 0 : -1;
}

/* The tables of split_top (a bytes-like allowed and slots); -1 with ValueError
 * when a slot is past MAX_SLOTS. */
static int
top_tables(Py_buffer *a, Py_buffer *sl, TopTables *t)
{
    *t = (TopTables){.allowed = a->buf, .nallowed = a->len, .slots = sl->buf, .nslots = sl->len};
    for (Py_ssize_t n = 0; n < t->nslots; n++) {
        if (t->slots[n] > MAX_SLOTS) {
            PyErr_SetString(PyExc_ValueError, "a slot past 16");
            return -1;
        }
    }
    for (int tag = 0; tag < 128; tag++) {
        int wire = tag & 7;
        t->kind1[tag] = wire == 0 || wire == 2 ? (int8_t)top_field_kind(t, (uint64_t)(tag >> 3), wire)
                                               : TOP_SLOW;
    }
    return 0;
}

/* (data, positions, counts, rest) for a buffer top_count passed (see split_top).
 * None when pass two refuses. */
static PyObject *
top_result(Py_buffer *b, const TopTables *t)
{
    Py_ssize_t total = 0, ndata = 0;
    for (int s = 0; s < MAX_SLOTS; s++) {
        total += t->count[s];
        ndata += t->bytes[s];
    }
    PyObject *data = PyBytes_FromStringAndSize(NULL, ndata);
    PyObject *positions = PyBytes_FromStringAndSize(NULL, 16 * total);
    PyObject *rest = PyBytes_FromStringAndSize(NULL, t->rest);
    PyObject *counts = PyTuple_New(MAX_SLOTS);
    PyObject *result = NULL;
    if (data == NULL || positions == NULL || rest == NULL || counts == NULL)
        goto done;
    for (Py_ssize_t s = 0; s < MAX_SLOTS; s++) {
        PyObject *c = PyLong_FromSsize_t(t->count[s]);
        if (c == NULL)
            goto done;
        PyTuple_SET_ITEM(counts, s, c);
    }
    uint8_t *d = (uint8_t *)PyBytes_AS_STRING(data);
    int64_t *start = (int64_t *)PyBytes_AS_STRING(positions);
    uint8_t *r = (uint8_t *)PyBytes_AS_STRING(rest);
    const uint8_t *p = b->buf;
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = top_fill(p, p + b->len, t, d, start, start + total, r);
    Py_END_ALLOW_THREADS
    if (status != 0) {
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    result = PyTuple_Pack(4, data, positions, counts, rest);
done:
    Py_XDECREF(data);
    Py_XDECREF(positions);
    Py_XDECREF(rest);
    Py_XDECREF(counts);
    return result;
}

PyDoc_STRVAR(split_top_doc,
"split_top(buf, allowed, slots) -> None or (data, positions, counts, rest)\n\n"
"The top level of one message in two passes, no object per field. Fields are\n"
"taken as known_fields takes them (allowed: the wire types of each known number;\n"
"the others dropped); a known field n with slots[n] = s > 0 (s <= 16; n <\n"
"len(slots)) must be length-delimited, and its payload is copied to data, slot by\n"
"slot, each slot's in order. positions: int64 starts (into data) then lengths,\n"
"each sum(counts) long, in the same order; counts: the fields of each of the 16\n"
"slots; rest: the other known fields, in order, as bytes. None when known_fields\n"
"would give None, a slot's field is not length-delimited, or buf is 2 GiB or\n"
"more: the caller then parses buf itself and reports what it finds.");

static PyObject *
split_top(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer b, a, sl;
    TopTables t;
    if (!PyArg_ParseTuple(args, "y*y*y*", &b, &a, &sl))
        return NULL;
    PyObject *result = NULL;
    if (top_tables(&a, &sl, &t) == 0) {
        int status = -1;
        if (b.len < INT32_MAX) {
            const uint8_t *p = b.buf;
            Py_BEGIN_ALLOW_THREADS
            status = top_count(p, p + b.len, &t);
            Py_END_ALLOW_THREADS
        }
        if (status == 0) {
            result = top_result(&b, &t);
        }
        else {
            result = Py_None;
            Py_INCREF(result);
        }
    }
    PyBuffer_Release(&b);
    PyBuffer_Release(&a);
    PyBuffer_Release(&sl);
    return result;
}

/* --- direct: samples, locations and functions read straight into their arrays -------- */

/* The common kinds of sub-message in one pass each, message by message in place,
 * into the arrays the walk above and repeated / children / last_values would
 * give (fast.py, direct.py). They take only the plain shapes: fields of the
 * numbers and wire types the kind has, every varint of at most 10 bytes and
 * inside its message, each packed run or nested message ending on a varint's
 * end. Anything else (labels, an unknown field, a wrong wire type, a field
 * number 0, a truncated field) is declined, and the walk above decodes the
 * kind, with its hand-overs and errors. Every byte of a message they take is
 * part of a varint they read, so the walk would read the same varints from the
 * same bytes. */

/* A varint at *pp, inside [*pp, end), read as split_core reads one (wrapping
 * modulo 2**64). -1: it runs past end or past 10 bytes. */
static inline int
read_varint(const uint8_t **pp, const uint8_t *end, uint64_t *v)
{
    const uint8_t *p = *pp;
    /* One and two bytes first: most ids, lengths and tags. */
    if (p < end && *p < 0x80) {
        *v = *p;
        *pp = p + 1;
        return 0;
    }
    if (end - p >= 2 && p[1] < 0x80) {
        *v = (p[0] & 0x7F) | (uint64_t)p[1] << 7;
        *pp = p + 2;
        return 0;
    }
    uint64_t acc = 0;
    for (int i = 0; i < MAX_VARINT_BYTES && p < end; i++) {
        uint64_t b = *p++;
        acc |= (b & 0x7F) << (7 * i);
        if (b < 0x80) {
            *v = acc;
            *pp = p;
            return 0;
        }
    }
    return -1;
}

/* A length-delimited field's payload at *pp: [*pp, *run_end) once its length is
 * read, which must fit before end, and whose last byte must end a varint (the
 * walk's "a field ends inside a varint"). -1 otherwise. */
static inline int
read_run(const uint8_t **pp, const uint8_t *end, const uint8_t **run_end)
{
    uint64_t len;
    if (read_varint(pp, end, &len) < 0 || len > (uint64_t)(end - *pp))
        return -1;
    *run_end = *pp + len;
    if (len && (*run_end)[-1] >= 0x80)
        return -1;
    return 0;
}

/* The varints of a packed run [p, end) appended to out[*n...] (cap entries).
 * -1: a varint too long or cut by end, or no room left. */
static inline int
read_packed(const uint8_t *p, const uint8_t *end, uint64_t *out, Py_ssize_t *n, Py_ssize_t cap)
{
    Py_ssize_t k = *n;
    if (cap - k >= end - p) {
        /* Room for a varint per byte: branch-free per byte, as split_core (ids of
         * one and two bytes mix unpredictably): every byte writes the varint in
         * progress at k, and a last byte moves k on. */
        uint64_t acc = 0, shift = 0;
        for (; p < end; p++) {
            uint64_t b = *p;
            uint64_t more = b >> 7;
            acc |= (b & 0x7F) << shift;
            out[k] = acc;
            k += (Py_ssize_t)(more ^ 1);
            acc &= -more;
            shift = (shift + 7) & -more;
            if (shift == 7 * MAX_VARINT_BYTES)
                return -1;
        }
        if (shift)
            return -1;
    }
    else {
        while (p < end) {
            if (k >= cap || read_varint(&p, end, &out[k]) < 0)
                return -1;
            k++;
        }
    }
    *n = k;
    return 0;
}

#define DIRECT_DECLINE (-1)

/* Samples: location_id (1) and value (2), each packed or not (repeated fields
 * concatenate, as repeated_core does), into loc and val with offsets. -1
 * declines: a label, another field, a bad varint or run, or no room left. */
typedef struct {
    int64_t *offsets; /* messages + 1 */
    uint64_t *out;
    Py_ssize_t n, cap;
} Repeated;

static int
samples_core(const Messages *ms, Repeated *loc, Repeated *val)
{
    loc->offsets[0] = val->offsets[0] = 0;
    for (Py_ssize_t i = 0; i < ms->count; i++) {
        const unsigned char *p, *end, *run_end;
        Py_ssize_t len;
        if (message_at(ms, i, &p, &len) < 0)
            return BAD_ARRAYS;
        for (end = p + len; p < end;) {
            uint64_t tag;
            if (read_varint(&p, end, &tag) < 0)
                return DIRECT_DECLINE;
            Repeated *r = tag >> 3 == 1 ? loc : tag >> 3 == 2 ? val : NULL;
            if (r == NULL)
                return DIRECT_DECLINE;
            if ((tag & 7) == 0) {
                if (r->n >= r->cap || read_varint(&p, end, &r->out[r->n]) < 0)
                    return DIRECT_DECLINE;
                r->n++;
            }
            else if ((tag & 7) == 2) {
                if (read_run(&p, end, &run_end) < 0 ||
                    read_packed(p, run_end, r->out, &r->n, r->cap) < 0)
                    return DIRECT_DECLINE;
                p = run_end;
            }
            else {
                return DIRECT_DECLINE;
            }
        }
        loc->offsets[i + 1] = loc->n;
        val->offsets[i + 1] = val->n;
    }
    return 0;
}

/* Locations: id (1), mapping_id (2), address (3) and is_folded (5) varints,
 * the last of each number winning, into rows 0 to 3 of scalars (zeroed: an
 * absent field stays 0); lines (4), each a Line of function_id (1), line (2)
 * and column (3) varints, the last winning, into rows 0 to 2 of lines (cap
 * each), with offsets; *nlines: how many. -1 declines (as samples). */
static const signed char LOCATION_ROW[8] = {-1, 0, 1, 2, -1, 3, -1, -1};

static int
locations_core(const Messages *ms, uint64_t *scalars, int64_t *offsets, uint64_t *lines,
               Py_ssize_t cap, Py_ssize_t *nlines)
{
    Py_ssize_t count = ms->count, k = 0;
    offsets[0] = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        const unsigned char *p, *end, *run_end;
        Py_ssize_t len;
        if (message_at(ms, i, &p, &len) < 0)
            return BAD_ARRAYS;
        for (end = p + len; p < end;) {
            uint64_t tag, v, number;
            if (read_varint(&p, end, &tag) < 0)
                return DIRECT_DECLINE;
            number = tag >> 3;
            if (tag == (4 << 3 | 2)) {
                if (read_run(&p, end, &run_end) < 0 || k >= cap)
                    return DIRECT_DECLINE;
                /* Zeroed here, line by line: the room past the lines is never touched. */
                lines[k] = lines[cap + k] = lines[2 * cap + k] = 0;
                while (p < run_end) {
                    uint64_t line_tag;
                    if (read_varint(&p, run_end, &line_tag) < 0 || (line_tag & 7) != 0 ||
                        line_tag >> 3 < 1 || line_tag >> 3 > 3 || read_varint(&p, run_end, &v) < 0)
                        return DIRECT_DECLINE;
                    lines[(Py_ssize_t)(line_tag >> 3) * cap - cap + k] = v;
                }
                k++;
            }
            else if ((tag & 7) == 0 && number < 8 && LOCATION_ROW[number] >= 0) {
                if (read_varint(&p, end, &v) < 0)
                    return DIRECT_DECLINE;
                scalars[LOCATION_ROW[number] * count + i] = v;
            }
            else {
                return DIRECT_DECLINE;
            }
        }
        offsets[i + 1] = k;
    }
    *nlines = k;
    return 0;
}

/* Functions: id, name, system_name, filename, start_line (1 to 5), varints, the
 * last of each winning, into rows 0 to 4 of out (zeroed). -1 declines. */
static int
functions_core(const Messages *ms, uint64_t *out)
{
    Py_ssize_t count = ms->count;
    for (Py_ssize_t i = 0; i < count; i++) {
        const unsigned char *p, *end;
        Py_ssize_t len;
        if (message_at(ms, i, &p, &len) < 0)
            return BAD_ARRAYS;
        for (end = p + len; p < end;) {
            uint64_t tag, v;
            if (read_varint(&p, end, &tag) < 0 || (tag & 7) != 0 || tag >> 3 < 1 ||
                tag >> 3 > 5 || read_varint(&p, end, &v) < 0)
                return DIRECT_DECLINE;
            out[(Py_ssize_t)(tag >> 3) * count - count + i] = v;
        }
    }
    return 0;
}

/* The direct functions' arguments: buf, start, length (into s[0..2], read as
 * messages), then the n writable arrays the format names (into o). -1 with an
 * exception; else 0, and the caller releases them with direct_release. */
static void
direct_release(Py_buffer *s, Py_buffer *o, int n)
{
    for (int i = 0; i < 3; i++)
        PyBuffer_Release(&s[i]);
    for (int i = 0; i < n; i++)
        PyBuffer_Release(&o[i]);
}

static int
direct_args(PyObject *args, const char *format, Py_buffer *s, Py_buffer *o, int n, Messages *ms)
{
    if (!PyArg_ParseTuple(args, format, &s[0], &s[1], &s[2], &o[0], &o[1], &o[2], &o[3]))
        return -1;
    int ok = messages_from_segments(s, ms) == 0;
    for (int i = 0; ok && i < n; i++)
        ok = o[i].len % 8 == 0;
    if (!ok) {
        if (!PyErr_Occurred())
            bad_arrays();
        direct_release(s, o, n);
        return -1;
    }
    return 0;
}

PyDoc_STRVAR(samples_at_doc,
             "samples_at(buf, start, length, loc_offsets, loc_ids, val_offsets, values)\n"
             "    -> None or (location ids, values)\n\n"
             "The location ids (field 1) and values (field 2), packed or not, of the\n"
             "samples buf[start[i] : start[i] + length[i]] (int64 arrays), as\n"
             "Fields.repeated_varints gives them: offsets (int64, samples + 1) and the\n"
             "values (uint64; room for the samples' bytes will do) at the head of each\n"
             "array, how many returned. None when a sample has a field it declines (a\n"
             "label, another number or wire type, a bad varint or run) or there is no\n"
             "room left: the arrays then hold nothing of use. ValueError when a segment\n"
             "lies outside buf or arrays do not fit.");

static PyObject *
samples_at(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer s[3], o[4];
    Messages ms;
    int status = BAD_ARRAYS;
    if (direct_args(args, "y*y*y*w*w*w*w*", s, o, 4, &ms) < 0)
        return NULL;
    Repeated loc = {o[0].buf, o[1].buf, 0, o[1].len / 8};
    Repeated val = {o[2].buf, o[3].buf, 0, o[3].len / 8};
    if (o[0].len / 8 == ms.count + 1 && o[2].len / 8 == ms.count + 1) {
        Py_BEGIN_ALLOW_THREADS
        status = samples_core(&ms, &loc, &val);
        Py_END_ALLOW_THREADS
    }
    direct_release(s, o, 4);
    if (status == BAD_ARRAYS)
        return bad_arrays();
    if (status != 0)
        Py_RETURN_NONE;
    return Py_BuildValue("nn", loc.n, val.n);
}

PyDoc_STRVAR(locations_at_doc,
             "locations_at(buf, start, length, scalars, line_offsets, lines) -> None or n\n\n"
             "The fields 1, 2, 3 and 5 of the locations buf[start[i] : start[i] +\n"
             "length[i]] (int64 arrays) into the rows of scalars (uint64, 4 x locations,\n"
             "zeroed), and their lines (field 4) into line_offsets (int64, locations + 1)\n"
             "and the heads of the rows of lines (uint64, 3 x room; room for half the\n"
             "locations' bytes will do: function_id, line, column), each the\n"
             "last of its number, as Fields.last_values and children give them; n: the\n"
             "lines. None when a location has a field it declines or there is no room\n"
             "left; ValueError when a segment lies outside buf or arrays do not fit.");

static PyObject *
locations_at(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer s[3], o[4];
    Messages ms;
    Py_ssize_t nlines = 0;
    int status = BAD_ARRAYS;
    if (direct_args(args, "y*y*y*w*w*w*", s, o, 3, &ms) < 0)
        return NULL;
    Py_ssize_t cap = o[2].len / 24;
    if (o[0].len / 8 == 4 * ms.count && o[1].len / 8 == ms.count + 1 && o[2].len == 24 * cap) {
        Py_BEGIN_ALLOW_THREADS
        status = locations_core(&ms, o[0].buf, o[1].buf, o[2].buf, cap, &nlines);
        Py_END_ALLOW_THREADS
    }
    direct_release(s, o, 3);
    if (status == BAD_ARRAYS)
        return bad_arrays();
    if (status != 0)
        Py_RETURN_NONE;
    return PyLong_FromSsize_t(nlines);
}

PyDoc_STRVAR(functions_at_doc,
             "functions_at(buf, start, length, out) -> bool\n\n"
             "The fields 1 to 5 of the functions buf[start[i] : start[i] + length[i]]\n"
             "(int64 arrays) into the rows of out (uint64, 5 x functions, zeroed), each\n"
             "the last of its number, as Fields.last_values gives them. False when a\n"
             "function has another field (see above); ValueError when a segment lies\n"
             "outside buf or arrays do not fit.");

static PyObject *
functions_at(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer s[3], o[4];
    Messages ms;
    int status = BAD_ARRAYS;
    if (direct_args(args, "y*y*y*w*", s, o, 1, &ms) < 0)
        return NULL;
    if (o[0].len / 8 == 5 * ms.count) {
        Py_BEGIN_ALLOW_THREADS
        status = functions_core(&ms, o[0].buf);
        Py_END_ALLOW_THREADS
    }
    direct_release(s, o, 1);
    if (status == BAD_ARRAYS)
        return bad_arrays();
    return PyBool_FromLong(status == 0);
}

/* --- module ---------------------------------------------------------------------------- */

static PyMethodDef methods[] = {
    {"count_ends", count_ends, METH_O, count_ends_doc},
    {"split", split, METH_VARARGS, split_doc},
    {"join", join, METH_VARARGS, join_doc},
    {"walk", walk, METH_VARARGS, walk_doc},
    {"last_values", last_values, METH_VARARGS, last_values_doc},
    {"gather", gather, METH_VARARGS, gather_doc},
    {"repeated", repeated, METH_VARARGS, repeated_doc},
    {"scan_fields", scan_fields, METH_VARARGS, scan_fields_doc},
    {"known_fields", known_fields, METH_VARARGS, known_fields_doc},
    {"split_top", split_top, METH_VARARGS, split_top_doc},
    {"count_ends_at", count_ends_at, METH_VARARGS, count_ends_at_doc},
    {"split_at", split_at, METH_VARARGS, split_at_doc},
    {"join_at", join_at, METH_VARARGS, join_at_doc},
    {"samples_at", samples_at, METH_VARARGS, samples_at_doc},
    {"locations_at", locations_at, METH_VARARGS, locations_at_doc},
    {"functions_at", functions_at, METH_VARARGS, functions_at_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "pyproflab.decode._wire",
    .m_doc = "The fast decoder's hot loops in C (see pyproflab/decode/fast.py).",
    .m_size = 0,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__wire(void)
{
    return PyModule_Create(&module);
}
