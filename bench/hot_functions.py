"""Make `crates/keel-cli/link/hot-functions.txt`: the functions keel runs in a session, for the
linker to lay out together in release builds (see `crates/keel-cli/build.rs`).

Why: the kernel maps the 64 KiB around each page of code first touched, so the code a session
runs, spread across a 20 MiB `.text`, made 12.6 MiB of it resident; laid out together it is
under 6 MiB (`bench/tool_loop.py` shows keel's peak RSS).

How: a 20-round headless tool loop against `keel mock` under valgrind's callgrind (every
function run; the sandbox off, since valgrind does not know Landlock's calls), then the same
loop with the sandbox on under `perf` (what the sandbox adds, sampled), if perf is there.
Names are the release build's own (its symbols are kept): run this on a release build of the
same `Cargo.lock`, toolchain and profile, e.g. after either changes.

Usage: python3 bench/hot_functions.py [KEEL]  (default: target/release/keel)
"""
import os, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
keel = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "target/release/keel"))
out_path = os.path.join(ROOT, "crates/keel-cli/link/hot-functions.txt")


def loop(home, wrapper, sandbox_on):
    """Run the 20-round loop in `home` under `wrapper` (a command prefix)."""
    mock = subprocess.Popen([keel, "mock", "--scenario", "tool-loop-20"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        base = mock.stdout.readline().strip()
        with open(os.path.join(home, "config.toml"), "w") as config:
            config.write(f'model = "deepseek/bench"\n[providers.deepseek]\nbase_url = "{base}"\n')
            if not sandbox_on:
                config.write('[sandbox]\nmode = "off"\n')
        env = dict(os.environ, KEEL_HOME=home, DEEPSEEK_API_KEY="bench-key")
        run = subprocess.run(wrapper + [keel, "run", "--yes", "--json", "run the loop"],
                             cwd=home, env=env, capture_output=True, text=True)
        results = run.stdout.count('"tool/result"')
        if results != 20:
            sys.exit(f"the loop did not run ({results} tool results): {run.stderr[-800:]}")
    finally:
        mock.terminate()
        mock.wait()


def called_functions(callgrind_out):
    """Every function of keel's own binary in a callgrind profile, in the order first seen."""
    seen, names = set(), []
    obj = called_obj = None
    with open(callgrind_out, errors="replace") as profile:
        for line in profile:
            if line.startswith("ob="):
                obj = line[3:].strip()
            elif line.startswith("cob="):
                called_obj = line[4:].strip()
            elif line.startswith(("fn=", "cfn=")):
                called = line.startswith("cfn=")
                where = (called_obj or obj) if called else obj
                name = line.split("=", 1)[1].strip()
                if where == keel and name not in seen and not name.startswith(("0x", "(")):
                    seen.add(name)
                    names.append(name)
                called_obj = None
    return names


def sampled_functions(home):
    """keel's own functions perf sampled through a loop with the sandbox on ([] without perf)."""
    data = os.path.join(home, "perf.data")
    try:
        loop(home, ["perf", "record", "-q", "-F", "49999", "-o", data], True)
    except (FileNotFoundError, SystemExit):
        return []
    report = subprocess.run(["perf", "report", "-i", data, "--sort", "dso,sym", "--no-demangle",
                             "--stdio", "--no-children"], capture_output=True, text=True).stdout
    names = []
    for line in report.splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[1] == os.path.basename(keel) and fields[2] == "[.]":
            if not fields[3].startswith("0x"):
                names.append(fields[3])
    return names


with tempfile.TemporaryDirectory() as home:
    profile = os.path.join(home, "callgrind.out")
    loop(home, ["valgrind", "--tool=callgrind", "--demangle=no", "--compress-strings=no",
                f"--callgrind-out-file={profile}"], False)
    names = called_functions(profile)
with tempfile.TemporaryDirectory() as home:
    extra = sampled_functions(home)
known = set(names)
names += [name for name in extra if name not in known and not known.add(name)]
with open(out_path, "w") as out:
    out.write("\n".join(names) + "\n")
print(f"{len(names)} functions ({len(extra)} sampled with the sandbox on) -> {out_path}")
