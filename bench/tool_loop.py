"""Drive `keel run` through an N-round tool loop against `keel mock` and print figures.

Per run:
- wall: spawn of `keel run` to its exit
- launch to first request: spawn to the mock receiving the first request (mock's clock)
- model time: sum of llm/request -> llm/response intervals as seen on keel's event stream
  (the mock answers at once, so this is mostly keel's own HTTP and SSE work)
- tool time: sum of tool/call -> tool/result intervals (the tool itself, a bash `echo`)
- harness overhead per round: (wall - model time - tool time) / rounds; it includes process
  start, SQLite writes with fsync, projection, validation and event handling
- peak RSS of the `keel run` process itself (its VmHWM, polled while it runs), and the figure
  wait4 reports, which is the largest of keel and every process it started: the sandbox's
  forked copies of keel count keel's resident pages again, so that one is higher and is not
  memory keel holds
"""
import json, os, subprocess, sys, tempfile, threading, time, urllib.request


def poll_hwm(pid, peak):
    """Keep the process's VmHWM (monotonic) until its memory is gone (a zombie has none)."""
    while True:
        try:
            with open(f"/proc/{pid}/status") as status:
                hwm = [int(line.split()[1]) for line in status if line.startswith("VmHWM:")]
        except OSError:
            return
        if not hwm:
            return
        peak[0] = max(peak[0], hwm[0])
        time.sleep(0.002)

keel, rounds, runs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])

def one_run():
    with tempfile.TemporaryDirectory() as home:
        mock = subprocess.Popen([keel, "mock", "--scenario", f"tool-loop-{rounds}"],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        base = mock.stdout.readline().strip()
        with open(os.path.join(home, "config.toml"), "w") as config:
            config.write(f'model = "deepseek/bench"\n[providers.deepseek]\nbase_url = "{base}"\n')
        env = dict(os.environ, KEEL_HOME=home, DEEPSEEK_API_KEY="bench-key")
        spawned_wall = time.time()
        spawned = time.perf_counter()
        run = subprocess.Popen([keel, "run", "--yes", "--json", "run the loop"], cwd=home, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        own_peak = [0]
        poller = threading.Thread(target=poll_hwm, args=(run.pid, own_peak), daemon=True)
        poller.start()
        events = []
        for line in run.stdout:
            events.append((time.perf_counter(), json.loads(line)))
        # Wait without reaping: the poller reads VmHWM until keel's memory is gone.
        os.waitid(os.P_PID, run.pid, os.WEXITED | os.WNOWAIT)
        poller.join()
        _, status, usage = os.wait4(run.pid, 0)
        ended = time.perf_counter()
        run.returncode = os.waitstatus_to_exitcode(status)
        peak_kib = usage.ru_maxrss
        requests = json.load(urllib.request.urlopen(base + "/_mock/requests"))
        mock.terminate()
        mock.wait()
        assert run.returncode == 0, f"keel run exited {run.returncode}"
        with open(os.path.join(home, "loop.log")) as log:
            assert len(log.read().splitlines()) == rounds, "each effect exactly once"
        model = tool = 0.0
        opened = {}
        for stamp, event in events:
            kind = event["type"]
            if kind in ("llm/request", "tool/call"):
                opened[kind] = stamp
            elif kind == "llm/response":
                model += stamp - opened.pop("llm/request")
            elif kind == "tool/result":
                tool += stamp - opened.pop("tool/call")
        wall = ended - spawned
        first_request = requests[0]["received_at_us"] / 1e6 - spawned_wall
        return {
            "wall_ms": wall * 1000,
            "first_request_ms": first_request * 1000,
            "model_ms": model * 1000,
            "tool_ms": tool * 1000,
            "overhead_per_round_ms": (wall - model - tool) * 1000 / rounds,
            "peak_rss_mib": peak_kib / 1024,
            "own_peak_rss_mib": own_peak[0] / 1024,
            "requests": len(requests),
        }

results = [one_run() for _ in range(runs)]
def median(key):
    values = sorted(r[key] for r in results)
    return values[len(values) // 2]
print(f"{rounds}-round tool loop, {runs} runs, medians:")
for key, label in [("wall_ms", "wall"), ("first_request_ms", "launch to first request"),
                   ("model_ms", "model time (request to response)"), ("tool_ms", "tool time"),
                   ("overhead_per_round_ms", "harness overhead per round")]:
    print(f"  {label:34} {median(key):8.2f} ms")
print(f"  {'peak RSS of keel run itself':34} {max(r['own_peak_rss_mib'] for r in results):8.2f} MiB (max)")
print(f"  {'peak RSS, forked sandbox copies too':34} {max(r['peak_rss_mib'] for r in results):8.2f} MiB (max, wait4)")
print(f"  {'requests per run':34} {results[0]['requests']}")
