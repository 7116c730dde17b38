"""What the benchmarks that run `foldline serve` share: a server started on
a free loopback port (its address read from its log) and a process's CPU
time from /proc."""
import os
import re
import subprocess
import sys
import threading


def start(binary, journal, members, extra=()):
    """`foldline serve` on `journal` for the members in the file `members`
    (with the arguments `extra` too): the process and its base URL; its log
    is read on so it never blocks."""
    server = subprocess.Popen([binary, "--journal", journal, "serve", "--members", members, "--listen", "127.0.0.1:0",
                               *extra], stderr=subprocess.PIPE, text=True)
    line = ""
    while "listening on" not in line:
        line = server.stderr.readline()
        if not line and server.poll() is not None:
            sys.exit("foldline serve did not start")
    threading.Thread(target=server.stderr.read, daemon=True).start()
    return server, re.search(r"listening on (http://\S+)", line).group(1)


def cpu_ms(pid):
    """User and system CPU time of process `pid` so far, in milliseconds."""
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) * 1000 / os.sysconf("SC_CLK_TCK")
