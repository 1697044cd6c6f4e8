#!/bin/bash
# run a command; let it run RUN_MS of every PERIOD_MS (SIGSTOP/SIGCONT on its pid): a starved process
RUN=${RUN:-0.005}; STOP=${STOP:-0.045}
"$@" &
pid=$!
sleep 0.5   # load phase
while kill -0 $pid 2>/dev/null; do
  kill -STOP $pid 2>/dev/null; sleep $STOP; kill -CONT $pid 2>/dev/null; sleep $RUN
done
wait $pid; echo "rc=$?" >&2
