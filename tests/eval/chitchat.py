"""Export public dialogue data for the summary evaluation.

The MIT chitchat dataset (PyPI `chitchat-dataset`, 7,168 human
conversations): the first N conversations by id, one after another, as one
long chat in JSON Lines of OpenAI-style messages (the first sender of each
conversation is the user). Deterministic: same package version, same file.
"""
import json
import sys

import chitchat_dataset as ccc

out, n = sys.argv[1], int(sys.argv[2])
data = ccc.Dataset()
with open(out, "w") as f:
    for key in sorted(data.keys())[:n]:
        convo = data[key]["messages"]
        if not convo:
            continue
        first = convo[0][0]["sender"]
        for turn in convo:
            text = " ".join(m["text"].strip() for m in turn if m["text"].strip())
            if not text:
                continue
            role = "user" if turn[0]["sender"] == first else "assistant"
            f.write(json.dumps({"role": role, "content": text}) + "\n")
