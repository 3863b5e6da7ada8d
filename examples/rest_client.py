#!/usr/bin/env python3
"""A client of codecell's REST API in plain Python (the standard library only).

    codecell serve &                     # or with CODECELL_TOKENS=... set
    python3 examples/rest_client.py http://127.0.0.1:8080 [TOKEN] [OUT_DIR]

It creates a session, uploads a CSV, runs Python in the sandbox that reads it
and draws a plot, downloads the plot, streams a second program's output as
Server-Sent Events, and deletes the session.
"""

import json
import os
import sys
import urllib.error
import urllib.request


class Codecell:
    def __init__(self, base, token=None):
        self.base = base.rstrip("/")
        self.token = token

    def request(self, method, path, body=None, content_type="application/json", accept="application/json"):
        data = body
        if body is not None and content_type == "application/json":
            data = json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", content_type)
        req.add_header("Accept", accept)
        if self.token:
            req.add_header("Authorization", "Bearer " + self.token)
        try:
            return urllib.request.urlopen(req, timeout=120)
        except urllib.error.HTTPError as e:
            # Every error is an envelope: what went wrong, and what to do.
            env = json.load(e)
            raise RuntimeError(f"{e.code} {env['error_code']}: {env['message']} (hints: {env.get('hints')})") from None

    def json(self, method, path, body=None):
        with self.request(method, path, body) as resp:
            raw = resp.read()
            return json.loads(raw) if raw else None

    def upload(self, session, path, content):
        with self.request("PUT", f"/v1/sessions/{session}/files/{path}", content, "application/octet-stream") as resp:
            return json.load(resp)

    def download(self, session, path):
        with self.request("GET", f"/v1/sessions/{session}/files/{path}", accept="*/*") as resp:
            return resp.read()

    def execute(self, code, language="python", session=None):
        path = f"/v1/sessions/{session}/executions" if session else "/v1/executions"
        return self.json("POST", path, {"language": language, "code": code})

    def stream(self, code, language="python", session=None):
        """Yields (event, data) as the program writes; the last is ("result", Result)."""
        path = f"/v1/sessions/{session}/executions" if session else "/v1/executions"
        with self.request("POST", path, {"language": language, "code": code}, accept="text/event-stream") as resp:
            event, data = None, []
            for raw in resp:
                line = raw.decode().rstrip("\n")
                if line.startswith(":"):
                    continue  # a keep-alive
                if line.startswith("event:"):
                    event = line[6:].strip()
                elif line.startswith("data:"):
                    data.append(line[5:].lstrip())
                elif line == "" and event:
                    yield event, json.loads("\n".join(data))
                    event, data = None, []


def main():
    base = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8080"
    token = sys.argv[2] if len(sys.argv) > 2 and sys.argv[2] else os.environ.get("CODECELL_TOKEN")
    out_dir = sys.argv[3] if len(sys.argv) > 3 else "."
    cc = Codecell(base, token)

    ses = cc.json("POST", "/v1/sessions", {"ttl": "10m", "limits": {"timeout": "60s"}})
    print("session", ses["id"])
    cc.upload(ses["id"], "data/sales.csv", b"month,units\n1,5\n2,9\n3,4\n4,12\n")

    res = cc.execute(
        "import csv\n"
        "import matplotlib.pyplot as plt\n"
        "rows = list(csv.DictReader(open('data/sales.csv')))\n"
        "plt.bar([r['month'] for r in rows], [int(r['units']) for r in rows])\n"
        "plt.savefig('sales.png')\n"
        "{'months': len(rows), 'units': sum(int(r['units']) for r in rows)}\n",
        session=ses["id"],
    )
    print("status", res["status"], "value", json.dumps(res.get("value"), sort_keys=True))
    if res["status"] != "success":
        print(res["stderr"], file=sys.stderr)
        sys.exit(1)

    png = cc.download(ses["id"], "sales.png")
    with open(os.path.join(out_dir, "sales.png"), "wb") as f:
        f.write(png)
    print("plot", len(png), "bytes", "png" if png.startswith(b"\x89PNG") else "not a png")

    for event, data in cc.stream("for i in 1 2 3; do echo line $i; done", language="bash"):
        if event in ("stdout", "stderr"):
            print(event, repr(data["text"]))
        elif event == "result":
            print("streamed status", data["status"])

    cc.request("DELETE", f"/v1/sessions/{ses['id']}").close()
    print("deleted")


if __name__ == "__main__":
    main()
