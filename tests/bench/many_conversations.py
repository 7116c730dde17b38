"""`foldline serve`'s memory over many conversations: N conversations of 20
messages (~1.8 KB each), each appended in one request and its context asked
for, four clients at once; then as many of 30 messages each sent with an
Idempotency-Key. The server's RSS after each thousand, and what a context of
a conversation the server let go costs. Prints one JSON object.

    cargo build --release -p foldline-wasmtime --bin foldline
    python3 tests/bench/many_conversations.py target/release/foldline [conversations=4000]
"""
import concurrent.futures, json, os, re, subprocess, sys, tempfile, time, urllib.request

binary = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 4000
TOKEN = "many-token"
d = tempfile.mkdtemp()
entry = subprocess.run([binary, "hash-token", "alice"], input=TOKEN, capture_output=True, text=True, check=True).stdout.strip()
open(f"{d}/m.json", "w").write(f'{{"members":[{entry}]}}')
server = subprocess.Popen([binary, "--journal", f"{d}/j.db", "serve", "--members", f"{d}/m.json", "--listen", "127.0.0.1:0"], stderr=subprocess.PIPE, text=True)
base = None
while base is None:
    m = re.search(r"listening on (http:\S+)", server.stderr.readline())
    if m: base = m.group(1)
H = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}

def rss_mb():
    for line in open(f"/proc/{server.pid}/status"):
        if line.startswith("VmRSS"): return int(line.split()[1]) // 1024

def call(path, body=None, headers=None):
    req = urllib.request.Request(base + path, data=body, headers={**H, **(headers or {})})
    with urllib.request.urlopen(req) as r: return r.read()

def plain(i):
    body = json.dumps([{"role": "user" if k % 2 == 0 else "assistant", "content": f"conv {i} msg {k} " + "lorem ipsum dolor " * 100} for k in range(20)]).encode()
    call(f"/api/conversations/c{i}/messages", body)
    call(f"/api/conversations/c{i}/context")

def keyed(i):
    for k in range(30):
        body = json.dumps({"role": "user" if k % 2 == 0 else "assistant", "content": f"conv {i} msg {k}"}).encode()
        call(f"/api/conversations/k{i}/messages", body, {"Idempotency-Key": f"key-{i}-{k}-" + "x" * 60})

out = {"conversations": n, "rss_mb_start": rss_mb(), "plain_rss_mb": {}, "keyed_rss_mb": {}}
for name, work in (("plain_rss_mb", plain), ("keyed_rss_mb", keyed)):
    for start in range(0, n, 1000):
        with concurrent.futures.ThreadPoolExecutor(4) as ex: list(ex.map(work, range(start, min(n, start + 1000))))
        time.sleep(1)
        out[name][min(n, start + 1000)] = rss_mb()
t = time.perf_counter()
for i in range(200): call(f"/api/conversations/c{i}/context")
out["context_of_one_let_go_ms"] = round((time.perf_counter() - t) * 1e3 / 200, 2)
server.terminate(); server.wait()
print(json.dumps(out))
