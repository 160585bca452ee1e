#!/usr/bin/env python3
"""Record what a keel binary sends and says, to prove a refactor changed neither.

    python3 scripts/wire_record.py KEEL_BINARY OUT_DIR
    diff -r OUT_DIR_BEFORE OUT_DIR_AFTER     # nothing: the same bytes

For a fixed set of `keel mock` scenarios (a tool loop on each protocol, a retry, a recovery,
compaction, plan mode, a rewind) it writes, per scenario:
- `NAME.requests.jsonl`: each request body the mock received, byte for byte, one per line;
- `NAME.events.jsonl`: the `--json` event lines of every `keel run` of the scenario;
- `NAME.exit`: the exit code of each step (and what it printed, for steps that are not runs);
What differs between two runs of one binary is normalised: the temporary home and workspace
paths, session ids, call ids, dates and times, durations, trace ids and the mock's port.
A run without those differences is not normalised further: the same bytes, or a finding.
"""

import json
import os
import re
import subprocess
import sys
import tempfile
import urllib.request


def effect_steps(rounds):
    steps = []
    for n in range(rounds):
        steps.append({"tool": "bash", "args": {"command": f"echo round {n} >> effects.txt"}})
    steps.append({"say": "All rounds done."})
    return steps


# A file tool's change and a command's, then a rewind of the turn and a turn after it.
REWIND_STEPS = {
    "steps": [
        {"tool": "write_file", "args": {"path": "notes.txt", "content": "changed\n"}},
        {"tool": "bash", "args": {"command": "echo made > made.txt"}},
        {"say": "Changed."},
        {"say": "Started over."},
    ]
}
REWIND_RUNS = [
    ["run", "--yes", "--json", "change things"],
    ["session", "rewind", "{session}", "--to", "1"],
    ["run", "--yes", "--json", "--session", "{session}", "start over"],
]

SCENARIOS = [
    # (name, protocol, scenario: built-in name or steps, extra provider lines, runs)
    # A run is a list of arguments after `keel`; "{session}" is the first run's session id.
    ("tool_loop_chat", "chat", "tool-loop-5", "", [["run", "--yes", "--json", "loop"]]),
    ("tool_loop_anthropic", "anthropic", "tool-loop-5", "", [["run", "--yes", "--json", "loop"]]),
    ("tool_loop_responses", "responses", "tool-loop-5", "", [["run", "--yes", "--json", "loop"]]),
    ("retry", "chat", "transient-500", "", [["run", "--yes", "--json", "hello"]]),
    (
        "recovery",
        "chat",
        "opaque-400-on-replay",
        "",
        [
            ["run", "--yes", "--json", "look around"],
            ["run", "--yes", "--json", "--session", "{session}", "/recover-context"],
        ],
    ),
    (
        "compaction",
        "chat",
        {"context_window": 4000, "steps": effect_steps(30)},
        "context_window = 4000",
        [
            ["run", "--yes", "--json", "run all the rounds"],
            ["run", "--yes", "--json", "--session", "{session}", "/compact keep the rounds"],
        ],
    ),
    (
        "plan_mode",
        "chat",
        {
            "steps": [
                {"tool": "read_file", "args": {"path": "notes.txt"}},
                {"tool": "propose_plan", "args": {"plan": "1. Rename\n2. Test"}},
            ]
        },
        "",
        [["run", "--json", "/plan rename things"]],
    ),
    (
        "rewind",
        "chat",
        REWIND_STEPS,
        "",
        REWIND_RUNS,
    ),
    # The same in a git repository: commands are bracketed by workspace snapshots.
    (
        "rewind_git",
        "chat",
        REWIND_STEPS,
        "",
        REWIND_RUNS,
    ),
]

PROVIDERS = {"chat": "deepseek", "anthropic": "deepseek-anthropic", "responses": "deepseek-responses"}


def normaliser(paths, port):
    """A function that replaces what differs between two runs of one binary."""
    rules = [(re.escape(path), f"<{name}>") for name, path in paths]
    rules += [
        (re.escape(f"127.0.0.1:{port}"), "127.0.0.1:<PORT>"),
        (r"\b[0-9a-f]{16}\b", "<ID16>"),
        (r"\b[0-9a-f]{32}\b", "<ID32>"),
        (r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", "<UUID>"),
        (r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})?", "<TIME>"),
        (r"\b\d{4}-\d{2}-\d{2}\b", "<DATE>"),
        (r"\b(call|toolu|fc|msg|resp|chatcmpl)_[A-Za-z0-9_-]+", r"\1_<N>"),
        (r"\"(ms|elapsed_ms|duration_ms|delay_ms|at_ms|started_ms|ended_ms|wall_ms)\":\d+", r'"\1":<MS>'),
        (r"\"(at|time|started_at|ended_at|created_at)\":\d{9,}", r'"\1":<EPOCH>'),
    ]
    compiled = [(re.compile(pattern), replacement) for pattern, replacement in rules]

    def normalise(text):
        for pattern, replacement in compiled:
            text = pattern.sub(replacement, text)
        return text

    return normalise


def record(binary, name, protocol, scenario, extra, runs, out):
    with tempfile.TemporaryDirectory(prefix="keel-wire-") as home:
        workspace = os.path.join(home, "ws")
        os.mkdir(workspace)
        with open(os.path.join(workspace, "notes.txt"), "w") as f:
            f.write("the notes\n")
        if name.endswith("_git"):
            subprocess.run(["git", "init", "-q"], cwd=workspace, check=True)
        if isinstance(scenario, str):
            mock_args = ["mock", "--scenario", scenario]
        else:
            path = os.path.join(home, "scenario.json")
            with open(path, "w") as f:
                json.dump(scenario, f)
            mock_args = ["mock", "--scenario", path]
        env = dict(os.environ, KEEL_HOME=home, DEEPSEEK_API_KEY="wire-record-key")
        for variable in ("KEEL_MODEL", "DEEPSEEK_BASE_URL", "NO_COLOR"):
            env.pop(variable, None)
        mock = subprocess.Popen(
            [binary, *mock_args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True
        )
        try:
            base_url = mock.stdout.readline().strip()
            port = base_url.rsplit(":", 1)[1]
            provider = PROVIDERS[protocol]
            with open(os.path.join(home, "config.toml"), "w") as f:
                f.write(
                    f'model = "{provider}/mock-model"\n[providers.{provider}]\nbase_url = "{base_url}"\n'
                    f"{extra}\n[providers.{provider}.retry]\nbase_delay_ms = 50\nmax_delay_ms = 200\n"
                )
            normalise = normaliser([("WORKSPACE", workspace), ("HOME", home)], port)
            session = None
            events, exits = [], []
            for args in runs:
                args = [arg.replace("{session}", session or "") for arg in args]
                done = subprocess.run(
                    [binary, *args], cwd=workspace, env=env, capture_output=True, text=True, timeout=120
                )
                exits.append(f"{' '.join(normalise(a) for a in args)} -> {done.returncode}")
                if args[0] != "run":
                    exits.extend(normalise(line) for line in (done.stdout + done.stderr).splitlines())
                for line in done.stdout.splitlines():
                    if args[0] == "run":
                        events.append(normalise(line))
                        if session is None:
                            try:
                                session = json.loads(line).get("session_id")
                            except json.JSONDecodeError:
                                pass
            with urllib.request.urlopen(f"{base_url}/_mock/requests") as response:
                received = json.load(response)
        finally:
            mock.terminate()
            mock.wait()
    with open(os.path.join(out, f"{name}.requests.jsonl"), "w") as f:
        for request in received:
            f.write(normalise(f"{request['path']} {request['body']}") + "\n")
    with open(os.path.join(out, f"{name}.events.jsonl"), "w") as f:
        f.write("\n".join(events) + "\n")
    with open(os.path.join(out, f"{name}.exit"), "w") as f:
        f.write("\n".join(exits) + "\n")
    return len(received), len(events)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    binary, out = os.path.abspath(sys.argv[1]), sys.argv[2]
    os.makedirs(out, exist_ok=True)
    for name, protocol, scenario, extra, runs in SCENARIOS:
        requests, events = record(binary, name, protocol, scenario, extra, runs, out)
        print(f"{name}: {requests} requests, {events} events")


if __name__ == "__main__":
    main()
