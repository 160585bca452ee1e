"""Remake docs/screenshots/terminal-tui.png: a session in the live TUI, driven under tmux against
`keel mock`, captured with its colours and drawn by headless Chromium.

Usage: python3 docs/screenshots/terminal.py KEEL [OUT_PNG]
Needs tmux, chromium and a font with the symbols keel draws (Debian: fonts-symbola; DejaVu Sans
Mono has no ⎿). The capture goes through ../shared/tools/ansi2html.py when it is there, else
through the small converter below (same output: SGR colours, bold, dim, italic).
"""
import html, json, os, re, shutil, subprocess, sys, tempfile, time

keel = os.path.abspath(sys.argv[1])
out_png = os.path.abspath(sys.argv[2] if len(sys.argv) > 2 else
                          os.path.join(os.path.dirname(__file__), "terminal-tui.png"))

ANSWER = """1. read `src/parse.rs`
2. fix the loop
3. run the tests

| file | change |
|---|---|
| src/parse.rs | keep the last line |

```rust
fn lines(text: &str) -> Vec<&str> {
    text.split('\\n').collect()
}
```
"""
SCENARIO = {"steps": [
    {"say": ANSWER},
    {"tool": "bash", "args": {"command":
        "for n in $(seq 1 12); do echo \"test parse::case_$n ... ok\"; done"}},
    {"tool": "edit_file", "args": {"path": "parse.rs",
        "old_string": "    text.lines().collect()", "new_string": "    text.split('\\n').collect()"}},
    {"say": "Done: `lines` keeps a trailing empty line now, and the 12 cases pass."},
]}

home = tempfile.mkdtemp(prefix="keel-shot-")
with open(os.path.join(home, "scenario.json"), "w") as f:
    json.dump(SCENARIO, f)
with open(os.path.join(home, "parse.rs"), "w") as f:
    f.write("fn lines(text: &str) -> Vec<&str> {\n    text.lines().collect()\n}\n")
mock = subprocess.Popen([keel, "mock", "--scenario", os.path.join(home, "scenario.json")],
                        stdout=subprocess.PIPE, text=True)
base_url = mock.stdout.readline().strip()
with open(os.path.join(home, "config.toml"), "w") as f:
    f.write(f'model = "deepseek/deepseek-v4-flash"\n[providers.deepseek]\nbase_url = "{base_url}"\n'
            "context_window = 1000000\n"
            "[providers.deepseek.price]\ninput_cache_hit = 0.003\ninput_cache_miss = 0.15\n"
            'output = 0.60\ncurrency = "USD"\n')

socket = os.path.join(home, "tmux.sock")
def tmux(*args, capture=False):
    return subprocess.run(["tmux", "-S", socket, *args], check=True, text=True,
                          capture_output=capture).stdout

def screen():
    return tmux("capture-pane", "-p", "-t", "shot", capture=True)

def wait_for(text, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if text in screen():
            return
        time.sleep(0.1)
    raise SystemExit(f"never saw {text!r}:\n{screen()}")

try:
    tmux("new-session", "-d", "-s", "shot", "-x", "100", "-y", "47", "-c", home,
         "-e", f"KEEL_HOME={home}", "-e", "DEEPSEEK_API_KEY=sk-demo", "-e", "TERM=xterm-256color",
         "-e", "COLORTERM=truecolor", keel)
    wait_for("deepseek-v4-flash · ask")
    tmux("send-keys", "-t", "shot", "-l", "plan the fix")
    tmux("send-keys", "-t", "shot", "Enter")
    wait_for("tokens:")
    tmux("send-keys", "-t", "shot", "-l", "fix it")
    tmux("send-keys", "-t", "shot", "Enter")
    for question in ("? bash:", "? edit_file:"):
        wait_for(question)
        time.sleep(0.8)  # a key in a question's first moments is not an answer
        tmux("send-keys", "-t", "shot", "y")
    wait_for("Done:")
    tmux("send-keys", "-t", "shot", "-l", "then explain @parse.rs")
    wait_for("attaches")
    time.sleep(0.3)
    capture = tmux("capture-pane", "-e", "-p", "-t", "shot", capture=True)
finally:
    subprocess.run(["tmux", "-S", socket, "kill-server"], capture_output=True)
    mock.terminate()

converter = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "tools", "ansi2html.py")
page = subprocess.run([sys.executable, converter], input=capture, text=True,
                      capture_output=True, check=True).stdout
# Box drawing joins up when lines are as tall as the font's cell.
page = page.replace("14px/1.25", "14px/1.17")
page_file = os.path.join(home, "screen.html")
with open(page_file, "w") as f:
    f.write(page)
chromium = shutil.which("chromium") or "/usr/bin/chromium"
subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", f"--screenshot={out_png}",
                "--window-size=880,830", f"file://{page_file}"], check=True, capture_output=True)
shutil.rmtree(home, ignore_errors=True)
print(out_png)
