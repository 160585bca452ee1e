"""Launch to the first frame of the interactive session: `keel` under a pseudo-terminal, from
spawn to the live region's status line on screen (the first frame a person sees), against a
shell that prints a word under the same pseudo-terminal (the floor of a process start here).

Each run uses a fresh KEEL_HOME whose config names a provider (nothing is sent: the frame does
not wait for the network, MCP servers, git or the highlighter), then Ctrl-D ends keel. Each run
is made twice: without an MCP server, and with one that never answers (`sleep`): the first
frame must not wait for it.
"""
import os, pty, select, statistics, sys, tempfile, time

keel, runs = sys.argv[1], int(sys.argv[2])


def time_to(argv, marker, env, stop=b""):
    """Seconds from spawn until `marker` appears in what the child writes to its terminal."""
    started = time.perf_counter()
    pid, fd = pty.fork()
    if pid == 0:
        os.execvpe(argv[0], argv, env)
    seen = b""
    shown_at = None
    deadline = started + 10
    while time.perf_counter() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if not ready:
            continue
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
        # A terminal answers keel's cursor-position question at once.
        if b"\x1b[6n" in chunk:
            os.write(fd, b"\x1b[1;1R")
        if shown_at is None and marker in seen:
            shown_at = time.perf_counter()
            if stop:
                os.write(fd, stop)
            else:
                break
    try:
        os.kill(pid, 9)
    except ProcessLookupError:
        pass
    os.waitpid(pid, 0)
    os.close(fd)
    if shown_at is None:
        sys.exit(f"{argv[0]} never showed {marker!r}; it wrote:\n{seen[-2000:]!r}")
    return shown_at - started


SILENT_SERVER = '[mcp_servers.silent]\ncommand = "sh"\nargs = ["-c", "sleep 30"]\n'
keel_times, mcp_times, shell_times = [], [], []
for _ in range(runs):
    for extra, times in (("", keel_times), (SILENT_SERVER, mcp_times)):
        with tempfile.TemporaryDirectory() as home, tempfile.TemporaryDirectory() as work:
            with open(os.path.join(home, "config.toml"), "w") as config:
                config.write('model = "deepseek/bench"\n' + extra + '[providers.deepseek]\n'
                             'base_url = "http://127.0.0.1:9"\n')
            env = dict(os.environ, KEEL_HOME=home, DEEPSEEK_API_KEY="sk-bench",
                       TERM="xterm-256color")
            env.pop("NO_COLOR", None)
            os.chdir(work)
            # The status line: the model in bold (the banner names it plainly before).
            times.append(time_to([keel], b"\x1b[1mdeepseek/bench", env, stop=b"\x04"))
    shell_times.append(time_to(["/bin/sh", "-c", "echo ready-word"], b"ready-word", env))


def figures(times):
    times = sorted(times)
    return (statistics.median(times) * 1000, times[int(len(times) * 0.9)] * 1000)


keel_median, keel_p90 = figures(keel_times)
mcp_median, mcp_p90 = figures(mcp_times)
shell_median, shell_p90 = figures(shell_times)
print(f"runs: {runs}")
print(f"keel: launch to first frame (status line on screen): median {keel_median:.1f} ms, p90 {keel_p90:.1f} ms")
print(f"keel with an MCP server that never answers: median {mcp_median:.1f} ms, p90 {mcp_p90:.1f} ms")
print(f"sh -c echo under the same terminal: median {shell_median:.1f} ms, p90 {shell_p90:.1f} ms")
print(f"keel minus the shell floor: {keel_median - shell_median:.1f} ms (target: first frame <= 30 ms)")
