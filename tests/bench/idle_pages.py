"""What chat pages left open on a conversation cost `foldline serve`.
While nobody writes: each page drawing the whole timeline every 1.5 s (the
chat page before timeline pages and tags) vs following it as the chat page
does now (its latest 200 items once, then a long poll of `GET …/timeline`
with `If-None-Match`, answered `304` without drawing). While a member
writes every second: N pages following it vs one (the pages that wake on a
write share one drawing). The server's CPU time (user + system, from
/proc) over the same seconds, in one run. Prints one JSON object.

    python3 tests/bench/idle_pages.py FOLDLINE [--quick]
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

binary, quick = sys.argv[1], "--quick" in sys.argv
messages, pages, seconds = (2000, 5, 10.0) if quick else (5000, 10, 20.0)
TOKEN = "bench-token"


def call(url, body=None, headers=None):
    req = urllib.request.Request(url, data=body, headers={"Authorization": f"Bearer {TOKEN}", **(headers or {})})
    if body is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.headers.get("etag"), r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("etag"), e.read()


with tempfile.TemporaryDirectory() as d:
    entry = subprocess.run([binary, "hash-token", "alice"], input=TOKEN, capture_output=True, text=True, check=True).stdout.strip()
    open(f"{d}/members.json", "w").write(f'{{"members":[{entry}]}}')
    server, address = start(binary, f"{d}/j.db", f"{d}/members.json")
    try:
        base = address + "/api/conversations/idle"
        for start in range(0, messages, 100):
            batch = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"Message {i}: " + "about the plan " * 12}
                     for i in range(start, min(start + 100, messages))]
            status, _, body = call(f"{base}/messages", json.dumps(batch).encode())
            assert status == 201, body
        # Let the automatic checks finish: the tag stops moving.
        last = None
        while True:
            time.sleep(1.0)
            _, tag, _ = call(f"{base}/timeline?limit=1")
            if tag == last:
                break
            last = tag

        def measure(page):
            stop = time.time() + seconds
            sent = [0, 0]
            threads = [threading.Thread(target=page, args=(stop, sent)) for _ in range(pages)]
            t0 = cpu_ms(server.pid)
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            return cpu_ms(server.pid) - t0, sent

        def polling(stop, sent):
            while time.time() < stop:
                _, _, body = call(f"{base}/timeline")
                sent[0] += 1
                sent[1] += len(body)
                time.sleep(1.5)

        first = {}
        for i in range(pages):  # each following page's first answer, before the clock
            _, first[i], _ = call(f"{base}/timeline?limit=200")
        order = iter(range(pages))

        def following(stop, sent):
            tag = first[next(order)]
            while (left := stop - time.time()) > 0:
                status, t, body = call(f"{base}/timeline?limit=200&wait={max(1, int(left * 1000))}", headers={"If-None-Match": tag})
                tag = t or tag
                sent[0] += 1
                sent[1] += len(body)

        poll_ms, poll_sent = measure(polling)
        follow_ms, follow_sent = measure(following)

        # One drawing of a page no request asked for before, and of it all.
        t = time.perf_counter()
        call(f"{base}/timeline?limit=199")
        page_ms = (time.perf_counter() - t) * 1e3
        t = time.perf_counter()
        call(f"{base}/timeline")
        whole_ms = (time.perf_counter() - t) * 1e3
        idle_pages = pages

        def room(n):
            # n pages following while a member writes every second.
            global pages, order
            pages = n
            for i in range(n):
                _, first[i], _ = call(f"{base}/timeline?limit=200")
            order = iter(range(n))
            stop = time.time() + seconds

            def writer():
                k = 0
                while time.time() < stop - 1:
                    call(f"{base}/messages", json.dumps({"role": "user", "content": f"In the room, {k}."}).encode())
                    k += 1
                    time.sleep(1.0)
            w = threading.Thread(target=writer)
            w.start()
            ms, _ = measure(following)
            w.join()
            return ms

        room_pages = pages
        room_many_ms = room(room_pages)
        room_one_ms = room(1)
    finally:
        server.terminate()
        server.wait()
print(json.dumps({
    "messages": messages, "pages": idle_pages, "seconds": seconds,
    "idle_poll_cpu_ms": poll_ms, "idle_poll_requests": poll_sent[0], "idle_poll_bytes": poll_sent[1],
    "idle_follow_cpu_ms": follow_ms, "idle_follow_requests": follow_sent[0], "idle_follow_bytes": follow_sent[1],
    "timeline_page_ms": page_ms, "timeline_whole_ms": whole_ms,
    "room_pages": room_pages, "room_many_cpu_ms": room_many_ms, "room_one_cpu_ms": room_one_ms,
}))
