/* cuzarr.runtime._native: zstd frame walks, and the decode of a shard's whole
 * inner chunks (see _native.c). */
#include "_native.h"

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

/* see _native.h */
void cz_zstd_walk(const uint8_t *p, uint64_t n, uint64_t *out) {
    uint64_t pos;
    unsigned checksum;
    if (!walk_header(p, n, out, &pos, &checksum)) {
        return;
    }
    while (walk_block(p, n, &pos, checksum, out) == 0) {
    }
}

/* A hint that the bytes at p are wanted soon (nothing where the compiler has
 * no such builtin). */
static inline void prefetch(const uint8_t *p) {
#if defined(__GNUC__) || defined(__clang__)
    __builtin_prefetch(p, 0, 0);
#else
    (void)p;
#endif
}

/* zstd_walk of several frames at once (frame j at ps[j], ns[j] bytes, into
 * outs + 2 * j), WALK_LANES at a time in lockstep. Each round first asks for
 * the next header of every frame still being walked (prefetch), then reads
 * them: a shard's inner chunks are walked after the whole shard was read, when
 * their bytes are no longer in the CPU's caches, and each header's address is
 * known only from the one before it. One by one, 64 frames of 1 MiB (about 8
 * blocks each) took 245 us on the development VM; in lockstep without the
 * prefetches the batch's whole window_rows took 103-125 us, with them 76-88
 * (the CPU overlaps more misses when their loads are issued first). The same
 * answers as zstd_walk, frame by frame. */
void cz_zstd_walk_lanes(const uint8_t *const *ps, const uint64_t *ns, uint64_t *const *outs,
                        Py_ssize_t n) {
    for (Py_ssize_t g = 0; g < n; g += WALK_LANES) {
        Py_ssize_t m = n - g < WALK_LANES ? n - g : WALK_LANES;
        uint64_t pos[WALK_LANES];
        unsigned checksum[WALK_LANES];
        int live[WALK_LANES], left = 0;
        for (Py_ssize_t k = 0; k < m; k++) {
            prefetch(ps[g + k]);
        }
        for (Py_ssize_t k = 0; k < m; k++) {
            live[k] = walk_header(ps[g + k], ns[g + k], outs[g + k], &pos[k], &checksum[k]);
            left += live[k];
        }
        while (left > 0) {
            for (Py_ssize_t k = 0; k < m; k++) {
                if (live[k] && pos[k] + 3 <= ns[g + k]) {
                    prefetch(ps[g + k] + pos[k]);
                    prefetch(ps[g + k] + pos[k] + 2); /* a header across two lines */
                }
            }
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

/* zstd_frames(buf, offsets, lengths, out) -> None: out[j] (n x 2 uint64) = the
 * zstd walk of the frame at buf[offsets[j]:offsets[j] + lengths[j]] (zstd_walk;
 * both 2**64 - 1 where the item lies outside buf). The other buffers are only
 * read. */
PyObject *cz_zstd_frames(PyObject *self, PyObject *args) {
    PyObject *buf_obj, *offs_obj, *lens_obj, *out_obj;
    if (!PyArg_ParseTuple(args, "OOOO", &buf_obj, &offs_obj, &lens_obj, &out_obj)) {
        return NULL;
    }
    buf_t out_b, offs_b, lens_b;
    buf_t buf_b;
    out_b.held = offs_b.held = lens_b.held = buf_b.held = 0;
    PyObject *result = NULL;
    if (cz_get_buffer(out_obj, &out_b, 0, 8, "out") < 0) {
        goto done;
    }
    Py_ssize_t n = out_b.view.len / 16;
    if (cz_get_buffer(buf_obj, &buf_b, 0, 1, "in: buf") < 0 ||
        cz_get_buffer(offs_obj, &offs_b, n, 8, "in: offsets") < 0 ||
        cz_get_buffer(lens_obj, &lens_b, n, 8, "in: lengths") < 0) {
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
        cz_zstd_walk(base + at, (uint64_t)len, out + 2 * j);
    }
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    cz_release_all((buf_t *const[]){&buf_b, &out_b, &offs_b, &lens_b}, 4);
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

/* The bytes of a block of `shape` (C order) of the buffer `target` in *nbytes;
 * returns whether such a block is contiguous there (1, 0), or -1 with an error
 * set where the shape is negative. */
static int block_layout(const Py_buffer *target, const int64_t *shape, int64_t *nbytes) {
    int contiguous = 1;
    int64_t want = target->itemsize;
    *nbytes = target->itemsize;
    for (int d = target->ndim - 1; d >= 0; d--) {
        if (shape[d] < 0) {
            PyErr_SetString(PyExc_ValueError, "zstd_decode_into: negative chunk shape");
            return -1;
        }
        *nbytes *= shape[d];
        if (shape[d] > 1 && target->strides[d] != want) {
            contiguous = 0;
        }
        want *= shape[d];
    }
    return contiguous;
}

/* zstd_decode_into's loop, without the GIL: chunk j (views[j]) decoded into
 * the block of `target` at element starts[j * ndim:] (straight in where
 * contiguous, else through scratch); status[j] = 1 where it decoded to
 * exactly nbytes and was placed. */
static void decode_blocks(zstd_decompress_fn decompress, void *dctx, const Py_buffer *views,
                          Py_ssize_t n, const int64_t *starts, const Py_buffer *target,
                          const int64_t *shape, int64_t nbytes, int contiguous,
                          uint8_t *scratch, uint8_t *status) {
    int ndim = target->ndim;
    for (Py_ssize_t j = 0; j < n; j++) {
        status[j] = 0;
        uint8_t *dst = target->buf;
        int inside = 1;
        for (int d = 0; d < ndim; d++) {
            int64_t at = starts[j * ndim + d];
            if (at < 0 || at > target->shape[d] - shape[d]) {
                inside = 0;
                break;
            }
            dst += at * target->strides[d];
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
            copy_block(dst, scratch, ndim, shape, target->strides, target->itemsize);
        }
        status[j] = 1;
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
PyObject *cz_zstd_decode_into(PyObject *self, PyObject *args) {
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
    if (cz_get_buffer(shape_obj, &shape_b, ndim, 8, "in: chunk_shape") < 0 ||
        cz_get_buffer(starts_obj, &starts_b, n * ndim, 8, "in: starts") < 0 ||
        cz_get_buffer(scratch_obj, &scratch_b, 0, 1, "scratch") < 0 ||
        cz_get_buffer(status_obj, &status_b, n, 1, "status") < 0) {
        goto done;
    }
    if (shape_b.view.len != (Py_ssize_t)ndim * 8 || starts_b.view.len != n * ndim * 8) {
        PyErr_SetString(PyExc_ValueError,
                        "zstd_decode_into: chunk_shape and starts must have the target's ndim");
        goto done;
    }
    const int64_t *shape = shape_b.view.buf, *starts = starts_b.view.buf;
    int64_t nbytes;
    int contiguous = block_layout(&target, shape, &nbytes);
    if (contiguous < 0) {
        goto done;
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
    Py_BEGIN_ALLOW_THREADS
    decode_blocks(decompress, dctx, views, n, starts, &target, shape, nbytes, contiguous,
                  scratch_b.view.buf, status_b.view.buf);
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    for (Py_ssize_t j = 0; j < got_views; j++) {
        PyBuffer_Release(&views[j]);
    }
    PyMem_Free(views);
    cz_release_all((buf_t *const[]){&starts_b, &shape_b, &scratch_b, &status_b}, 4);
    PyBuffer_Release(&target);
    Py_DECREF(seq);
    return result;
}
