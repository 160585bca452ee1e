"""Peak memory of an interactive session in the live TUI: `keel --yes` under a pseudo-terminal,
one prompt that runs ROUNDS tool rounds (a `bash` echo each, its output drawn under its card)
and ends with an answer holding highlighted code in three languages, against `keel mock`.
Prints keel's own peak RSS (VmHWM, polled) and the time the session took.
Usage: python3 bench/tui_memory.py KEEL [ROUNDS]
"""
import json, os, pty, select, subprocess, sys, tempfile, threading, time

keel = sys.argv[1]
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 100
answer = ("## Done\n\n| round | result |\n|---|---|\n| all | ok |\n\n"
          "```rust\nfn main() {\n    println!(\"{}\", 42);\n}\n```\n\n"
          "```python\ndef main():\n    print(42)\n```\n\n"
          "```sh\nfor n in 1 2 3; do echo $n; done\n```\n")
steps = [{"tool": "bash", "args": {"command": f"echo round {n}"}} for n in range(rounds)]
steps.append({"say": answer})

with tempfile.TemporaryDirectory() as home, tempfile.TemporaryDirectory() as work:
    scenario = os.path.join(home, "scenario.json")
    with open(scenario, "w") as out:
        json.dump({"steps": steps}, out)
    mock = subprocess.Popen([keel, "mock", "--scenario", scenario],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    base = mock.stdout.readline().strip()
    with open(os.path.join(home, "config.toml"), "w") as config:
        config.write(f'model = "deepseek/bench"\n[providers.deepseek]\nbase_url = "{base}"\n'
                     '[providers.deepseek.retry]\nbase_delay_ms = 50\n')
    env = dict(os.environ, KEEL_HOME=home, DEEPSEEK_API_KEY="sk-bench", TERM="xterm-256color")
    env.pop("NO_COLOR", None)
    os.chdir(work)
    started = time.perf_counter()
    pid, fd = pty.fork()
    if pid == 0:
        os.execvpe(keel, [keel, "--yes"], env)
    peak = [0]

    def poll():
        while True:
            try:
                with open(f"/proc/{pid}/status") as status:
                    hwm = [int(l.split()[1]) for l in status if l.startswith("VmHWM:")]
            except OSError:
                return
            if not hwm:
                return
            peak[0] = max(peak[0], hwm[0])
            time.sleep(0.005)

    threading.Thread(target=poll, daemon=True).start()
    seen, sent, done = b"", False, None
    while time.perf_counter() - started < 120:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if not ready:
            continue
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        seen = (seen + chunk)[-200000:]
        if b"\x1b[6n" in chunk:
            os.write(fd, b"\x1b[1;1R")
        # The status line (the model in bold): the live region reads keys from here on.
        if not sent and b"\x1b[1mdeepseek/bench" in seen:
            os.write(fd, b"run the rounds\r")
            sent = True
        if sent and b"tokens:" in seen and done is None:
            done = time.perf_counter()
            os.write(fd, b"\x04")
    os.waitpid(pid, 0)
    mock.kill()
    if done is None:
        sys.exit("the session never finished its turn")
    print(f"{rounds} rounds in the live TUI: {done - started:.2f} s, keel's peak RSS {peak[0] / 1024:.1f} MiB")
