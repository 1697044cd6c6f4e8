#!/usr/bin/env python3
"""Port churn beside a cluster test: the load of other test processes
whose servers take ports found by binding port 0 (the old free_ports).
Binds 127.0.0.1:0 with SO_REUSEADDR (as Rust's TcpListener::bind), listens,
holds each listener HOLD seconds, RATE new ones a second.
usage: janus25b-port-churn.py RATE HOLD SECONDS"""
import collections, socket, sys, time

rate, hold, secs = float(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
held = collections.deque()
end = time.monotonic() + secs
n = 0
while time.monotonic() < end:
    t = time.monotonic()
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    held.append((t, s))
    n += 1
    while held and held[0][0] < t - hold:
        held.popleft()[1].close()
    time.sleep(max(0.0, 1.0 / rate - (time.monotonic() - t)))
print(f"bound {n} ports", file=sys.stderr)
