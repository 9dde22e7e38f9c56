/* cuzarr.runtime._native: the per-chunk loops of a batch read, in C.
 *
 * Why: a device read of 1 MiB chunk files spends its host time in Python calls
 * per chunk (open, size, read into the staging buffer, close, the zstd frame
 * walk): ~3-5 us each on a 2-CPU machine, more than all of a batch's numpy
 * work. Here each loop is one call per batch, run without the GIL, so the
 * read workers also overlap their I/O.
 *
 * Every function does the common case only and says, per item, where it did
 * not: the callers (cuzarr.runtime.native, cuzarr.storage.local) take those
 * items through the Python path, which raises the precise error. Nothing here
 * raises on a file's or a stream's content.
 *
 * The module is four files: this one (buffers, the module), _native_io.c
 * (open, size, place and read a batch's files), _native_zstd.c (zstd frame
 * walks, the decode of a shard's chunks) and _native_rows.c (a device batch's
 * check, stream rows and plan rows); _native.h is what they share.
 *
 * Arrays are passed as writable buffers of int64 (or uint8 for the staging
 * buffer); lengths are checked against the item count.
 */
#include "_native.h"

/* a C-contiguous buffer of at least min_len items of itemsize bytes, aligned
 * for them; writable unless the name says it is only read ("in:") */
int cz_get_buffer(PyObject *obj, buf_t *b, Py_ssize_t min_len, Py_ssize_t itemsize,
                  const char *what) {
    b->held = 0;
    int flags = PyBUF_C_CONTIGUOUS | (strncmp(what, "in:", 3) == 0 ? 0 : PyBUF_WRITABLE);
    if (PyObject_GetBuffer(obj, &b->view, flags) < 0) {
        return -1;
    }
    b->held = 1;
    if (b->view.len < min_len * itemsize) {
        PyErr_Format(PyExc_ValueError, "%s: %zd bytes, need %zd", what, b->view.len,
                     min_len * itemsize);
        return -1;
    }
    if (itemsize > 1 && ((uintptr_t)b->view.buf % (uintptr_t)itemsize) != 0) {
        PyErr_Format(PyExc_ValueError, "%s: not aligned", what);
        return -1;
    }
    return 0;
}

void cz_release(buf_t *b) {
    if (b->held) {
        PyBuffer_Release(&b->view);
        b->held = 0;
    }
}

/* release each of the n buffers at bs that is held (a function's exit path) */
void cz_release_all(buf_t *const *bs, int n) {
    for (int i = 0; i < n; i++) {
        cz_release(bs[i]);
    }
}

static PyMethodDef methods[] = {
    {"zstd_decode_into", cz_zstd_decode_into, METH_VARARGS,
     "zstd_decode_into(fn, dctx, srcs, starts, target, chunk_shape, scratch, status)."},
    {"open_sized", cz_open_sized, METH_VARARGS,
     "open_sized(paths, fds, sizes): open and size each file (see the C source)."},
    {"close_fds", cz_close_fds, METH_O, "close_fds(fds): close every descriptor >= 0."},
    {"read_placed", cz_read_placed, METH_VARARGS,
     "read_placed(fds, sizes, offsets, buf, got, frames): read each file into its place."},
    {"place", cz_place, METH_VARARGS,
     "place(sizes, head, align, offsets): where each value of a batch goes."},
    {"index_rows", cz_index_rows, METH_VARARGS,
     "index_rows(index, flat, at, offs, sizes, where): a shard's index rows (see the C source)."},
    {"window_rows", cz_window_rows, METH_VARARGS,
     "window_rows(...): a read's batch of consecutive items planned and described."},
    {"stream_rows", cz_stream_rows, METH_VARARGS,
     "stream_rows(kind, head, ...): a device batch's stream rows (see the C source)."},
    {"slice_rows", cz_slice_rows, METH_VARARGS,
     "slice_rows(chunk_sels, out_sels, extents, out_len, out_stride, rows): plan rows of slices."},
    {"zstd_frames", cz_zstd_frames, METH_VARARGS,
     "zstd_frames(buf, offsets, lengths, out): walk the zstd frame of each item."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "cuzarr.runtime._native",
    "The per-chunk loops of a batch read, in C (see cuzarr.runtime.native).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__native(void) { return PyModule_Create(&module); }
