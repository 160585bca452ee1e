"""Launch to first request, keel against curl, as whole processes against one local server.

The server notes the moment each request's headers arrive (this process's clock); a client's
time is that moment minus the moment it was spawned. keel runs `keel run hi` with a fresh
KEEL_HOME each time ("fresh": the store is created) and with one home reused ("used").
KEEL_STARTUP_TRACE=1 makes keel print where its start-up went (stderr), summarised here.
"""
import http.server, json, os, queue, statistics, subprocess, sys, tempfile, threading, time

keel, runs = sys.argv[1], int(sys.argv[2])
arrivals = queue.Queue()
ANSWER = (b'data: {"choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}],'
          b'"usage":{"prompt_tokens":1,"completion_tokens":1}}\n\ndata: [DONE]\n\n')


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        arrivals.put(time.perf_counter())
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(ANSWER)))
        self.send_header("connection", "close")
        self.end_headers()
        self.wfile.write(ANSWER)

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
threading.Thread(target=server.serve_forever, daemon=True).start()
base = f"http://127.0.0.1:{server.server_address[1]}"
work = tempfile.mkdtemp(prefix="keel-startup-")
config = f'model = "deepseek/deepseek-chat"\n[providers.deepseek]\nbase_url = "{base}"\n'


def home(path):
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "config.toml"), "w") as file:
        file.write(config)
    return path


def launch(command, env=None, trace=None):
    while not arrivals.empty():
        arrivals.get()
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=work, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
    arrived = arrivals.get(timeout=30)
    _, stderr = process.communicate(timeout=30)
    if process.returncode != 0:
        sys.exit(f"{command[0]} failed: {stderr.decode(errors='replace')}")
    if trace is not None:
        for line in stderr.decode(errors="replace").splitlines():
            if line.startswith("keel startup: "):
                trace.append(json.loads(line[len("keel startup: "):]))
    return (arrived - started) * 1000


def keel_env(path):
    return dict(os.environ, KEEL_HOME=path, DEEPSEEK_API_KEY="sk-bench", KEEL_STARTUP_TRACE="1",
                NO_COLOR="1")


curl = ["curl", "-s", "-o", "/dev/null", "-X", "POST", "-H", "content-type: application/json",
        "-H", "authorization: Bearer sk-bench", "--data",
        '{"model":"deepseek-chat","stream":true,"messages":[{"role":"user","content":"hi"}]}',
        f"{base}/chat/completions"]
used_home = home(os.path.join(work, "used"))
for _ in range(3):  # warm the page cache and create the used store
    launch(curl)
    launch([keel, "run", "hi"], keel_env(used_home))

results = {"curl": [], "keel fresh": [], "keel used": []}
traces = {"keel fresh": [], "keel used": []}
for n in range(runs):
    results["curl"].append(launch(curl))
    results["keel fresh"].append(launch([keel, "run", "hi"],
                                        keel_env(home(os.path.join(work, f"fresh-{n}"))),
                                        traces["keel fresh"]))
    results["keel used"].append(launch([keel, "run", "hi"], keel_env(used_home),
                                       traces["keel used"]))

curl_median = statistics.median(results["curl"])
print(f"launch to first request, {runs} runs each, interleaved (ms)")
for name, times in results.items():
    times.sort()
    median = statistics.median(times)
    print(f"  {name:<11} min {times[0]:6.2f}  median {median:6.2f}  p90 "
          f"{times[int(len(times) * 0.9)]:6.2f}  ratio to curl (median) {median / curl_median:4.2f}x")
for name, trace in traces.items():
    if not trace:
        continue
    print(f"  {name}: keel's own breakdown, median ms since main() (KEEL_STARTUP_TRACE)")
    for phase in trace[0]:
        print(f"    {phase:<28} {statistics.median(t[phase] for t in trace):6.2f}")

version = []
true = []
for _ in range(runs):
    started = time.perf_counter()
    subprocess.run([keel, "--version"], stdout=subprocess.DEVNULL, check=True)
    version.append((time.perf_counter() - started) * 1000)
    started = time.perf_counter()
    subprocess.run(["/bin/true"], check=True)
    true.append((time.perf_counter() - started) * 1000)
print(f"keel --version {statistics.median(version):.2f} ms, /bin/true "
      f"{statistics.median(true):.2f} ms (medians)")
server.shutdown()
