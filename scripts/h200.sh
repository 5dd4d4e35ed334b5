#!/usr/bin/env bash
# Runs on the GPU machine (the `device` tool), from the repository root, with
# release binaries in .carry/ (scripts/carry.sh): cuzk, gpu_ops, gpu_proofs,
# pce, msm, supraseal-bench (if built), and cpu_vs_bellperson and fil_c2 for
# the `cpu` and `fil` sections (CARRY_BENCHES=1 scripts/carry.sh). Results go to $OUT.
#   scripts/h200.sh tests | chain | sha256 | cpu | anchors
#   scripts/h200.sh side-by-side WORKLOAD LOG_SIZE PARTITIONS C J
#   scripts/h200.sh fil        (2 KiB parameters made here, PoRep C2: seal_commit_phase2 vs cuzk CPU vs GPU)
#   scripts/h200.sh synth32    (synthesis of a 32 GiB-shaped PoRep partition, full vs pre-compiled)
#   scripts/h200.sh variants   (the four interlock variants, chain and sha256 2^20 x 10, 3 reps, waterfalls)
#   scripts/h200.sh selfverify (chain 2^20 x 10 with and without self-verification, interleaved)
#   scripts/h200.sh chain-locks (chain 2^20 x 10 with tables: single_lock vs two_lock, waterfalls and TIMELINEs)
#   scripts/h200.sh steady     (chain 2^20 x 10 single_lock after a warm-up proof and without, TIMELINE; gpu_proofs)
#   scripts/h200.sh msm        (fixed-base MSM tests against blst, cuzk vs sppark msm_t at each size, chain with tables on/off)
#   scripts/h200.sh check      (gpu_proofs and pce tests; sha256 2^20 x 10 pce_gpu with the matrices on and off the device)
#   scripts/h200.sh windows    (fixed-base MSM window widths 18..22 at 2^20 and 2^22, G1 and G2)
#   scripts/h200.sh pce-tables (sha256 2^20 x 10: classic vs pce_gpu with tables, SupraSeal; 2^26 G1 over a smaller table)
#   scripts/h200.sh pairs      (fixed-base MSM level 0 one by one vs in pairs: tests, every size, chain steady state)
#   scripts/h200.sh affine     (dense MSMs with level 0 in affine pairs, runs stored, vs one by one and msm_t; GPU tests)
#   scripts/h200.sh reduce     (the bucket reduction's threads per SM at dense G1 2^26 and the G1 2^24 table; GPU tests)
#   scripts/h200.sh blocks     (level 0 in blocks of 256, 128 and 64 threads: G1/G2 2^24 tables, dense G1 2^26/2^27,
#                               chain 2^20 x 10 steady state; GPU tests)
#   scripts/h200.sh madd       (the mixed addition's rate: from registers, two sums a thread, random reads, read ahead)
#   scripts/h200.sh stalls     (CUPTI PC sampling: stall reasons of the mixed-addition probe's modes and of a dense G1
#                               2^26 MSM's kernels, level 0's PCs in $OUT/stalls_dense26.csv)
#   scripts/h200.sh occupancy  (level 0 at 14 and 12 warps an SM (blocks of 64, 128) and fused, interleaved;
#                               the registers each ran at from the profile; GPU tests)
#   scripts/h200.sh ahead      (level 0 prefetching the point 2 and 8 entries ahead vs none, blocks of 64 vs 128,
#                               interleaved: G1 2^24 table, dense G1 2^26, G2 2^26; GPU tests)
#   scripts/h200.sh fused      (level 0 and the ones with Y3 as one dot product vs the inlined addition, as `looped`)
#   scripts/h200.sh looped     (level 0 and the ones with sppark's looped addition vs the inlined one: G1/G2 2^24
#                               tables, dense G1 2^26/2^27 and G2 2^26, phases, SM clock; chain 2^20 x 10 each way)
#   scripts/h200.sh clocks     (SM clock, power and throttle reasons during a dense G1 2^26 MSM; the multiply-rate probe)
#   scripts/h200.sh footprint  (G1 2^24 over tables of 12 down to 2 copies, phases timed: is level 0 bound by table reads?)
#   scripts/h200.sh ptx        (a build with sm_90 and PTX compute_90: the GPU tests natively, then with the driver's
#                               JIT forced, cold and warm cache)
#   scripts/h200.sh setup      (cuzk's setup: GPU multiples against the CPU's; chain 2^20 GPU vs CPU vs bellperson on
#                               16 cores; chain 2^24 and 2^26 and 2 KiB Filecoin parameters on the GPU)
#   scripts/h200.sh setup32    (the setup's GPU test; 32 GiB PoRep parameters on the GPU into /tmp/fil-32g, time and peak RSS)
#   scripts/h200.sh porep32    (right after setup32, on the same warm machine: a synthetic 32 GiB sector proved with
#                               pce_gpu, WARMUP=1 then PROOFS=3 proofs (JOBS in flight, ARENAS=2 host arenas), every one
#                               checked by verify_seal; waterfall; the log in $OUT/porep32.log)
#   scripts/h200.sh p32        (setup32 then porep32 in one call, each bounded by the call's 10 minutes; the GPU setup
#                               only where its test passes, else the CPU's; a later porep32 call reuses what it made;
#                               THEN=soak32 runs soak32 after the parameters instead)
#   scripts/h200.sh soak32     (after porep32: 32 GiB WinningPoSt every 15 s under a backlog of 32 GiB PoReps, through
#                               the daemon, every proof verified; WinningPoSt against its solo latency)
#   scripts/h200.sh window32   (32 GiB WindowPoSt and WinningPoSt parameters on the GPU, 2,349 synthetic sectors,
#                               WindowPoSt proved after a cold warm-up, WinningPoSt cold and resident, all verified)
#   scripts/h200.sh small-vram (streamed SRS: list kernels, GPU proof tests, chain 2^24 x 2 resident / 16 GiB budget /
#                               streamed under 16 GiB and 4 GiB, peak device memory)
#   scripts/h200.sh msm-porep  (one PoRep query's MSMs with PoRep's bit-heavy scalars: lists, ones, tail vs one dense msm_t)
#   scripts/h200.sh dense      (dense G1 MSMs at 2^26 and 2^27 on our Pippenger, runs stored vs added, vs msm_t; then the
#                               GPU tests; PROFILE=1 adds the phases at 2^26)
#   scripts/h200.sh stored     (runs stored, the default since a3fde3d: GPU proofs, the tables' MSMs at 2^20-2^24 and chain
#                               2^20 x 10 steady state, each beside runs added in place, interleaved)
#   scripts/h200.sh pce        (sha256 2^20 x 10 after a warm-up: classic synthesis vs pre-compiled constraints, host and device, vs SupraSeal)
set -u
section=${1:?section}
bin=$PWD/.carry
# carry.sh stages the binaries gzipped.
for z in "$bin"/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
out=${OUT:-/tmp/out}
mkdir -p "$out"
export RUST_LOG=warn CUZK_SRS__CACHE_DIR=/tmp/cuzk-params
params=$CUZK_SRS__CACHE_DIR
four="configs/serial.toml configs/single_lock.toml configs/two_lock.toml configs/throttled.toml"
variants="configs/serial.toml configs/single_lock.toml configs/single_lock_cpu_b2.toml configs/two_lock.toml configs/throttled.toml"
# The GPU keeps up with more synthesis than the defaults give it on 16 cores.
gpu_env="CUZK_GPU__BACKEND=gpu CUZK_STAGES__SYNTH__WORKERS=8"

setup() { # workload log
  [ -f "$params/$1-k$2.params" ] || { /usr/bin/time -f "setup $1 2^$2: %e s" "$bin/cuzk" setup --workload "$1" --log-size "$2" --out "$params"; }
}

# The SM clock, power and throttle reasons every 100 ms from smi_start to
# smi_summary, summarised over the samples above 250 W.
smi_start() {
  nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu,clocks_throttle_reasons.active \
      --format=csv,noheader -lms 100 > /tmp/smi.csv & smi=$!
}
smi_summary() {
  sleep 0.5; kill $smi
  python3 - <<'PY'
import collections
rows = [l.strip().split(', ') for l in open('/tmp/smi.csv') if l.strip()]
busy = [r for r in rows if len(r) >= 7 and r[3].split()[0].replace('.', '', 1).isdigit() and float(r[3].split()[0]) > 250]
print("samples", len(rows), "above 250 W", len(busy))
print("SM clock (MHz) above 250 W:", collections.Counter(r[1] for r in busy).most_common(8))
p = sorted(float(r[3].split()[0]) for r in busy)
if p:
    print("power p50 %.0f W, max %.0f W, limit %s" % (p[len(p) // 2], p[-1], busy[0][4]))
print("throttle reasons:", collections.Counter(r[6] for r in busy).most_common(4))
PY
}

# #27: level 0 and the ones' sums with the addition form $1 (looped or
# fused) beside the default (inlined): the G1 and G2 2^24 tables, dense G1
# 2^26 and 2^27 and G2 2^26 at window 20, interleaved, every result compared
# with msm_t's, each MSM's phases from CUDA events (the log in $OUT/$1.log),
# the SM clock and power meanwhile; then the multiply-rate probe; then chain
# 2^20 x 10 steady state (c=10 j=3, after a warm-up) each way, twice, every
# proof verified.
compare_add() {
  local form=$1
  smi_start
  CUZK_MSM_PROFILE=1 CUZK_MSM_WAYS="$form add" CUZK_MSM_G1=${TABLES_G1:-24} CUZK_MSM_G2=${TABLES_G2:-24} \
      CUZK_MSM_PLAIN_G1=${PLAIN:-26,27} CUZK_MSM_PLAIN_G2=${PLAIN_G2:-26} CUZK_MSM_PLAIN_WINDOWS=20 \
      timeout ${MSM_S:-330} "$bin/msm" > "$out/$form.log" 2>&1
  smi_summary
  grep -E "^G[12]|panicked" "$out/$form.log"
  # Each size's MSMs (up to its summary line) alternate ours (inlined) and
  # the other form: the median of each phase either way.
  python3 - "$out/$form.log" "$form" <<'PY'
import re, sys
runs = []
for line in open(sys.argv[1]):
    m = re.match(r"fixed msm n=(\d+):(.*)\| wall", line)
    if m:
        runs.append(dict((k, float(v)) for k, v in re.findall(r" (\w+) ([\d.]+) ms", m.group(2))))
    elif re.match(r"G[12] ", line) and runs:
        for way, rs in (("inlined", runs[0::2]), (sys.argv[2], runs[1::2])):
            med = {k: sorted(r.get(k, 0) for r in rs)[len(rs) // 2] for k in rs[0]}
            print(" ".join(line.split()[:3]), way, "(%d runs):" % len(rs), " ".join("%s %.2f" % kv for kv in med.items()))
        runs = []
PY
  [ -x "$bin/imad_rate" ] && "$bin/imad_rate" | grep -E "fp_t|H100|H200"
  [ "${CHAIN:-1}" = 1 ] || return 0
  setup chain 20
  for rep in 1 2; do
    for add in inlined $form; do
      env $gpu_env CUZK_PIPELINE__VARIANT=single_lock CUZK_MSM_ADD=$add timeout 45 "$bin/cuzk" bench --quiet \
          --workload chain --log-size 20 --partitions 10 -c 10 -j 3 --warmup 1 2>&1 | grep -E "throughput|verified" \
          | sed "s/^/add=$add: /"
    done
  done
}

# Seconds left of this call's budget (the device gives a call 10 minutes).
start=$(date +%s); left() { echo $(( ${BUDGET:-580} - ($(date +%s) - start) )); }

case $section in
setup)
  "$bin/setup_test" --test-threads 1 --nocapture 2>&1 | grep -E "^test |test result|skipping|panicked"
  CUZK_SETUP_LOG=20 CUZK_SETUP_DEVICE=gpu "$bin/setup_bench" 2>&1 | grep -E "^setup|panicked"
  CUZK_SETUP_LOG=20 CUZK_SETUP_DEVICE=cpu CUZK_SETUP_BELLPERSON=0 "$bin/setup_bench" 2>&1 | grep -E "^setup|panicked"
  for log in 24 26; do
    /usr/bin/time -f "chain 2^$log: %e s, peak RSS %M KiB" "$bin/cuzk" setup --workload chain --log-size $log \
        --device gpu --out /tmp/setup 2>&1 | tail -2
    rm -f /tmp/setup/*
  done
  /usr/bin/time -f "2 KiB Filecoin parameters (all kinds): %e s" "$bin/cuzk" fil params --sector-size 2KiB \
      --device gpu --dir /tmp/fil-2k-gpu 2>&1 | tail -5
  ;;
setup32)
  "$bin/setup_test" --test-threads 1 2>&1 | grep -E "^test |test result|panicked"
  RUST_LOG=info /usr/bin/time -f "32 GiB PoRep parameters: %e s, peak RSS %M KiB" "$bin/cuzk" fil params \
      --sector-size 32GiB --kinds porep --device gpu --dir /tmp/fil-32g 2>&1 \
      | grep -E "setup:|parameters|porep |error|warn" | cut -c1-400 | tail -12
  ls -la /tmp/fil-32g; df -h /tmp | tail -1; free -g | head -2
  ;;
p32)
  # setup32 and porep32 in one call, each step bounded so the call ends
  # inside the device's 10 minutes; a second `porep32` call on the warm
  # machine reuses /tmp/fil-32g and /tmp/syn32. The GPU setup path is used
  # only if its test passes on this card; otherwise the CPU's.
  # MSM_FIRST=WINDOWS: first the dense G1 2^27 MSM on our Pippenger at those
  # windows, runs stored and added, against msm_t (results compared).
  [ -n "${MSM_FIRST:-}" ] && CUZK_MSM_G1= CUZK_MSM_G2= CUZK_MSM_PLAIN_G1=27 CUZK_MSM_PLAIN_WINDOWS=$MSM_FIRST \
      timeout 90 "$bin/msm" 2>&1 | grep -vE "^fixed msm"
  dev=cpu
  # DEV=gpu: the GPU setup without its test first (it passed on this kind of card before).
  if [ "${DEV:-}" = gpu ]; then dev=gpu; else
    timeout 120 "$bin/setup_test" --test-threads 1 gpu_setup_equals_cpu_setup 2>&1 | grep -E "^test |test result|panicked" \
        | tee "$out/setup_test.txt"
    grep -q "test result: ok. 1 passed" "$out/setup_test.txt" && dev=gpu
  fi
  # The device-memory wait (a partition whose buffers do not fit yet waits).
  # MSM tables give their memory up to partition buffers and matrices.
  [ -x "$bin/gpu_proofs" ] && timeout 120 "$bin/gpu_proofs" --test-threads 1 a_partition_waits msm_tables_give_way 2>&1 \
      | grep -E "^test |test result|panicked"
  if [ ! -f /tmp/fil-32g/done ]; then
    rm -rf /tmp/fil-32g
    RUST_LOG=info timeout $(left) /usr/bin/time -f "32 GiB PoRep parameters ($dev): %e s, peak RSS %M KiB" \
        "$bin/cuzk" fil params --sector-size 32GiB --kinds porep --device $dev --dir /tmp/fil-32g 2>&1 \
        | grep -E "setup|parameters|porep |error|warn|panick|Killed|Command" | cut -c1-400 | tail -16 \
      && ls /tmp/fil-32g/*.params /tmp/fil-32g/*.vk >/dev/null 2>&1 && touch /tmp/fil-32g/done
    ls -la /tmp/fil-32g; df -h /tmp | tail -1; free -g | head -2
  fi
  [ -f /tmp/fil-32g/done ] || exit 1
  # THEN=soak32: the soak on these parameters in the same call instead.
  [ "${THEN:-porep32}" = soak32 ] && BUDGET=$(left) exec "$0" soak32
  # porep32's warm-up (the recording, ~240 s) and three proofs need ~330 s.
  [ $(left) -gt 330 ] || { echo "left $(left) s: porep32 in the next call"; exit 0; }
  ;&
porep32)
  [ -f /tmp/syn32/c1-wrapper.json ] || "$bin/cuzk" fil gen --synthetic --sector-size 32GiB --out /tmp/syn32 | head -1
  free -g | head -2
  # A line per proof as it lands; the whole log (SRS, recording and
  # matrices resident, waits) comes back in $out/porep32.log.
  # Device memory in use, sampled every 200 ms (the peak under a vram_budget).
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 > /tmp/vram.txt 2>/dev/null &
  smi=$!
  # The bench's resident set by kind, each second: where the host peak is.
  ( while sleep 1; do p=$(pgrep -x cuzk | head -1) && [ -n "$p" ] \
      && echo "$(date +%s) $(grep -E '^(VmRSS|RssAnon|RssFile|RssShmem):' /proc/$p/status | awk '{printf "%s %d ", $1, $2/1048576}')"; \
    done > /tmp/rss.txt ) &
  rss=$!
  env $gpu_env RUST_LOG=warn,cuzk_stages=info CUZK_FIL__PARAMETER_CACHE=/tmp/fil-32g CUZK_PIPELINE__VARIANT=pce_gpu \
      CUZK_ARENAS__COUNT=${ARENAS:-2} timeout $(( $(left) - 15 )) /usr/bin/time -f "bench: %e s, peak RSS %M KiB" \
      "$bin/cuzk" bench --quiet --c1 /tmp/syn32/c1-wrapper.json --miner 1000 -c ${PROOFS:-3} -j ${JOBS:-1} \
      --warmup ${WARMUP:-1} --waterfall "$out/wf/porep32" --timeline "$out/porep32.timeline" > "$out/porep32.log" 2>&1
  kill $smi $rss 2>/dev/null
  cp /tmp/rss.txt "$out/porep32-rss.txt"
  echo "host RSS (GiB) at its peak: $(sort -k3 -n /tmp/rss.txt | tail -1); first >= 90 GiB: $(awk '$3 >= 90' /tmp/rss.txt | head -1)"
  grep -v "INFO" "$out/porep32.log" | cut -c1-300 | tail -40
  grep "INFO" "$out/porep32.log" | cut -c1-300 | head -12
  echo "peak device memory in use: $(sort -n /tmp/vram.txt | tail -1) MiB (budget ${CUZK_GPU__VRAM_BUDGET:-default})"
  nvidia-smi --query-gpu=memory.used,memory.total --format=csv
  ;;
soak32)
  # Right after porep32, on the same warm machine: WinningPoSt (32 GiB, 370 k
  # constraints, its parameters made here in seconds) every WINNING_EVERY
  # under a backlog of BACKLOG 32 GiB PoReps on the GPU, through our own
  # daemon; every proof checked with Filecoin's verifier; WinningPoSt's
  # latency against its solo latency (#24's goal: solo + 2 s).
  [ -f /tmp/syn32/c1-wrapper.json ] || "$bin/cuzk" fil gen --synthetic --sector-size 32GiB --out /tmp/syn32 | head -1
  [ -f /tmp/fil-32g/winning-done ] || { /usr/bin/time -f "32 GiB WinningPoSt parameters: %e s" \
      "$bin/cuzk" fil params --sector-size 32GiB --kinds winning --device gpu --dir /tmp/fil-32g 2>&1 | tail -3 \
      && touch /tmp/fil-32g/winning-done; }
  ls -la /tmp/fil-32g
  # The daemon's waterfall and metrics from its status page, twice while
  # the backlog runs (where WinningPoSt's time goes under PoRep load).
  soak_s=${SOAK:-200s}; soak_s=${soak_s%s}
  for at in $(( soak_s / 2 + 60 )) $(( soak_s + 50 )); do
    ( sleep $at; python3 -c "
import urllib.request as u
for path, name in (('/waterfall.svg', 'waterfall.svg'), ('/metrics', 'metrics.txt')):
    open('$out/soak32-$at-' + name, 'wb').write(u.urlopen('http://127.0.0.1:9821' + path, timeout=20).read())
" 2>&1 | tail -1 ) &
  done
  env $gpu_env CUZK_FIL__PARAMETER_CACHE=/tmp/fil-32g CUZK_PIPELINE__VARIANT=pce_gpu CUZK_ARENAS__COUNT=${ARENAS:-2} \
      CUZK_DAEMON__STATUS_LISTEN=127.0.0.1:9821 RUST_LOG=warn,cuzk_stages=info \
      timeout $(( $(left) - 10 )) /usr/bin/time -f "soak: %e s, peak RSS %M KiB" "$bin/cuzk" soak --fixtures /tmp/syn32 \
      --duration ${soak_s}s --winning-every ${WINNING_EVERY:-15s} --window-burst 0 --porep-backlog ${BACKLOG:-2} \
      --restart-every 0s --grace ${GRACE:-150s} --json "$out/soak32.json" 2>&1 | tail -30
  cp /tmp/cuzk-soak-*.log "$out/" 2>/dev/null
  grep -E "WARN|ERROR" /tmp/cuzk-soak-*.log | cut -c1-300 | tail -10
  ;;
window32)
  # 32 GiB WindowPoSt (one partition of 2,349 sectors: 125 M constraints, a
  # 56.6 GiB SRS) and WinningPoSt, through `cuzk bench --fixtures`, every
  # proof checked by Filecoin's verifier. On a machine of its own: PoRep's
  # parameters and WindowPoSt's do not fit its disk together.
  rm -rf /tmp/fil-32g
  if [ ! -f /tmp/fil-32w/done ]; then
    rm -rf /tmp/fil-32w
    RUST_LOG=info timeout $(( $(left) - 240 )) /usr/bin/time -f "32 GiB WindowPoSt + WinningPoSt parameters (gpu): %e s, peak RSS %M KiB" \
        "$bin/cuzk" fil params --sector-size 32GiB --kinds window,winning --device gpu --dir /tmp/fil-32w 2>&1 \
        | grep -E "setup|parameters|post|error|warn|panick|Killed|Command" | cut -c1-400 | tail -16 \
      && ls /tmp/fil-32w/*.params >/dev/null 2>&1 && touch /tmp/fil-32w/done
    ls -la /tmp/fil-32w; df -h /tmp | tail -1; free -g | head -2
  fi
  [ -f /tmp/fil-32w/done ] || exit 1
  [ -f /tmp/synw/synthetic.json ] || /usr/bin/time -f "fixtures: %e s" "$bin/cuzk" fil gen --synthetic \
      --sector-size 32GiB --window-sectors 2349 --out /tmp/synw 2>&1 | head -1
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 > /tmp/vram.txt 2>/dev/null &
  smi=$!
  # WindowPoSt: the warm-up is the cold proof (SRS load, the recording).
  env $gpu_env RUST_LOG=warn,cuzk_stages=info CUZK_FIL__PARAMETER_CACHE=/tmp/fil-32w CUZK_PIPELINE__VARIANT=pce_gpu \
      timeout $(( $(left) - 70 )) /usr/bin/time -f "window bench: %e s, peak RSS %M KiB" "$bin/cuzk" bench --quiet \
      --fixtures /tmp/synw --fil-kind window-post -c ${PROOFS:-2} -j 1 --warmup 1 --waterfall "$out/wf/window32" \
      > "$out/window32.log" 2>&1
  grep -v "INFO" "$out/window32.log" | cut -c1-300 | tail -30
  echo "window: peak device memory in use: $(sort -n /tmp/vram.txt | tail -1) MiB"
  # WinningPoSt: cold (the warm-up) and with its SRS resident.
  env $gpu_env CUZK_FIL__PARAMETER_CACHE=/tmp/fil-32w CUZK_PIPELINE__VARIANT=pce_gpu timeout $(( $(left) - 5 )) \
      "$bin/cuzk" bench --quiet --fixtures /tmp/synw --fil-kind winning-post -c 5 -j 1 --warmup 1 2>&1 \
      | grep -v INFO | cut -c1-300 | tail -14
  kill $smi 2>/dev/null
  ;;
small-vram)
  # Streamed SRS (#28): the list kernels and every GPU proof test (SRS
  # streamed through 64 KiB chunks included), then chain 2^24 x 2 resident,
  # under a 16 GiB budget, streamed under 16 GiB and under 4 GiB, with the
  # device memory in use sampled every 100 ms.
  "$bin/gpu_ops" --test-threads 1 list_lower 2>&1 | grep -E "^test |test result|panicked"
  timeout 300 "$bin/gpu_proofs" --test-threads 1 2>&1 | grep -E "^test |test result|panicked" | cut -c1-300
  setup chain 24
  for run in "resident:" "budget16:CUZK_GPU__VRAM_BUDGET=16GiB" \
      "streamed16:CUZK_GPU__VRAM_BUDGET=16GiB CUZK_GPU__SRS_RESIDENT=false" \
      "streamed4:CUZK_GPU__VRAM_BUDGET=4GiB CUZK_GPU__SRS_RESIDENT=false"; do
    name=${run%%:*}; extra=${run#*:}
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 > "$out/vram-$name.txt" &
    smi=$!
    env $gpu_env $extra CUZK_PIPELINE__VARIANT=single_lock timeout $(( $(left) - 20 )) "$bin/cuzk" bench --quiet \
        --workload chain --log-size 24 --partitions 2 -c 3 -j 1 --warmup 1 2>&1 \
        | grep -E "throughput|verified:|error|Error" | sed "s/^/$name: /"
    kill $smi; wait $smi 2>/dev/null
    echo "$name: peak device memory $(sort -n "$out/vram-$name.txt" | tail -1) MiB"
  done
  ;;
dense)
  # #27: dense MSMs on our Pippenger over the points as they are (runs stored
  # into buckets zeroed per chunk, and added in place as before) against
  # msm_t at a 32 GiB partition's sizes, every result compared; then the GPU
  # tests; with PROFILE=1 where the time goes (CUDA events) at 2^26.
  [ -x "$bin/cuzk" ] && "$bin/cuzk" info 2>&1 | head -4
  CUZK_MSM_G1= CUZK_MSM_G2= CUZK_MSM_PLAIN_G1=${PLAIN:-26,27} CUZK_MSM_PLAIN_WINDOWS=${WINDOWS:-14,16,18,20} \
      timeout ${BENCH_S:-260} "$bin/msm" 2>&1 | grep -vE "^fixed msm"
  timeout $(( $(left) - 90 )) "$bin/gpu_ops" --test-threads 1 2>&1 | grep -E "^test |test result|panicked|skipping"
  timeout $(( $(left) - 40 )) "$bin/gpu_proofs" --test-threads 1 2>&1 | grep -E "^test |test result|panicked|skipping"
  [ -x "$bin/pce" ] && timeout $(( $(left) - 5 )) "$bin/pce" --test-threads 1 2>&1 | grep -E "^test |test result|skipping|panicked"
  [ "${PROFILE:-0}" = 1 ] && CUZK_MSM_G1= CUZK_MSM_G2= CUZK_MSM_PLAIN_G1=26 CUZK_MSM_PLAIN_WINDOWS=14,20 CUZK_MSM_PROFILE=1 \
      timeout $(( $(left) - 5 )) "$bin/msm" 2>&1 | grep -E "^fixed msm|window" | cut -c1-300
  ;;
affine)
  # #27: level 0 of the dense MSM in affine pairs (one inversion for each
  # segment's pairs) with runs stored, against runs stored one by one and
  # msm_t, at a 32 GiB partition's sizes, every result compared; with
  # PROFILE=1 where the time goes at 2^26 window 20; then the GPU tests
  # (pairs against blst at 2^26, in chunks, on every edge case).
  CUZK_MSM_G1= CUZK_MSM_G2= CUZK_MSM_PLAIN_G1=26 CUZK_MSM_PLAIN_WINDOWS=${WINDOWS:-18,20,22} \
      timeout 150 "$bin/msm" 2>&1 | grep -vE "^fixed msm"
  CUZK_MSM_G1= CUZK_MSM_G2= CUZK_MSM_PLAIN_G1=27 CUZK_MSM_PLAIN_WINDOWS=${WINDOWS27:-20} \
      timeout 120 "$bin/msm" 2>&1 | grep -vE "^fixed msm"
  [ "${PROFILE:-0}" = 1 ] && CUZK_MSM_G1= CUZK_MSM_G2= CUZK_MSM_PLAIN_G1=26 CUZK_MSM_PLAIN_WINDOWS=20 CUZK_MSM_PROFILE=1 \
      timeout 60 "$bin/msm" 2>&1 | grep -E "^fixed msm|window" | cut -c1-300
  # THREADS="512 2048": level 0's threads per SM (segment length) at 2^26 window 20.
  for t in ${THREADS:-}; do
    CUZK_MSM_G1= CUZK_MSM_G2= CUZK_MSM_PLAIN_G1=26 CUZK_MSM_PLAIN_WINDOWS=20 CUZK_MSM_THREADS=$t \
        timeout 60 "$bin/msm" 2>&1 | grep -E "window" | sed "s/^/threads_per_sm=$t: /"
  done
  timeout $(( $(left) - 5 )) "$bin/gpu_ops" --test-threads 1 2>&1 | grep -E "^test |test result|panicked|skipping"
  ;;
reduce)
  # #27: the bucket reduction's threads per SM (REDUCE="512 2048", the first
  # the default): dense G1 2^26 window 20 and the G1 2^24 table, every
  # result compared with msm_t's, the reduction's median (CUDA events) per
  # size; then the GPU tests.
  for r in ${REDUCE:-512 2048}; do
    CUZK_MSM_REDUCE_PER_SM=$r CUZK_MSM_PROFILE=1 CUZK_MSM_G1=24 CUZK_MSM_G2= CUZK_MSM_PLAIN_G1=26 \
        CUZK_MSM_PLAIN_WINDOWS=20 timeout 150 "$bin/msm" 2>&1 | python3 -c '
import re, statistics, sys
red = {}
for line in sys.stdin:
    m = re.match(r"fixed msm n=(\d+):.* reduce ([\d.]+) ms", line)
    if m:
        red.setdefault(int(m.group(1)), []).append(float(m.group(2)))
    elif re.match(r"G1 (dense )?2\^\d+(:| window)", line) and "made" not in line:
        print(line.rstrip()[:260])
for n, v in sorted(red.items()):
    print(f"reduce, n={n}: median {statistics.median(v):.2f} ms of {len(v)}")
' | sed "s/^/reduce_per_sm=$r: /"
  done
  timeout $(( $(left) - 5 )) "$bin/gpu_ops" --test-threads 1 2>&1 | grep -E "^test |test result|panicked|skipping"
  ;;
blocks)
  # #27: level 0 in blocks of 256 (the default), 128 and 64 threads (BLOCKS,
  # the first the default; fewer threads a block let more warps an SM fit
  # the addition's registers): the G1 and G2 2^24 tables, dense G1 2^26 and
  # 2^27 at window 20, every result compared with msm_t's, interleaved; then
  # chain 2^20 x 10 steady state (c=10 j=3, after a warm-up) at each block
  # size, every proof verified; then the GPU tests.
  blocks=${BLOCKS:-256 128 64}
  extra=$(echo "$blocks" | cut -d' ' -f2- | tr ' ' ',')
  CUZK_MSM_BLOCK=${blocks%% *} CUZK_MSM_WAYS= CUZK_MSM_BLOCKS=$extra CUZK_MSM_G1=24 CUZK_MSM_G2=24 \
      CUZK_MSM_PLAIN_G1=${PLAIN:-26,27} CUZK_MSM_PLAIN_WINDOWS=20 timeout 330 "$bin/msm" 2>&1 | grep -E "^G[12]|panicked"
  setup chain 20
  for b in $blocks; do
    env $gpu_env CUZK_PIPELINE__VARIANT=single_lock CUZK_MSM_BLOCK=$b timeout 45 "$bin/cuzk" bench --quiet \
        --workload chain --log-size 20 --partitions 10 -c 10 -j 3 --warmup 1 2>&1 | grep -E "throughput|verified" \
        | sed "s/^/block=$b: /"
  done
  timeout $(( $(left) - 5 )) "$bin/gpu_ops" --test-threads 1 2>&1 | grep -E "^test |test result|panicked|skipping"
  ;;
clocks)
  # #27: what binds level 0 (session 43: 40% of the IMAD pipe's bound, more
  # warps no help). The SM clock, power and throttle reasons every 100 ms
  # while a dense G1 2^26 MSM runs (phases from CUDA events), then the
  # multiply-rate probe (scripts/imad_rate.cu built into .carry/imad_rate),
  # summarised for the samples above 250 W.
  smi_start
  CUZK_MSM_PROFILE=1 CUZK_MSM_G1= CUZK_MSM_G2= CUZK_MSM_PLAIN_G1=26 CUZK_MSM_PLAIN_WINDOWS=20 CUZK_MSM_WAYS= \
      timeout 150 "$bin/msm" 2>&1 | grep -E "window|accumulat" | tail -4
  [ -x "$bin/imad_rate" ] && "$bin/imad_rate" | grep -E "fp_t|H100|H200"
  smi_summary
  ;;
madd)
  # #27: the mixed addition's rate apart from level 0 (scripts/madd_rate.cu
  # built into .carry/madd_rate): points from registers, one or two running
  # sums a thread, and read at random from 2^26 points, with and without the
  # next point loaded ahead; each with ptxas' registers and bounded to level
  # 0's 14 warps an SM. Level 0 at dense 2^26 takes 113 SM-clocks an
  # addition (H100).
  "$bin/madd_rate"
  ;;
stalls)
  # #27: why level 0's warps wait, from CUPTI's PC sampling
  # (scripts/stalls.cpp built into .carry/libcuzk_stalls.so, beside
  # libcupti.so.13 from PyPI's nvidia-cuda-cupti 13.0): the mixed-addition
  # probe's rates plain, then each of its modes' stall reasons, then a dense
  # G1 2^26 MSM's (window 20; level 0 and sppark's msm_t each by kernel), the
  # PCs of level 0 in $OUT/stalls_dense26.csv to join with the SASS
  # (scripts/stalls_sass.py).
  # The modules sampled go to $OUT/cubins (gzipped) for stalls_sass.py.
  mkdir -p "$out/cubins"
  stalled() { CUZK_STALLS_CUBINS=$out/cubins CUDA_INJECTION64_PATH=$bin/libcuzk_stalls.so \
      LD_LIBRARY_PATH=$bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} "$@"; }
  [ -x "$bin/madd_rate" ] && timeout 120 "$bin/madd_rate"
  [ -x "$bin/madd_rate" ] && CUZK_STALLS_MATCH=madd CUZK_STALLS_CSV=$out/stalls_madd.csv stalled timeout 150 "$bin/madd_rate" 2>&1 \
      | grep -E "^stalls|fail|error" | head -150
  CUZK_STALLS_CSV=$out/stalls_dense26.csv CUZK_MSM_PROFILE=1 CUZK_MSM_G1= CUZK_MSM_G2= CUZK_MSM_PLAIN_G1=26 \
      CUZK_MSM_PLAIN_WINDOWS=20 CUZK_MSM_WAYS= stalled timeout 240 "$bin/msm" 2>&1 \
      | grep -E "^stalls|^G1|window|accumulat|panicked" | head -150
  gzip -f "$out"/cubins/*.cubin 2>/dev/null; ls -la "$out/cubins"
  ;;
looped)
  # sppark's looped addition (uadd: one multiplication site in a loop, code
  # the instruction cache holds) against the inlined one (measured slower).
  compare_add looped
  ;;
occupancy)
  # #27: does level 0 gain from warps? Level 0 of G1 holds 134 registers
  # (the profile lines say: `| level 0: N registers, ... W warps an SM`), so
  # blocks of 64 and 128 hold 14 and 12 warps an SM (G2: 12 in either; 256
  # asked runs as 128; binaries of 54f83a8 and before had a kernel
  # per block size, 256 at 8 warps); with the fused addition at 64 beside them,
  # interleaved, every result compared with msm_t's: the G1 2^24 table,
  # dense G1 2^26 and 2^27 and G2 2^26 at window 20. Then the GPU tests.
  CUZK_MSM_PROFILE=1 CUZK_MSM_WAYS="fused add" CUZK_MSM_BLOCKS=${BLOCKS:-128} CUZK_MSM_G1=${TABLES_G1:-24} \
      CUZK_MSM_G2=${TABLES_G2:-} CUZK_MSM_PLAIN_G1=${PLAIN:-26,27} CUZK_MSM_PLAIN_G2=${PLAIN_G2:-26} \
      CUZK_MSM_PLAIN_WINDOWS=20 timeout ${MSM_S:-300} "$bin/msm" > "$out/occupancy.log" 2>&1
  grep -E "^G[12]|panicked" "$out/occupancy.log"
  grep -oE "level 0: .*" "$out/occupancy.log" | sort | uniq -c
  timeout $(( $(left) - 5 )) "$bin/gpu_ops" --test-threads 1 2>&1 | grep -E "^test |test result|panicked|skipping"
  ;;
ahead)
  # #27: level 0 asking L2 for the point AHEADS entries ahead (tuning.ahead,
  # default none) against none, and in blocks of 128 (12 warps an SM for G1
  # against 14 in 64), interleaved, every result compared with msm_t's: the
  # G1 2^24 table, dense G1 2^26 (and PLAIN) and G2 2^26 at window 20, each
  # MSM's phases and the registers it ran at. Then the GPU tests.
  CUZK_MSM_PROFILE=1 CUZK_MSM_WAYS= CUZK_MSM_AHEADS=${AHEADS:-2,8} CUZK_MSM_BLOCKS=128 CUZK_MSM_G1=${TABLES_G1:-24} \
      CUZK_MSM_G2=${TABLES_G2:-} CUZK_MSM_PLAIN_G1=${PLAIN:-26} CUZK_MSM_PLAIN_G2=${PLAIN_G2:-26} \
      CUZK_MSM_PLAIN_WINDOWS=20 timeout ${MSM_S:-300} "$bin/msm" > "$out/ahead.log" 2>&1
  grep -E "^G[12]|panicked" "$out/ahead.log"
  grep -oE "accumulate [0-9.]+ ms|level 0: .*" "$out/ahead.log" | paste - - | sort | uniq -c | head -40
  timeout $(( $(left) - 5 )) "$bin/gpu_ops" --test-threads 1 2>&1 | grep -E "^test |test result|panicked|skipping"
  ;;
fused)
  # Y3's two products under one reduction (AddForm::Fused, G1; G2 adds
  # inlined) against the inlined addition. TABLES_G1/TABLES_G2, PLAIN,
  # PLAIN_G2 pick the sizes, MSM_S bounds the bench, CHAIN=0 skips the chain.
  compare_add fused
  ;;
stored)
  # #27: runs stored into buckets zeroed per chunk (the default) against
  # added in place, where tables serve the MSMs: proofs first, then the
  # tables' MSMs side by side, then chain 2^20 x 10 steady state (c=10 j=3,
  # after a warm-up) both ways, interleaved, every proof verified.
  [ -x "$bin/gpu_proofs" ] && timeout 150 "$bin/gpu_proofs" --test-threads 1 2>&1 | grep -E "^test |test result|panicked"
  CUZK_MSM_G1=20,22,24 CUZK_MSM_G2=20,22 timeout 200 "$bin/msm" 2>&1 | grep -E "^G[12]|panicked"
  setup chain 20
  for r in 1 2; do for added in 0 1; do
    env $gpu_env CUZK_PIPELINE__VARIANT=single_lock CUZK_MSM_RUNS_ADDED=$added timeout 60 "$bin/cuzk" bench --quiet \
        --workload chain --log-size 20 --partitions 10 -c 10 -j 3 --warmup 1 2>&1 | grep -E "throughput|verified" \
        | sed "s/^/runs_added=$added: /"
  done; done
  ;;
tests)
  "$bin/cuzk" info
  # Every test's line: a failure is named, not cut off by a tail.
  "$bin/gpu_ops" --test-threads 1 2>&1 | grep -E "^test |test result|panicked|skipping"
  "$bin/gpu_proofs" --test-threads 1 2>&1 | grep -E "^test |test result|panicked|skipping"
  [ -x "$bin/pce" ] && "$bin/pce" --test-threads 1 --nocapture 2>&1 | grep -E "^test |test result|skipping|panicked"
  CUZK_MSM_G1=24 CUZK_MSM_G2= "$bin/msm" 2>&1
  ;;
ptx)
  "$bin/cuzk" info
  echo "== native sm_90 =="
  "$bin/gpu_ops" --test-threads 1 2>&1 | tail -4
  "$bin/gpu_proofs" --test-threads 1 2>&1 | tail -3
  echo "== CUDA_FORCE_PTX_JIT=1, cold JIT cache =="
  export CUDA_CACHE_PATH=/tmp/jit-cache CUDA_CACHE_MAXSIZE=4294967296
  rm -rf /tmp/jit-cache
  CUDA_FORCE_PTX_JIT=1 "$bin/cuzk" info 2>&1 | grep -E "kernels|runs the kernels|backend"
  /usr/bin/time -f "gpu_ops under the JIT, cold cache: %e s" env CUDA_FORCE_PTX_JIT=1 "$bin/gpu_ops" --test-threads 1 2>&1 | tail -5
  /usr/bin/time -f "gpu_ops under the JIT, warm cache: %e s" env CUDA_FORCE_PTX_JIT=1 "$bin/gpu_ops" --test-threads 1 2>&1 | tail -2
  CUDA_FORCE_PTX_JIT=1 "$bin/gpu_proofs" --test-threads 1 2>&1 | tail -3
  [ -x "$bin/pce" ] && CUDA_FORCE_PTX_JIT=1 "$bin/pce" --test-threads 1 2>&1 | grep -E "test result|panicked"
  du -sh /tmp/jit-cache
  ;;
chain|sha256)
  w=$section
  setup "$w" 20
  env $gpu_env "$bin/cuzk" compare $variants --workload "$w" --log-size 20 --partitions 10 -c 10 -j 3 --reps 1 \
      --markdown "$out/compare-$w.md" 2>&1 | tail -7
  env $gpu_env CUZK_PIPELINE__VARIANT=single_lock "$bin/cuzk" bench --quiet --workload "$w" --log-size 20 \
      --partitions 10 -c 4 -j 3 --waterfall "$out/wf/$w" 2>&1 | tail -26
  ;;
cpu)
  # bellperson-CPU and the CPU backend (one proof each, interleaved in one
  # run), and the GPU backend on the same workload and size: 2^18 x 10.
  for w in chain sha256; do
    setup "$w" 18
    CUZK_BENCH_WORKLOAD=$w CUZK_BENCH_LOG_SIZE=18 CUZK_BENCH_PARTITIONS=10 CUZK_BENCH_REPS=1 \
      CUZK_BENCH_PARAMS="$params/$w-k18.params" "$bin/cpu_vs_bellperson" --bench 2>&1 | tail -4 
    env $gpu_env "$bin/cuzk" bench --quiet --workload "$w" --log-size 18 --partitions 10 -c 6 -j 3 \
        2>&1 | grep -E "throughput|verified" | sed "s/^/cuzk-gpu $w 2^18: /" 
  done
  ;;
anchors)
  for w in chain sha256; do
    setup "$w" 20
    "$bin/supraseal-bench" "$params/$w-k20.params" "$w" 20 10 "${SUPRASEAL_C:-3}" 1 2>&1 | tail -3 
  done
  ;;
fil)
  export CUZK_FIL_PARAMS=/tmp/fil-2k CUZK_FIL__PARAMETER_CACHE=/tmp/fil-2k
  /usr/bin/time -f "2 KiB PoRep parameters: %e s" "$bin/cuzk" fil params --sector-size 2KiB --kinds porep --dir /tmp/fil-2k 2>&1 | tail -2
  "$bin/cuzk" fil gen --sector-size 2KiB --out /tmp/fx | head -1
  CUZK_FIL_FIXTURES=/tmp/fx CUZK_BENCH_SIDES=seal_commit_phase2,cuzk-cpu,cuzk-gpu CUZK_BENCH_REPS=3 \
    env $gpu_env CUZK_PIPELINE__VARIANT=single_lock "$bin/fil_c2" --bench 2>&1 | tail -8
  env $gpu_env CUZK_PIPELINE__VARIANT=single_lock "$bin/cuzk" bench --quiet --fixtures /tmp/fx --fil-kind porep \
      -c 8 -j 3 --waterfall "$out/wf/porep" 2>&1 | tail -14
  ;;
synth32)
  # Full synthesis takes minutes at this size and is measured once per
  # change of the full path: SYNTH32_ARGS="--reps 1" includes it.
  "$bin/cuzk" fil synth --sector-size 16KiB --layers 11 --challenges 18 ${SYNTH32_ARGS:---no-full --reps 3} \
      --json "$out/synth32.json" 2>&1 | tail -14
  ;;
chain-locks)
  # chain 2^20 x 10 with MSM tables: single_lock against two_lock (staging
  # under its own lock, overlapping the previous partition's compute),
  # interleaved; then each with its waterfall and TIMELINE.
  setup chain 20
  for r in 1 2; do for v in single_lock two_lock; do
    env $gpu_env CUZK_PIPELINE__VARIANT=$v "$bin/cuzk" bench --quiet --workload chain --log-size 20 \
        --partitions 10 -c 10 -j 3 2>&1 | grep -E "throughput|verified" | sed "s/^/$v: /"
  done; done
  for v in single_lock two_lock; do
    env $gpu_env CUZK_PIPELINE__VARIANT=$v "$bin/cuzk" bench --quiet --workload chain --log-size 20 \
        --partitions 10 -c 4 -j 3 --timeline "$out/timeline-chain-$v.log" --waterfall "$out/wf/chain-$v" 2>&1 \
        | grep -E "throughput|GPU utilisation|verdict|GPU |upload|msm|ntt" | sed "s/^/$v: /"
  done
  ;;
variants)
  for w in chain sha256; do
    setup "$w" 20
    env $gpu_env "$bin/cuzk" compare $four --workload "$w" --log-size 20 --partitions 10 -c 10 -j 3 --reps 3 \
        --markdown "$out/compare-$w.md" 2>&1 | tail -6
  done
  for v in serial single_lock two_lock throttled; do
    env $gpu_env CUZK_PIPELINE__VARIANT=$v "$bin/cuzk" bench --quiet --workload chain --log-size 20 \
        --partitions 10 -c 4 -j 3 --waterfall "$out/wf/chain-$v" 2>&1 | grep -E "throughput|GPU utilisation|verdict"
  done
  ;;
selfverify)
  setup chain 20
  for r in 1 2; do for sv in true false; do
    env $gpu_env CUZK_PIPELINE__VARIANT=single_lock CUZK_ENGINE__SELF_VERIFY=$sv "$bin/cuzk" bench --quiet \
        --workload chain --log-size 20 --partitions 10 -c 10 -j 3 2>&1 | grep throughput | sed "s/^/self_verify=$sv: /"
  done; done
  ;;
steady)
  # Steady state (--warmup 1: SRS resident, tables built): chain 2^20 x 10
  # single_lock with and without the warm-up, interleaved, then one run with
  # its TIMELINE; proofs under every variant (gpu_proofs).
  "$bin/gpu_proofs" --test-threads 1 2>&1 | grep -E "^test |test result|panicked"
  setup chain 20
  for r in 1 2; do for w in 1 0; do
    env $gpu_env CUZK_PIPELINE__VARIANT=single_lock "$bin/cuzk" bench --quiet --workload chain --log-size 20 \
        --partitions 10 -c 10 -j 3 --warmup $w 2>&1 | grep -E "throughput|verified" | sed "s/^/warmup=$w: /"
  done; done
  env $gpu_env CUZK_PIPELINE__VARIANT=single_lock "$bin/cuzk" bench --quiet --workload chain --log-size 20 \
      --partitions 10 -c 10 -j 3 --warmup 1 --timeline "$out/timeline-chain-steady.log" \
      --waterfall "$out/wf/chain-steady" 2>&1 | grep -E "throughput|GPU utilisation|verdict"
  ;;
msm)
  # Correctness first, then the phases of each MSM (CUZK_MSM_PROFILE) and
  # the edge reduction's segment length side by side, then the chain with
  # tables on and off, interleaved, and proofs under every variant.
  "$bin/gpu_ops" --test-threads 1 fixed 2>&1 | grep -E "^test |test result|panicked|left|right|fixed"
  for seg in 16 4 64; do
    echo "== edge segments of $seg"
    CUZK_MSM_EDGE_SEG=$seg CUZK_MSM_PROFILE=1 CUZK_MSM_G1=20,24 CUZK_MSM_G2=20 "$bin/msm" 2>&1 | awk '/^fixed msm/ {last[$3] = $0; next} /^G[12] 2/ {print} END {for (k in last) print last[k]}'
  done
  setup chain 20
  for r in 1 2; do for t in true false; do
    env $gpu_env CUZK_PIPELINE__VARIANT=single_lock CUZK_GPU__MSM_TABLES=$t "$bin/cuzk" bench --quiet \
        --workload chain --log-size 20 --partitions 10 -c 10 -j 3 2>&1 | grep -E "throughput|verified" | sed "s/^/msm_tables=$t: /"
  done; done
  env $gpu_env CUZK_PIPELINE__VARIANT=single_lock "$bin/cuzk" bench --quiet --workload chain --log-size 20 \
      --partitions 10 -c 4 -j 3 --waterfall "$out/wf/chain-tables" 2>&1 | tail -26
  "$bin/gpu_proofs" --test-threads 1 2>&1 | grep -E "^test |test result|panicked"
  CUZK_MSM_G1=22,26 CUZK_MSM_G2=22 "$bin/msm" 2>&1
  ;;
msm-porep)
  # One query of a 32 GiB PoRep partition as the engine runs it (prep's
  # lists, the ones by batch addition, the significant tail) with PoRep's
  # bit-heavy scalars, G1 at 2^27 and G2 at 2^25, against one dense msm_t.
  CUZK_MSM_G1= CUZK_MSM_G2= CUZK_MSM_POREP_G1=${POREP_G1:-27} CUZK_MSM_POREP_G2=${POREP_G2:-25} \
      timeout $(( $(left) - 10 )) "$bin/msm" 2>&1 | grep -v "^$"
  ;;
pce)
  # sha256 2^20 x 10 after a warm-up proof: classic synthesis against
  # pre-compiled constraints on the host and on the device (witness computed
  # natively), then each one's stages and waterfall, then SupraSeal, in one run.
  setup sha256 20
  env $gpu_env "$bin/cuzk" compare configs/single_lock.toml configs/pce.toml configs/pce_gpu.toml --workload sha256 \
      --log-size 20 --partitions 10 -c 10 -j 3 --warmup 1 --reps 2 --markdown "$out/compare-pce.md" 2>&1 | tail -5
  for v in single_lock pce pce_gpu; do
    env $gpu_env CUZK_PIPELINE__VARIANT=$v "$bin/cuzk" bench --quiet --workload sha256 --log-size 20 \
        --partitions 10 -c 10 -j 3 --warmup 1 --waterfall "$out/wf/sha256-$v" 2>&1 \
        | grep -E "throughput|verified|GPU utilisation|verdict|^synth|^prep|^gpu|^b_g2" | sed "s/^/$v: /"
  done
  [ -x "$bin/supraseal-bench" ] && "$bin/supraseal-bench" "$params/sha256-k20.params" sha256 20 10 "${SUPRASEAL_C:-3}" 1 2>&1 | tail -2
  ;;
check)
  # GPU tests (proofs under every variant, pce_gpu with the matrices off the
  # device), the pre-compiled constraint tests, then sha256 2^20 x 10 under
  # pce_gpu with the matrices on and off the device (a, b, c on the host).
  "$bin/gpu_proofs" --test-threads 1 2>&1 | grep -E "^test |test result|panicked"
  [ -x "$bin/pce" ] && "$bin/pce" --test-threads 1 2>&1 | grep -E "^test |test result|panicked"
  setup sha256 20
  for m in true false; do
    env $gpu_env CUZK_PIPELINE__VARIANT=pce_gpu CUZK_GPU__PCE_MATRICES=$m "$bin/cuzk" bench --quiet --workload sha256 \
        --log-size 20 --partitions 10 -c 10 -j 3 --warmup 1 2>&1 \
        | grep -E "throughput|verified|peak RSS|^synth|^gpu" | sed "s/^/pce_matrices=$m: /"
  done
  ;;
windows)
  # The fixed-base MSM's window width against the default (size - 2 bits),
  # G1 and G2 at 2^20 and 2^22, each checked against sppark's result.
  for w in ${WINDOWS:-18 19 20 21 22}; do
    echo "== window $w"
    CUZK_MSM_WINDOW=$w CUZK_MSM_G1=20,22 CUZK_MSM_G2=20,22 "$bin/msm" 2>&1 | grep -E "^G[12] 2"
  done
  ;;
pairs)
  # Level 0 of the fixed-base MSM one by one (the default) against in pairs:
  # the fixed-base tests against blst (in pairs), every MSM size both ways and
  # sppark side by side, the chain 2^20 x 10 in the steady state both ways,
  # interleaved; 2^26 over a 3-copy table; a waterfall; gpu_proofs.
  export CUZK_MSM_PAIRS=1
  timeout 150 "$bin/gpu_ops" --test-threads 1 fixed 2>&1 | grep -E "^test |test result|panicked|left|right"
  unset CUZK_MSM_PAIRS
  timeout 150 env CUZK_MSM_G1=20,22,24,26 CUZK_MSM_G2=20,22 "$bin/msm" 2>&1 | grep -E "^G[12] 2|skipping|panicked"
  # chain 2^20's parameters take over a minute to make here (60 s was not enough).
  timeout 240 "$bin/cuzk" setup --workload chain --log-size 20 --out "$params" 2>&1 | tail -1
  for r in 1 2; do for p in 0 1; do
    timeout 50 env $gpu_env CUZK_PIPELINE__VARIANT=single_lock CUZK_MSM_PAIRS=$p "$bin/cuzk" bench --quiet \
        --workload chain --log-size 20 --partitions 10 -c 10 -j 3 --warmup 1 2>&1 | grep -E "throughput|verified" | sed "s/^/pairs=$p: /"
  done; done
  timeout 45 env CUZK_MSM_COPIES=3 CUZK_MSM_G1=26 CUZK_MSM_G2= "$bin/msm" 2>&1 | grep -E "^G1 2|panicked"
  timeout 45 env $gpu_env CUZK_PIPELINE__VARIANT=single_lock "$bin/cuzk" bench --quiet --workload chain --log-size 20 \
      --partitions 10 -c 10 -j 3 --warmup 1 --waterfall "$out/wf/chain-pairs" 2>&1 | grep -E "throughput|GPU utilisation|verdict|^gpu|^b_g2"
  timeout 120 "$bin/gpu_proofs" --test-threads 1 2>&1 | grep -E "^test |test result|panicked"
  ;;
footprint)
  # Whether the fixed-base MSM's level 0 is bound by its random table reads:
  # G1 2^24 over tables of 12, 6, 4, 3 and 2 copies (16.5 down to 1.5 GiB),
  # each phase's device time (CUZK_MSM_PROFILE) of the last repetition, one
  # by one and in pairs (the benchmark times them in that order).
  for c in 12 6 4 3 2; do
    echo "== $c copies"
    CUZK_MSM_COPIES=$c CUZK_MSM_PROFILE=1 CUZK_MSM_G1=24 CUZK_MSM_G2= "$bin/msm" 2>&1 \
      | awk '/^fixed msm/ {prev = last; last = $0; next} /^G1 2/ {print} END {print "one by one: " prev; print "in pairs:   " last}'
  done
  ;;
pce-tables)
  # sha256 2^20 x 10 with MSM tables: classic synthesis against pce_gpu, then
  # SupraSeal, in one run; a 2^26 G1 MSM over a smaller table.
  setup sha256 20
  env $gpu_env "$bin/cuzk" compare configs/single_lock.toml configs/pce_gpu.toml --workload sha256 \
      --log-size 20 --partitions 10 -c 10 -j 3 --reps 1 --markdown "$out/compare-pce-tables.md" 2>&1 | tail -4
  env $gpu_env CUZK_PIPELINE__VARIANT=pce_gpu "$bin/cuzk" bench --quiet --workload sha256 --log-size 20 \
      --partitions 10 -c 10 -j 3 --waterfall "$out/wf/sha256-pce_gpu-tables" 2>&1 | grep -E "throughput|verified|GPU utilisation|verdict|SYNTH|GPU "
  [ -x "$bin/supraseal-bench" ] && "$bin/supraseal-bench" "$params/sha256-k20.params" sha256 20 10 "${SUPRASEAL_C:-3}" 1 2>&1 | tail -2
  CUZK_MSM_TABLE_GIB=24 CUZK_MSM_G1=26 CUZK_MSM_G2= "$bin/msm" 2>&1 | grep "^G1 2"
  ;;
side-by-side)
  # One parameter file; cuzk on the GPU (every variant), SupraSeal and
  # bellperson on the CPU; one table of s/proof at the end.
  w=${2:?workload} k=${3:?log size} p=${4:?partitions} c=${5:?proofs} j=${6:?in flight}
  setup "$w" "$k"
  file="$params/$w-k$k.params"
  env $gpu_env "$bin/cuzk" compare $variants --workload "$w" --log-size "$k" --partitions "$p" \
      -c "$c" -j "$j" --reps 1 --params "$file" --json /tmp/sbs.json > /tmp/sbs-cuzk.txt 2>&1
  "$bin/supraseal-bench" "$file" "$w" "$k" "$p" "${SUPRASEAL_C:-$c}" 1 > /tmp/sbs-supraseal.txt 2>&1
  CUZK_BENCH_WORKLOAD=$w CUZK_BENCH_LOG_SIZE=$k CUZK_BENCH_PARTITIONS=$p CUZK_BENCH_REPS=1 \
      CUZK_BENCH_PARAMS="$file" "$bin/cpu_vs_bellperson" --bench > /tmp/sbs-cpu.txt 2>&1
  echo "$w 2^$k x $p partitions, parameters $file"
  printf '%-34s %10s\n' prover s/proof
  python3 - <<'PY'
import json, re
for r in json.load(open("/tmp/sbs.json")):
    print(f"{'cuzk gpu ' + r['variant']:<34} {r['s_per_proof']:>10.3f}")
s = open("/tmp/sbs-supraseal.txt").read()
m = re.search(r"([0-9.]+) s/proof.*verified (\d+)/(\d+)", s)
print(f"{'supraseal (j=1)':<34} {float(m.group(1)):>10.3f}" if m else "supraseal: " + s[-300:])
c = open("/tmp/sbs-cpu.txt").read()
for name, label in [("bellperson", "bellperson cpu (c=1)"), ("cuzk \\(cpu\\)", "cuzk cpu (c=1)")]:
    m = re.search(name + r"\s+([0-9.]+)", c)
    print(f"{label:<34} {float(m.group(1)):>10.3f}" if m else c[-300:])
PY
  ;;
esac
