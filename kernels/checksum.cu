// Per-block CRC-32 and Adler-32 partial sums over byte ranges ("blocks") of one
// device buffer, so that the zlib (Adler-32) and gzip (CRC-32) trailers of chunks
// compressed on the device need no copy of the uncompressed chunk to the host.
// The host splits every chunk into blocks (cuzarr.gpu.checksums.split_blocks) and
// folds the per-block values of a chunk into its checksum (combine_crc32,
// combine_adler32, chunk_checksums).
//
// Per block of n bytes x_0 .. x_{n-1} (any n >= 0, any alignment):
//   crc     = CRC-32 (polynomial 0xEDB88320 reflected, init and xorout 0xFFFFFFFF):
//             zlib.crc32(block), 0 for an empty block
//   adler_a = sum x_i                mod 65521
//   adler_b = sum (n - i) * x_i      mod 65521
// (zlib.adler32(block) == ((adler_b + n) % 65521) << 16 | (adler_a + 1) % 65521.)
//
// One thread per block (grid-stride over blocks), slice-by-8 CRC tables in shared
// memory built by each thread block. `kinds`: bit 0 computes crc, bit 1 the Adler
// sums; outputs of a kind not asked for are not written.
// Launched as extern "C" cuzarr_block_checksums (no templates). The per-block routine
// is __host__ __device__ so the CPU tests can run it through nvcc's host compiler.

#define CUZARR_CRC_POLY 0xEDB88320u
#define CUZARR_ADLER_MOD 65521u
// Largest byte count (a multiple of 8) after which unreduced 32-bit Adler sums that
// started below 65521 cannot have overflowed (zlib's NMAX).
#define CUZARR_ADLER_NMAX 5552

// Slice-by-8 tables, t[k * 256 + i]: the CRC register after byte i followed by k zero
// bytes. Entries [lo, 256) with stride `step` (a thread block splits the work);
// `phase` 0 fills table 0, phase 1 tables 1..7 from table 0 (complete before).
__host__ __device__ inline void cuzarr_crc_tables(unsigned int* t, int phase, int lo,
                                                  int step) {
    for (int i = lo; i < 256; i += step) {
        if (phase == 0) {
            unsigned int c = (unsigned int)i;
            for (int j = 0; j < 8; ++j) c = (c & 1u) ? (c >> 1) ^ CUZARR_CRC_POLY : c >> 1;
            t[i] = c;
        } else {
            unsigned int c = t[i];
            for (int k = 1; k < 8; ++k) {
                c = (c >> 8) ^ t[c & 0xFFu];
                t[k * 256 + i] = c;
            }
        }
    }
}

// One byte into the running CRC (c) and Adler sums (a, b), unreduced.
template <bool CRC, bool ADLER>
__host__ __device__ inline void cuzarr_checksum_byte(unsigned int x,
                                                     const unsigned int* __restrict__ t,
                                                     unsigned int& c, unsigned int& a,
                                                     unsigned int& b) {
    if (CRC) c = (c >> 8) ^ t[(c ^ x) & 0xFFu];
    if (ADLER) {
        a += x;
        b += a;
    }
}

template <bool CRC, bool ADLER>
__host__ __device__ inline void cuzarr_checksum_range(const unsigned char* __restrict__ p,
                                                      long long n,
                                                      const unsigned int* __restrict__ t,
                                                      unsigned int& crc_out,
                                                      unsigned int& a_out,
                                                      unsigned int& b_out) {
    unsigned int c = 0xFFFFFFFFu, a = 0, b = 0;
    // Head: single bytes up to an 8-byte aligned address (at most 7, no reduction).
    while (n > 0 && ((unsigned long long)p & 7ull) != 0) {
        cuzarr_checksum_byte<CRC, ADLER>(*p++, t, c, a, b);
        --n;
    }
    // Body: aligned 8-byte words, in runs of at most NMAX bytes between reductions.
    while (n >= 8) {
        long long run = n & ~7ll;
        if (run > CUZARR_ADLER_NMAX) run = CUZARR_ADLER_NMAX;
        const unsigned long long* w = reinterpret_cast<const unsigned long long*>(p);
        const long long words = run >> 3;
        for (long long k = 0; k < words; ++k) {
            const unsigned long long v = w[k];  // little-endian: byte 0 is the low byte
            const unsigned int lo = (unsigned int)v;
            const unsigned int hi = (unsigned int)(v >> 32);
            if (CRC) {
                const unsigned int x = c ^ lo;
                c = t[7 * 256 + (x & 0xFFu)] ^ t[6 * 256 + ((x >> 8) & 0xFFu)] ^
                    t[5 * 256 + ((x >> 16) & 0xFFu)] ^ t[4 * 256 + (x >> 24)] ^
                    t[3 * 256 + (hi & 0xFFu)] ^ t[2 * 256 + ((hi >> 8) & 0xFFu)] ^
                    t[1 * 256 + ((hi >> 16) & 0xFFu)] ^ t[hi >> 24];
            }
            if (ADLER) {
                a += lo & 0xFFu;         b += a;
                a += (lo >> 8) & 0xFFu;  b += a;
                a += (lo >> 16) & 0xFFu; b += a;
                a += lo >> 24;           b += a;
                a += hi & 0xFFu;         b += a;
                a += (hi >> 8) & 0xFFu;  b += a;
                a += (hi >> 16) & 0xFFu; b += a;
                a += hi >> 24;           b += a;
            }
        }
        if (ADLER) {
            a %= CUZARR_ADLER_MOD;
            b %= CUZARR_ADLER_MOD;
        }
        p += run;
        n -= run;
    }
    // Tail: fewer than 8 bytes.
    while (n > 0) {
        cuzarr_checksum_byte<CRC, ADLER>(*p++, t, c, a, b);
        --n;
    }
    crc_out = ~c;
    a_out = a % CUZARR_ADLER_MOD;
    b_out = b % CUZARR_ADLER_MOD;
}

extern "C" __global__ void cuzarr_block_checksums(const unsigned char* __restrict__ data,
                                                  const long long* __restrict__ offsets,
                                                  const long long* __restrict__ lengths,
                                                  long long nblocks, int kinds,
                                                  unsigned int* __restrict__ crc,
                                                  unsigned int* __restrict__ adler_a,
                                                  unsigned int* __restrict__ adler_b) {
    __shared__ unsigned int table[8 * 256];
    cuzarr_crc_tables(table, 0, threadIdx.x, blockDim.x);
    __syncthreads();
    cuzarr_crc_tables(table, 1, threadIdx.x, blockDim.x);
    __syncthreads();
    const bool want_crc = (kinds & 1) != 0;
    const bool want_adler = (kinds & 2) != 0;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < nblocks;
         i += (long long)gridDim.x * blockDim.x) {
        const unsigned char* p = data + offsets[i];
        const long long n = lengths[i];
        unsigned int c = 0, a = 0, b = 0;
        if (want_crc && want_adler) {
            cuzarr_checksum_range<true, true>(p, n, table, c, a, b);
        } else if (want_crc) {
            cuzarr_checksum_range<true, false>(p, n, table, c, a, b);
        } else if (want_adler) {
            cuzarr_checksum_range<false, true>(p, n, table, c, a, b);
        } else {
            continue;
        }
        if (want_crc) crc[i] = c;
        if (want_adler) {
            adler_a[i] = a;
            adler_b[i] = b;
        }
    }
}
