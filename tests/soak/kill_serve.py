"""`foldline serve` killed at random moments: a member writing (each message
with an Idempotency-Key, retried until answered) and four chat pages
following the timeline by long poll, while the server is killed with
SIGKILL and started again twelve times. Then: every message stored exactly
once, the chain verifies, the timeline's pages walked back are the whole
timeline. Prints one JSON line; exits 1 if any of it fails.

    cargo build --release -p foldline-wasmtime --bin foldline
    python3 tests/soak/kill_serve.py target/release/foldline
"""
import json, os, random, re, signal, subprocess, sys, tempfile, threading, time, urllib.request, urllib.error
binary = sys.argv[1]; TOKEN = "chaos-token"
d = tempfile.mkdtemp()
entry = subprocess.run([binary, "hash-token", "alice"], input=TOKEN, capture_output=True, text=True, check=True).stdout.strip()
open(f"{d}/m.json", "w").write(f'{{"members":[{entry}]}}')
decl = {"targetId": "assistant", "compactorId": "assistant-compactor", "budget": {"kind": "chars", "trigger": 6000, "retain": 2000}, "summary": {"maxChars": 600}}
open(f"{d}/decl.json", "w").write(json.dumps(decl))
port = random.randint(20000, 40000)
base = f"http://127.0.0.1:{port}/api/conversations/chaos"
def start():
    p = subprocess.Popen([binary, "--journal", f"{d}/j.db", "--declaration", f"{d}/decl.json", "serve", "--members", f"{d}/m.json", "--listen", f"127.0.0.1:{port}"], stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            urllib.request.urlopen(urllib.request.Request(f"{base}/timeline", headers={"Authorization": f"Bearer {TOKEN}"}), timeout=2)
            return p
        except urllib.error.HTTPError: return p
        except Exception: time.sleep(0.05)
    return p
def call(url, body=None, headers=None, timeout=30):
    req = urllib.request.Request(url, data=body, headers={"Authorization": f"Bearer {TOKEN}", **(headers or {})})
    if body is not None: req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r: return r.status, r.headers.get("etag"), r.read()
    except urllib.error.HTTPError as e: return e.code, e.headers.get("etag"), e.read()
stop = False; sent = []; errors = []
def writer():
    k = 0
    while not stop:
        body = json.dumps({"role": "user", "content": f"chaos message {k}: " + "the plan in detail " * 20}).encode()
        while True:
            try:
                s, _, b = call(f"{base}/messages", body, {"Idempotency-Key": f"k{k}"})
                if s == 201: break
                if s not in (408, 409, 503): errors.append((s, b[:200])); break
            except Exception: pass
            time.sleep(0.1)
        sent.append(k); k += 1; time.sleep(0.05)
def page(i):
    tag = None
    while not stop:
        try:
            s, t, b = call(f"{base}/timeline?limit=20" + ("&wait=5000" if tag else ""), headers={"If-None-Match": tag} if tag else {})
            if s == 200: json.loads(b); tag = t
            elif s != 304 and s != 404: errors.append(("page", s, b[:200]))
        except Exception: time.sleep(0.2)
server = start()
threads = [threading.Thread(target=writer)] + [threading.Thread(target=page, args=(i,)) for i in range(4)]
for t in threads: t.start()
for n in range(12):
    time.sleep(random.uniform(0.4, 2.0))
    server.send_signal(signal.SIGKILL); server.wait()
    server = start()
time.sleep(2); stop = True
for t in threads: t.join(timeout=30)
time.sleep(1)
s, _, v = call(f"{base}/verify"); vj = json.loads(v)
msgs = []
after = 0
while True:
    s, _, b = call(f"{base}/events?after={after}&limit=500"); bj = json.loads(b)
    msgs += [e["event"] for e in bj["events"] if e["event"]["type"] == "message"]
    after = bj["last"]
    if not bj["more"]: break
texts = [m["parts"][0]["text"].split(":")[0] for m in msgs]
dup = len(texts) - len(set(texts))
missing = [k for k in sent if f"chaos message {k}" not in set(texts)]
whole = json.loads(call(f"{base}/timeline")[2]); walked = []; before = None
while True:
    p = json.loads(call(f"{base}/timeline?limit=7" + (f"&before={before}" if before else ""))[2]); walked = p["items"] + walked
    if "earlier" not in p: break
    before = p["earlier"]
boundaries = sum(1 for i in whole["items"] if i["type"] == "divider" and i["state"] == "completed")
print(json.dumps({"sent": len(sent), "stored": len(msgs), "duplicates": dup, "missing": len(missing), "verify_ok": vj.get("ok"), "pages_equal_whole": walked == whole["items"], "completed_dividers": boundaries, "errors": errors[:5]}))
server.send_signal(signal.SIGTERM); server.wait()
ok = not dup and not missing and len(msgs) == len(sent) and vj.get("ok") and walked == whole["items"] and not errors
sys.exit(0 if ok else 1)
