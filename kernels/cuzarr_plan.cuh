// Descriptor tables shared by the cuzarr kernels. Each struct mirrors a numpy
// structured dtype in src/cuzarr/gpu/ (PLAN_DTYPE in plan.py, UNSHUFFLE_DTYPE in
// formats.py) field by field: 8-byte fields first, no implicit padding. Change
// both sides together (tests/test_gpu_plan.py checks the names and sizes).
#pragma once

#define CUZARR_MAX_DIMS 8
#define CUZARR_PLAN_ROW_BYTES 496
#define CUZARR_UNSHUFFLE_ROW_BYTES 32

#define CUZARR_FLAG_MISSING 1  // no source: write the fill value
#define CUZARR_FLAG_PAD 2      // gather: fill the chunk outside the region

// One chunk of a read (scatter) or write (gather).
struct cuzarr_plan_row {
    long long src_offset;   // byte offset of the chunk's slot in the staging buffer
    long long dst_offset;   // byte offset of the first selected element in the output
    long long count;        // selected elements (product of n)
    long long chunk_count;  // elements in the decoded chunk (product of chunk_shape)
    int ndim;
    int itemsize;
    int flags;              // CUZARR_FLAG_*
    int swap;               // 0: native; else reverse every `swap` bytes
    long long chunk_shape[CUZARR_MAX_DIMS];
    long long src_strides[CUZARR_MAX_DIMS];  // bytes, in the decoded chunk
    long long start[CUZARR_MAX_DIMS];        // clipped region inside the chunk:
    long long stop[CUZARR_MAX_DIMS];         //   range(start, stop, step), n indices
    long long step[CUZARR_MAX_DIMS];
    long long n[CUZARR_MAX_DIMS];
    long long dst_strides[CUZARR_MAX_DIMS];  // bytes, in the output (may be negative)
};

// One blosc block to byte-unshuffle.
struct cuzarr_unshuffle_row {
    long long src_offset;  // shuffled block (decompressed) in the scratch buffer
    long long dst_offset;  // where the unshuffled block goes
    long long nbytes;      // block size in bytes
    int typesize;
    int pad_;
};

static_assert(sizeof(cuzarr_plan_row) == CUZARR_PLAN_ROW_BYTES, "plan row layout");
static_assert(sizeof(cuzarr_unshuffle_row) == CUZARR_UNSHUFFLE_ROW_BYTES, "unshuffle row layout");

// Byte index inside an element after a byte swap of `swap`-byte units.
__device__ __forceinline__ int cuzarr_swapped_byte(int b, int swap) {
    return swap > 1 ? (b / swap) * swap + (swap - 1 - b % swap) : b;
}
