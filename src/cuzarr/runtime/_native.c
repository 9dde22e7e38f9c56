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
 * Arrays are passed as writable buffers of int64 (or uint8 for the staging
 * buffer); lengths are checked against the item count.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef O_CLOEXEC
#define O_CLOEXEC 0
#endif

/* sizes at or above this get an fstat to tell a regular file from a directory
 * or block device (whose lseek end is no size); below, lseek's answer stands,
 * as in cuzarr.storage.local.files */
#define TYPE_CHECK_ABOVE (1LL << 30)

#define ZSTD_MAGIC 0xFD2FB528u
#define ZSTD_BLOCK_MAX (128u << 10)
#define WALK_ERROR UINT64_MAX
#define NO_CONTENT UINT64_MAX

typedef struct {
    Py_buffer view;
    int held;
} buf_t;

/* a C-contiguous buffer of at least min_len items of itemsize bytes, aligned
 * for them; writable unless the name says it is only read ("in:") */
static int get_buffer(PyObject *obj, buf_t *b, Py_ssize_t min_len, Py_ssize_t itemsize,
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

static void release(buf_t *b) {
    if (b->held) {
        PyBuffer_Release(&b->view);
        b->held = 0;
    }
}

/* release each of the n buffers at bs that is held (a function's exit path) */
static void release_all(buf_t *const *bs, int n) {
    for (int i = 0; i < n; i++) {
        release(bs[i]);
    }
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
#define OPEN_SKIPPED 1
#define OPEN_UNSIZED 2
static PyObject *open_sized(PyObject *self, PyObject *args) {
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
    if (get_buffer(fds_obj, &fds_b, n, 8, "fds") < 0 ||
        get_buffer(sizes_obj, &sizes_b, n, 8, "sizes") < 0) {
        release(&fds_b);
        release(&sizes_b);
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
    for (Py_ssize_t j = 0; j < n; j++) {
        PyObject *p = PyTuple_GET_ITEM(seq, j);
        if (known != NULL) {
            if (!PyUnicode_CheckExact(p)) {
                continue;
            }
            p = PyDict_GetItemWithError(known, p); /* exact str: no Python code runs */
            if (p == NULL) {
                if (PyErr_Occurred()) {
                    goto done;
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
            goto done;
        }
        names[j] = PyBytes_AS_STRING(encoded[j]);
    }
    int64_t *fds = (int64_t *)fds_b.view.buf, *sizes = (int64_t *)sizes_b.view.buf;
    long flags = 0;
    Py_BEGIN_ALLOW_THREADS
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
    release(&fds_b);
    release(&sizes_b);
    Py_DECREF(seq);
    return result;
}

/* close_fds(fds) -> None: close every descriptor >= 0 and set it to -1 */
static PyObject *close_fds(PyObject *self, PyObject *arg) {
    buf_t b;
    if (get_buffer(arg, &b, 0, 8, "fds") < 0) {
        release(&b);
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
    release(&b);
    Py_RETURN_NONE;
}

static inline uint32_t le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The zstd frame at p (n bytes there), walked header by header: magic, frame
 * header, every block header (type, a size of at most 128 KiB, inside the n
 * bytes) to the last block, then the optional checksum. out[0] = its compressed
 * size (WALK_ERROR where any of that fails); out[1] = its content size where
 * nvCOMP's raw zstd decoder may take it: a content size field present, no
 * dictionary id, the reserved bit clear (NO_CONTENT otherwise). It checks what
 * cuzarr.gpu.scan checks, field for field and block for block: each frame
 * header is read once, here, while the chunk's bytes are in the CPU's cache. */
static void zstd_walk(const uint8_t *p, uint64_t n, uint64_t *out);

/* zstd_walk's first step: the frame header. Sets out[1] (and out[0] to
 * WALK_ERROR); returns 1 with *pos at the first block header and *checksum
 * set, or 0 where the walk ends here (an error). */
static int walk_header(const uint8_t *p, uint64_t n, uint64_t *out, uint64_t *pos,
                       unsigned *checksum) {
    out[0] = WALK_ERROR;
    out[1] = NO_CONTENT;
    if (n < 6 || le32(p) != ZSTD_MAGIC) {
        return 0;
    }
    uint8_t fhd = p[4];
    unsigned fcs_flag = fhd >> 6, single = (fhd >> 5) & 1;
    static const unsigned did_size[4] = {0, 1, 2, 4};
    static const unsigned fcs_size[4] = {0, 2, 4, 8};
    unsigned fcs = fcs_flag == 0 ? single : fcs_size[fcs_flag];
    uint64_t start = 5 + (single ? 0 : 1) + did_size[fhd & 3]; /* the content size */
    *checksum = (fhd >> 2) & 1;
    *pos = start + fcs;
    if (*pos > n) {
        return 0;
    }
    if (fcs > 0 && (fhd & 0x08) == 0 && (fhd & 3) == 0) {
        uint64_t v = 0;
        for (unsigned i = 0; i < fcs; i++) {
            v |= (uint64_t)p[start + i] << (8 * i);
        }
        out[1] = v + (fcs == 2 ? 256 : 0);
    }
    return 1;
}

/* zstd_walk's next step: the block header at *pos. Returns -1 where the walk
 * fails, 1 after the last block (out[0] set where its checksum fits), 0 to go
 * on (*pos at the next block header). */
static int walk_block(const uint8_t *p, uint64_t n, uint64_t *pos, unsigned checksum,
                      uint64_t *out) {
    if (*pos + 3 > n) {
        return -1;
    }
    uint32_t h = (uint32_t)p[*pos] | (uint32_t)p[*pos + 1] << 8 | (uint32_t)p[*pos + 2] << 16;
    uint32_t last = h & 1, type = (h >> 1) & 3, size = h >> 3;
    if (type == 3 || size > ZSTD_BLOCK_MAX) {
        return -1;
    }
    *pos += 3 + (type == 1 ? 1 : size);
    if (*pos > n) {
        return -1;
    }
    if (!last) {
        return 0;
    }
    *pos += checksum ? 4 : 0;
    if (*pos <= n) {
        out[0] = *pos;
    }
    return 1;
}

/* The zstd frame at p (n bytes there), walked header by header: magic, frame
 * header, every block header (type, a size of at most 128 KiB, inside the n
 * bytes) to the last block, then the optional checksum. out[0] = its compressed
 * size (WALK_ERROR where any of that fails); out[1] = its content size where
 * nvCOMP's raw zstd decoder may take it: a content size field present, no
 * dictionary id, the reserved bit clear (NO_CONTENT otherwise). It checks what
 * cuzarr.gpu.scan checks, field for field and block for block: each frame
 * header is read once, here, while the chunk's bytes are in the CPU's cache. */
static void zstd_walk(const uint8_t *p, uint64_t n, uint64_t *out) {
    uint64_t pos;
    unsigned checksum;
    if (!walk_header(p, n, out, &pos, &checksum)) {
        return;
    }
    while (walk_block(p, n, &pos, checksum, out) == 0) {
    }
}

/* zstd_walk of several frames at once (frame j at ps[j], ns[j] bytes, into
 * outs + 2 * j), WALK_LANES at a time in lockstep: each round reads one
 * header of each frame still being walked, so the cache misses of frames
 * whose bytes are no longer in the CPU's caches (a shard's inner chunks,
 * walked after the whole shard was read) overlap instead of following one
 * another. The same answers as zstd_walk, frame by frame. */
#define WALK_LANES 16
static void zstd_walk_lanes(const uint8_t *const *ps, const uint64_t *ns, uint64_t *const *outs,
                            Py_ssize_t n) {
    for (Py_ssize_t g = 0; g < n; g += WALK_LANES) {
        Py_ssize_t m = n - g < WALK_LANES ? n - g : WALK_LANES;
        uint64_t pos[WALK_LANES];
        unsigned checksum[WALK_LANES];
        int live[WALK_LANES], left = 0;
        for (Py_ssize_t k = 0; k < m; k++) {
            live[k] = walk_header(ps[g + k], ns[g + k], outs[g + k], &pos[k], &checksum[k]);
            left += live[k];
        }
        while (left > 0) {
            for (Py_ssize_t k = 0; k < m; k++) {
                if (live[k] && walk_block(ps[g + k], ns[g + k], &pos[k], checksum[k],
                                          outs[g + k]) != 0) {
                    live[k] = 0;
                    left--;
                }
            }
        }
    }
}

/* read_placed(fds, sizes, offsets, buf, got, frames) -> int
 *
 * For each j with fds[j] >= 0, sizes[j] >= 0 and its bytes fitting at
 * buf[offsets[j]:]: one pread of the whole file there. got[j] = 1 where it read
 * sizes[j] bytes, else 0 (a short read, an error, no descriptor: the caller's
 * slow path). frames (or None, else n x 2 uint64): for each read item, the
 * zstd walk of the frame it starts with (zstd_walk: its compressed size and
 * content size), while its bytes are still in the CPU's cache. Returns how
 * many items were read. */
static PyObject *read_placed(PyObject *self, PyObject *args) {
    PyObject *fds_obj, *sizes_obj, *offs_obj, *buf_obj, *got_obj, *frames_obj;
    if (!PyArg_ParseTuple(args, "OOOOOO", &fds_obj, &sizes_obj, &offs_obj, &buf_obj, &got_obj,
                          &frames_obj)) {
        return NULL;
    }
    buf_t fds_b, sizes_b, offs_b, buf_b, got_b, frames_b;
    fds_b.held = sizes_b.held = offs_b.held = buf_b.held = got_b.held = frames_b.held = 0;
    PyObject *result = NULL;
    if (get_buffer(fds_obj, &fds_b, 0, 8, "in: fds") < 0) {
        goto done;
    }
    Py_ssize_t n = fds_b.view.len / 8;
    if (get_buffer(sizes_obj, &sizes_b, n, 8, "in: sizes") < 0 ||
        get_buffer(offs_obj, &offs_b, n, 8, "in: offsets") < 0 ||
        get_buffer(buf_obj, &buf_b, 0, 1, "buf") < 0 ||
        get_buffer(got_obj, &got_b, n, 1, "got") < 0) {
        goto done;
    }
    if (frames_obj != Py_None && get_buffer(frames_obj, &frames_b, 2 * n, 8, "frames") < 0) {
        goto done;
    }
    const int64_t *fds = fds_b.view.buf, *sizes = sizes_b.view.buf, *offs = offs_b.view.buf;
    uint8_t *base = buf_b.view.buf, *got = got_b.view.buf;
    uint64_t *frames = frames_b.held ? frames_b.view.buf : NULL;
    int64_t cap = (int64_t)buf_b.view.len;
    Py_ssize_t count = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t j = 0; j < n; j++) {
        int64_t fd = fds[j], size = sizes[j], at = offs[j];
        got[j] = 0;
        if (fd < 0 || size < 0 || at < 0 || at > cap - size) {
            continue;
        }
        ssize_t r;
        do {
            r = pread((int)fd, base + at, (size_t)size, 0);
        } while (r < 0 && errno == EINTR);
        if (r != (ssize_t)size) {
            continue;
        }
        got[j] = 1;
        count++;
        if (frames != NULL) {
            zstd_walk(base + at, (uint64_t)size, frames + 2 * j);
        }
    }
    Py_END_ALLOW_THREADS
    result = PyLong_FromSsize_t(count);
done:
    release_all((buf_t *const[]){&fds_b, &sizes_b, &offs_b, &buf_b, &got_b, &frames_b}, 6);
    return result;
}

/* zstd_frames(buf, offsets, lengths, out) -> None: out[j] (n x 2 uint64) = the
 * zstd walk of the frame at buf[offsets[j]:offsets[j] + lengths[j]] (zstd_walk;
 * both 2**64 - 1 where the item lies outside buf). The other buffers are only
 * read. */
static PyObject *zstd_frames(PyObject *self, PyObject *args) {
    PyObject *buf_obj, *offs_obj, *lens_obj, *out_obj;
    if (!PyArg_ParseTuple(args, "OOOO", &buf_obj, &offs_obj, &lens_obj, &out_obj)) {
        return NULL;
    }
    buf_t out_b, offs_b, lens_b;
    buf_t buf_b;
    out_b.held = offs_b.held = lens_b.held = buf_b.held = 0;
    PyObject *result = NULL;
    if (get_buffer(out_obj, &out_b, 0, 8, "out") < 0) {
        goto done;
    }
    Py_ssize_t n = out_b.view.len / 16;
    if (get_buffer(buf_obj, &buf_b, 0, 1, "in: buf") < 0 ||
        get_buffer(offs_obj, &offs_b, n, 8, "in: offsets") < 0 ||
        get_buffer(lens_obj, &lens_b, n, 8, "in: lengths") < 0) {
        goto done;
    }
    const uint8_t *base = buf_b.view.buf;
    const int64_t *offs = offs_b.view.buf, *lens = lens_b.view.buf;
    uint64_t *out = out_b.view.buf;
    int64_t cap = (int64_t)buf_b.view.len;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t j = 0; j < n; j++) {
        int64_t at = offs[j], len = lens[j];
        if (at < 0 || len < 0 || at > cap - len) {
            out[2 * j] = WALK_ERROR;
            out[2 * j + 1] = NO_CONTENT;
            continue;
        }
        zstd_walk(base + at, (uint64_t)len, out + 2 * j);
    }
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    release_all((buf_t *const[]){&buf_b, &out_b, &offs_b, &lens_b}, 4);
    return result;
}

/* place(sizes, head, align, offsets) -> total
 *
 * Where each value of a batch goes in one host buffer: offsets[j] = -1 where
 * sizes[j] < 0 (missing), else the next start after the previous value rounded
 * up to `align`, the first at (-head) mod align, so that every value's first
 * `head` bytes end on an aligned address (cuzarr.gpu.batch.place_chunks).
 * Returns the buffer's size: the end of the last value placed. */
static PyObject *place(PyObject *self, PyObject *args) {
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
    if (get_buffer(sizes_o, &s_b, 0, 8, "in: sizes") < 0) {
        goto done;
    }
    Py_ssize_t n = s_b.view.len / 8;
    if (get_buffer(offs_o, &o_b, n, 8, "offsets") < 0) {
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
    release(&s_b);
    release(&o_b);
    return result;
}

/* The stream table of a device batch (cuzarr.gpu.batch.STREAM_DTYPE, 34 bytes
 * a row, packed) and its scatter plan's rows (cuzarr.gpu.plan.PLAN_DTYPE, 496
 * bytes: dst_offset at 8, count at 16; kernels/cuzarr_plan.cuh). */
#define STREAM_ROW 34
#define PLAN_ROW 496
#define NOT_PARSED (UINT64_MAX - 1)
enum { KIND_COPY = 0, KIND_ZSTD = 1, KIND_LZ4 = 2 };

/* Whether item j's bytes (n at p) are one raw stream of `kind` decoding to
 * `expect` bytes (at most max_size), as cuzarr.gpu.scan checks them; fr: its
 * zstd walk (frames row, walked here when not yet). */
static int stream_ok(int kind, const uint8_t *p, int64_t n, int64_t expect, int64_t max_size,
                     uint64_t *fr) {
    if (kind == KIND_COPY) {
        return n == expect;
    }
    if (kind == KIND_LZ4) {
        if (n < 4) {
            return 0;
        }
        int64_t size = le32(p), clen = n - 4;
        return size == expect && !(size > 0 && clen == 0) && clen <= size + size / 255 + 16 &&
               size <= clen * 255 + 64 && size <= max_size;
    }
    if (fr[0] == 0 || fr[1] == NOT_PARSED) {
        zstd_walk(p, (uint64_t)n, fr);
    }
    return n >= 6 && fr[0] == (uint64_t)n && fr[1] == (uint64_t)expect &&
           (int64_t)fr[1] <= max_size;
}

/* Whether an item lies whole in the buffer (cap bytes) at `at`, `len` bytes,
 * has a staging slot, and its raw stream (`head` bytes in) is aligned. */
static int placed(int64_t at, int64_t len, int64_t slot, int64_t cap, int64_t head,
                  int64_t in_align) {
    return slot >= 0 && at >= 0 && len >= 0 && at <= cap - len && (at + head) % in_align == 0 &&
           len >= head;
}

/* The zstd frames of a batch's placed items that are not walked yet, walked
 * together (zstd_walk_lanes: their headers' cache misses overlap) into
 * `frames`, or, where that is NULL, into a new n x 2 array returned (the
 * caller frees it; NULL where there is none, and then stream_ok walks each
 * frame itself). */
static uint64_t *prewalk(const uint8_t *base, int64_t cap, const int64_t *offs,
                         const int64_t *lens, const int64_t *slots, uint64_t *frames,
                         int64_t head, int64_t in_align, Py_ssize_t n) {
    uint64_t *mine = NULL;
    if (frames == NULL) {
        mine = PyMem_Malloc((size_t)(n ? n : 1) * 2 * sizeof(uint64_t));
        if (mine == NULL) {
            return NULL;
        }
        for (Py_ssize_t j = 0; j < n; j++) {
            mine[2 * j] = 0;
            mine[2 * j + 1] = NOT_PARSED;
        }
        frames = mine;
    }
    const uint8_t **ps = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(*ps));
    uint64_t *ns = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(*ns));
    uint64_t **outs = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(*outs));
    if (ps != NULL && ns != NULL && outs != NULL) {
        Py_ssize_t m = 0;
        for (Py_ssize_t j = 0; j < n; j++) {
            uint64_t *fr = frames + 2 * j;
            if (placed(offs[j], lens[j], slots[j], cap, head, in_align) &&
                (fr[0] == 0 || fr[1] == NOT_PARSED)) {
                ps[m] = base + offs[j];
                ns[m] = (uint64_t)lens[j];
                outs[m++] = fr;
            }
        }
        zstd_walk_lanes(ps, ns, outs, m);
    }
    PyMem_Free(ps);
    PyMem_Free(ns);
    PyMem_Free(outs);
    return mine;
}

/* The chunks of a batch lying in `base` (cap bytes; item j at offs[j], lens[j]
 * bytes; -1: not there) checked (stream_ok) and described where they lie, in
 * item order: rows[0:k] (STREAM_DTYPE) and owners[0:k] (their items); done[j]
 * = 1 for each. A chunk decodes into its staging slot (slots[j]; -1: missing,
 * skipped), or, where whole[j] (NULL: nowhere) and out_ptr (-1: none) + its
 * table row's dst_offset is aligned to out_align, straight into the output:
 * then its row's `out` is set and its plan row's count zeroed. Returns k. */
static Py_ssize_t describe_streams(int kind, int64_t head, int64_t in_align, int64_t max_size,
                                   const uint8_t *base, int64_t cap, const int64_t *offs,
                                   const int64_t *lens, uint64_t *frames, const int64_t *slots,
                                   const int64_t *nbytes, uint8_t *table, const uint8_t *whole,
                                   int64_t out_ptr, int64_t out_align, uint8_t *rows,
                                   int64_t *owners, uint8_t *done_v, Py_ssize_t n) {
    Py_ssize_t k = 0;
    uint64_t *walked = NULL; /* frames walked here, where the caller has none */
    if (kind == KIND_ZSTD) {
        walked = prewalk(base, cap, offs, lens, slots, frames, head, in_align, n);
    }
    for (Py_ssize_t j = 0; j < n; j++) {
        int64_t at = offs[j], len = lens[j], slot = slots[j], expect = nbytes[j];
        uint64_t walk[2] = {0, NOT_PARSED};
        uint64_t *fr = frames ? frames + 2 * j : walked ? walked + 2 * j : walk;
        done_v[j] = 0;
        if (!placed(at, len, slot, cap, head, in_align) ||
            !stream_ok(kind, base + at, len, expect, max_size, fr)) {
            continue;
        }
        int64_t dst = slot;
        uint8_t to_out = 0;
        if (whole != NULL && table != NULL && whole[j] && out_ptr >= 0) {
            int64_t d;
            memcpy(&d, table + j * PLAN_ROW + 8, 8);
            if ((uint64_t)(out_ptr + d) % (uint64_t)out_align == 0) {
                int64_t zero = 0;
                memcpy(table + j * PLAN_ROW + 16, &zero, 8); /* decoded in place */
                dst = d;
                to_out = 1;
            }
        }
        int64_t src = at + head, nn = len - head;
        uint8_t *r = rows + k * STREAM_ROW;
        memcpy(r, &src, 8);
        memcpy(r + 8, &nn, 8);
        memcpy(r + 16, &dst, 8);
        memcpy(r + 24, &expect, 8);
        r[32] = 0;
        r[33] = to_out;
        owners[k++] = j;
        done_v[j] = 1;
    }
    PyMem_Free(walked);
    return k;
}

static int bad_kind(int kind, long long head, long long in_align, long long out_align,
                    const char *name) {
    if (kind < KIND_COPY || kind > KIND_LZ4 || head < 0 || in_align < 1 || out_align < 1) {
        PyErr_Format(PyExc_ValueError, "%s: bad kind, head or alignment", name);
        return 1;
    }
    return 0;
}

/* stream_rows(kind, head, in_align, max_size, base, offs, lens, frames, slots,
 *             nbytes, table, whole, out_ptr, out_align, rows, owners, done) -> k
 *
 * describe_streams over a batch (n = len(done)) whose plan is made: whole and
 * table None together (no decode into the output). Items not done take
 * cuzarr.gpu.batch's per-chunk parsers. */
static PyObject *stream_rows(PyObject *self, PyObject *args) {
    int kind;
    long long head, in_align, max_size, out_ptr, out_align;
    PyObject *base_o, *offs_o, *lens_o, *frames_o, *slots_o, *nbytes_o, *table_o, *whole_o;
    PyObject *rows_o, *owners_o, *done_o;
    if (!PyArg_ParseTuple(args, "iLLLOOOOOOOOLLOOO", &kind, &head, &in_align, &max_size,
                          &base_o, &offs_o, &lens_o, &frames_o, &slots_o, &nbytes_o, &table_o,
                          &whole_o, &out_ptr, &out_align, &rows_o, &owners_o, &done_o)) {
        return NULL;
    }
    if (bad_kind(kind, head, in_align, out_align, "stream_rows")) {
        return NULL;
    }
    buf_t b[11];
    for (int i = 0; i < 11; i++) {
        b[i].held = 0;
    }
    PyObject *result = NULL;
    if (get_buffer(done_o, &b[0], 0, 1, "done") < 0) {
        goto done;
    }
    Py_ssize_t n = b[0].view.len;
    if (get_buffer(base_o, &b[1], 0, 1, "in: base") < 0 ||
        get_buffer(offs_o, &b[2], n, 8, "in: offsets") < 0 ||
        get_buffer(lens_o, &b[3], n, 8, "in: lengths") < 0 ||
        get_buffer(slots_o, &b[4], n, 8, "in: slots") < 0 ||
        get_buffer(nbytes_o, &b[5], n, 8, "in: nbytes") < 0 ||
        get_buffer(rows_o, &b[6], n * STREAM_ROW, 1, "rows") < 0 ||
        get_buffer(owners_o, &b[7], n, 8, "owners") < 0) {
        goto done;
    }
    if (frames_o != Py_None && get_buffer(frames_o, &b[8], 2 * n, 8, "frames") < 0) {
        goto done;
    }
    if (whole_o != Py_None && (get_buffer(whole_o, &b[9], n, 1, "in: whole") < 0 ||
                               get_buffer(table_o, &b[10], n * (PLAN_ROW / 8), 8, "table") < 0)) {
        goto done;
    }
    Py_ssize_t k = describe_streams(
        kind, head, in_align, max_size, b[1].view.buf, (int64_t)b[1].view.len, b[2].view.buf,
        b[3].view.buf, b[8].held ? b[8].view.buf : NULL, b[4].view.buf, b[5].view.buf,
        b[10].held ? b[10].view.buf : NULL, b[9].held ? b[9].view.buf : NULL, out_ptr, out_align,
        b[6].view.buf, b[7].view.buf, b[0].view.buf, n);
    result = PyLong_FromSsize_t(k);
done:
    for (int i = 0; i < 11; i++) {
        release(&b[i]);
    }
    return result;
}

/* Plan rows (PLAN_ROW bytes, kernels/cuzarr_plan.cuh): field offsets */
#define PLAN_DIMS 8
enum {
    P_SRC = 0, P_DST = 8, P_COUNT = 16, P_CHUNK_COUNT = 24, P_NDIM = 32, P_ITEMSIZE = 36,
    P_FLAGS = 40, P_SWAP = 44, P_SHAPE = 48, P_SRC_STRIDES = 112, P_START = 176,
    P_STOP = 240, P_STEP = 304, P_N = 368, P_DST_STRIDES = 432
};
#define STAGING_ALIGN 16

static void put64(uint8_t *row, int at, int d, int64_t v) {
    memcpy(row + at + 8 * d, &v, 8);
}

static void put32(uint8_t *row, int at, int32_t v) {
    memcpy(row + at, &v, 4);
}

/* The plan row of the item at per-dimension indices idx[] of a read's product
 * of per-dimension rows (cuzarr.gpu.plan._dim_rows: start, stop, step, n, dst
 * stride, dst offset, extent); returns its slot size in bytes and sets *whole
 * (cuzarr.gpu.plan.whole_block). As cuzarr.gpu.plan._fill_table fills it. */
static int64_t fill_row(uint8_t *row, int ndim, const int64_t *const *dim_rows,
                        const int64_t *idx, int64_t itemsize, int order_f, int64_t swap,
                        uint8_t *whole) {
    memset(row, 0, PLAN_ROW);
    int64_t dst = 0, count = 1, chunk_count = 1;
    int ok = swap == 0;
    const int64_t *r[PLAN_DIMS];
    for (int d = 0; d < ndim; d++) {
        r[d] = dim_rows[d] + 7 * idx[d];
        dst += r[d][5];
        count *= r[d][3];
        chunk_count *= r[d][6];
        put64(row, P_START, d, r[d][0]);
        put64(row, P_STOP, d, r[d][1]);
        put64(row, P_STEP, d, r[d][2]);
        put64(row, P_N, d, r[d][3]);
        put64(row, P_DST_STRIDES, d, r[d][4]);
        put64(row, P_SHAPE, d, r[d][6]);
    }
    int64_t acc = itemsize;
    for (int k = 0; k < ndim; k++) {
        int d = order_f ? k : ndim - 1 - k;
        put64(row, P_SRC_STRIDES, d, acc);
        ok = ok && r[d][0] == 0 && r[d][2] == 1 && r[d][3] == r[d][6] &&
             (r[d][4] == acc || r[d][3] <= 1);
        acc *= r[d][6] > 1 ? r[d][6] : 1;
    }
    put64(row, P_DST, 0, dst);
    put64(row, P_COUNT, 0, count);
    put64(row, P_CHUNK_COUNT, 0, chunk_count);
    put32(row, P_NDIM, ndim);
    put32(row, P_ITEMSIZE, (int32_t)itemsize);
    put32(row, P_SWAP, (int32_t)swap);
    *whole = (uint8_t)(ok && count > 0);
    return chunk_count * itemsize;
}

/* window_rows(kind, head, in_align, max_size, base, offs, lens, frames, lo, pos,
 *             dim_rows, itemsize, order_f, swap, out_ptr, out_align,
 *             table, slots, nbytes, whole, rows, owners, done) -> (k, total)
 *
 * A batch of n = len(done) items of a read, all present, planned and described
 * in one call. The read is the product of per-dimension rows (dim_rows: a
 * tuple of one (len_d x 7) int64 array per dimension, cuzarr.gpu.plan's
 * _dim_rows); item j is its item lo + j (pos None), or pos[j] (int64), in C
 * order. Its plan rows are filled into `table` (as _fill_table fills them:
 * chunks of `itemsize` bytes in Fortran order where order_f, byte swap unit
 * `swap`), with staging slots one after another (slots[j], also each row's
 * src_offset, each STAGING_ALIGN-padded), slot sizes nbytes[j] and whole-block
 * flags whole[j]; then its chunks are described as stream_rows does (decoded
 * into the output where out_ptr >= 0 allows). total: the batch's staging
 * bytes. An item not in `base` (offs[j] < 0: missing, or its bytes apart)
 * makes it return (-1, 0) with nothing described: such a batch takes the
 * general path. */
static PyObject *window_rows(PyObject *self, PyObject *args) {
    int kind, order_f;
    long long head, in_align, max_size, out_ptr, out_align, itemsize, swap;
    Py_ssize_t lo;
    PyObject *o[13], *dims;
    if (!PyArg_ParseTuple(args, "iLLLOOOOnOO!LiLLLOOOOOOO", &kind, &head, &in_align,
                          &max_size, &o[0], &o[1], &o[2], &o[3], &lo, &o[4], &PyTuple_Type,
                          &dims, &itemsize, &order_f, &swap, &out_ptr, &out_align, &o[5], &o[6],
                          &o[7], &o[8], &o[9], &o[10], &o[11])) {
        return NULL;
    }
    if (bad_kind(kind, head, in_align, out_align, "window_rows")) {
        return NULL;
    }
    Py_ssize_t ndim = PyTuple_GET_SIZE(dims);
    if (ndim > PLAN_DIMS || itemsize < 1) {
        PyErr_SetString(PyExc_ValueError, "window_rows: too many dimensions, or no itemsize");
        return NULL;
    }
    buf_t b[12 + PLAN_DIMS];
    for (int i = 0; i < 12 + PLAN_DIMS; i++) {
        b[i].held = 0;
    }
    PyObject *result = NULL;
    const int64_t *dim_rows[PLAN_DIMS];
    int64_t dim_len[PLAN_DIMS], total_items = 1;
    for (Py_ssize_t d = 0; d < ndim; d++) {
        if (get_buffer(PyTuple_GET_ITEM(dims, d), &b[12 + d], 0, 8, "in: dim_rows") < 0) {
            goto done;
        }
        dim_rows[d] = b[12 + d].view.buf;
        dim_len[d] = b[12 + d].view.len / 56;
        total_items *= dim_len[d];
    }
    if (get_buffer(o[11], &b[11], 0, 1, "done") < 0) {
        goto done;
    }
    Py_ssize_t n = b[11].view.len;
    if (get_buffer(o[0], &b[0], 0, 1, "in: base") < 0 ||
        get_buffer(o[1], &b[1], n, 8, "in: offsets") < 0 ||
        get_buffer(o[2], &b[2], n, 8, "in: lengths") < 0 ||
        get_buffer(o[5], &b[5], n * (PLAN_ROW / 8), 8, "table") < 0 ||
        get_buffer(o[6], &b[6], n, 8, "slots") < 0 ||
        get_buffer(o[7], &b[7], n, 8, "nbytes") < 0 ||
        get_buffer(o[8], &b[8], n, 1, "whole") < 0 ||
        get_buffer(o[9], &b[9], n * STREAM_ROW, 1, "rows") < 0 ||
        get_buffer(o[10], &b[10], n, 8, "owners") < 0) {
        goto done;
    }
    if (o[3] != Py_None && get_buffer(o[3], &b[3], 2 * n, 8, "frames") < 0) {
        goto done;
    }
    const int64_t *pos = NULL;
    if (o[4] != Py_None) {
        if (get_buffer(o[4], &b[4], n, 8, "in: positions") < 0) {
            goto done;
        }
        pos = b[4].view.buf;
        for (Py_ssize_t j = 0; j < n; j++) {
            if (pos[j] < 0 || pos[j] >= total_items) {
                PyErr_Format(PyExc_ValueError, "window_rows: item %lld of a read of %lld",
                             (long long)pos[j], (long long)total_items);
                goto done;
            }
        }
    } else if (lo < 0 || lo > total_items - n) {
        PyErr_Format(PyExc_ValueError, "window_rows: items %zd:%zd of a read of %lld", lo,
                     lo + n, (long long)total_items);
        goto done;
    }
    const int64_t *offs = b[1].view.buf;
    for (Py_ssize_t j = 0; j < n; j++) {
        if (offs[j] < 0) {
            result = Py_BuildValue("(nL)", (Py_ssize_t)-1, 0LL);
            goto done;
        }
    }
    uint8_t *table = b[5].view.buf, *whole = b[8].view.buf;
    int64_t *slots = b[6].view.buf, *nbytes = b[7].view.buf;
    int64_t at = 0;
    for (Py_ssize_t j = 0; j < n; j++) {
        int64_t p = pos != NULL ? pos[j] : (int64_t)(lo + j), idx[PLAN_DIMS];
        for (Py_ssize_t d = ndim - 1; d >= 0; d--) { /* C order: the last dimension fastest */
            idx[d] = p % dim_len[d];
            p /= dim_len[d];
        }
        uint8_t *row = table + j * PLAN_ROW;
        nbytes[j] = fill_row(row, (int)ndim, dim_rows, idx, itemsize, order_f, swap, &whole[j]);
        memcpy(row + P_SRC, &at, 8);
        slots[j] = at;
        at += (nbytes[j] + STAGING_ALIGN - 1) / STAGING_ALIGN * STAGING_ALIGN;
    }
    Py_ssize_t k = describe_streams(
        kind, head, in_align, max_size, b[0].view.buf, (int64_t)b[0].view.len, b[1].view.buf,
        b[2].view.buf, b[3].held ? b[3].view.buf : NULL, slots, nbytes, table, whole, out_ptr,
        out_align, b[9].view.buf, b[10].view.buf, b[11].view.buf, n);
    result = Py_BuildValue("(nL)", k, (long long)at);
done:
    for (int i = 0; i < 12 + PLAN_DIMS; i++) {
        release(&b[i]);
    }
    return result;
}

/* index_rows(index, flat, at, offs, sizes, where) -> empty
 *
 * The rows of a shard's (checked) index, uint64 (offset, size) pairs, for its
 * inner chunks at positions flat[k] (int64): offs[k] and sizes[k] (-1 where
 * the chunk is not stored: offset 2**64 - 1), and where[k] = at + offs[k],
 * the chunk's place in a buffer holding the shard at `at` (-1: not stored, or
 * at < 0). Returns how many are not stored. */
static PyObject *index_rows(PyObject *self, PyObject *args) {
    PyObject *index_o, *flat_o, *offs_o, *sizes_o, *where_o;
    long long at;
    if (!PyArg_ParseTuple(args, "OOLOOO", &index_o, &flat_o, &at, &offs_o, &sizes_o,
                          &where_o)) {
        return NULL;
    }
    buf_t b[5];
    for (int i = 0; i < 5; i++) {
        b[i].held = 0;
    }
    PyObject *result = NULL;
    if (get_buffer(index_o, &b[0], 0, 8, "in: index") < 0 ||
        get_buffer(flat_o, &b[1], 0, 8, "in: flat") < 0) {
        goto done;
    }
    Py_ssize_t n = b[1].view.len / 8, rows = b[0].view.len / 16;
    if (get_buffer(offs_o, &b[2], n, 8, "offs") < 0 ||
        get_buffer(sizes_o, &b[3], n, 8, "sizes") < 0 ||
        get_buffer(where_o, &b[4], n, 8, "where") < 0) {
        goto done;
    }
    const uint64_t *index = b[0].view.buf;
    const int64_t *flat = b[1].view.buf;
    int64_t *offs = b[2].view.buf, *sizes = b[3].view.buf, *where = b[4].view.buf;
    Py_ssize_t empty = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        if (flat[k] < 0 || flat[k] >= rows) {
            PyErr_Format(PyExc_ValueError, "index_rows: chunk %lld of a shard of %zd",
                         (long long)flat[k], rows);
            goto done;
        }
        uint64_t o = index[2 * flat[k]], size = index[2 * flat[k] + 1];
        if (o == UINT64_MAX) {
            offs[k] = sizes[k] = where[k] = -1;
            empty++;
            continue;
        }
        offs[k] = (int64_t)o;
        sizes[k] = (int64_t)size;
        where[k] = at >= 0 ? at + (int64_t)o : -1;
    }
    result = PyLong_FromSsize_t(empty);
done:
    release_all((buf_t *const[]){&b[0], &b[1], &b[2], &b[3], &b[4]}, 5);
    return result;
}

typedef size_t (*zstd_decompress_fn)(void *dctx, void *dst, size_t cap, const void *src,
                                     size_t n);

#define MAX_DIMS 32

/* Copy a C-ordered block of `shape` (items of `itemsize` bytes) from src to dst,
 * whose strides (bytes, any sign) are `strides`. */
static void copy_block(uint8_t *dst, const uint8_t *src, int ndim, const int64_t *shape,
                       const Py_ssize_t *strides, Py_ssize_t itemsize) {
    int64_t idx[MAX_DIMS] = {0};
    Py_ssize_t inner = ndim ? strides[ndim - 1] : itemsize;
    int64_t run = ndim ? shape[ndim - 1] : 1;
    int contiguous_rows = inner == itemsize;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] == 0) {
            return;
        }
    }
    for (;;) {
        uint8_t *row = dst;
        for (int d = 0; d < ndim - 1; d++) {
            row += idx[d] * strides[d];
        }
        if (contiguous_rows) {
            memcpy(row, src, (size_t)(run * itemsize));
            src += run * itemsize;
        } else {
            for (int64_t k = 0; k < run; k++) {
                memcpy(row + k * inner, src, (size_t)itemsize);
                src += itemsize;
            }
        }
        int d = ndim - 2;
        while (d >= 0 && ++idx[d] == shape[d]) {
            idx[d] = 0;
            d--;
        }
        if (d < 0) {
            return;
        }
    }
}

/* zstd_decode_into(fn, dctx, srcs, starts, target, chunk_shape, scratch, status)
 *
 * Decode each of the zstd chunks `srcs` (a list of bytes-like objects) with
 * libzstd's ZSTD_decompressDCtx (`fn`, its address; `dctx`, a context of the
 * calling thread) into the block of `target` (a writable buffer with strides,
 * of the chunks' item type) that starts at element `starts[j]` (n x ndim
 * int64) and has `chunk_shape` (ndim int64, C order): straight into it where
 * that block is contiguous, else into `scratch` (at least one chunk's bytes)
 * and copied. status[j] = 1 where chunk j decoded to exactly the block's size
 * and was placed, 0 where not (a block outside `target`, a corrupt chunk, the
 * wrong size: the caller decodes it again its own way, which raises the
 * precise error; a block decoded in place may then hold part of the bad
 * chunk). All without the GIL. */
static PyObject *zstd_decode_into(PyObject *self, PyObject *args) {
    unsigned long long fn_addr, dctx_addr;
    PyObject *srcs, *starts_obj, *target_obj, *shape_obj, *scratch_obj, *status_obj;
    if (!PyArg_ParseTuple(args, "KKO!OOOOO", &fn_addr, &dctx_addr, &PyList_Type, &srcs,
                          &starts_obj, &target_obj, &shape_obj, &scratch_obj, &status_obj)) {
        return NULL;
    }
    Py_buffer target;
    buf_t starts_b, shape_b, scratch_b, status_b;
    starts_b.held = shape_b.held = scratch_b.held = status_b.held = 0;
    Py_buffer *views = NULL;
    Py_ssize_t got_views = 0;
    PyObject *result = NULL;
    /* a snapshot: taking a buffer may run Python code that changes the list */
    PyObject *seq = PyList_AsTuple(srcs);
    if (seq == NULL) {
        return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(seq);
    if (PyObject_GetBuffer(target_obj, &target, PyBUF_STRIDES | PyBUF_WRITABLE) < 0) {
        Py_DECREF(seq);
        return NULL;
    }
    int ndim = target.ndim;
    if (ndim > MAX_DIMS || target.itemsize <= 0 || fn_addr == 0 || dctx_addr == 0) {
        PyErr_SetString(PyExc_ValueError, "zstd_decode_into: unsupported target or context");
        goto done;
    }
    if (get_buffer(shape_obj, &shape_b, ndim, 8, "in: chunk_shape") < 0 ||
        get_buffer(starts_obj, &starts_b, n * ndim, 8, "in: starts") < 0 ||
        get_buffer(scratch_obj, &scratch_b, 0, 1, "scratch") < 0 ||
        get_buffer(status_obj, &status_b, n, 1, "status") < 0) {
        goto done;
    }
    if (shape_b.view.len != (Py_ssize_t)ndim * 8 || starts_b.view.len != n * ndim * 8) {
        PyErr_SetString(PyExc_ValueError,
                        "zstd_decode_into: chunk_shape and starts must have the target's ndim");
        goto done;
    }
    const int64_t *shape = shape_b.view.buf, *starts = starts_b.view.buf;
    int64_t nbytes = target.itemsize;
    int contiguous = 1; /* a block of the chunk's shape is contiguous in target */
    int64_t want = target.itemsize;
    for (int d = ndim - 1; d >= 0; d--) {
        if (shape[d] < 0) {
            PyErr_SetString(PyExc_ValueError, "zstd_decode_into: negative chunk shape");
            goto done;
        }
        nbytes *= shape[d];
        if (shape[d] > 1 && target.strides[d] != want) {
            contiguous = 0;
        }
        want *= shape[d];
    }
    if (!contiguous && scratch_b.view.len < nbytes) {
        PyErr_SetString(PyExc_ValueError, "zstd_decode_into: scratch smaller than a chunk");
        goto done;
    }
    views = PyMem_Calloc((size_t)(n ? n : 1), sizeof(Py_buffer));
    if (views == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (; got_views < n; got_views++) {
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(seq, got_views), &views[got_views],
                               PyBUF_SIMPLE) < 0) {
            goto done;
        }
    }
    zstd_decompress_fn decompress = (zstd_decompress_fn)(uintptr_t)fn_addr;
    void *dctx = (void *)(uintptr_t)dctx_addr;
    uint8_t *status = status_b.view.buf, *scratch = scratch_b.view.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t j = 0; j < n; j++) {
        status[j] = 0;
        uint8_t *dst = target.buf;
        int inside = 1;
        for (int d = 0; d < ndim; d++) {
            int64_t at = starts[j * ndim + d];
            if (at < 0 || at > target.shape[d] - shape[d]) {
                inside = 0;
                break;
            }
            dst += at * target.strides[d];
        }
        if (!inside) {
            continue;
        }
        uint8_t *into = contiguous ? dst : scratch;
        size_t r = decompress(dctx, into, (size_t)nbytes, views[j].buf, (size_t)views[j].len);
        if (r != (size_t)nbytes) {
            continue;
        }
        if (!contiguous) {
            copy_block(dst, scratch, ndim, shape, target.strides, target.itemsize);
        }
        status[j] = 1;
    }
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    for (Py_ssize_t j = 0; j < got_views; j++) {
        PyBuffer_Release(&views[j]);
    }
    PyMem_Free(views);
    release_all((buf_t *const[]){&starts_b, &shape_b, &scratch_b, &status_b}, 4);
    PyBuffer_Release(&target);
    Py_DECREF(seq);
    return result;
}

static PyMethodDef methods[] = {
    {"zstd_decode_into", zstd_decode_into, METH_VARARGS,
     "zstd_decode_into(fn, dctx, srcs, starts, target, chunk_shape, scratch, status)."},
    {"open_sized", open_sized, METH_VARARGS,
     "open_sized(paths, fds, sizes): open and size each file (see the C source)."},
    {"close_fds", close_fds, METH_O, "close_fds(fds): close every descriptor >= 0."},
    {"read_placed", read_placed, METH_VARARGS,
     "read_placed(fds, sizes, offsets, buf, got, frames): read each file into its place."},
    {"place", place, METH_VARARGS,
     "place(sizes, head, align, offsets): where each value of a batch goes."},
    {"index_rows", index_rows, METH_VARARGS,
     "index_rows(index, flat, at, offs, sizes, where): a shard's index rows (see the C source)."},
    {"window_rows", window_rows, METH_VARARGS,
     "window_rows(...): a read's batch of consecutive items planned and described."},
    {"stream_rows", stream_rows, METH_VARARGS,
     "stream_rows(kind, head, ...): a device batch's stream rows (see the C source)."},
    {"zstd_frames", zstd_frames, METH_VARARGS,
     "zstd_frames(buf, offsets, lengths, out): walk the zstd frame of each item."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "cuzarr.runtime._native",
    "The per-chunk loops of a batch read, in C (see cuzarr.runtime.native).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__native(void) { return PyModule_Create(&module); }
