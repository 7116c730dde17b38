"""The `foldline` program's start: one command (`context` of a
two-message conversation) with the compiled core read from the compile cache vs compiled
in the process (`--compile-cache off`), in turns. Prints one JSON object.

    python3 tests/bench/cli_start.py FOLDLINE [--quick]
"""
import json
import subprocess
import sys
import tempfile
import time

binary, quick = sys.argv[1], "--quick" in sys.argv
runs = 7 if quick else 21
with tempfile.TemporaryDirectory() as d:
    base = [binary, "--journal", f"{d}/j.db", "--conversation", "c"]
    # `context` is about a conversation already written.
    subprocess.run(base + ["import", "--no-compact", "-"], input=b'[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"}]', check=True, capture_output=True)

    def once(cache):
        t = time.perf_counter()
        subprocess.run(base + ["--compile-cache", cache, "context"], check=True, capture_output=True)
        return (time.perf_counter() - t) * 1e3

    once(f"{d}/cache")  # writes the cache entry
    cached, compiled = [], []
    for _ in range(runs):
        cached.append(once(f"{d}/cache"))
        compiled.append(once("off"))
median = lambda xs: sorted(xs)[len(xs) // 2]
print(json.dumps({"cli_start_cached_ms": median(cached), "cli_start_compiled_ms": median(compiled)}))
