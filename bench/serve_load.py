#!/usr/bin/env python3
"""Load on loopback for `keel serve` (a bench, not a test): 50 SSE clients on one session
and 20 sessions running tool loops at once, for a bounded time.

Usage: bench/serve_load.py KEEL_BINARY [SECONDS] [CLIENTS] [SESSIONS]

Every session gets its own `keel mock` (a scripted tool loop), so the turns really overlap.
Checks, then prints:
- no lost or reordered event: each watching client's stored-event ids equal the store's
  (a full replay from id 0 at the end), in order, without gaps or duplicates;
- peak RSS of `keel serve` (VmHWM);
- p50/p99 fan-out delay: for each stored event, the time from the first client receiving it
  to each other client receiving it.
All traffic stays on 127.0.0.1; the run stops by itself.
"""
import http.client
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

KEEL = sys.argv[1]
SECONDS = float(sys.argv[2]) if len(sys.argv) > 2 else 60.0
CLIENTS = int(sys.argv[3]) if len(sys.argv) > 3 else 50
SESSIONS = int(sys.argv[4]) if len(sys.argv) > 4 else 20
ROUNDS = 5  # tool rounds per turn


def start_mock(directory, turns):
    steps = []
    for turn in range(turns):
        for round_ in range(ROUNDS):
            steps.append({"tool": "bash", "args": {"command": f"echo t{turn}r{round_} >> loop.log"}})
        steps.append({"say": f"turn {turn} done"})
    path = os.path.join(directory, "scenario.json")
    with open(path, "w") as f:
        json.dump({"steps": steps}, f)
    mock = subprocess.Popen([KEEL, "mock", "--scenario", path], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    return mock, mock.stdout.readline().strip()


def request(address, token, method, path, body=None):
    connection = http.client.HTTPConnection(*address, timeout=30)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    connection.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
    response = connection.getresponse()
    data = response.read()
    connection.close()
    return response.status, (json.loads(data) if data else None)


def watch(address, token, session, seen, stop):
    """Follow the events of `session`; record (id, arrival time) of stored events."""
    last = 0
    while not stop.is_set():
        try:
            connection = http.client.HTTPConnection(*address, timeout=5)
            connection.request("GET", f"/api/sessions/{session}/events",
                               headers={"Authorization": f"Bearer {token}", "Last-Event-ID": str(last)})
            response = connection.getresponse()
            while not stop.is_set():
                line = response.fp.readline()
                if not line:
                    break
                if line.startswith(b"id: "):
                    event_id = int(line[4:].strip())
                    seen.append((event_id, time.monotonic()))
                    last = event_id
        except (OSError, http.client.HTTPException):
            time.sleep(0.05)


def main():
    work = tempfile.mkdtemp(prefix="keel-serve-load-")
    home = os.path.join(work, "home")
    os.makedirs(home)
    turns = int(SECONDS * 40) + 50  # more than a session can run in the time
    mocks = [start_mock(tempfile.mkdtemp(dir=work), turns) for _ in range(SESSIONS)]
    # One provider per session, each pointing at its own mock.
    config = ['model = "p0/m"', 'permission_mode = "auto"']
    for index, (_, url) in enumerate(mocks):
        config += [f"[providers.p{index}]", 'protocol = "chat"', f'base_url = "{url}"',
                   'api_key_env = "DEEPSEEK_API_KEY"', 'reasoning_protocol = "deepseek"']
    with open(os.path.join(home, "config.toml"), "w") as f:
        f.write("\n".join(config) + "\n")
    env = dict(os.environ, KEEL_HOME=home, DEEPSEEK_API_KEY="bench-key")
    serve = subprocess.Popen([KEEL, "serve"], cwd=home, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True)
    url = serve.stdout.readline().strip()
    hostport, fragment = url[len("http://"):].split("/", 1)
    host, port = hostport.split(":")
    address = (host, int(port))
    token = fragment.split("#token=")[1]
    sessions = []
    for index in range(SESSIONS):
        status, body = request(address, token, "POST", "/api/sessions")
        assert status == 201, body
        sid = body["id"]
        status, body = request(address, token, "POST", f"/api/sessions/{sid}/model", {"model": f"p{index}/m"})
        assert status == 200, body
        sessions.append(sid)
    stop = threading.Event()
    watched = sessions[0]
    seen = [[] for _ in range(CLIENTS)]
    watchers = [threading.Thread(target=watch, args=(address, token, watched, seen[i], stop), daemon=True)
                for i in range(CLIENTS)]
    for thread in watchers:
        thread.start()
    peak = [0]

    def sample_rss():
        while not stop.is_set():
            try:
                with open(f"/proc/{serve.pid}/status") as f:
                    for line in f:
                        if line.startswith("VmHWM:"):
                            peak[0] = max(peak[0], int(line.split()[1]))
            except OSError:
                pass
            time.sleep(0.2)

    threading.Thread(target=sample_rss, daemon=True).start()
    completed = [0]

    def drive(sid):
        deadline = time.monotonic() + SECONDS
        while time.monotonic() < deadline:
            status, _ = request(address, token, "POST", f"/api/sessions/{sid}/submit", {"input": "loop"})
            if status == 202:
                while True:
                    _, body = request(address, token, "GET", f"/api/sessions/{sid}")
                    if not body["busy"]:
                        break
                    time.sleep(0.02)
            else:
                time.sleep(0.05)

    drivers = [threading.Thread(target=drive, args=(sid,)) for sid in sessions]
    started = time.monotonic()
    for thread in drivers:
        thread.start()
    for thread in drivers:
        thread.join()
    time.sleep(1.0)
    stop.set()
    elapsed = time.monotonic() - started
    # The store's view: every stored event of the watched session, from id 0.
    for sid in sessions:
        _, transcript = request(address, token, "GET", f"/api/sessions/{sid}/history")
        completed[0] += sum(
            1 for item in transcript["items"] if item.get("role") == "assistant"
            and any(part.get("type") == "text" and part.get("text", "").endswith(" done")
                    for part in item.get("parts", [])))
    status, history = request(address, token, "GET", f"/api/sessions/{watched}/history")
    expected = list(range(1, history["last_event_id"] + 1))
    lost = reordered = 0
    delays = []
    first_arrival = {}
    for client in seen:
        ids = [event_id for event_id, _ in client]
        if ids != sorted(set(ids)):
            reordered += 1
        if ids != expected:
            lost += 1
        for event_id, at in client:
            first_arrival[event_id] = min(first_arrival.get(event_id, at), at)
    for client in seen:
        for event_id, at in client:
            delays.append(at - first_arrival[event_id])
    delays.sort()
    serve.terminate()
    serve.wait(timeout=15)
    for mock, _ in mocks:
        mock.kill()
        mock.wait(timeout=5)
    p = lambda q: delays[min(len(delays) - 1, int(q * len(delays)))] * 1000 if delays else 0.0
    print(f"{SESSIONS} sessions looping ({ROUNDS} bash rounds per turn) and {CLIENTS} SSE clients "
          f"on one session, {elapsed:.0f} s:")
    print(f"  turns completed                  {completed[0]}")
    print(f"  stored events on the watched one {len(expected)}")
    print(f"  clients with a lost event        {lost} of {CLIENTS}")
    print(f"  clients with reordered events    {reordered} of {CLIENTS}")
    print(f"  fan-out delay p50 / p99          {p(0.5):.2f} ms / {p(0.99):.2f} ms")
    print(f"  peak RSS of keel serve           {peak[0] / 1024:.1f} MiB")
    if lost or reordered:
        sys.exit(1)


main()
