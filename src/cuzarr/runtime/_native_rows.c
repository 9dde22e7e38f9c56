/* cuzarr.runtime._native: a device batch's chunks checked where they lie, its
 * stream rows and its plan rows (see _native.c). */
#include "_native.h"

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
        cz_zstd_walk(p, (uint64_t)n, fr);
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
        cz_zstd_walk_lanes(ps, ns, outs, m);
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
PyObject *cz_stream_rows(PyObject *self, PyObject *args) {
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
    if (cz_get_buffer(done_o, &b[0], 0, 1, "done") < 0) {
        goto done;
    }
    Py_ssize_t n = b[0].view.len;
    if (cz_get_buffer(base_o, &b[1], 0, 1, "in: base") < 0 ||
        cz_get_buffer(offs_o, &b[2], n, 8, "in: offsets") < 0 ||
        cz_get_buffer(lens_o, &b[3], n, 8, "in: lengths") < 0 ||
        cz_get_buffer(slots_o, &b[4], n, 8, "in: slots") < 0 ||
        cz_get_buffer(nbytes_o, &b[5], n, 8, "in: nbytes") < 0 ||
        cz_get_buffer(rows_o, &b[6], n * STREAM_ROW, 1, "rows") < 0 ||
        cz_get_buffer(owners_o, &b[7], n, 8, "owners") < 0) {
        goto done;
    }
    if (frames_o != Py_None && cz_get_buffer(frames_o, &b[8], 2 * n, 8, "frames") < 0) {
        goto done;
    }
    if (whole_o != Py_None && (cz_get_buffer(whole_o, &b[9], n, 1, "in: whole") < 0 ||
                               cz_get_buffer(table_o, &b[10], n * (PLAN_ROW / 8), 8, "table") < 0)) {
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
        cz_release(&b[i]);
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
#define FLAG_MISSING 1 /* cuzarr.gpu.plan.FLAG_MISSING: the fill value, no source */

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

/* window_rows' read: each dimension's rows (dims, a tuple of (len_d x 7)
 * int64 arrays) held in b[0:ndim]; their pointers, lengths and product. */
static int window_dims(PyObject *dims, buf_t *b, const int64_t **dim_rows, int64_t *dim_len,
                       int64_t *total_items) {
    *total_items = 1;
    for (Py_ssize_t d = 0; d < PyTuple_GET_SIZE(dims); d++) {
        if (cz_get_buffer(PyTuple_GET_ITEM(dims, d), &b[d], 0, 8, "in: dim_rows") < 0) {
            return -1;
        }
        dim_rows[d] = b[d].view.buf;
        dim_len[d] = b[d].view.len / 56;
        *total_items *= dim_len[d];
    }
    return 0;
}

/* window_rows' batch buffers (o[0:12], see below) held in b[0:12]; *n: the
 * batch's items; *pos: its positions (NULL: lo, lo + 1, ...), checked
 * against the read's total_items. */
static int window_buffers(PyObject *const *o, buf_t *b, Py_ssize_t lo, int64_t total_items,
                          Py_ssize_t *n_out, const int64_t **pos_out) {
    if (cz_get_buffer(o[11], &b[11], 0, 1, "done") < 0) {
        return -1;
    }
    Py_ssize_t n = *n_out = b[11].view.len;
    if (cz_get_buffer(o[0], &b[0], 0, 1, "in: base") < 0 ||
        cz_get_buffer(o[1], &b[1], n, 8, "in: offsets") < 0 ||
        cz_get_buffer(o[2], &b[2], n, 8, "in: lengths") < 0 ||
        cz_get_buffer(o[5], &b[5], n * (PLAN_ROW / 8), 8, "table") < 0 ||
        cz_get_buffer(o[6], &b[6], n, 8, "slots") < 0 ||
        cz_get_buffer(o[7], &b[7], n, 8, "nbytes") < 0 ||
        cz_get_buffer(o[8], &b[8], n, 1, "whole") < 0 ||
        cz_get_buffer(o[9], &b[9], n * STREAM_ROW, 1, "rows") < 0 ||
        cz_get_buffer(o[10], &b[10], n, 8, "owners") < 0) {
        return -1;
    }
    if (o[3] != Py_None && cz_get_buffer(o[3], &b[3], 2 * n, 8, "frames") < 0) {
        return -1;
    }
    *pos_out = NULL;
    if (o[4] == Py_None) {
        if (lo < 0 || lo > total_items - n) {
            PyErr_Format(PyExc_ValueError, "window_rows: items %zd:%zd of a read of %lld", lo,
                         lo + n, (long long)total_items);
            return -1;
        }
        return 0;
    }
    if (cz_get_buffer(o[4], &b[4], n, 8, "in: positions") < 0) {
        return -1;
    }
    const int64_t *pos = *pos_out = b[4].view.buf;
    for (Py_ssize_t j = 0; j < n; j++) {
        if (pos[j] < 0 || pos[j] >= total_items) {
            PyErr_Format(PyExc_ValueError, "window_rows: item %lld of a read of %lld",
                         (long long)pos[j], (long long)total_items);
            return -1;
        }
    }
    return 0;
}

/* The plan rows of a batch's n items (item j: the read's item pos[j], or
 * lo + j), unravelled in C order over dim_len, with their staging slots one
 * after another; returns the batch's staging bytes. */
static int64_t fill_window(uint8_t *table, int64_t *slots, int64_t *nbytes, uint8_t *whole,
                           const uint8_t *missing, Py_ssize_t n, Py_ssize_t lo,
                           const int64_t *pos, int ndim, const int64_t *const *dim_rows,
                           const int64_t *dim_len, int64_t itemsize, int order_f, int64_t swap) {
    int64_t at = 0;
    for (Py_ssize_t j = 0; j < n; j++) {
        int64_t p = pos != NULL ? pos[j] : (int64_t)(lo + j), idx[PLAN_DIMS];
        for (int d = ndim - 1; d >= 0; d--) { /* C order: the last dimension fastest */
            idx[d] = p % dim_len[d];
            p /= dim_len[d];
        }
        uint8_t *row = table + j * PLAN_ROW;
        nbytes[j] = fill_row(row, ndim, dim_rows, idx, itemsize, order_f, swap, &whole[j]);
        if (missing[j]) { /* the fill value, no slot (as cuzarr.gpu.plan._with_slots) */
            put32(row, P_FLAGS, FLAG_MISSING);
            slots[j] = -1;
            nbytes[j] = 0;
            whole[j] = 0;
            continue;
        }
        memcpy(row + P_SRC, &at, 8);
        slots[j] = at;
        at += (nbytes[j] + STAGING_ALIGN - 1) / STAGING_ALIGN * STAGING_ALIGN;
    }
    return at;
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
 * bytes. A missing item (offs[j] < 0 and lens[j] < 0) gets the fill value:
 * its row flagged FLAG_MISSING, no slot (slots[j] -1, nbytes[j] 0), done[j] 1.
 * An item whose bytes lie apart (offs[j] < 0, lens[j] >= 0) makes it return
 * (-1, 0) with nothing described: such a batch takes the general path. */
PyObject *cz_window_rows(PyObject *self, PyObject *args) {
    int kind, order_f;
    long long head, in_align, max_size, out_ptr, out_align, itemsize, swap;
    Py_ssize_t lo, n;
    PyObject *o[12], *dims;
    if (!PyArg_ParseTuple(args, "iLLLOOOOnOO!LiLLLOOOOOOO", &kind, &head, &in_align,
                          &max_size, &o[0], &o[1], &o[2], &o[3], &lo, &o[4], &PyTuple_Type,
                          &dims, &itemsize, &order_f, &swap, &out_ptr, &out_align, &o[5], &o[6],
                          &o[7], &o[8], &o[9], &o[10], &o[11])) {
        return NULL;
    }
    if (bad_kind(kind, head, in_align, out_align, "window_rows")) {
        return NULL;
    }
    int ndim = (int)PyTuple_GET_SIZE(dims);
    if (ndim > PLAN_DIMS || itemsize < 1) {
        PyErr_SetString(PyExc_ValueError, "window_rows: too many dimensions, or no itemsize");
        return NULL;
    }
    buf_t b[12 + PLAN_DIMS];
    for (int i = 0; i < 12 + PLAN_DIMS; i++) {
        b[i].held = 0;
    }
    PyObject *result = NULL;
    const int64_t *dim_rows[PLAN_DIMS], *pos;
    int64_t dim_len[PLAN_DIMS], total_items;
    if (window_dims(dims, b + 12, dim_rows, dim_len, &total_items) < 0 ||
        window_buffers(o, b, lo, total_items, &n, &pos) < 0) {
        goto done;
    }
    const int64_t *offs = b[1].view.buf, *lens = b[2].view.buf;
    uint8_t *done_v = b[11].view.buf; /* first: which items are missing */
    for (Py_ssize_t j = 0; j < n; j++) {
        if (offs[j] < 0 && lens[j] >= 0) { /* bytes apart: the general path takes the batch */
            result = Py_BuildValue("(nL)", (Py_ssize_t)-1, 0LL);
            goto done;
        }
        done_v[j] = offs[j] < 0;
    }
    uint8_t *table = b[5].view.buf, *whole = b[8].view.buf;
    int64_t *slots = b[6].view.buf, *nbytes = b[7].view.buf;
    int64_t total = fill_window(table, slots, nbytes, whole, done_v, n, lo, pos, ndim,
                                dim_rows, dim_len, itemsize, order_f, swap);
    Py_ssize_t k = describe_streams(
        kind, head, in_align, max_size, b[0].view.buf, (int64_t)b[0].view.len, offs, lens,
        b[3].held ? b[3].view.buf : NULL, slots, nbytes, table, whole, out_ptr, out_align,
        b[9].view.buf, b[10].view.buf, done_v, n);
    for (Py_ssize_t j = 0; j < n; j++) {
        done_v[j] |= slots[j] < 0; /* missing: nothing left to do */
    }
    result = Py_BuildValue("(nL)", k, (long long)total);
done:
    for (int i = 0; i < 12 + PLAN_DIMS; i++) {
        cz_release(&b[i]);
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
PyObject *cz_index_rows(PyObject *self, PyObject *args) {
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
    if (cz_get_buffer(index_o, &b[0], 0, 8, "in: index") < 0 ||
        cz_get_buffer(flat_o, &b[1], 0, 8, "in: flat") < 0) {
        goto done;
    }
    Py_ssize_t n = b[1].view.len / 8, rows = b[0].view.len / 16;
    if (cz_get_buffer(offs_o, &b[2], n, 8, "offs") < 0 ||
        cz_get_buffer(sizes_o, &b[3], n, 8, "sizes") < 0 ||
        cz_get_buffer(where_o, &b[4], n, 8, "where") < 0) {
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
    cz_release_all((buf_t *const[]){&b[0], &b[1], &b[2], &b[3], &b[4]}, 5);
    return result;
}

/* a slice's bound (start or stop) as an int64: 0 where it is no integer (None,
 * or anything without __index__; the error cleared) */
static int slice_bound(PyObject *v, int64_t *out) {
    if (v == Py_None) {
        return 0;
    }
    Py_ssize_t x = PyNumber_AsSsize_t(v, NULL);
    if (x == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    *out = (int64_t)x;
    return 1;
}

/* a forward step-1 slice's start and stop (step None or 1, both bounds given) */
static int step1_bounds(PyObject *s, int64_t *start, int64_t *stop) {
    if (!PySlice_Check(s)) {
        return 0;
    }
    PySliceObject *sl = (PySliceObject *)s;
    if (sl->step != Py_None) {
        int64_t step;
        if (!slice_bound(sl->step, &step) || step != 1) {
            return 0;
        }
    }
    return slice_bound(sl->start, start) && slice_bound(sl->stop, stop);
}

/* slice_rows(chunk_sels, out_sels, extents, out_len, out_stride, rows): the
 * plan rows of one dimension's projection (cuzarr.gpu.plan._dim_rows) where
 * every chunk and output selection is a forward step-1 slice inside its chunk
 * (extents[j]) and the output (out_len), the two of one length: row j of rows
 * (int64, n x 7) = start, stop (start where empty), 1, n, out_stride,
 * out start * out_stride, extent. Returns False (rows partly written) where
 * any selection is otherwise: the caller works those rows out in Python. */
PyObject *cz_slice_rows(PyObject *self, PyObject *args) {
    PyObject *cs_o, *os_o, *ext_o, *rows_o;
    long long out_len, out_stride;
    if (!PyArg_ParseTuple(args, "OOOLLO", &cs_o, &os_o, &ext_o, &out_len, &out_stride,
                          &rows_o)) {
        return NULL;
    }
    PyObject *cs = PySequence_Fast(cs_o, "chunk_sels: a sequence");
    PyObject *os = cs ? PySequence_Fast(os_o, "out_sels: a sequence") : NULL;
    PyObject *ext = os ? PySequence_Fast(ext_o, "extents: a sequence") : NULL;
    buf_t rb;
    rb.held = 0;
    PyObject *result = NULL;
    if (ext == NULL) {
        goto done;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(cs);
    if (PySequence_Fast_GET_SIZE(os) != n || PySequence_Fast_GET_SIZE(ext) != n) {
        PyErr_SetString(PyExc_ValueError, "slice_rows: selections and extents differ in length");
        goto done;
    }
    if (cz_get_buffer(rows_o, &rb, n * 7, 8, "rows") < 0) {
        goto done;
    }
    int64_t *rows = rb.view.buf;
    int ok = 1;
    for (Py_ssize_t j = 0; j < n && ok; j++) {
        int64_t c0, c1, o0, o1, e;
        ok = step1_bounds(PySequence_Fast_GET_ITEM(cs, j), &c0, &c1) &&
             step1_bounds(PySequence_Fast_GET_ITEM(os, j), &o0, &o1) &&
             slice_bound(PySequence_Fast_GET_ITEM(ext, j), &e);
        int64_t m = c1 - c0;
        ok = ok && c0 >= 0 && c1 <= e && m >= 0 && o0 >= 0 && o1 <= out_len && o1 - o0 == m;
        if (ok) {
            int64_t *r = rows + 7 * j;
            r[0] = c0;
            r[1] = m > 0 ? c1 : c0;
            r[2] = 1;
            r[3] = m;
            r[4] = out_stride;
            r[5] = o0 * out_stride;
            r[6] = e;
        }
    }
    result = PyBool_FromLong(ok);
done:
    cz_release(&rb);
    Py_XDECREF(cs);
    Py_XDECREF(os);
    Py_XDECREF(ext);
    return result;
}
