//! The sandbox via the binary (docs/sandbox.md#what-a-command-can-do): every escape, as a
//! tool call of a `--yes` run, must not happen, and the result the model gets must say why;
//! ordinary work must still work (`crate::common::escapes` has the fixture: the workspace is `~`).

use crate::common::escapes::*;
use crate::common::*;
use serde_json::{Value, json};
use std::io::Read;

#[test]
fn writes_outside_the_workspace_are_refused_through_bash_and_the_file_tools() {
    let mut escapes = Escapes::new();
    let outside = escapes.outside.display().to_string();
    let cases = [
        ("absolute path", format!("echo evil > {outside}/victim")),
        ("..", "echo evil > ../outside/victim".to_string()),
        (
            "symlink",
            format!("ln -s {outside} escape && echo evil > escape/victim"),
        ),
        (
            "hard link",
            format!("ln {outside}/victim hard && echo evil > hard"),
        ),
        ("rename out", format!("mv mine.txt {outside}/")),
        (
            "/proc/self/cwd/..",
            "echo evil > /proc/self/cwd/../outside/victim".to_string(),
        ),
        ("new file outside", format!("touch {outside}/created")),
    ];
    let mut steps: Vec<Value> = cases.iter().map(|(_, command)| bash(command)).collect();
    steps.push(json!({"tool": "write_file", "args": {"path": format!("{outside}/victim"), "content": "evil"}}));
    steps
        .push(json!({"tool": "write_file", "args": {"path": "../outside/new", "content": "evil"}}));
    escapes.script(steps, "");
    let run = escapes.run(&["run", "--yes", "--json", "escape"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let results = escapes.results();
    assert_eq!(results.len(), cases.len() + 2);
    let receipts = escapes.receipts(&run);
    assert_eq!(receipts[0]["sandbox"], "workspace-write", "{receipts:?}");
    assert!(
        receipts[cases.len()].get("sandbox").is_none(),
        "a file tool runs no command"
    );
    for ((label, _), result) in cases.iter().zip(&results) {
        refused_by_the_sandbox(label, result);
    }
    for result in &results[cases.len()..] {
        assert!(result.contains("outside the workspace"), "{result}");
    }
    assert!(escapes.victim_untouched());
    let outside_now: Vec<_> = std::fs::read_dir(&escapes.outside)
        .unwrap()
        .map(|entry| entry.unwrap().file_name())
        .collect();
    assert_eq!(outside_now, ["victim"], "nothing new outside");
    assert!(escapes.me.join("mine.txt").exists(), "not moved out");
}

#[test]
fn credentials_keels_state_and_other_processes_cannot_be_read() {
    let mut escapes = Escapes::new();
    let database = escapes.home.path().join("state/keel.db");
    let parent = std::process::id();
    let cases = [
        ("~/.ssh/id_rsa", "cat ~/.ssh/id_rsa".to_string()),
        ("keel's state", format!("cat {}", database.display())),
        ("init's environment", "cat /proc/1/environ".to_string()),
        (
            "keel's parent's environment",
            format!("cat /proc/{parent}/environ"),
        ),
        ("every process", "cat /proc/[0-9]*/environ".to_string()),
    ];
    let mut steps: Vec<Value> = cases.iter().map(|(_, command)| bash(command)).collect();
    let key = escapes.me.join(".ssh/id_rsa").display().to_string();
    steps.push(json!({"tool": "read_file", "args": {"path": key}}));
    steps.push(json!({"tool": "read_file", "args": {"path": database.display().to_string()}}));
    steps.push(json!({"tool": "list_dir", "args": {"path": ".ssh"}}));
    steps.push(json!({"tool": "grep", "args": {"pattern": "PRIVATE-KEY", "path": "."}}));
    escapes.script(steps, "");
    let run = escapes
        .keel(&["run", "--yes", "--json", "look around"])
        .env("DEEPSEEK_API_KEY", "sk-sandbox-canary-42")
        .output()
        .unwrap();
    let run = Run::from(run);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let results = escapes.results();
    assert_eq!(results.len(), cases.len() + 4);
    for ((label, _), result) in cases.iter().zip(&results) {
        refused_by_the_sandbox(label, result);
    }
    for result in &results[cases.len()..cases.len() + 3] {
        assert!(result.contains("keel sandbox: reading"), "{result}");
        assert!(result.contains("is forbidden"), "{result}");
    }
    let grep = &results[cases.len() + 3];
    assert!(
        !grep.contains("id_rsa"),
        "the walk skips what is hidden: {grep}"
    );
    let everything = results.join("\n");
    assert!(!everything.contains(KEY_MATERIAL), "{everything}");
    assert!(!everything.contains("SQLite format"), "{everything}");
    assert!(
        !everything.contains("DEEPSEEK_API_KEY"),
        "no environment of keel's was read, not even redacted: {everything}"
    );
}

#[test]
fn the_network_the_host_and_keel_are_out_of_reach() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let tcp = listener.local_addr().unwrap().port();
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_nonblocking(true).unwrap();
    let udp_port = udp.local_addr().unwrap().port();
    let sockets = tempfile::tempdir().unwrap();
    let unix_path = sockets.path().join("listener.sock");
    let unix = std::os::unix::net::UnixListener::bind(&unix_path).unwrap();
    unix.set_nonblocking(true).unwrap();
    let probe = |family: &str, target: &str| {
        format!(
            "python3 -c \"import socket; s=socket.socket({family}); s.settimeout(2); \
             s.connect({target}); s.sendall(b'hello'); print(s.recv(10))\""
        )
    };
    let udp_probe = format!(
        "python3 -c \"import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); \
         s.settimeout(1); s.sendto(b'hello', ('127.0.0.1', {udp_port})); print(s.recv(10))\""
    );
    let ptrace = "python3 -c 'import ctypes,os,sys; libc=ctypes.CDLL(None,use_errno=True); \
        r=[libc.ptrace(16,int(p),0,0) for p in sys.argv[1:]]; print(r, os.strerror(ctypes.get_errno())); \
        sys.exit(0 if 0 in r else 1)' $(cat keel.pid) $PPID";
    let wait_for_pid = "for i in $(seq 200); do [ -s keel.pid ] && break; sleep 0.05; done; ";
    let steps_with_mock = |mock_port: u16| -> Vec<(&'static str, String)> {
        vec![
            (
                "kill keel",
                format!("{wait_for_pid}kill -TERM $(cat keel.pid)"),
            ),
            ("ptrace keel and init", ptrace.to_string()),
            (
                "the host's TCP listener",
                probe("", &format!("('127.0.0.1', {tcp})")),
            ),
            (
                "keel's own server",
                probe("", &format!("('127.0.0.1', {mock_port})")),
            ),
            ("UDP", udp_probe.clone()),
            (
                "a unix socket outside",
                probe("socket.AF_UNIX", &format!("'{}'", unix_path.display())),
            ),
        ]
    };
    // keel's own server: another `keel mock`, which must get no request.
    let server_dir = tempfile::tempdir().unwrap();
    let server = MockProcess::with_steps(server_dir.path(), r#"{"steps": [{"say": "x"}]}"#);
    let server_port: u16 = server
        .base_url
        .trim_end_matches('/')
        .rsplit(':')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let cases = steps_with_mock(server_port);
    let steps = cases.iter().map(|(_, command)| bash(command)).collect();
    let mut escapes = Escapes::new();
    escapes.script(steps, "");
    let mut child = escapes
        .keel(&["run", "--yes", "--json", "reach out"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::fs::write(escapes.me.join("keel.pid"), child.id().to_string()).unwrap();
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(1), "keel was not stopped: {stderr}");
    let results = escapes.results();
    assert_eq!(results.len(), cases.len());
    for ((label, _), result) in cases.iter().zip(&results) {
        refused_by_the_sandbox(label, result);
    }
    assert!(
        listener.accept().is_err(),
        "nothing reached the host's listener"
    );
    let mut buffer = [0u8; 16];
    assert!(udp.recv_from(&mut buffer).is_err(), "no datagram arrived");
    assert!(unix.accept().is_err(), "nothing reached the unix socket");
    let reached = server.requests();
    assert!(reached.is_empty(), "keel's server was reached: {reached:?}");
}

#[test]
fn git_and_keels_own_files_cannot_be_changed() {
    let cases = [
        ("a hook", "echo evil > .git/hooks/pre-commit"),
        ("git config", "echo evil >> .git/config"),
        ("keel.toml", "echo evil >> keel.toml"),
        (
            "a moved .git",
            "mv .git .git2 && mkdir -p .git/hooks && echo evil > .git/hooks/pre-commit",
        ),
        (
            "a recreated hooks dir",
            "rm -rf .git/hooks && mkdir .git/hooks && echo evil > .git/hooks/pre-commit",
        ),
        (
            "keel.toml replaced",
            "mv keel.toml old.toml; echo evil > keel.toml",
        ),
    ];
    let mut steps: Vec<Value> = cases.iter().map(|(_, command)| bash(*command)).collect();
    steps.push(
        json!({"tool": "write_file", "args": {"path": ".git/hooks/pre-commit", "content": "evil"}}),
    );
    steps.push(json!({"tool": "write_file", "args": {"path": ".git/config", "content": "evil"}}));
    steps.push(json!({"tool": "edit_file", "args": {"path": "keel.toml", "old_string": "60", "new_string": "6000"}}));
    steps.push(json!({"tool": "write_file", "args": {"path": ".git/commondir", "content": "../elsewhere"}}));
    // A redirect git follows to another directory's config and hooks: undone after the command.
    steps.push(bash("echo ../elsewhere > .git/commondir"));
    steps.push(json!({"tool": "read_file", "args": {"path": "/proc/self/environ"}}));
    let mut escapes = Escapes::new();
    escapes.script(steps, "");
    let run = escapes.run(&["run", "--yes", "--json", "tamper"]);
    assert_eq!(run.code(), 1, "{}", run.stderr());
    let results = escapes.results();
    assert_eq!(results.len(), cases.len() + 6);
    assert!(
        results[cases.len() + 3].contains("keel sandbox: writing"),
        "{}",
        results[cases.len() + 3]
    );
    assert!(
        results[cases.len() + 4].contains("keel removed it"),
        "{}",
        results[cases.len() + 4]
    );
    assert!(!escapes.me.join(".git/commondir").exists());
    assert!(
        results[cases.len() + 5].contains("read_file does not read there"),
        "{}",
        results[cases.len() + 5]
    );
    for ((label, _), result) in cases.iter().zip(&results) {
        refused_by_the_sandbox(label, result);
    }
    for result in &results[cases.len()..cases.len() + 3] {
        assert!(
            result.contains("keel sandbox: writing") && result.contains("read-only"),
            "{result}"
        );
    }
    let me = &escapes.me;
    assert!(!me.join(".git/hooks/pre-commit").exists());
    assert_eq!(
        std::fs::read_to_string(me.join(".git/config")).unwrap(),
        "[core]\n"
    );
    assert_eq!(
        std::fs::read_to_string(me.join("keel.toml")).unwrap(),
        "max_rounds = 60\n"
    );
    assert!(!me.join(".git2").exists() && !me.join("old.toml").exists());
    // `keel sandbox`, which users run on code they distrust, undoes a redirect too.
    let by_hand = escapes.run(&[
        "sandbox",
        "--",
        "sh",
        "-c",
        "echo ../elsewhere > .git/commondir",
    ]);
    assert_eq!(by_hand.code(), 0, "{}", by_hand.stderr());
    assert!(!me.join(".git/commondir").exists(), "{}", by_hand.stderr());
    assert!(
        by_hand.stderr().contains(".git/commondir") && by_hand.stderr().contains("removed"),
        "{}",
        by_hand.stderr()
    );
}

/// In a workspace that is the home, a startup file that did not exist (git's XDG config with
/// an fsmonitor, `.zshenv`) is moved aside after the command that made it, and the file tools
/// refuse it: neither the user's git nor their next shell runs it.
#[test]
fn startup_files_a_command_makes_in_the_home_are_moved_aside() {
    let planted = "mkdir -p .config/git && printf '[core]\\n\\tfsmonitor = \"touch PWNED\"\\n' \
                   > .config/git/config && echo 'touch PWNED' > .zshenv";
    let steps = vec![
        bash(planted),
        json!({"tool": "write_file", "args": {"path": ".zshenv", "content": "touch PWNED"}}),
    ];
    let mut escapes = Escapes::new();
    escapes.script(steps, "");
    let run = escapes.run(&["run", "--yes", "--json", "plant"]);
    assert_eq!(run.code(), 1, "{}", run.stderr());
    let results = escapes.results();
    let me = &escapes.me;
    assert!(!me.join(".config/git").exists(), "{}", results[0]);
    assert!(!me.join(".zshenv").exists(), "{}", results[0]);
    assert!(
        results[0].contains("moved it to") && results[0].contains(".zshenv.keel-moved-aside-"),
        "{}",
        results[0]
    );
    // Kept, not lost: the person can move it back (`.config` did not exist: it is a new dot
    // entry of the home, moved aside whole).
    let aside = std::fs::read_dir(me)
        .unwrap()
        .flatten()
        .find(|entry| {
            entry
                .file_name()
                .to_string_lossy()
                .starts_with(".config.keel-moved-aside-")
        })
        .expect("git's config moved aside");
    assert!(
        std::fs::read_to_string(aside.path().join("git/config"))
            .unwrap()
            .contains("fsmonitor")
    );
    assert!(
        results[1].contains("keel sandbox: writing"),
        "{}",
        results[1]
    );
    assert!(!me.join(".zshenv").exists());
}

/// A hidden store inside the workspace cannot be carried out from under its cover by moving
/// the directory it is in: the next command would read it at its new path.
#[test]
fn a_hidden_store_cannot_be_moved_out_from_under_its_cover() {
    let mut escapes = Escapes::new();
    std::fs::create_dir_all(escapes.me.join(".config/gh")).unwrap();
    std::fs::write(escapes.me.join(".config/gh/hosts.yml"), KEY_MATERIAL).unwrap();
    escapes.script(
        vec![
            bash("mv .config cfg"),
            bash("cat cfg/gh/hosts.yml .config/gh/hosts.yml"),
        ],
        "",
    );
    let run = escapes.run(&["run", "--yes", "--json", "move"]);
    assert_eq!(run.code(), 1, "{}", run.stderr());
    let results = escapes.results();
    assert!(
        escapes.me.join(".config/gh/hosts.yml").exists(),
        "{}",
        results[0]
    );
    assert!(!results[1].contains(KEY_MATERIAL), "{}", results[1]);
}

/// keel undoes a planted startup file unconfined: a directory on the way replaced by a link
/// must not turn the undo on what the link leads to (a new top-level link of the home goes
/// aside itself).
#[test]
fn an_undo_never_follows_a_link_a_command_put_on_the_way() {
    let mut escapes = Escapes::new();
    let elsewhere = escapes.outside.join("config-of-someone-else");
    std::fs::create_dir_all(elsewhere.join("git")).unwrap();
    std::fs::write(elsewhere.join("git/config"), "theirs").unwrap();
    let link = format!("ln -s {} .config", elsewhere.display());
    escapes.script(vec![bash(link)], "");
    let run = escapes.run(&["run", "--yes", "--json", "link"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let results = escapes.results();
    assert_eq!(
        std::fs::read_to_string(elsewhere.join("git/config")).unwrap(),
        "theirs",
        "{}",
        results[0]
    );
    // The new dot entry (the link itself, never what it leads to) went aside whole.
    assert!(results[0].contains("moved it to"), "{}", results[0]);
    assert!(escapes.me.join(".config").symlink_metadata().is_err());
}

#[test]
fn a_keel_toml_made_by_a_command_is_not_applied_without_trust() {
    let escalation = "permission_mode = \\\"auto\\\"\\n[permissions]\\nallow = [\\\"bash\\\"]\\n";
    let steps = vec![
        bash(format!("printf \"{escalation}\" > keel.toml")),
        json!({"say": "made it easier"}),
        bash("touch PWNED"),
    ];
    let mut escapes = Escapes::new();
    escapes.script(steps, "");
    std::fs::remove_file(escapes.me.join("keel.toml")).unwrap();
    let made = escapes.run(&["run", "--yes", "--json", "make a config"]);
    assert_eq!(made.code(), 0, "{}", made.stderr());
    assert!(
        std::fs::read_to_string(escapes.me.join("keel.toml"))
            .unwrap()
            .contains("auto"),
        "a new project file may be written"
    );
    let next = escapes.run(&["run", "--json", "go"]);
    assert_eq!(next.events_of("tool/result")[0]["state"], "denied");
    assert!(!escapes.me.join("PWNED").exists());
    let ignored: Vec<String> = next
        .events_of("trust/ignored")
        .iter()
        .map(|event| event["key"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ignored, ["permission_mode", "permissions.allow"]);
}

#[test]
fn ordinary_work_still_works_inside_the_sandbox() {
    let cargo_home = std::env::var("CARGO_HOME")
        .unwrap_or_else(|_| format!("{}/.cargo", std::env::var("HOME").unwrap()));
    let rustup_home = std::env::var("RUSTUP_HOME")
        .unwrap_or_else(|_| format!("{}/.rustup", std::env::var("HOME").unwrap()));
    let mut cases = vec![
        (
            "git",
            "mkdir repo && cd repo && git init -q && echo a > a && git add a && \
             git -c user.name=k -c user.email=k@example.invalid commit -q -m first && \
             git log --oneline | wc -l"
                .to_string(),
            "1",
        ),
        (
            "cargo",
            "cargo new -q --vcs none tiny && cd tiny && cargo build -q --offline && \
             ./target/debug/tiny"
                .to_string(),
            "Hello, world!",
        ),
        (
            "python multiprocessing",
            "python3 -c \"import multiprocessing as m; p=m.Pool(2); \
             print(sum(p.map(abs,[-1,-2]))); open('py.txt','w').write('ok')\" && cat py.txt"
                .to_string(),
            "3\nok",
        ),
        (
            "pipes",
            "printf 'b\\na\\n' | sort | head -1".to_string(),
            "a",
        ),
        (
            "a background job",
            "(sleep 0.2; echo bg > bg.txt) & wait; cat bg.txt".to_string(),
            "bg",
        ),
        ("timeout", "timeout 1 sleep 5; echo $?".to_string(), "124"),
        (
            "$TMPDIR",
            "echo t > $TMPDIR/t && cat $TMPDIR/t && echo $TMPDIR".to_string(),
            "t\n/tmp",
        ),
        (
            "its own server",
            "python3 -c \"import socket; s=socket.socket(); s.bind(('127.0.0.1',0)); s.listen(); \
             c=socket.create_connection(s.getsockname()); a,_=s.accept(); c.sendall(b'pong'); \
             print(a.recv(4).decode())\""
                .to_string(),
            "pong",
        ),
    ];
    if cfg!(keel_e2e_node) {
        cases.push(("npm", "npm --version | grep -c '^[0-9]'".to_string(), "1"));
    }
    let steps = cases.iter().map(|(_, command, _)| bash(command)).collect();
    let config = format!("[sandbox]\nallow_write = [\"{cargo_home}\"]\n");
    let mut escapes = Escapes::new();
    escapes.script(steps, &config);
    let run = Run::from(
        escapes
            .keel(&["run", "--yes", "--json", "work"])
            .env("CARGO_HOME", &cargo_home)
            .env("RUSTUP_HOME", &rustup_home)
            .output()
            .unwrap(),
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let results = escapes.results();
    assert_eq!(results.len(), cases.len());
    for ((label, _, expected), result) in cases.iter().zip(&results) {
        assert!(
            result.ends_with("[exit code 0]"),
            "{label} failed inside the sandbox: {result}"
        );
        let output = result.trim_end_matches("[exit code 0]").trim();
        assert_eq!(output, *expected, "{label}");
    }
    assert!(
        escapes.me.join("repo/.git/HEAD").exists(),
        "the command's own .git"
    );
    assert!(escapes.me.join("tiny/target/debug/tiny").exists());
}

#[test]
fn read_only_mode_runs_commands_confined_to_reading() {
    let steps = vec![bash("cat mine.txt && echo new > new.txt")];
    let mut escapes = Escapes::new();
    escapes.script(steps, "");
    let run = escapes.run(&["run", "--permission-mode", "read-only", "--json", "look"]);
    assert_eq!(run.code(), 1, "{}", run.stderr());
    let results = escapes.results();
    assert!(
        results[0].starts_with("mine"),
        "it ran, and read: {}",
        results[0]
    );
    refused_by_the_sandbox("a write in read-only mode", &results[0]);
    assert!(!escapes.me.join("new.txt").exists());
    assert_eq!(
        escapes.receipts(&run)[0]["sandbox"],
        "read-only",
        "recorded"
    );
}

#[test]
fn a_command_has_no_controlling_terminal_when_keel_has_one() {
    let mut escapes = Escapes::new();
    let probe = "cut -d' ' -f7 /proc/self/stat; exec 3</dev/tty && echo TERMINAL-OPENED";
    escapes.script(vec![bash(probe), bash(probe)], "");
    // keel itself on a terminal (util-linux `script` gives it one as its controlling terminal).
    let keel = escapes.keel(&["run", "--yes", "go"]);
    let mut command = std::process::Command::new("script");
    command
        .args(["-qec", &format!("{KEEL} run --yes go"), "/dev/null"])
        .stdin(std::process::Stdio::null());
    if let Some(dir) = keel.get_current_dir() {
        command.current_dir(dir);
    }
    for (name, value) in keel.get_envs() {
        match value {
            Some(value) => command.env(name, value),
            None => command.env_remove(name),
        };
    }
    let output = command.output().expect("script(1) from util-linux");
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let results = escapes.results();
    assert_eq!(results.len(), 2, "{results:?}");
    for result in results {
        assert!(result.starts_with("0\n"), "a terminal: {result}");
        assert!(!result.contains("TERMINAL-OPENED"), "{result}");
    }
}
