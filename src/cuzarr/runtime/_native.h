/* cuzarr.runtime._native: what its C files share (see _native.c). */
#ifndef CUZARR_NATIVE_H
#define CUZARR_NATIVE_H

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
/* a content size nobody has parsed yet (cuzarr.runtime.native.NOT_PARSED) */
#define NOT_PARSED (UINT64_MAX - 1)
/* frames walked together by cz_zstd_walk_lanes */
#define WALK_LANES 64

/* open_sized's flags (cuzarr.runtime.native.OPEN_SKIPPED, OPEN_UNSIZED) */
#define OPEN_SKIPPED 1
#define OPEN_UNSIZED 2

/* The stream table of a device batch (cuzarr.gpu.batch.STREAM_DTYPE, 34 bytes
 * a row, packed) and its scatter plan's rows (cuzarr.gpu.plan.PLAN_DTYPE, 496
 * bytes: dst_offset at 8, count at 16; kernels/cuzarr_plan.cuh). */
#define STREAM_ROW 34
#define PLAN_ROW 496
enum { KIND_COPY = 0, KIND_ZSTD = 1, KIND_LZ4 = 2 };

typedef struct {
    Py_buffer view;
    int held;
} buf_t;

/* a C-contiguous buffer of at least min_len items of itemsize bytes, aligned
 * for them; writable unless the name says it is only read ("in:") */
int cz_get_buffer(PyObject *obj, buf_t *b, Py_ssize_t min_len, Py_ssize_t itemsize,
                  const char *what);
void cz_release(buf_t *b);
/* release each of the n buffers at bs that is held (a function's exit path) */
void cz_release_all(buf_t *const *bs, int n);

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
void cz_zstd_walk(const uint8_t *p, uint64_t n, uint64_t *out);
/* cz_zstd_walk of n frames (frame j at ps[j], ns[j] bytes, into outs[j]),
 * WALK_LANES at a time in lockstep, each round's headers prefetched first (their
 * cache misses overlap) */
void cz_zstd_walk_lanes(const uint8_t *const *ps, const uint64_t *ns, uint64_t *const *outs,
                        Py_ssize_t n);

/* the module's functions (see each one's definition) */
PyObject *cz_open_sized(PyObject *self, PyObject *args);
PyObject *cz_close_fds(PyObject *self, PyObject *arg);
PyObject *cz_read_placed(PyObject *self, PyObject *args);
PyObject *cz_place(PyObject *self, PyObject *args);
PyObject *cz_zstd_frames(PyObject *self, PyObject *args);
PyObject *cz_slice_rows(PyObject *self, PyObject *args);
PyObject *cz_zstd_decode_into(PyObject *self, PyObject *args);
PyObject *cz_stream_rows(PyObject *self, PyObject *args);
PyObject *cz_window_rows(PyObject *self, PyObject *args);
PyObject *cz_index_rows(PyObject *self, PyObject *args);

#endif
