// Blosc byte-shuffle and unshuffle, batched: one row (cuzarr_unshuffle_row) per
// blosc block. In a shuffled block of nbytes with typesize ts, byte b of element i
// sits at b * (nbytes / ts) + i; the nbytes % ts trailing bytes are not shuffled.
// Launched as extern "C" cuzarr_unshuffle (reads) and cuzarr_shuffle (writes).
#include "cuzarr_plan.cuh"

// Unshuffle (Forward = false: shuffled src -> plain dst) or shuffle (Forward =
// true: plain src -> shuffled dst) every row, grid-stride over rows (y) and bytes (x).
template <bool Forward>
__device__ void cuzarr_shuffle_rows(const cuzarr_unshuffle_row* __restrict__ rows,
                                    long long nrows, const unsigned char* __restrict__ src,
                                    unsigned char* __restrict__ dst) {
    for (long long r = blockIdx.y; r < nrows; r += gridDim.y) {
        const cuzarr_unshuffle_row row = rows[r];
        const long long ts = row.typesize;
        const long long neblock = row.nbytes / ts;
        const long long shuffled = neblock * ts;
        const unsigned char* s = src + row.src_offset;
        unsigned char* d = dst + row.dst_offset;
        for (long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x; j < row.nbytes;
             j += (long long)gridDim.x * blockDim.x) {
            if (j < shuffled) {
                const long long i = j / ts;
                const long long b = j - i * ts;
                if (Forward) {
                    d[b * neblock + i] = s[j];
                } else {
                    d[j] = s[b * neblock + i];
                }
            } else {
                d[j] = s[j];
            }
        }
    }
}

extern "C" __global__ void cuzarr_unshuffle(const cuzarr_unshuffle_row* __restrict__ rows,
                                            long long nrows,
                                            const unsigned char* __restrict__ src,
                                            unsigned char* __restrict__ dst) {
    cuzarr_shuffle_rows<false>(rows, nrows, src, dst);
}

extern "C" __global__ void cuzarr_shuffle(const cuzarr_unshuffle_row* __restrict__ rows,
                                          long long nrows,
                                          const unsigned char* __restrict__ src,
                                          unsigned char* __restrict__ dst) {
    cuzarr_shuffle_rows<true>(rows, nrows, src, dst);
}
