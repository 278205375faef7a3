#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""What an idle connection costs afio-echo in memory: the server's RSS
before any client, then with N connections open and idle, each after one
echo of SIZE bytes, per connection.  --burst sends on every connection
before reading any echo back (every connection mid-echo at once), instead
of one connection at a time; pool buffers touched then stay resident.
Holds /tmp/afio-bench.lock, as every benchmark here does.

  echo-idle-rss.py [--build DIR] [--conns N] [--size BYTES] [--burst]
                   [--recv own|pooled ...] [-- MORE AFIO-ECHO OPTIONS]

Prints one line per receive style:
  recv=pooled conns=19900 size=1024 burst=0 rss_before_kb=... rss_idle_kb=...
  bytes_per_conn=..."""
import argparse
import fcntl
import os
import resource
import socket
import subprocess
import sys
import time


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS for %d" % pid)


def recv_exactly(s, n):
    got = 0
    while got < n:
        d = s.recv(n - got)
        if not d:
            raise RuntimeError("the server closed a connection")
        got += len(d)


def settle(pid):
    """RSS once it stops moving: the server may still be finishing sends."""
    last = rss_kb(pid)
    for _ in range(20):
        time.sleep(0.25)
        now = rss_kb(pid)
        if now == last:
            return now
        last = now
    return last


def measure(a, recv, extra):
    cmd = [os.path.join(a.build, "examples", "afio-echo"), "--port", "0",
           "--max-conn", str(a.conns + 10), "--recv", recv] + extra
    srv = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    conns = []
    try:
        port = int(srv.stdout.readline().rsplit(":", 1)[1])
        before = settle(srv.pid)
        msg = b"x" * a.size
        for _ in range(a.conns):
            s = socket.create_connection(("127.0.0.1", port))
            conns.append(s)
            if not a.burst:
                s.sendall(msg)
                recv_exactly(s, a.size)
        if a.burst:
            for s in conns:
                s.sendall(msg)
            for s in conns:
                recv_exactly(s, a.size)
        idle = settle(srv.pid)
        print("recv=%s conns=%d size=%d burst=%d rss_before_kb=%d rss_idle_kb=%d "
              "bytes_per_conn=%.0f" % (recv, a.conns, a.size, int(a.burst), before, idle,
                                       (idle - before) * 1024.0 / a.conns), flush=True)
    finally:
        for s in conns:
            s.close()
        srv.terminate()
        srv.wait(timeout=30)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(os.path.dirname(__file__), "..", "build"))
    ap.add_argument("--conns", type=int, default=19900)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--burst", action="store_true")
    ap.add_argument("--recv", nargs="+", default=["own", "pooled"])
    ap.add_argument("extra", nargs="*", help="more afio-echo options, after --")
    a = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if a.conns + 50 > hard:
        sys.exit("echo-idle-rss.py: RLIMIT_NOFILE %d is too low for %d connections"
                 % (hard, a.conns))
    with open("/tmp/afio-bench.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for recv in a.recv:
            measure(a, recv, a.extra)
    return 0


if __name__ == "__main__":
    sys.exit(main())
