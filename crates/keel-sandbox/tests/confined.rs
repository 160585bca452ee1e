//! Commands run under the real sandbox on this kernel: each escape is tried and must not
//! happen; ordinary work must still work. (Detection must find the minimum here: CI's kernel
//! has Landlock ABI 7, seccomp and unprivileged user namespaces.)

#![allow(clippy::unwrap_used, clippy::panic)]

use keel_sandbox::{Places, Sandbox, SandboxMode, SandboxSettings, on_lasting_thread};
use std::path::{Path, PathBuf};
use std::process::Command;

struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
    workspace: PathBuf,
    home: PathBuf,
    keel_home: PathBuf,
}

impl Fixture {
    /// A workspace with a `.git`, a home with a key, and keel's home with its state. With
    /// `temp`, the session has a temp dir (which becomes `/tmp`, hiding the fixture's own
    /// `/tmp` tree from the command).
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let workspace = root.join("ws");
        let home = root.join("home");
        let keel_home = root.join("keel-home");
        std::fs::create_dir_all(workspace.join(".git/hooks")).unwrap();
        std::fs::write(workspace.join(".git/config"), "[core]\n").unwrap();
        std::fs::write(workspace.join("keel.toml"), "max_rounds = 3\n").unwrap();
        std::fs::create_dir_all(home.join(".ssh")).unwrap();
        std::fs::write(home.join(".ssh/id_rsa"), "PRIVATE-KEY-MATERIAL").unwrap();
        std::fs::create_dir_all(keel_home.join("state")).unwrap();
        std::fs::write(keel_home.join("state/keel.db"), "STATE-DATABASE").unwrap();
        std::fs::create_dir_all(keel_home.join("tmp/this")).unwrap();
        std::fs::create_dir_all(root.join("outside")).unwrap();
        std::fs::write(root.join("outside/victim"), "untouched").unwrap();
        Fixture {
            _dir: dir,
            root,
            workspace,
            home,
            keel_home,
        }
    }

    fn sandbox(&self, settings: SandboxSettings, temp: bool) -> Sandbox {
        Sandbox::new(
            settings,
            Places {
                workspace: self.workspace.clone(),
                extra_dirs: Vec::new(),
                keel_home: self.keel_home.clone(),
                home: Some(self.home.clone()),
                temp_dir: temp.then(|| self.keel_home.join("tmp/this")),
                referenced_files: Vec::new(),
            },
        )
    }

    /// Run `script` with bash under `sandbox` in `mode`: (exit code or 128+signal, output).
    fn run_in(&self, sandbox: &Sandbox, mode: SandboxMode, script: &str) -> (i32, String) {
        let mut command = Command::new("bash");
        command.arg("-c").arg(script).current_dir(&self.workspace);
        let confinement = sandbox.confine(&mut command, mode).unwrap();
        let output = on_lasting_thread(move || command.output())
            .unwrap()
            .unwrap_or_else(|error| panic!("{}", confinement.explain(error)));
        use std::os::unix::process::ExitStatusExt;
        let code = output
            .status
            .code()
            .unwrap_or_else(|| 128 + output.status.signal().unwrap_or(0));
        let text = String::from_utf8_lossy(&output.stdout).into_owned()
            + &String::from_utf8_lossy(&output.stderr);
        (code, text)
    }

    fn run(&self, script: &str) -> (i32, String) {
        let sandbox = self.sandbox(SandboxSettings::default(), false);
        self.run_in(&sandbox, SandboxMode::WorkspaceWrite, script)
    }

    fn outside(&self) -> PathBuf {
        self.root.join("outside")
    }
}

fn unchanged(path: &Path) -> bool {
    std::fs::read_to_string(path).is_ok_and(|text| text == "untouched")
}

#[test]
fn the_minimum_is_enforced_on_this_kernel() {
    let fixture = Fixture::new();
    let sandbox = fixture.sandbox(SandboxSettings::default(), true);
    let enforcement = sandbox.enforcement(SandboxMode::WorkspaceWrite);
    assert!(enforcement.is_enforced(), "{enforcement:?}");
    let described = sandbox.describe(SandboxMode::WorkspaceWrite).join("\n");
    assert!(described.contains("Landlock ABI"), "{described}");
    assert!(described.contains("PID namespace"), "{described}");
}

#[test]
fn writes_outside_the_workspace_are_refused_however_they_are_spelled() {
    let fixture = Fixture::new();
    let outside = fixture.outside();
    std::os::unix::fs::symlink(&outside, fixture.workspace.join("escape")).unwrap();
    std::fs::write(fixture.workspace.join("mine"), "mine").unwrap();
    let victim = outside.join("victim");
    let attempts = [
        format!("echo evil > {}", victim.display()),
        "echo evil > ../outside/victim".to_string(),
        "echo evil > escape/victim".to_string(),
        format!("ln {} linked && echo evil > linked", victim.display()),
        format!("mv mine {}/new", outside.display()),
        "echo evil > /proc/self/cwd/../outside/victim".to_string(),
        format!("touch {}/created", outside.display()),
    ];
    for attempt in attempts {
        let (code, output) = fixture.run(&attempt);
        assert_ne!(code, 0, "{attempt}: {output}");
        assert!(unchanged(&victim), "{attempt} changed the victim");
        assert!(!outside.join("new").exists() && !outside.join("created").exists());
    }
    assert!(
        fixture.workspace.join("mine").exists(),
        "the rename did not happen"
    );
    let (code, output) =
        fixture.run("echo fine > inside.txt && mkdir -p a/b && mv inside.txt a/b/");
    assert_eq!(code, 0, "{output}");
    assert!(fixture.workspace.join("a/b/inside.txt").exists());
}

#[test]
fn hidden_paths_cannot_be_read_and_protected_paths_cannot_change() {
    let fixture = Fixture::new();
    for path in [
        fixture.home.join(".ssh/id_rsa"),
        fixture.keel_home.join("state/keel.db"),
    ] {
        let (code, output) = fixture.run(&format!("cat {}", path.display()));
        assert_ne!(code, 0, "{output}");
        assert!(output.contains("Permission denied"), "{output}");
        assert!(!output.contains("PRIVATE-KEY") && !output.contains("STATE-DATABASE"));
    }
    let attempts = [
        "echo evil > .git/hooks/pre-commit",
        "echo evil >> .git/config",
        "echo evil >> keel.toml",
        "mv .git .git2 && mkdir -p .git/hooks && echo evil > .git/hooks/pre-commit",
        "rm -rf .git/hooks && mkdir .git/hooks && echo evil > .git/hooks/pre-commit",
        "mv keel.toml old.toml && echo evil > keel.toml",
    ];
    for attempt in attempts {
        let (code, output) = fixture.run(attempt);
        assert_ne!(code, 0, "{attempt}: {output}");
        assert!(
            !fixture.workspace.join(".git/hooks/pre-commit").exists(),
            "{attempt}"
        );
        assert_eq!(
            std::fs::read_to_string(fixture.workspace.join("keel.toml")).unwrap(),
            "max_rounds = 3\n"
        );
        assert_eq!(
            std::fs::read_to_string(fixture.workspace.join(".git/config")).unwrap(),
            "[core]\n"
        );
        assert!(!fixture.workspace.join(".git2").exists());
    }
    // The rest of .git is the command's: objects can be written.
    let (code, output) = fixture.run("mkdir -p .git/objects/aa && echo x > .git/objects/aa/bb");
    assert_eq!(code, 0, "{output}");
}

#[test]
fn keel_and_every_other_process_are_out_of_reach() {
    let fixture = Fixture::new();
    let keel = std::process::id();
    let parent = std::os::unix::process::parent_id();
    for attempt in [
        format!("kill -0 {keel}"),
        format!("cat /proc/{keel}/environ"),
        format!("cat /proc/{parent}/environ"),
        "cat /proc/1/environ".to_string(),
    ] {
        let (code, output) = fixture.run(&attempt);
        assert_ne!(code, 0, "{attempt}: {output}");
    }
    let (code, output) = fixture.run("ls /proc | grep -c '^[0-9]'");
    assert_eq!(code, 0, "{output}");
    let count: u32 = output.trim().parse().unwrap();
    assert!(count < 10, "only the sandbox's own processes: {output}");
    let (code, output) = fixture.run("grep CapBnd /proc/self/status");
    assert_eq!(code, 0);
    assert!(output.contains("0000000000000000"), "{output}");
}

#[test]
fn the_network_is_off_but_the_commands_own_loopback_works() {
    let fixture = Fixture::new();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (code, output) = fixture.run(&format!("exec 3<>/dev/tcp/127.0.0.1/{port}"));
    assert_ne!(code, 0, "{output}");
    listener.set_nonblocking(true).unwrap();
    assert!(
        listener.accept().is_err(),
        "nothing reached the host's listener"
    );
    let own = "python3 - <<'PY'\nimport socket\ns=socket.socket(); s.bind(('127.0.0.1',0)); s.listen()\nc=socket.create_connection(s.getsockname()); a,_=s.accept(); c.sendall(b'pong'); print(a.recv(4).decode())\nPY";
    let (code, output) = fixture.run(own);
    assert_eq!(code, 0, "{output}");
    assert!(output.contains("pong"), "{output}");
    let settings = SandboxSettings {
        allow_network: true,
        ..SandboxSettings::default()
    };
    let open = fixture.sandbox(settings, false);
    let (code, output) = fixture.run_in(
        &open,
        SandboxMode::WorkspaceWrite,
        &format!("exec 3<>/dev/tcp/127.0.0.1/{port}"),
    );
    assert_eq!(code, 0, "allow_network reaches the host: {output}");
}

#[test]
fn the_temp_dir_is_tmp_and_read_only_mode_writes_only_there() {
    let fixture = Fixture::new();
    let sandbox = fixture.sandbox(SandboxSettings::default(), true);
    let (code, output) = fixture.run_in(
        &sandbox,
        SandboxMode::WorkspaceWrite,
        "echo t > /tmp/t && echo $TMPDIR && echo w > written",
    );
    assert_eq!(code, 0, "{output}");
    assert_eq!(output.trim(), "/tmp");
    assert!(fixture.keel_home.join("tmp/this/t").exists());
    assert!(
        fixture.workspace.join("written").exists(),
        "the workspace under /tmp is back"
    );
    let (code, output) = fixture.run_in(
        &sandbox,
        SandboxMode::ReadOnly,
        "cat written && echo r > /tmp/r && echo no > refused",
    );
    assert_ne!(code, 0, "{output}");
    assert!(output.contains('w'), "reading works: {output}");
    assert!(fixture.keel_home.join("tmp/this/r").exists());
    assert!(!fixture.workspace.join("refused").exists());
}

#[test]
fn exit_codes_and_signals_pass_through_and_mount_is_refused() {
    let fixture = Fixture::new();
    assert_eq!(fixture.run("exit 7").0, 7);
    assert_eq!(fixture.run("kill -KILL $$").0, 128 + 9);
    let (code, output) = fixture.run("echo $$");
    assert_eq!((code, output.trim()), (0, "2"), "the command is not PID 1");
    let (code, output) = fixture.run("mount -t tmpfs none /mnt");
    assert_ne!(code, 0, "{output}");
}

#[test]
fn off_confines_nothing() {
    let fixture = Fixture::new();
    let sandbox = fixture.sandbox(SandboxSettings::default(), false);
    let victim = fixture.outside().join("victim");
    let (code, output) = fixture.run_in(
        &sandbox,
        SandboxMode::Off,
        &format!("echo changed > {}", victim.display()),
    );
    assert_eq!(code, 0, "{output}");
    assert!(!unchanged(&victim));
}
