"""Two `foldline serve` replicas on one PostgreSQL database, each killed
with SIGKILL at random moments and started again: a member writes through
either (each message with an Idempotency-Key, retried on either until
answered), asks for /compact through either every second or so, and follows
each accepted task's events to its end — resumed with Last-Event-ID on
either replica. Then: every message stored exactly once, every accepted
task ended in the journal and on its stream, the chain verifies, and the
conversation still compacts. Prints one JSON line; exits 1 if any fails.
Starts its own PostgreSQL server (Debian's binaries, as `postgres` when
root) unless given a database URL.

    python3 tests/soak/kill_replicas.py target/release/foldline [kills=30] [postgres://…]
"""
import glob, json, os, random, re, shutil, signal, subprocess, sys, tempfile, threading, time, urllib.request, urllib.error
binary = sys.argv[1]
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 30

def own_postgres():
    """A fresh server in a temp dir on a free loopback port: its URL and a stop function."""
    bin = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))[-1].rsplit("/", 1)[0]
    d = tempfile.mkdtemp(prefix="foldline-pg-")
    root = os.geteuid() == 0
    if root: shutil.chown(d, "postgres", "postgres")
    def run(*args):
        cmd = " ".join(f"'{a}'" for a in args)
        subprocess.run(["su", "postgres", "-s", "/bin/sh", "-c", cmd] if root else ["/bin/sh", "-c", cmd], check=True, capture_output=True)
    import socket
    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
    run(f"{bin}/initdb", "-D", f"{d}/data", "-U", "foldline", "--auth=trust", "-E", "UTF8", "--no-sync")
    run(f"{bin}/pg_ctl", "-D", f"{d}/data", "-o", f"-p {port} -k {d} -c listen_addresses=127.0.0.1 -c fsync=off", "-l", f"{d}/log", "-w", "start")
    def stop():
        run(f"{bin}/pg_ctl", "-D", f"{d}/data", "-m", "immediate", "stop")
        shutil.rmtree(d, ignore_errors=True)
    return f"postgres://foldline@127.0.0.1:{port}/postgres", stop

if len(sys.argv) > 3: pgurl, stop_pg = sys.argv[3], (lambda: None)
else: pgurl, stop_pg = own_postgres()
TOKEN = "chaos-token"
d = tempfile.mkdtemp()
entry = subprocess.run([binary, "hash-token", "alice"], input=TOKEN, capture_output=True, text=True, check=True).stdout.strip()
open(f"{d}/m.json", "w").write(f'{{"members":[{entry}]}}')
decl = {"targetId": "assistant", "compactorId": "assistant-compactor", "budget": {"kind": "chars", "trigger": 6000, "retain": 2000}, "summary": {"maxChars": 600}}
open(f"{d}/decl.json", "w").write(json.dumps(decl))
ports = {"a": random.randint(20000, 30000), "b": random.randint(30001, 40000)}
conv = f"chaos{random.randint(0, 10**9)}"
def base(r): return f"http://127.0.0.1:{ports[r]}/api/conversations/{conv}"
def start(r):
    p = subprocess.Popen([binary, "--journal", pgurl, "--declaration", f"{d}/decl.json", "serve", "--members", f"{d}/m.json", "--listen", f"127.0.0.1:{ports[r]}", "--replica", r, "--lease-ms", "3000", "--condense-per-minute", "1000"], stderr=open(f"{d}/{r}.log", "a"))
    for _ in range(200):
        try:
            urllib.request.urlopen(urllib.request.Request(f"{base(r)}/timeline", headers={"Authorization": f"Bearer {TOKEN}"}), timeout=2); return p
        except urllib.error.HTTPError: return p
        except Exception: time.sleep(0.05)
    return p
def call(url, body=None, headers=None, timeout=30, method=None):
    req = urllib.request.Request(url, data=body, method=method, headers={"Authorization": f"Bearer {TOKEN}", **(headers or {})})
    if body is not None: req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r: return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e: return e.code, e.headers, e.read()
stop = False; sent = []; errors = []; tasks = {}; lock = threading.Lock(); answered = {}
def saw(what, status):
    with lock: answered[f"{what} {status}"] = answered.get(f"{what} {status}", 0) + 1
def writer():
    k = 0
    while not stop:
        body = json.dumps({"role": "user" if k % 2 == 0 else "assistant", "content": f"chaos message {k}: " + "the plan in detail " * 20}).encode()
        while True:
            r = random.choice("ab")
            try:
                s, _, b = call(f"{base(r)}/messages", body, {"Idempotency-Key": f"k{k}"})
                saw("append", s)
                if s == 201: break
                if s not in (408, 409, 500, 503): errors.append(("append", s, b[:200])); break
            except Exception: saw("append", "unreachable")
            time.sleep(0.05)
        sent.append(k); k += 1; time.sleep(0.03)
def follow(task, events_path):
    last = None; seen = []
    deadline = time.time() + 120
    while time.time() < deadline:
        r = random.choice("ab")
        try:
            req = urllib.request.Request(f"http://127.0.0.1:{ports[r]}{events_path}", headers={"Authorization": f"Bearer {TOKEN}", **({"Last-Event-ID": str(last)} if last else {})})
            with urllib.request.urlopen(req, timeout=30) as res:
                ev = None
                for line in res:
                    line = line.decode().rstrip("\n")
                    if line.startswith("id:"): last = int(line[3:].strip())
                    elif line.startswith("event:"): ev = line[6:].strip()
                    elif line == "" and ev:
                        seen.append(ev); ev = None
                        if seen[-1] in ("completed", "failed"):
                            with lock: tasks[task] = seen
                            return
        except Exception: time.sleep(0.2)
    with lock: tasks[task] = seen + ["(no end)"]
followers = []
def condenser():
    while not stop:
        time.sleep(random.uniform(0.5, 1.5))
        r = random.choice("ab")
        try:
            s, _, b = call(f"{base(r)}/condense", method="POST", body=b"")
            saw("condense", s if s != 409 else f"409 {json.loads(b)['error']['code']}")
        except Exception: saw("condense", "unreachable"); continue
        if s == 202:
            j = json.loads(b); t = threading.Thread(target=follow, args=(j["task"], j["events"])); t.start(); followers.append(t)
            with lock: tasks.setdefault(j["task"], [])
        elif s not in (409, 429, 500, 503): errors.append(("condense", s, b[:200]))
servers = {r: start(r) for r in "ab"}
threads = [threading.Thread(target=writer), threading.Thread(target=condenser)]
for t in threads: t.start()
kills = 0
for n in range(ROUNDS):
    time.sleep(random.uniform(0.5, 2.5))
    r = random.choice("ab")
    servers[r].send_signal(signal.SIGKILL); servers[r].wait(); kills += 1
    time.sleep(random.uniform(0, 1.0))
    servers[r] = start(r)
time.sleep(2); stop = True
for t in threads: t.join(timeout=60)
for t in followers: t.join(timeout=150)
# After the storm: one more round of messages compacts as usual.
for k in range(len(sent), len(sent) + 30):
    s, _, b = call(f"{base('a')}/messages", json.dumps({"role": "user" if k % 2 == 0 else "assistant", "content": f"chaos message {k}: " + "the plan in detail " * 20}).encode(), {"Idempotency-Key": f"k{k}"})
    if s == 201: sent.append(k)
    else: errors.append(("after", s, b[:200]))
time.sleep(5)
s, _, v = call(f"{base('b')}/verify"); vj = json.loads(v)
msgs = []; events = []; after = 0
while True:
    s, _, b = call(f"{base('a')}/events?after={after}&limit=500"); bj = json.loads(b)
    events += [e["event"] for e in bj["events"]]
    after = bj["last"]
    if not bj["more"]: break
msgs = [e for e in events if e["type"] == "message"]
texts = [m["parts"][0]["text"].split(":")[0] for m in msgs]
dup = len(texts) - len(set(texts)); missing = [k for k in sent if f"chaos message {k}" not in set(texts)]
ended = {e["taskId"]: e["state"] for e in events if e["type"] == "compactionTask"}
unended = [t for t, st in ended.items() if st == "requested"]
unfollowed = {t: s for t, s in tasks.items() if not s or s[-1] not in ("completed", "failed")}
boundaries = [e for e in events if e["type"] == "boundary"]
last_boundary_seq = max([i for i, e in enumerate(events) if e["type"] == "boundary"], default=-1)
s, _, ctx = call(f"{base('a')}/context"); cj = json.loads(ctx)
out = {"kills": kills, "sent": len(sent), "stored": len(msgs), "duplicates": dup, "missing": len(missing), "verify_ok": vj.get("ok"), "boundaries": len(boundaries), "tasks_accepted": len(tasks), "tasks_unended_in_journal": len(unended), "tasks_not_followed_to_end": len(unfollowed), "context_chars": cj["manifest"]["sizes"], "events_after_last_boundary": len(events) - 1 - last_boundary_seq, "answered": dict(sorted(answered.items())), "errors": errors[:5]}
print(json.dumps(out))
for r in "ab": servers[r].send_signal(signal.SIGTERM); servers[r].wait()
stop_pg()
ok = not dup and not missing and vj.get("ok") and not unended and not unfollowed and not errors
if not ok: print("logs in", d, "unfollowed", list(unfollowed.items())[:3])
sys.exit(0 if ok else 1)
