"""A test MCP stdio server (newline-delimited JSON-RPC, written by hand on purpose: it misbehaves).

Tools: ``misbehave(how)`` and ``check``. ``how`` is ``hang`` (never answers; says so by a file
``hanging`` in its working folder), ``flood`` (one line of 5 MB, no newline until the end),
``malformed`` (a line that is not JSON-RPC), ``exit`` (exits mid-call, saying so on stderr),
``check_nan``, ``check_text`` or ``check_flood`` (answers ``fine`` now, and makes the later
``check`` answer ``{"reward": NaN}``, a string, or a line of 2 MB), ``daemon`` (starts a process in
a session of its own, tagged with the server's first argument, that sleeps an hour, and answers
``fine``) or anything else (answers ``fine: <how>``). ``check`` answers ``{"reward": 1, "feedback":
"checked"}``. Every argument after the script is ignored (tests tag processes with one). When
``COMBEE_TEST_MCP_ENV`` names a folder, the server writes the environment it was given there
(``<pid>.json``), as a server after secrets would read it; when ``COMBEE_TEST_MCP_TOOLS`` is a
number N, it lists N more tools, each with a description of 1,000 characters.
"""

import json
import os
import subprocess
import sys
import time

TOOLS = [
    {"name": "misbehave", "description": "Do something.",
     "inputSchema": {"type": "object", "properties": {"how": {"type": "string"}}, "required": ["how"]}},
    {"name": "check", "description": "Grade.", "inputSchema": {"type": "object", "properties": {}}},
]


TOOLS += [{"name": f"pad{n}", "description": "p" * 1000, "inputSchema": {"type": "object", "properties": {}}}
          for n in range(int(os.environ.get("COMBEE_TEST_MCP_TOOLS", "0")))]


def send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def text(request_id: object, value: str) -> None:
    send({"jsonrpc": "2.0", "id": request_id,
          "result": {"content": [{"type": "text", "text": value}], "isError": False}})


if folder := os.environ.get("COMBEE_TEST_MCP_ENV"):
    with open(os.path.join(folder, f"{os.getpid()}.json"), "w") as out:
        json.dump(dict(os.environ), out)

GRADES = {"check_nan": '{"reward": NaN, "feedback": "nan"}', "check_text": '"excellent"',
          "check_flood": json.dumps({"reward": 1, "feedback": "x" * 2_000_000})}
grade = json.dumps({"reward": 1, "feedback": "checked"})

for line in sys.stdin:
    if not line.strip():
        continue
    message = json.loads(line)
    method, request_id = message.get("method"), message.get("id")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": request_id, "result": {
            "protocolVersion": message["params"]["protocolVersion"], "capabilities": {"tools": {}},
            "serverInfo": {"name": "hostile", "version": "0"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": request_id, "result": {"tools": TOOLS}})
    elif method == "tools/call":
        name, arguments = message["params"]["name"], message["params"].get("arguments") or {}
        how = arguments.get("how", "")
        if name == "check":
            text(request_id, grade)
        elif how in GRADES:
            grade = GRADES[how]
            text(request_id, f"fine: {how}")
        elif how == "daemon":
            subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)", *sys.argv[1:2]],
                             start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
            text(request_id, "fine: daemon")
        elif how == "hang":
            open("hanging", "w").close()  # in its working folder: the episode's scratch folder
            time.sleep(3600)
        elif how == "flood":
            sys.stdout.write("x" * 5_000_000)
            sys.stdout.flush()
            time.sleep(3600)
        elif how == "malformed":
            sys.stdout.write("{this is not json-rpc\n")
            sys.stdout.flush()
        elif how == "exit":
            sys.stderr.write("hostile: exiting as asked\n")
            sys.stderr.flush()
            os._exit(3)
        else:
            text(request_id, f"fine: {how}")
    elif request_id is not None:
        send({"jsonrpc": "2.0", "id": request_id, "result": {}})
