"""How soon a long poll on one `foldline serve` replica hears a write made
through another, on one PostgreSQL database: two replicas, then N times a
new conversation, a long poll of `GET …/events?wait=20000` on the first and
a message posted through the second; the time from the post's answer to
the poll's. Prints one JSON object (median, p90, max in ms).

    python3 tests/bench/replica_wake.py FOLDLINE POSTGRES_URL [N]

Give each build a database of its own: a build applies its schema only to
a database that has not seen its version.
"""
import json
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

from serving import start

binary, url = sys.argv[1], sys.argv[2]
samples = int(sys.argv[3]) if len(sys.argv) > 3 else 20


def call(base, path, body=None):
    req = urllib.request.Request(base + path, data=body, headers={"Authorization": "Bearer t"})
    if body is not None:
        req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


with tempfile.TemporaryDirectory() as d:
    entry = subprocess.run([binary, "hash-token", "m"], input="t", capture_output=True, text=True, check=True).stdout
    open(f"{d}/members.json", "w").write('{"members":[' + entry.strip() + "]}")
    replicas = [start(binary, url, f"{d}/members.json", ["--replica", name]) for name in ("r1", "r2")]
    (_, first), (_, second) = replicas
    try:
        waited = []
        for k in range(samples):
            conv = f"/api/conversations/wake-{int(time.time() * 1000)}-{k}/"
            call(first, conv + "messages", json.dumps({"role": "user", "content": "hello"}).encode())
            time.sleep(0.6)  # its automatic check has written
            after = call(first, conv + "events?after=0")["last"]
            answered = {}

            def poll():
                got = call(first, conv + f"events?after={after}&wait=20000")
                answered["at"], answered["events"] = time.perf_counter(), len(got["events"])

            t = threading.Thread(target=poll)
            t.start()
            time.sleep(0.3)  # the poll waits
            call(second, conv + "messages", json.dumps({"role": "user", "content": "from the other"}).encode())
            posted = time.perf_counter()
            t.join()
            assert answered["events"] >= 1, answered
            waited.append(max(0.0, answered["at"] - posted) * 1000)
        waited.sort()
        print(json.dumps({"samples": samples, "median_ms": round(waited[len(waited) // 2], 1),
                          "p90_ms": round(waited[int(len(waited) * 0.9)], 1), "max_ms": round(waited[-1], 1)}))
    finally:
        for server, _ in replicas:
            server.terminate()
            server.wait()
