"""What long polls waiting on other conversations cost `foldline serve`'s
appends. N members each follow a conversation of their own with a long
poll of `GET …/events?wait=` (a chat page per member, nobody writing there)
while 4 clients append to 4 other conversations; the appends per second
with the N polls waiting vs with none, each on a fresh server, in one run;
and the server's CPU per second while the polls wait and nobody writes.
A write should wake the polls of its own conversation only. Prints one JSON
object.

    python3 tests/bench/idle_polls.py FOLDLINE [N] [--quick]
"""
import json
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

from serving import cpu_ms, start

binary = sys.argv[1]
numbers = [a for a in sys.argv[2:] if a.isdigit()]
quick = "--quick" in sys.argv
pollers = int(numbers[0]) if numbers else (100 if quick else 300)
writers, appends = 4, (60 if quick else 150)
IDLE_S = 2.0


def call(url, token, body=None, timeout=60):
    req = urllib.request.Request(url, data=body, headers={"Authorization": f"Bearer {token}"})
    if body is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def run(waiting):
    """Appends per second and the server's CPU per append with `waiting` polls open."""
    with tempfile.TemporaryDirectory() as d:
        members = [subprocess.run([binary, "hash-token", f"m{i}"], input=f"t{i}", capture_output=True,
                                  text=True, check=True).stdout.strip() for i in range(waiting + 1)]
        open(f"{d}/members.json", "w").write('{"members":[' + ",".join(members) + "]}")
        server, address = start(binary, f"{d}/j.db", f"{d}/members.json")
        try:
            base = address + "/api/conversations/"
            stop, answered, ready = threading.Event(), [0], threading.Barrier(waiting + 1)

            def follow(i):
                conv, token = f"page{i}", f"t{i}"
                status, body = call(base + conv + "/messages", token, json.dumps({"role": "user", "content": "hi"}).encode())
                assert status == 201, (status, body)
                # The automatic check writes the conversation's frontier
                # after the first message: follow from after it.
                while True:
                    page = json.loads(call(base + conv + "/events?after=0", token)[1])
                    if any(e["event"]["type"] == "frontier" for e in page["events"]):
                        break
                    time.sleep(0.05)
                after = page["last"]
                ready.wait()
                while not stop.is_set():
                    status, body = call(base + conv + f"/events?after={after}&wait=25000", token, timeout=40)
                    assert status == 200, (status, body)
                    after = json.loads(body)["last"]
                    answered[0] += 1

            threads = [threading.Thread(target=follow, args=(i,), daemon=True) for i in range(waiting)]
            for t in threads:
                t.start()
            ready.wait()
            time.sleep(1.0)  # every poll waiting
            # The server's CPU while the polls wait and nobody writes.
            c0 = cpu_ms(server.pid)
            time.sleep(IDLE_S)
            idle = (cpu_ms(server.pid) - c0) / IDLE_S
            token = f"t{waiting}"

            def write(w):
                for i in range(appends):
                    status, body = call(base + f"writer{w}/messages", token,
                                        json.dumps({"role": "user", "content": f"message {i}"}).encode())
                    assert status == 201, (status, body)

            t0, c0 = time.perf_counter(), cpu_ms(server.pid)
            ws = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
            for t in ws:
                t.start()
            for t in ws:
                t.join()
            seconds, cpu = time.perf_counter() - t0, cpu_ms(server.pid) - c0
            stop.set()
            return writers * appends / seconds, cpu / (writers * appends), answered[0], idle
        finally:
            server.terminate()
            server.wait()


none = run(0)
many = run(pollers)
print(json.dumps({
    "pollers": pollers,
    "appends_per_s_none": round(none[0], 1),
    "appends_per_s_polling": round(many[0], 1),
    "server_cpu_ms_per_append_none": round(none[1], 2),
    "server_cpu_ms_per_append_polling": round(many[1], 2),
    # The server's CPU per second while the polls wait and nobody writes:
    # what following conversations costs when nothing happens.
    "server_cpu_ms_per_s_idle_none": round(none[3], 1),
    "server_cpu_ms_per_s_idle_polling": round(many[3], 1),
    # Polls answered while the others wrote: none should be (nobody wrote to theirs).
    "polls_answered_meanwhile": many[2],
}))
