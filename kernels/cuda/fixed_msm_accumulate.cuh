// Accumulation: sorted (bucket, entry) pairs summed into buckets in segments,
// level by level (one thread per segment; runs across segment edges to slots).
// Part of the fixed-base MSM of one group (fixed_msm.cuh includes it inside
// the group's namespace, after the types it names).

// How a run that is its bucket's whole sum (for this chunk of scalars)
// reaches the bucket. Every key's entries are contiguous once sorted, so such
// a run is the only one of its key at any level: with buckets zeroed for the
// chunk it is stored, a few stores however short the runs. Added in place,
// a run's end costs a full addition that the warp's other lanes wait for;
// with runs a few dozen entries long (wide windows) nearly every step of a
// warp had one, which made wide windows cost twice as much per entry.
enum fm_runs { RUNS_STORED, RUNS_ADDED };

// Where a run [rs, re) of one key inside segment [s0, s1) goes: a run that
// begins and ends inside the segment is its bucket's whole sum; one that
// crosses the segment's start goes to the head slot, its end to the tail slot.
#ifdef __CUDA_ARCH__
template<fm_runs RUNS>
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
            if constexpr (RUNS == RUNS_STORED) {
                buckets[key] = acc;
            } else {
                bucket_t b = buckets[key];
                b.add(acc);
                buckets[key] = b;
            }
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

// Asks L2 for entry v of a table without waiting for it (no register holds
// it): the one or two 128-byte lines a point of either group spans.
__device__ __forceinline__
void fm_prefetch(const affine_h* base, const affine_h* extra, uint64_t ntab, uint32_t v)
{
    const char* p = reinterpret_cast<const char*>(fm_entry(base, extra, ntab, v));
    asm volatile("prefetch.global.L2 [%0];" :: "l"(p));
    asm volatile("prefetch.global.L2 [%0];" :: "l"(p + sizeof(affine_h) - 1));
}

// Entry v of a table (the sign applied by the caller).
__device__ __forceinline__
affine_t fm_point(const affine_h* base, const affine_h* extra, uint64_t ntab, uint32_t v)
{
    return *fm_entry(base, extra, ntab, v);
}
#endif

// How an accumulation level reads its entries: table points (level 0) or
// partial buckets (the levels above).
enum fm_source { FROM_PARTIALS, FROM_TABLE };

// One accumulation level over `m` sorted keys (read from `m_ptr` when set):
// segment t = [t*seg, (t+1)*seg) of entries, each a table point (with sign)
// or, above level 0, a partial bucket, added in the form `ADD` names. Slots
// unused keep the order sorted: the head takes the segment's first key, the
// tail its last, at infinity. Level 0 with `ahead` > 0 prefetches the point
// of entry e + ahead into L2 while it adds entry e's; the entry's index is
// read an iteration before its prefetch, so the prefetch never waits on it.
// One kernel serves both block sizes (FM_BLOCK_MAX threads or half that):
// a kernel per size let the compiler shape each one apart, and their
// registers drifted apart with edits (G1: 140 in blocks of 64 and 144 in
// 256, then 184 and 134), so the occupancy a block size bought changed with
// unrelated code. Bounded to 128 threads, ptxas gives G2 166 registers
// where a bound of 256 gives it 182 (12 warps an SM in blocks of 64 against
// 10); G1 134 either way.
constexpr int FM_BLOCK_MAX = 128;
template<fm_source SOURCE, fm_runs RUNS, cuzk_add_form ADD = CUZK_ADD_INLINED>
__launch_bounds__(FM_BLOCK_MAX) __global__
void fm_accumulate(bucket_h* buckets, uint32_t* slot_keys, bucket_h* slot_vals,
                   const uint32_t* keys, const uint32_t* vals, const bucket_h* partial,
                   const uint32_t* m_ptr, uint32_t m_, uint32_t seg, uint32_t nseg,
                   const affine_h* base, const affine_h* extra, uint64_t ntab,
                   uint32_t sentinel, uint32_t ahead)
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
    // vals[e + ahead], for the prefetch at entry e.
    uint32_t v_ahead = SOURCE == FROM_TABLE && ahead && s0 + ahead < s1 ? vals[s0 + ahead] : 0;
    #pragma unroll 1
    for (uint32_t e = s0; e < s1; e++) {
        if constexpr (SOURCE == FROM_TABLE) {
            if (ahead && e + ahead < s1) {
                fm_prefetch(base, extra, ntab, v_ahead);
                if (e + ahead + 1 < s1)
                    v_ahead = vals[e + ahead + 1];
            }
        }
        const uint32_t k = keys[e];
        if (k != key) {
            fm_flush<RUNS>(buckets, sk, sv, keys, key, acc, rs, e, s0, s1, m, head_open,
                           sentinel, head_done, tail_done);
            key = k;
            rs = e;
            acc.inf();
        }
        if constexpr (SOURCE == FROM_TABLE) {
            const uint32_t v = vals[e];
            affine_t p = fm_point(base, extra, ntab, v);
            add_in<ADD>(acc, p, v >> 31);
        } else {
            bucket_t q = partial[e];
            add_sum<ADD>(acc, q);
        }
    }
    fm_flush<RUNS>(buckets, sk, sv, keys, key, acc, rs, s1, s0, s1, m, head_open, sentinel,
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
// It is slower all the same, with runs added (H200, G1 2^24 over 12
// copies: 160 ms against 112) and stored (H100, G1 dense 2^26 at window 20:
// 520 ms against 430): each table point is read twice, at random, and the
// prefix products go through memory, which costs more than the ~20% fewer
// multiplications save. Runs end as `RUNS` says, like fm_accumulate's.
// Opt-in (CUZK_MSM_PAIRS=1), tested against blst, timed beside the default.
template<fm_runs RUNS, int THREADS>
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
            fm_flush<RUNS>(buckets, sk, sv, keys, key, acc, e, re, s0, s1, m, head_open,
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
    fm_flush<RUNS>(buckets, sk, sv, keys, key, acc, s0, re, s0, s1, m, head_open, sentinel,
                   head_done, tail_done);
    fm_close_slots(sk, sv, first, last, head_done, tail_done);
#endif
}

// into[b] += from[b] for b < count: a chunk's stored buckets joined to the
// buckets of the chunks before it, one bucket per lane group (no two lanes
// share one, so nothing waits on a neighbour's run).
__launch_bounds__(256) __global__
void fm_merge(bucket_h* into, const bucket_h* from, uint32_t count)
{
#ifdef __CUDA_ARCH__
    const uint32_t t = lane_group();
    if (t >= count)
        return;
    bucket_t x = from[t];
    if (x.is_inf())
        return;
    bucket_t b = into[t];
    b.add(x);
    into[t] = b;
#endif
}
