#!/bin/bash
# janus25b-loop.sh with janus25b-port-churn.py beside it, both in a network
# namespace of their own (the churn's ports touch no one else's tests).
# usage: janus25b-churn-loop.sh BINARY RUNS OUTDIR RATE HOLD
here=$(dirname "$(readlink -f "$0")")
exec unshare -n bash -c "
  ip link set lo up
  python3 $here/janus25b-port-churn.py $4 $5 100000 2> $3.churn.txt &
  churn=\$!
  $here/janus25b-loop.sh $1 $2 $3
  kill \$churn
"
