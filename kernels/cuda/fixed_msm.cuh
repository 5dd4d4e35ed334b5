// The fixed-base MSM of one group. Included by fixed_msm.cu once per group
// inside a namespace defining field_t, point_t, bucket_t and affine_t, with
// CUZK_FN(name) naming the exports.
//
// With a table of `copies` multiples of every base (copy t = 2^(c*t) * base)
// the windows of all copies share one set of 2^(c-1) signed buckets, so a
// wide window costs one bucket reduction instead of one per window:
//   1. digits: every scalar's signed c-bit digits as (bucket, entry) pairs;
//   2. sort the pairs by bucket (cub radix sort);
//   3. accumulate: fixed-length segments of the sorted pairs, one thread
//      each; runs inside a segment go straight to their bucket, runs across
//      segment edges to two slots per segment, which the same kernel reduces
//      again until one segment is left (no host synchronisation, and no
//      bucket, however full, sits on one thread); fm_accumulate_pairs is a
//      level 0 that first sums neighbours of a run in pairs, in affine
//      coordinates (opt-in: measured slower);
//   4. reduce: sum (b+1)*bucket[b] over chunks of buckets in parallel, then
//      per group in one block; the host joins the groups (Horner, c*copies
//      doublings each) when the table has fewer copies than windows.
// Large MSMs run in chunks of scalars into the same buckets, bounding the
// scratch memory. Field elements of G2 span two lanes (degree 2), so every
// kernel works in lane groups of `DEGREE` threads that follow one path.

typedef affine_t::mem_t affine_h;
typedef bucket_t::mem_t bucket_h;
typedef field_t::mem_t field_h;
static constexpr uint32_t DEGREE = bucket_t::degree;

#ifdef __CUDA_ARCH__
__device__ __forceinline__ uint32_t lane_group()
{   return (threadIdx.x + blockIdx.x * blockDim.x) / DEGREE;   }
__device__ __forceinline__ uint32_t lane_groups()
{   return gridDim.x * blockDim.x / DEGREE;   }

// A point in XYZZ coordinates with its fields in reach (sppark's keeps them
// private), for building tables.
struct xyzz_pt {
    field_t X, Y, ZZ, ZZZ;

    // dbl-2008-s-1 (a = 0); the point at infinity (ZZ = ZZZ = 0) stays there.
    __device__ __forceinline__ void dbl()
    {
        field_t U = Y + Y;
        field_t V = U^2;
        field_t W = U * V;
        field_t S = X * V;
        field_t M = X^2;
        M = M + M + M;
        X = M^2;
        X -= S;
        X -= S;
        S -= X;
        S *= M;
        Y = S - Y * W;
        ZZ *= V;
        ZZZ *= W;
    }
};
#endif

// out[i] = 2^c * in[i], affine, for i < n. Every lane runs the same number of
// rounds (the tail recomputes the last point without storing it): the field
// inversion pairs lanes up.
__launch_bounds__(256) __global__
void fm_table_double(affine_h* out, const affine_h* in, size_t n, uint32_t c)
{
#ifdef __CUDA_ARCH__
    const size_t stride = lane_groups();
    const size_t rounds = (n + stride - 1) / stride;
    for (size_t r = 0; r < rounds; r++) {
        const size_t i = lane_group() + r * stride;
        const field_h* f = reinterpret_cast<const field_h*>(&in[i < n ? i : n - 1]);
        xyzz_pt p;
        p.X = f[0];
        p.Y = f[1];
        const bool inf = p.X.is_zero() & p.Y.is_zero();
        p.ZZ = field_t::one(inf);
        p.ZZZ = p.ZZ;
        for (uint32_t k = 0; k < c; k++)
            p.dbl();
        field_t zi = p.ZZZ.reciprocal();    // zero at infinity
        field_t x = zi * p.ZZ;              // 1/Z
        x = x^2;
        x *= p.X;
        field_t y = zi * p.Y;
        if (i < n) {
            field_h* o = reinterpret_cast<field_h*>(&out[i]);
            o[0] = x;
            o[1] = y;
        }
    }
#endif
}

// Where a run [rs, re) of one key inside segment [s0, s1) goes: a run that
// begins and ends inside the segment is its bucket's whole sum; one that
// crosses the segment's start goes to the head slot, its end to the tail slot.
#ifdef __CUDA_ARCH__
__device__ __forceinline__
void fm_flush(bucket_h* buckets, uint32_t* sk, bucket_h* sv, const uint32_t* keys,
              uint32_t key, const bucket_t& acc, uint32_t rs, uint32_t re,
              uint32_t s0, uint32_t s1, uint32_t m, bool head_open, uint32_t sentinel,
              bool& head_done, bool& tail_done)
{
    const bool before = rs == s0 && head_open;
    const bool after = re == s1 && re < m && keys[re] == key;
    if (!before && !after) {
        if (key != sentinel && !acc.is_inf()) {
            bucket_t b = buckets[key];
            b.add(acc);
            buckets[key] = b;
        }
    } else if (before) {
        sk[0] = key;
        sv[0] = acc;
        head_done = true;
        if (after) {
            sk[1] = key;
            sv[1].inf();
            tail_done = true;
        }
    } else {
        sk[1] = key;
        sv[1] = acc;
        tail_done = true;
    }
}
#endif

#ifdef __CUDA_ARCH__
// The slots a segment left unwritten: at infinity, the head under the
// segment's first key and the tail under its last, so the order stays sorted
// (an empty segment passes the sentinel for both).
__device__ __forceinline__
void fm_close_slots(uint32_t* sk, bucket_h* sv, uint32_t first, uint32_t last,
                    bool head_done, bool tail_done)
{
    if (!head_done) {
        sk[0] = first;
        sv[0].inf();
    }
    if (!tail_done) {
        sk[1] = last;
        sv[1].inf();
    }
}
#endif

#ifdef __CUDA_ARCH__
// Where entry v of a table lies (bit 31 is the digit's sign).
__device__ __forceinline__
const affine_h* fm_entry(const affine_h* base, const affine_h* extra, uint64_t ntab, uint32_t v)
{
    const uint32_t i = v & 0x7fffffff;
    return i < ntab ? &base[i] : &extra[i - ntab];
}

// Entry v of a table (the sign applied by the caller).
__device__ __forceinline__
affine_t fm_point(const affine_h* base, const affine_h* extra, uint64_t ntab, uint32_t v)
{
    return *fm_entry(base, extra, ntab, v);
}
#endif

// How an accumulation level reads its entries: table points (level 0; with
// the next point loaded while the current one is added, or not) or partial
// buckets (the levels above).
enum fm_source { FROM_PARTIALS, FROM_TABLE };

// One accumulation level over `m` sorted keys (read from `m_ptr` when set):
// segment t = [t*seg, (t+1)*seg) of entries, each a table point (with sign)
// or, above level 0, a partial bucket. Slots unused keep the order sorted:
// the head takes the segment's first key, the tail its last, at infinity.
template<fm_source SOURCE, int THREADS>
__launch_bounds__(THREADS) __global__
void fm_accumulate(bucket_h* buckets, uint32_t* slot_keys, bucket_h* slot_vals,
                   const uint32_t* keys, const uint32_t* vals, const bucket_h* partial,
                   const uint32_t* m_ptr, uint32_t m_, uint32_t seg, uint32_t nseg,
                   const affine_h* base, const affine_h* extra, uint64_t ntab,
                   uint32_t sentinel)
{
#ifdef __CUDA_ARCH__
    const uint32_t t = lane_group();
    if (t >= nseg)
        return;
    const uint32_t m = m_ptr ? *m_ptr : m_;
    uint32_t* sk = slot_keys + 2 * (size_t)t;
    bucket_h* sv = slot_vals + 2 * (size_t)t;
    const uint32_t s0 = t * seg;
    if (s0 >= m) {
        fm_close_slots(sk, sv, sentinel, sentinel, false, false);
        return;
    }
    const uint32_t s1 = min(s0 + seg, m);
    const uint32_t first = keys[s0];
    const bool head_open = s0 > 0 && keys[s0 - 1] == first;
    bool head_done = false, tail_done = false;
    uint32_t key = first, rs = s0;
    bucket_t acc;
    acc.inf();
    #pragma unroll 1
    for (uint32_t e = s0; e < s1; e++) {
        const uint32_t k = keys[e];
        if (k != key) {
            fm_flush(buckets, sk, sv, keys, key, acc, rs, e, s0, s1, m, head_open,
                     sentinel, head_done, tail_done);
            key = k;
            rs = e;
            acc.inf();
        }
        if constexpr (SOURCE == FROM_TABLE) {
            const uint32_t v = vals[e];
            affine_t p = fm_point(base, extra, ntab, v);
            acc.add(p, v >> 31);
        } else {
            bucket_t q = partial[e];
            acc.add(q);
        }
    }
    fm_flush(buckets, sk, sv, keys, key, acc, rs, s1, s0, s1, m, head_open, sentinel,
             head_done, tail_done);
    fm_close_slots(sk, sv, first, key, head_done, tail_done);
#endif
}

#ifdef __CUDA_ARCH__
// x (and, when `y` is asked for, y with the digit's sign applied) of table
// entry v.
__device__ __forceinline__
void fm_xy(const affine_h* base, const affine_h* extra, uint64_t ntab, uint32_t v,
           field_t& x, field_t* y)
{
    const field_h* f = reinterpret_cast<const field_h*>(fm_entry(base, extra, ntab, v));
    x = f[0];
    if (y) {
        *y = f[1];
        y->cneg(v >> 31);
    }
}
#endif

// Level 0 with the entries added in pairs first, in affine coordinates: two
// neighbours of one run (e, e+1) are summed with one field inversion shared
// by all of the segment's pairs (Montgomery's trick), and the sum goes into
// the run's XYZZ accumulator as one mixed addition, so a pair costs about
// 6M + 8M+2S instead of two mixed additions (2 x (8M+2S)). A pair whose x
// coordinates match, or that holds the point at infinity (x = 0 there; no
// point of the subgroup has x = 0 otherwise), is added point by point as
// before. The forward pass stores each pair's prefix product and position in
// `prefix`/`pair_at` (element j of lane group t at j*stride + t, coalesced);
// every lane runs the inversion (sppark's pairs lanes up), so none leaves
// before it; the backward pass walks the segment from its end, flushing runs
// as fm_accumulate does.
// On an H200 it is slower all the same (G1 2^24 over 12 copies: 160 ms
// against 112): each table point is read twice, at random, and the prefix
// products go through memory; fewer multiplications do not pay for that.
// Kept, opt-in (CUZK_MSM_PAIRS=1), tested against blst, for tables of few
// copies (G1 2^26 over 3 copies: 940 ms against 1194) and as the measured
// alternative.
template<int THREADS>
__launch_bounds__(THREADS) __global__
void fm_accumulate_pairs(bucket_h* buckets, uint32_t* slot_keys, bucket_h* slot_vals,
                         const uint32_t* keys, const uint32_t* vals, const uint32_t* m_ptr,
                         uint32_t seg, uint32_t nseg, const affine_h* base,
                         const affine_h* extra, uint64_t ntab, uint32_t sentinel,
                         field_h* prefix, uint32_t* pair_at, uint32_t stride)
{
#ifdef __CUDA_ARCH__
    const uint32_t t = lane_group();
    const uint32_t m = *m_ptr;
    const uint32_t s0 = t * seg;
    const bool live = t < nseg && s0 < m;
    const uint32_t s1 = live ? min(s0 + seg, m) : s0;

    field_t prod = field_t::one();
    uint32_t np = 0;
    #pragma unroll 1
    for (uint32_t e = s0; e + 1 < s1;) {
        if (keys[e] != keys[e + 1]) {
            e++;
            continue;
        }
        field_t x1, x2;
        fm_xy(base, extra, ntab, vals[e], x1, nullptr);
        fm_xy(base, extra, ntab, vals[e + 1], x2, nullptr);
        field_t d = x2 - x1;
        const bool special = x1.is_zero() | x2.is_zero() | d.is_zero();
        prefix[(size_t)np * stride + t] = prod;
        pair_at[(size_t)np * stride + t] = e;
        if (!special)
            prod *= d;
        np++;
        e += 2;
    }
    __syncwarp();
    field_t inv = prod.reciprocal();
    uint32_t* sk = slot_keys + 2 * (size_t)t;
    bucket_h* sv = slot_vals + 2 * (size_t)t;
    if (!live) {
        if (t < nseg)
            fm_close_slots(sk, sv, sentinel, sentinel, false, false);
        return;
    }

    const uint32_t first = keys[s0], last = keys[s1 - 1];
    const bool head_open = s0 > 0 && keys[s0 - 1] == first;
    bool head_done = false, tail_done = false;
    uint32_t key = last, re = s1;
    uint32_t j = np;
    uint32_t next_pair = j ? pair_at[(size_t)(j - 1) * stride + t] : 0;
    bucket_t acc;
    acc.inf();
    #pragma unroll 1
    for (uint32_t e = s1; e > s0;) {
        const uint32_t i = e - 1;
        const uint32_t k = keys[i];
        if (k != key) {
            fm_flush(buckets, sk, sv, keys, key, acc, e, re, s0, s1, m, head_open,
                     sentinel, head_done, tail_done);
            key = k;
            re = e;
            acc.inf();
        }
        if (j != 0 && next_pair + 1 == i) {
            j--;
            field_t x1, y1, x2, y2;
            fm_xy(base, extra, ntab, vals[i - 1], x1, &y1);
            fm_xy(base, extra, ntab, vals[i], x2, &y2);
            field_t d = x2 - x1;
            const bool special = x1.is_zero() | x2.is_zero() | d.is_zero();
            if (special) {
                acc.add(affine_t(x1, y1));
                acc.add(affine_t(x2, y2));
            } else {
                field_t pre = prefix[(size_t)j * stride + t];
                field_t dinv = inv * pre;   // 1/d
                inv *= d;                   // 1/(product of the pairs before)
                field_t lam = y2 - y1;
                lam *= dinv;
                field_t x3 = lam^2;
                x3 -= x1;
                x3 -= x2;
                field_t y3 = x1 - x3;
                y3 *= lam;
                y3 -= y1;
                acc.add(affine_t(x3, y3));
            }
            next_pair = j ? pair_at[(size_t)(j - 1) * stride + t] : 0;
            e -= 2;
        } else {
            field_t x, y;
            fm_xy(base, extra, ntab, vals[i], x, &y);
            acc.add(affine_t(x, y));
            e -= 1;
        }
    }
    fm_flush(buckets, sk, sv, keys, key, acc, s0, re, s0, s1, m, head_open, sentinel,
             head_done, tail_done);
    fm_close_slots(sk, sv, first, last, head_done, tail_done);
#endif
}

// partials[g*parts + p] = sum over b in chunk p of group g of (b+1)*bucket[b]
// (bucket b holds the digit b+1): running sums from the top of the chunk give
// sum (b-lo+1)*bucket[b]; lo times the chunk's plain sum makes up the rest.
__launch_bounds__(256) __global__
void fm_reduce(bucket_h* partials, const bucket_h* buckets, uint32_t nb, uint32_t groups,
               uint32_t parts)
{
#ifdef __CUDA_ARCH__
    const uint32_t t = lane_group();
    if (t >= groups * parts)
        return;
    const uint32_t g = t / parts, p = t % parts, len = nb / parts, lo = p * len;
    const bucket_h* row = buckets + (size_t)g * nb;
    bucket_t run, sum;
    run.inf();
    sum.inf();
    #pragma unroll 1
    for (uint32_t b = lo + len; b-- > lo;) {
        bucket_t x = row[b];
        run.add(x);
        sum.add(run);
    }
    bucket_t m;
    m.inf();
    #pragma unroll 1
    for (int bit = lo ? 31 - __clz(lo) : -1; bit >= 0; bit--) {
        bucket_t d = m;
        m.add(d);
        if ((lo >> bit) & 1)
            m.add(run);
    }
    sum.add(m);
    partials[t] = sum;
#endif
}

// out[g*gridDim.x + b] = sum of in[g*count + b*per_block ...] (up to
// per_block of group g's values), block (b, g) of 128 lane groups: serial
// sums per lane, then a tree in shared memory.
__launch_bounds__(256) __global__
void fm_collect(bucket_h* out, const bucket_h* in, uint32_t count, uint32_t per_block)
{
#ifdef __CUDA_ARCH__
    // Raw storage: the field types' constructors rule out typed __shared__ arrays.
    __shared__ uint4 raw[128 * sizeof(bucket_h) / sizeof(uint4)];
    bucket_h* sh = reinterpret_cast<bucket_h*>(raw);
    const uint32_t lt = threadIdx.x / DEGREE, nl = blockDim.x / DEGREE;
    const uint32_t b = blockIdx.x, g = blockIdx.y;
    const uint32_t end = min((b + 1) * per_block, count);
    bucket_t acc;
    acc.inf();
    for (uint32_t p = b * per_block + lt; p < end; p += nl) {
        bucket_t x = in[(size_t)g * count + p];
        acc.add(x);
    }
    sh[lt] = acc;
    __syncthreads();
    for (uint32_t s = nl / 2; s; s >>= 1) {
        if (lt < s) {
            bucket_t a = sh[lt];
            bucket_t c = sh[lt + s];
            a.add(c);
            sh[lt] = a;
        }
        __syncthreads();
    }
    if (lt == 0)
        out[(size_t)g * gridDim.x + b] = sh[0];
#endif
}

static inline uint32_t blocks_for(size_t lanes, uint32_t threads)
{   return (uint32_t)((lanes * DEGREE + threads - 1) / threads);   }

// Table copies 1..copies-1 of `n` bases into `extra`, each from the one before.
extern "C" RustError CUZK_FN(msm_table_build)(int device, void* stream, const affine_t* points,
                                              size_t n, uint32_t window, uint32_t copies,
                                              affine_t* extra)
{
    CUZK_TRY
    if (n == 0 || copies < 2)
        return RustError{cudaSuccess};
    if (window < 2 || window > 24)
        throw std::invalid_argument("MSM table window must be 2..24 bits");
    select_gpu(device).select();
    stream_t& s = as_stream_t(stream);
    const affine_h* in = reinterpret_cast<const affine_h*>(points);
    affine_h* out = reinterpret_cast<affine_h*>(extra);
    for (uint32_t t = 1; t < copies; t++) {
        fm_table_double<<<s.sm_count() * 4, 256, 0, s>>>(out, in, n, window);
        CUDA_OK(cudaGetLastError());
        in = out;
        out += n;
    }
    CUZK_CATCH
}

// The fixed-base MSM `a` describes (cuzk_fixed_msm_args), on the caller's
// stream, returning with the result on the host.
extern "C" RustError CUZK_FN(msm_fixed)(int device, void* stream,
                                        const cuzk_fixed_msm_args* a, point_t* out)
{
    CUZK_TRY
    out->inf();
    const size_t n = a->n;
    if (n == 0)
        return RustError{cudaSuccess};
    if (a->form > CUZK_MONTGOMERY)
        throw std::invalid_argument("MSM scalars: an unknown form");
    const cuzk_msm_table* tab = &a->table;
    const uint64_t base_off = a->base_off;
    const uint32_t* base_idx = a->base_idx;
    const fr_t* scalars = a->scalars;
    const uint32_t* scalar_idx = a->scalar_idx;
    const bool mont = a->form == CUZK_MONTGOMERY;
    size_t max_entries = a->max_entries;
    const uint32_t c = tab->window, nwin = windows_of(c);
    const uint32_t copies = std::max(1u, std::min(tab->copies, nwin));
    if (c < 2 || c > 24)
        throw std::invalid_argument("MSM table window must be 2..24 bits");
    if ((uint64_t)copies * tab->ntab >= (1ull << 31))
        throw std::invalid_argument("MSM table too large for 31-bit entries");
    const uint32_t groups = (nwin + copies - 1) / copies, nb = 1u << (c - 1);
    const uint32_t sentinel = groups * nb;
    const int key_bits = 32 - __builtin_clz(sentinel);
    // tuning.pairs: level 0 adds entries in pairs (fm_accumulate_pairs),
    // measured slower on an H200 (G1 2^24: 160 ms against 112, G2 2^22: 104
    // against 100), so not the default. Its scratch is about half an element
    // and an index per entry, so G2's chunk is then half G1's.
    const bool pairs = a->tuning.pairs;
    if (max_entries == 0 || max_entries > (1u << 30))
        max_entries = (1u << 28) / (pairs ? DEGREE : 1);
    const size_t chunk = std::min(n, std::max<size_t>(1, max_entries / nwin));
    const size_t cap = chunk * nwin;

    const gpu_t& gpu = select_gpu(device);
    gpu.select();
    stream_t& s = as_stream_t(stream);
    const uint32_t sms = s.sm_count();

    // Level 0 aims at a few lane groups per SM's worth of threads; the
    // levels above reduce the segments' slots 4 at a time (on an H200, 4
    // beat 16 and 64: more threads for the few slots there are), both from
    // the tuning Rust passes. Level 0's blocks
    // are 256 threads with no register bound: 384-thread blocks (at most 168
    // registers) lost on an H200, and G2's addition needs more registers
    // than that bound leaves on Turing and Blackwell.
    const uint32_t target = sms * std::max(1u, a->tuning.threads_per_sm) / DEGREE;
    const uint32_t seg0 = std::max<uint32_t>(8, (uint32_t)((cap + target - 1) / target));
    const uint32_t seg_up = std::max(2u, a->tuning.edge_seg);
    const uint32_t nseg0 = (uint32_t)((cap + seg0 - 1) / seg0);
    const uint32_t nseg1 = (2 * nseg0 + seg_up - 1) / seg_up;

    phase_clock clock{s, a->tuning.profile};
    stream_buf<bucket_h> buckets{(size_t)sentinel + 1, s};
    CUDA_OK(cudaMemsetAsync((bucket_h*)buckets, 0, ((size_t)sentinel + 1) * sizeof(bucket_h), s));
    stream_buf<uint32_t> k0{cap, s}, k1{cap, s}, v0{cap, s}, v1{cap, s}, nz{1, s};
    stream_buf<uint32_t> slot_k[2] = {{2 * (size_t)nseg0, s}, {2 * (size_t)nseg1, s}};
    stream_buf<bucket_h> slot_v[2] = {{2 * (size_t)nseg0, s}, {2 * (size_t)nseg1, s}};
    size_t temp_bytes = 0;
    {
        cub::DoubleBuffer<uint32_t> dk{k0, k1}, dv{v0, v1};
        CUDA_OK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, dk, dv, (int)cap, 0,
                                                key_bits, (cudaStream_t)s));
    }
    stream_buf<uint8_t> temp{temp_bytes, s};
    // Pair scratch: seg0/2 elements per level-0 lane group, laid out
    // element-major (see fm_accumulate_pairs).
    const uint32_t pair_stride = blocks_for(nseg0, 256) * 256 / DEGREE;
    const size_t pair_elems = pairs ? (size_t)(seg0 / 2) * pair_stride : 0;
    stream_buf<field_h> prefix{pair_elems, s};
    stream_buf<uint32_t> pair_at{pair_elems, s};
    const affine_h* base = reinterpret_cast<const affine_h*>(tab->base);
    const affine_h* extra = reinterpret_cast<const affine_h*>(tab->extra);
    clock.mark("alloc");

    for (size_t off = 0; off < n; off += chunk) {
        const uint32_t m = (uint32_t)std::min(chunk, n - off);
        CUDA_OK(cudaMemsetAsync((uint32_t*)nz, 0, sizeof(uint32_t), s));
        fm_digits<<<std::min<uint32_t>((m + 255) / 256, sms * 16), 256, 0, s>>>(
            k0, v0, nz, scalar_idx ? scalars : scalars + off,
            scalar_idx ? scalar_idx + off : nullptr, base_idx ? base_idx + off : nullptr,
            base_off + off, m, mont, c, nwin, copies, tab->ntab, sentinel);
        CUDA_OK(cudaGetLastError());
        clock.mark("digits");
        cub::DoubleBuffer<uint32_t> dk{k0, k1}, dv{v0, v1};
        CUDA_OK(cub::DeviceRadixSort::SortPairs((uint8_t*)temp, temp_bytes, dk, dv,
                                                (int)(m * nwin), 0, key_bits, (cudaStream_t)s));
        clock.mark("sort");
        uint32_t nseg = (m * nwin + seg0 - 1) / seg0;
        if (pairs)
            fm_accumulate_pairs<256><<<blocks_for(nseg, 256), 256, 0, s>>>(
                buckets, slot_k[0], slot_v[0], dk.Current(), dv.Current(), nz, seg0, nseg,
                base, extra, tab->ntab, sentinel, prefix, pair_at,
                blocks_for(nseg, 256) * 256 / DEGREE);
        else
            fm_accumulate<FROM_TABLE, 256><<<blocks_for(nseg, 256), 256, 0, s>>>(
                buckets, slot_k[0], slot_v[0], dk.Current(), dv.Current(), nullptr, nz, 0,
                seg0, nseg, base, extra, tab->ntab, sentinel);
        CUDA_OK(cudaGetLastError());
        clock.mark("accumulate");
        // Reduce the edge slots, level by level, until one segment holds them.
        for (int from = 0; nseg > 1; from ^= 1) {
            const uint32_t count = 2 * nseg;
            nseg = (count + seg_up - 1) / seg_up;
            fm_accumulate<FROM_PARTIALS, 256><<<blocks_for(nseg, 256), 256, 0, s>>>(
                buckets, slot_k[from ^ 1], slot_v[from ^ 1], slot_k[from], nullptr,
                slot_v[from], nullptr, count, seg_up, nseg, nullptr, nullptr, 0, sentinel);
            CUDA_OK(cudaGetLastError());
        }
        clock.mark("edges");
    }

    // Enough chunks of buckets to fill the device, each long enough (32
    // buckets) that the multiplication by its start stays a small part.
    uint32_t parts = 1;
    while (parts < nb && nb / (parts * 2) >= 32 &&
           (size_t)groups * parts * 2 <= (size_t)sms * 512 / DEGREE)
        parts *= 2;
    const uint32_t per_block = 512, blocks = (parts + per_block - 1) / per_block;
    stream_buf<bucket_h> partials{(size_t)groups * parts, s}, mid{(size_t)groups * blocks, s},
        sums{groups, s};
    fm_reduce<<<blocks_for((size_t)groups * parts, 256), 256, 0, s>>>(partials, buckets, nb,
                                                                      groups, parts);
    CUDA_OK(cudaGetLastError());
    clock.mark("reduce");
    // Partials to one block's worth per group, then to one point per group.
    fm_collect<<<dim3(blocks, groups), 128 * DEGREE, 0, s>>>(mid, partials, parts, per_block);
    CUDA_OK(cudaGetLastError());
    fm_collect<<<dim3(1, groups), 128 * DEGREE, 0, s>>>(sums, mid, blocks, blocks);
    CUDA_OK(cudaGetLastError());
    std::vector<bucket_t> res(groups);
    CUDA_OK(cudaMemcpyAsync(res.data(), (bucket_h*)sums, groups * sizeof(bucket_h),
                            cudaMemcpyDeviceToHost, s));
    clock.mark("collect");
    s.sync();
    clock.print(n);

    // Group g's windows start at bit c*copies*g.
    bucket_t acc = res[groups - 1];
    for (int g = (int)groups - 2; g >= 0; g--) {
        for (uint32_t i = 0; i < c * copies; i++) {
            bucket_t d = acc;
            acc.add(d);
        }
        acc.add(res[g]);
    }
    *out = acc;
    CUZK_CATCH
}
