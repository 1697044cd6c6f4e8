#!/bin/bash
# One run of janus_cluster's kill test by hand; keeps the directory on failure.
# usage: run.sh N  (run index)
BIN=/work/wt/janus24c/target/release/tessera
N=$1
D=/tmp/j24c/run$N
rm -rf $D; mkdir -p $D
ports=($(python3 -c "
import socket
ss=[socket.socket() for _ in range(6)]
[s.bind(('127.0.0.1',0)) for s in ss]
print(' '.join(str(s.getsockname()[1]) for s in ss))
[s.close() for s in ss]"))
cat > $D/cluster.toml <<EOT
[cluster]
protocol = "janus"
run_dir = "run"
[workload]
name = "ycsb"
partitions = 2
keys_per_partition = 2000
multi_partition = 0.3
zipf_theta = 0.6
[clients]
clients = 12
hosts = 1
[wal]
fsync = false
checkpoint_mb = 1
[net]
stats_every_s = 0
EOT
for i in 0 1 2 3 4 5; do printf '[[nodes]]\nname = "s%d"\naddr = "127.0.0.1:%d"\n' $i ${ports[$i]} >> $D/cluster.toml; done
printf '[[shards]]\nreplicas = ["s0", "s1", "s2"]\n[[shards]]\nreplicas = ["s3", "s4", "s5"]\n' >> $D/cluster.toml
declare -a P
for i in 0 1 2 3 4 5; do
  TESSERA_LOG=${SLOG:-info} $BIN server --config $D/cluster.toml --node s$i >>$D/s$i.log 2>&1 &
  P[$i]=$!
done
for i in 0 1 2 3 4 5; do
  until (echo > /dev/tcp/127.0.0.1/${ports[$i]}) 2>/dev/null; do sleep 0.02; done
done
$BIN bench --runtime tcp --check --duration 5s --config $D/cluster.toml --out $D/rows.jsonl --history $D/history.jsonl >$D/bench.out 2>$D/bench.err &
B=$!
sleep 1.5
kill -9 ${P[1]}; wait ${P[1]} 2>/dev/null
cp -r $D/run $D/run-at-kill 2>/dev/null
sleep 0.3
TESSERA_LOG=${SLOG:-info} $BIN server --config $D/cluster.toml --node s1 >>$D/s1.log 2>&1 &
P[1]=$!
wait $B; rc=$?
for i in 0 1 2 3 4 5; do kill ${P[$i]} 2>/dev/null; done
wait 2>/dev/null
if [ $rc -eq 0 ] && ! grep -q "replicas differ" $D/bench.err; then echo "run $N ok $(grep -c "forgotten elsewhere" $D/s1.log) $(grep -o "janus_committed_unexecuted=[0-9]*" $D/s1.log)"; rm -rf $D; else echo "run $N FAIL rc=$rc"; fi
