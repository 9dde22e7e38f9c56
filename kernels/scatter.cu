// Batched scatter (reads) and gather (writes) over a descriptor table
// (cuzarr_plan_row, one row per chunk): one launch moves every chunk of a
// request. blockIdx.y walks rows (grid-stride), the x dimension walks the words of
// a row's elements (grid-stride). W is the copy word (1, 2, 4, 8 or 16 bytes); the
// host picks the widest W that divides the item size and every offset and stride,
// and W = unsigned char whenever a row byte-swaps.
//
// Instantiated at run time through name_expressions, e.g.
//   "cuzarr_scatter<unsigned int>", "cuzarr_gather<unsigned char>".
#include "cuzarr_plan.cuh"

// 16-byte aligned, so that a 16-byte word is one 128-bit load and store (without
// __align__ it would be two 64-bit ones); copy_word picks it only where every
// address it touches is a multiple of 16.
struct __align__(16) cuzarr_w16 {
    unsigned long long lo, hi;
};

// Position of element e (C order over n[]) in the chunk and in the output.
__device__ __forceinline__ void cuzarr_locate(const cuzarr_plan_row& row, long long e,
                                              long long& src, long long& dst) {
    src = row.src_offset;
    dst = row.dst_offset;
    for (int d = row.ndim - 1; d >= 0; --d) {
        const long long nd = row.n[d];
        const long long k = e % nd;
        e /= nd;
        src += (row.start[d] + k * row.step[d]) * row.src_strides[d];
        dst += k * row.dst_strides[d];
    }
}

template <typename W>
__global__ void cuzarr_scatter(const cuzarr_plan_row* __restrict__ rows, long long nrows,
                               const unsigned char* __restrict__ staging,
                               unsigned char* __restrict__ out,
                               const unsigned char* __restrict__ fill) {
    for (long long r = blockIdx.y; r < nrows; r += gridDim.y) {
        const cuzarr_plan_row& row = rows[r];
        const int words = row.itemsize / (int)sizeof(W);
        const long long total = row.count * words;
        const bool missing = (row.flags & CUZARR_FLAG_MISSING) != 0;
        for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < total;
             t += (long long)gridDim.x * blockDim.x) {
            const long long e = t / words;
            const int w = (int)(t - e * words);
            long long src, dst;
            cuzarr_locate(row, e, src, dst);
            W v;
            if (missing) {
                v = reinterpret_cast<const W*>(fill)[w];
            } else if (sizeof(W) == 1) {
                v = reinterpret_cast<const W*>(staging + src)[cuzarr_swapped_byte(w, row.swap)];
            } else {
                v = reinterpret_cast<const W*>(staging + src)[w];
            }
            reinterpret_cast<W*>(out + dst)[w] = v;
        }
    }
}

// The reverse: value (laid out as the plan's output) -> chunk slots in staging.
// Rows with CUZARR_FLAG_PAD cover the whole chunk and write the fill value (given
// in native order, swapped like the data) outside the region; other rows touch the
// region only (read-modify-write of a decoded chunk). Missing rows are skipped.
template <typename W>
__global__ void cuzarr_gather(const cuzarr_plan_row* __restrict__ rows, long long nrows,
                              unsigned char* __restrict__ staging,
                              const unsigned char* __restrict__ value,
                              const unsigned char* __restrict__ fill) {
    for (long long r = blockIdx.y; r < nrows; r += gridDim.y) {
        const cuzarr_plan_row& row = rows[r];
        if (row.flags & CUZARR_FLAG_MISSING) continue;
        const int words = row.itemsize / (int)sizeof(W);
        const bool pad = (row.flags & CUZARR_FLAG_PAD) != 0;
        const long long total = (pad ? row.chunk_count : row.count) * words;
        for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < total;
             t += (long long)gridDim.x * blockDim.x) {
            long long e = t / words;
            const int w = (int)(t - e * words);
            const int ws = sizeof(W) == 1 ? cuzarr_swapped_byte(w, row.swap) : w;
            long long src, dst;
            if (!pad) {
                cuzarr_locate(row, e, src, dst);
                reinterpret_cast<W*>(staging + src)[ws] = reinterpret_cast<const W*>(value + dst)[w];
                continue;
            }
            // e runs over the whole chunk (C order over chunk_shape).
            src = row.src_offset;
            dst = row.dst_offset;
            bool inside = true;
            for (int d = row.ndim - 1; d >= 0; --d) {
                const long long cd = row.chunk_shape[d];
                const long long i = e % cd;
                e /= cd;
                src += i * row.src_strides[d];
                const long long rel = i - row.start[d];
                if (rel < 0 || rel % row.step[d] != 0 || rel / row.step[d] >= row.n[d]) {
                    inside = false;
                } else {
                    dst += (rel / row.step[d]) * row.dst_strides[d];
                }
            }
            const W v = inside ? reinterpret_cast<const W*>(value + dst)[w]
                               : reinterpret_cast<const W*>(fill)[w];
            reinterpret_cast<W*>(staging + src)[ws] = v;
        }
    }
}

#ifdef CUZARR_NVCC_CHECK
template __global__ void cuzarr_scatter<unsigned char>(const cuzarr_plan_row*, long long,
                                                       const unsigned char*, unsigned char*,
                                                       const unsigned char*);
template __global__ void cuzarr_scatter<unsigned short>(const cuzarr_plan_row*, long long,
                                                        const unsigned char*, unsigned char*,
                                                        const unsigned char*);
template __global__ void cuzarr_scatter<unsigned int>(const cuzarr_plan_row*, long long,
                                                      const unsigned char*, unsigned char*,
                                                      const unsigned char*);
template __global__ void cuzarr_scatter<unsigned long long>(const cuzarr_plan_row*, long long,
                                                            const unsigned char*, unsigned char*,
                                                            const unsigned char*);
template __global__ void cuzarr_scatter<cuzarr_w16>(const cuzarr_plan_row*, long long,
                                                    const unsigned char*, unsigned char*,
                                                    const unsigned char*);
template __global__ void cuzarr_gather<unsigned char>(const cuzarr_plan_row*, long long,
                                                      unsigned char*, const unsigned char*,
                                                      const unsigned char*);
template __global__ void cuzarr_gather<unsigned short>(const cuzarr_plan_row*, long long,
                                                       unsigned char*, const unsigned char*,
                                                       const unsigned char*);
template __global__ void cuzarr_gather<unsigned int>(const cuzarr_plan_row*, long long,
                                                     unsigned char*, const unsigned char*,
                                                     const unsigned char*);
template __global__ void cuzarr_gather<unsigned long long>(const cuzarr_plan_row*, long long,
                                                           unsigned char*, const unsigned char*,
                                                           const unsigned char*);
template __global__ void cuzarr_gather<cuzarr_w16>(const cuzarr_plan_row*, long long,
                                                   unsigned char*, const unsigned char*,
                                                   const unsigned char*);
#endif
