/* cuzarr.runtime._native: a batch's files opened, sized, placed and read (see
 * _native.c). */
#include "_native.h"

/* open_sized's paths: names[j] the file system name of paths[j] (a str, or,
 * with `known`, the str a key stands for there; NULL: skipped), its bytes
 * object kept in encoded[j]. -1 with an error set where one fails. */
static int encode_paths(PyObject *seq, PyObject *known, PyObject **encoded, const char **names) {
    for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(seq); j++) {
        PyObject *p = PyTuple_GET_ITEM(seq, j);
        if (known != NULL) {
            if (!PyUnicode_CheckExact(p)) {
                continue;
            }
            p = PyDict_GetItemWithError(known, p); /* exact str: no Python code runs */
            if (p == NULL) {
                if (PyErr_Occurred()) {
                    return -1;
                }
                continue;
            }
            if (!PyUnicode_CheckExact(p)) {
                continue;
            }
        }
        if (p == Py_None) {
            continue;
        }
        if (!PyUnicode_FSConverter(p, &encoded[j])) {
            return -1;
        }
        names[j] = PyBytes_AS_STRING(encoded[j]);
    }
    return 0;
}

/* open_sized's system calls (no GIL): each named file opened and sized into
 * fds[j] and sizes[j]; returns the flags. */
static long open_each(const char **names, Py_ssize_t n, int64_t *fds, int64_t *sizes) {
    long flags = 0;
    for (Py_ssize_t j = 0; j < n; j++) {
        fds[j] = -1;
        sizes[j] = -1;
        if (names[j] == NULL) {
            flags |= OPEN_SKIPPED | OPEN_UNSIZED;
            continue;
        }
        int fd = open(names[j], O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
            fds[j] = -(int64_t)errno;
            flags |= OPEN_UNSIZED;
            continue;
        }
        fds[j] = fd;
        off_t end = lseek(fd, 0, SEEK_END);
        if (end >= 0 && (int64_t)end >= TYPE_CHECK_ABOVE) {
            struct stat st;
            end = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? st.st_size : -1;
        }
        if (end < 0) {
            flags |= OPEN_UNSIZED;
            continue;
        }
        sizes[j] = (int64_t)end;
    }
    return flags;
}

/* open_sized(paths, fds, sizes[, known]) -> flags
 *
 * paths: a list of str (or bytes), or None for an item to skip. Each is opened
 * read-only without following a final symlink; fds[j] is the descriptor, or
 * -errno (-1 for a skipped item), and sizes[j] the file's size (-1 when not a
 * regular file or not opened). With `known` (a dict of str to str), paths are
 * keys: each str found in it stands for its value there, any other is skipped
 * (a store's checked paths: one lookup here instead of a Python step each).
 * flags: OPEN_SKIPPED where an item was skipped, | OPEN_UNSIZED where an item
 * has no descriptor or no size (skipped, failed, not a regular file): the
 * caller's two questions, answered without a numpy operation each. */
PyObject *cz_open_sized(PyObject *self, PyObject *args) {
    PyObject *paths, *fds_obj, *sizes_obj, *known = NULL;
    if (!PyArg_ParseTuple(args, "O!OO|O!", &PyList_Type, &paths, &fds_obj, &sizes_obj,
                          &PyDict_Type, &known)) {
        return NULL;
    }
    /* a snapshot: encoding a path may run Python code that changes the list */
    PyObject *seq = PyList_AsTuple(paths);
    if (seq == NULL) {
        return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(seq);
    buf_t fds_b, sizes_b;
    sizes_b.held = 0;
    if (cz_get_buffer(fds_obj, &fds_b, n, 8, "fds") < 0 ||
        cz_get_buffer(sizes_obj, &sizes_b, n, 8, "sizes") < 0) {
        cz_release(&fds_b);
        cz_release(&sizes_b);
        Py_DECREF(seq);
        return NULL;
    }
    PyObject **encoded = PyMem_Calloc((size_t)(n ? n : 1), sizeof(PyObject *));
    const char **names = PyMem_Calloc((size_t)(n ? n : 1), sizeof(char *));
    PyObject *result = NULL;
    if (encoded == NULL || names == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (encode_paths(seq, known, encoded, names) < 0) {
        goto done;
    }
    int64_t *fds = (int64_t *)fds_b.view.buf, *sizes = (int64_t *)sizes_b.view.buf;
    long flags;
    Py_BEGIN_ALLOW_THREADS
    flags = open_each(names, n, fds, sizes);
    Py_END_ALLOW_THREADS
    result = PyLong_FromLong(flags);
done:
    if (encoded != NULL) {
        for (Py_ssize_t j = 0; j < n; j++) {
            Py_XDECREF(encoded[j]);
        }
    }
    PyMem_Free(encoded);
    PyMem_Free(names);
    cz_release(&fds_b);
    cz_release(&sizes_b);
    Py_DECREF(seq);
    return result;
}

/* close_fds(fds) -> None: close every descriptor >= 0 and set it to -1 */
PyObject *cz_close_fds(PyObject *self, PyObject *arg) {
    buf_t b;
    if (cz_get_buffer(arg, &b, 0, 8, "fds") < 0) {
        cz_release(&b);
        return NULL;
    }
    int64_t *fds = (int64_t *)b.view.buf;
    Py_ssize_t n = b.view.len / 8;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t j = 0; j < n; j++) {
        if (fds[j] >= 0) {
            close((int)fds[j]);
            fds[j] = -1;
        }
    }
    Py_END_ALLOW_THREADS
    cz_release(&b);
    Py_RETURN_NONE;
}

/* read_placed(fds, sizes, offsets, buf, got, frames[, starts]) -> int
 *
 * For each j with fds[j] >= 0, sizes[j] >= 0 and its bytes fitting at
 * buf[offsets[j]:]: one pread of the whole file there (with `starts`, an
 * int64 array: of its sizes[j] bytes from starts[j] on, a byte range). got[j]
 * = 1 where it read sizes[j] bytes, else 0 (a short read, an error, no
 * descriptor: the caller's slow path). frames (or None, else n x 2 uint64):
 * for each read item, the zstd walk of the frame it starts with (zstd_walk:
 * its compressed size and content size), while its bytes are still in the
 * CPU's cache. Returns how many items were read. */
PyObject *cz_read_placed(PyObject *self, PyObject *args) {
    PyObject *fds_obj, *sizes_obj, *offs_obj, *buf_obj, *got_obj, *frames_obj;
    PyObject *starts_obj = Py_None;
    if (!PyArg_ParseTuple(args, "OOOOOO|O", &fds_obj, &sizes_obj, &offs_obj, &buf_obj, &got_obj,
                          &frames_obj, &starts_obj)) {
        return NULL;
    }
    buf_t fds_b, sizes_b, offs_b, buf_b, got_b, frames_b, starts_b;
    fds_b.held = sizes_b.held = offs_b.held = buf_b.held = got_b.held = frames_b.held = 0;
    starts_b.held = 0;
    PyObject *result = NULL;
    if (cz_get_buffer(fds_obj, &fds_b, 0, 8, "in: fds") < 0) {
        goto done;
    }
    Py_ssize_t n = fds_b.view.len / 8;
    if (cz_get_buffer(sizes_obj, &sizes_b, n, 8, "in: sizes") < 0 ||
        cz_get_buffer(offs_obj, &offs_b, n, 8, "in: offsets") < 0 ||
        cz_get_buffer(buf_obj, &buf_b, 0, 1, "buf") < 0 ||
        cz_get_buffer(got_obj, &got_b, n, 1, "got") < 0) {
        goto done;
    }
    if ((frames_obj != Py_None && cz_get_buffer(frames_obj, &frames_b, 2 * n, 8, "frames") < 0) ||
        (starts_obj != Py_None && cz_get_buffer(starts_obj, &starts_b, n, 8, "in: starts") < 0)) {
        goto done;
    }
    const int64_t *fds = fds_b.view.buf, *sizes = sizes_b.view.buf, *offs = offs_b.view.buf;
    const int64_t *starts = starts_b.held ? starts_b.view.buf : NULL;
    uint8_t *base = buf_b.view.buf, *got = got_b.view.buf;
    uint64_t *frames = frames_b.held ? frames_b.view.buf : NULL;
    int64_t cap = (int64_t)buf_b.view.len;
    Py_ssize_t count = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t j = 0; j < n; j++) {
        int64_t fd = fds[j], size = sizes[j], at = offs[j], from = starts ? starts[j] : 0;
        got[j] = 0;
        if (fd < 0 || size < 0 || at < 0 || at > cap - size || from < 0) {
            continue;
        }
        ssize_t r;
        do {
            r = pread((int)fd, base + at, (size_t)size, (off_t)from);
        } while (r < 0 && errno == EINTR);
        if (r != (ssize_t)size) {
            continue;
        }
        got[j] = 1;
        count++;
        if (frames != NULL) {
            cz_zstd_walk(base + at, (uint64_t)size, frames + 2 * j);
        }
    }
    Py_END_ALLOW_THREADS
    result = PyLong_FromSsize_t(count);
done:
    cz_release_all(
        (buf_t *const[]){&fds_b, &sizes_b, &offs_b, &buf_b, &got_b, &frames_b, &starts_b}, 7);
    return result;
}

/* place(sizes, head, align, offsets) -> total
 *
 * Where each value of a batch goes in one host buffer: offsets[j] = -1 where
 * sizes[j] < 0 (missing), else the next start after the previous value rounded
 * up to `align`, the first at (-head) mod align, so that every value's first
 * `head` bytes end on an aligned address (cuzarr.gpu.batch.place_chunks).
 * Returns the buffer's size: the end of the last value placed. */
PyObject *cz_place(PyObject *self, PyObject *args) {
    PyObject *sizes_o, *offs_o;
    long long head, align;
    if (!PyArg_ParseTuple(args, "OLLO", &sizes_o, &head, &align, &offs_o)) {
        return NULL;
    }
    if (align < 1 || head < 0) {
        PyErr_SetString(PyExc_ValueError, "place: align must be >= 1 and head >= 0");
        return NULL;
    }
    buf_t s_b, o_b;
    s_b.held = o_b.held = 0;
    PyObject *result = NULL;
    if (cz_get_buffer(sizes_o, &s_b, 0, 8, "in: sizes") < 0) {
        goto done;
    }
    Py_ssize_t n = s_b.view.len / 8;
    if (cz_get_buffer(offs_o, &o_b, n, 8, "offsets") < 0) {
        goto done;
    }
    const int64_t *sizes = s_b.view.buf;
    int64_t *offs = o_b.view.buf;
    int64_t p = (align - head % align) % align, total = 0;
    for (Py_ssize_t j = 0; j < n; j++) {
        int64_t size = sizes[j];
        if (size < 0) {
            offs[j] = -1;
            continue;
        }
        offs[j] = p;
        total = p + size;
        p += (size + align - 1) / align * align;
    }
    result = PyLong_FromLongLong(total);
done:
    cz_release(&s_b);
    cz_release(&o_b);
    return result;
}
