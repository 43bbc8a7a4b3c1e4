/* A whole gzip file inflated in one call of libdeflate, when it is one member
 * whose stated size the caller accepts (decode/pprof.py streams the rest).
 *
 * Rules: whole(data, size) inflates data as exactly one gzip member into a
 * buffer of exactly `size` bytes. It returns those bytes only when libdeflate
 * succeeds (the header valid, the CRC-32 and size in the member's trailer equal
 * to what came out), the member ends at the last byte of data, and the output
 * fills the buffer. In every other case (a truncated, corrupt or longer stream,
 * another member or any byte after the first, a size that is not the member's)
 * it returns None and the caller's stream decides, with its errors. Memory is
 * `size` bytes, which the caller bounds: libdeflate never writes past it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <libdeflate.h>

PyDoc_STRVAR(whole_doc,
             "whole(data, size) -> bytes | None\n\n"
             "data inflated as one gzip member of exactly size bytes that ends at data's\n"
             "last byte; None when it is anything else.");

static PyObject *
whole(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer in;
    Py_ssize_t size;
    if (!PyArg_ParseTuple(args, "y*n", &in, &size))
        return NULL;
    if (size <= 0) {
        PyBuffer_Release(&in);
        Py_RETURN_NONE;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, size);
    struct libdeflate_decompressor *d = out ? libdeflate_alloc_decompressor() : NULL;
    if (d == NULL) {
        Py_XDECREF(out);
        PyBuffer_Release(&in);
        return PyErr_NoMemory();
    }
    size_t used = 0, made = 0;
    enum libdeflate_result r;
    Py_BEGIN_ALLOW_THREADS
    r = libdeflate_gzip_decompress_ex(d, in.buf, (size_t)in.len, PyBytes_AS_STRING(out),
                                      (size_t)size, &used, &made);
    Py_END_ALLOW_THREADS
    libdeflate_free_decompressor(d);
    int exact = r == LIBDEFLATE_SUCCESS && used == (size_t)in.len && made == (size_t)size;
    PyBuffer_Release(&in);
    if (!exact) {
        Py_DECREF(out);
        Py_RETURN_NONE;
    }
    return out;
}

static PyMethodDef methods[] = {
    {"whole", whole, METH_VARARGS, whole_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "pyproflab.decode._inflate",
    .m_doc = "One-member gzip files inflated whole by libdeflate (decode/pprof.py).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__inflate(void)
{
    return PyModule_Create(&module);
}
