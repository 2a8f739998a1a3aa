"""A tiny OpenAI-compatible chat server on 127.0.0.1 for backend tests (threads; stops with the test).

Behaviour is scripted per request by the `plan` list: each entry is consumed in order
("ok", "503", "429", "400", "slow", "garbage", "kill": interrupt the test's main thread as a kill would,
then answer after `slow_s`); once the plan is used up every request is "ok".
An "ok" reply is `reply(body, choice_index)` (default: echo the last user message), one choice per
`n`, with fake log-probs.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeServer:
    def __init__(self, plan: list[str] | None = None, slow_s: float = 2.0, reply=None, before_kill=None):
        self.plan = list(plan or [])
        self.before_kill = before_kill  # "kill": called first (e.g. wait until the client stored its answers)
        self.reply = reply or (lambda body, i: "echo[%d] %s" % (i, [m["content"] for m in body["messages"]
                                                                    if m["role"] == "user"][-1]))
        self.slow_s = slow_s
        self.bodies: list[dict] = []
        self.times: list[float] = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):   # keep test output quiet
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server.lock:
                    server.bodies.append(body)
                    server.times.append(time.monotonic())
                    action = server.plan.pop(0) if server.plan else "ok"
                if action == "kill":
                    import _thread

                    if server.before_kill is not None:
                        server.before_kill()
                    _thread.interrupt_main()  # KeyboardInterrupt in the client, mid-batch
                    action = "slow"
                if action == "slow":
                    time.sleep(server.slow_s)
                    action = "ok"
                if action in ("503", "429", "400"):
                    self.send_response(int(action))
                    if action == "429":
                        self.send_header("Retry-After", "0.05")
                    self.end_headers()
                    self.wfile.write(b'{"error": "scripted"}')
                    return
                if action == "garbage":
                    payload = b'{"choices": "nope"}'
                else:
                    choices = [{"index": i, "finish_reason": "stop",
                                "message": {"role": "assistant", "content": server.reply(body, i)},
                                "logprobs": {"content": [{"token": "e", "logprob": -0.5},
                                                         {"token": "cho", "logprob": -1.5}]}}
                               for i in range(body.get("n", 1))]
                    payload = json.dumps({"choices": choices, "usage": {"prompt_tokens": 7,
                                                                        "completion_tokens": 2}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> "FakeServer":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
