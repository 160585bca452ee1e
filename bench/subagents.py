"""Four `explore` subagents of ROUNDS rounds each, run at once by one `task` batch, against the
same 4 x ROUNDS rounds in one agent, on `keel mock` with a per-request delay (a provider's
latency). Prints, median of RUNS paired runs: the wall time of each and their ratio, and the
peak RSS of `keel run` itself in each (VmHWM, polled): what the running children cost keel.

The sandbox's namespace holders are forked copies of keel: their memory is not keel's and is
counted apart (wait4's figure, the largest of keel and every process it started).

Usage: python3 bench/subagents.py KEEL [ROUNDS] [RUNS] [DELAY_MS]
"""
import json, os, subprocess, sys, tempfile, threading, time, urllib.request

keel = os.path.abspath(sys.argv[1])
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 10
runs = int(sys.argv[3]) if len(sys.argv) > 3 else 5
delay = int(sys.argv[4]) if len(sys.argv) > 4 else 50
CHILDREN = 4


def poll_hwm(pid, peak):
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


def reading_rounds(count, last):
    """`count` rounds of a read-only tool, then an answer; every step held back `delay` ms."""
    # Each round asks something else (the same call again and again is stopped as no progress).
    steps = [{"tool": "glob", "args": {"pattern": f"**/*.x{n}"}, "delay_ms": delay}
             for n in range(count)]
    return steps + [{"say": last, "delay_ms": delay}]


def scenario(delegated):
    if not delegated:
        return {"steps": reading_rounds(CHILDREN * rounds, "All read.")}
    tasks = [{"tool": "task", "args": {"agent": "explore", "description": f"part {n}",
                                        "prompt": f"MARK-{n} read"}} for n in range(CHILDREN)]
    return {
        "steps": [{"tools": tasks, "delay_ms": delay}, {"say": "All read.", "delay_ms": delay}],
        "conversations": [{"when": {"contains": f"MARK-{n}"},
                           "steps": reading_rounds(rounds - 1, f"Part {n} read.")}
                          for n in range(CHILDREN)],
    }


def one_run(delegated):
    with tempfile.TemporaryDirectory() as home:
        path = os.path.join(home, "scenario.json")
        with open(path, "w") as out:
            json.dump(scenario(delegated), out)
        mock = subprocess.Popen([keel, "mock", "--scenario", path], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True)
        try:
            base = mock.stdout.readline().strip()
            with open(os.path.join(home, "config.toml"), "w") as config:
                config.write(f'model = "deepseek/bench"\n[providers.deepseek]\n'
                             f'base_url = "{base}"\ncontext_window = 128000\n')
            env = dict(os.environ, KEEL_HOME=home, DEEPSEEK_API_KEY="bench-key")
            env.pop("CARGO_TARGET_DIR", None)
            started = time.perf_counter()
            run = subprocess.Popen([keel, "run", "--yes", "--json", "read it all"], cwd=home,
                                   env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            own = [0]
            poller = threading.Thread(target=poll_hwm, args=(run.pid, own), daemon=True)
            poller.start()
            os.waitid(os.P_PID, run.pid, os.WEXITED | os.WNOWAIT)
            poller.join()
            _, status, usage = os.wait4(run.pid, 0)
            wall = time.perf_counter() - started
            assert os.waitstatus_to_exitcode(status) == 0, "keel run failed"
            requests = json.load(urllib.request.urlopen(base + "/_mock/requests"))
        finally:
            mock.terminate()
            mock.wait()
        expected = CHILDREN * rounds + (2 if delegated else 1)
        assert len(requests) == expected, f"{len(requests)} requests, expected {expected}"
        return {"wall_ms": wall * 1000, "own_mib": own[0] / 1024, "all_mib": usage.ru_maxrss / 1024}


pairs = [(one_run(False), one_run(True)) for _ in range(runs)]


def median(values):
    values = sorted(values)
    return values[len(values) // 2]


one = median(p[0]["wall_ms"] for p in pairs)
four = median(p[1]["wall_ms"] for p in pairs)
print(f"{CHILDREN} explore subagents x {rounds} rounds vs {CHILDREN * rounds} rounds in one agent,"
      f" {delay} ms per request, median of {runs} paired runs:")
print(f"  {'one agent, wall':40} {one:9.1f} ms")
print(f"  {'four subagents at once, wall':40} {four:9.1f} ms")
print(f"  {'ratio (subagents / one agent)':40} {four / one:9.2f}")
own_one = median(p[0]["own_mib"] for p in pairs)
own_four = median(p[1]["own_mib"] for p in pairs)
print(f"  {'peak RSS of keel, one agent':40} {own_one:9.2f} MiB")
print(f"  {'peak RSS of keel, four subagents':40} {own_four:9.2f} MiB")
print(f"  {'per running subagent':40} {(own_four - own_one) / CHILDREN:+9.2f} MiB")
print(f"  {'with forked sandbox holders (wait4)':40} {median(p[1]['all_mib'] for p in pairs):9.2f} MiB")
