"""The peer: langchain-core's trim_messages on W1 with the same budget and an
approximate counter. Prints one JSON object."""
import json
import sys
import time

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage, trim_messages
from langchain_core.messages.utils import count_tokens_approximately

out_dir, quick = sys.argv[1], "--quick" in sys.argv
raw = json.load(open(f"{out_dir}/w1-openai-messages.json"))
messages = []
for m in raw:
    if m["role"] == "system":
        messages.append(SystemMessage(m["content"]))
    elif m["role"] == "user":
        messages.append(HumanMessage(m["content"]))
    elif m["role"] == "tool":
        messages.append(ToolMessage(m["content"], tool_call_id=m["tool_call_id"]))
    else:
        calls = [{"id": c["id"], "name": c["function"]["name"], "args": json.loads(c["function"]["arguments"])} for c in m.get("tool_calls", [])]
        messages.append(AIMessage(m["content"] or "", tool_calls=calls))


def run():
    return trim_messages(messages, max_tokens=10_000, token_counter=count_tokens_approximately,
                         strategy="last", include_system=True, start_on="human", allow_partial=False)


kept = run()
budget = 0.6 if quick else 3.0
samples, start = [], time.perf_counter()
while len(samples) < 5 or time.perf_counter() - start < budget:
    t = time.perf_counter()
    run()
    samples.append(time.perf_counter() - t)
samples.sort()
print(json.dumps({"langchain_trim_messages_us": samples[len(samples) // 2] * 1e6, "langchain_kept": len(kept), "w1_messages": len(messages)}))
