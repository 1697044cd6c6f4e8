#!/bin/bash
# Loops one tessera-cli integration test file (its release test binary),
# keeping the full output of every failing run.
# usage: janus25b-loop.sh BINARY RUNS OUTDIR [test filter...]
bin=$1; runs=$2; out=$3; shift 3
mkdir -p "$out"
for i in $(seq 1 "$runs"); do
  t0=$(date +%s.%N)
  nice -n 10 "$bin" "$@" > "$out/run.$i.txt" 2>&1
  rc=$?
  t1=$(date +%s.%N)
  load=$(cut -d' ' -f1 /proc/loadavg)
  printf '{"run":%d,"rc":%d,"secs":%.2f,"load":%s,"utc":"%s"}\n' "$i" "$rc" "$(echo "$t1 - $t0" | bc)" "$load" "$(date -u +%H:%M:%S)" >> "$out/summary.jsonl"
  if [ $rc -eq 0 ]; then rm "$out/run.$i.txt"; else mv "$out/run.$i.txt" "$out/fail.$i.txt"; fi
done
