# A probe closed by the parent while a child forked meanwhile has not yet
# exec'd (CLOEXEC closes it only at exec): does the server's bind succeed?
import os, socket, time
P = 64007
for listening in (True, False):
    probe = socket.socket(); probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    probe.bind(("127.0.0.1", P))
    if listening: probe.listen(128)
    pid = os.fork()
    if pid == 0:
        time.sleep(0.3)               # the child's way to its exec, slowed down
        os.execv("/bin/true", ["true"])
    probe.close()                    # the probe "dropped" in the parent
    srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        srv.bind(("127.0.0.1", P)); srv.listen(8); r = "server binds and listens"
    except OSError as e:
        r = f"server: {e}"
    srv.close(); os.waitpid(pid, 0)
    print(f"{'listening' if listening else 'bound-only'} probe, child not yet exec'd: {r}")
# output (2026-11-29 18:11 UTC, in a network namespace of its own, kernel 6.18):
# listening probe, child not yet exec'd: server: [Errno 98] Address already in use
# bound-only probe, child not yet exec'd: server binds and listens
