//! Commands run under the real sandbox on this kernel: each escape is tried and must not
//! happen; ordinary work must still work. (Detection must find the minimum here: CI's kernel
//! has Landlock ABI 7, seccomp and unprivileged user namespaces.)

#![allow(clippy::unwrap_used, clippy::panic)]

mod fixture;

use fixture::{Fixture, unchanged};
use keel_sandbox::{SandboxMode, SandboxSettings, on_lasting_thread};
use std::path::{Path, PathBuf};
use std::process::Command;

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
    // A few of the other stores: a token, another agent's login, a history, a keyring.
    for (store, file) in [
        (".config/github-copilot", "hosts.json"),
        (".codex", "auth.json"),
        (".local/share/keyrings", "login.keyring"),
    ] {
        std::fs::create_dir_all(fixture.home.join(store)).unwrap();
        std::fs::write(fixture.home.join(store).join(file), "PRIVATE-KEY-TOKEN").unwrap();
    }
    std::fs::write(fixture.home.join(".bash_history"), "PRIVATE-KEY typed").unwrap();
    std::fs::write(fixture.home.join(".pgpass"), "db:5432:*:me:PRIVATE-KEY").unwrap();
    // A key kept in a dotfiles repository and linked into ~/.ssh: hidden at its real path too.
    std::fs::create_dir_all(fixture.root.join("dotfiles/ssh")).unwrap();
    std::fs::write(
        fixture.root.join("dotfiles/ssh/id_ed25519"),
        "PRIVATE-KEY-LINKED",
    )
    .unwrap();
    std::fs::write(fixture.root.join("dotfiles/README"), "public").unwrap();
    std::os::unix::fs::symlink(
        fixture.root.join("dotfiles/ssh/id_ed25519"),
        fixture.home.join(".ssh/id_ed25519"),
    )
    .unwrap();
    let mut secrets = vec![
        fixture.home.join(".ssh/id_rsa"),
        fixture.keel_home.join("state/keel.db"),
        fixture.home.join(".config/github-copilot/hosts.json"),
        fixture.home.join(".codex/auth.json"),
        fixture.home.join(".local/share/keyrings/login.keyring"),
        fixture.home.join(".bash_history"),
        fixture.home.join(".pgpass"),
        fixture.root.join("dotfiles/ssh/id_ed25519"),
    ];
    // The machine's password hashes, where this process (root) could read them.
    if std::fs::read("/etc/shadow").is_ok() {
        secrets.push(PathBuf::from("/etc/shadow"));
    }
    for path in secrets {
        let (code, output) = fixture.run(&format!("cat {}", path.display()));
        assert_ne!(code, 0, "{}: {output}", path.display());
        assert!(output.contains("Permission denied"), "{output}");
        assert!(!output.contains("PRIVATE-KEY") && !output.contains("STATE-DATABASE"));
        assert!(!output.contains("root:"), "{output}");
    }
    // What sits beside the linked key stays readable.
    let (code, output) = fixture.run(&format!("cat {}/dotfiles/README", fixture.root.display()));
    assert_eq!(code, 0, "{output}");
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

#[test]
fn no_terminal_is_reachable_and_typing_into_one_is_refused() {
    let fixture = Fixture::new();
    // No controlling terminal (field 7 of `stat`, `tty_nr`, is 0), whether the command joins
    // the session's namespaces or makes its own (an MCP server's, a snapshot's git).
    let script = "cut -d' ' -f7 /proc/self/stat; exec 3</dev/tty";
    let (code, output) = fixture.run(script);
    assert_ne!(code, 0, "{output}");
    assert!(output.starts_with("0\n"), "no terminal: {output}");
    let sandbox = fixture.sandbox(SandboxSettings::default(), false);
    let policy = sandbox.policy(SandboxMode::WorkspaceWrite);
    let mut command = Command::new("bash");
    command.args(["-c", script]).current_dir(&fixture.workspace);
    let _confinement = sandbox.confine_policy(&mut command, &policy).unwrap();
    let output = on_lasting_thread(move || command.output())
        .unwrap()
        .unwrap();
    assert!(!output.status.success());
    assert!(output.stdout.starts_with(b"0\n"), "{output:?}");
    // Even on a terminal of its own, made its controlling terminal (where the kernel itself
    // would allow it), TIOCSTI is refused.
    let (code, output) = fixture.run(
        "python3 -c \"import os,fcntl,termios; m,s=os.openpty(); n=os.ttyname(s); os.setsid(); \
         fd=os.open(n, os.O_RDWR); fcntl.ioctl(fd, termios.TIOCSTI, b'x')\"",
    );
    assert_ne!(code, 0, "{output}");
    assert!(output.contains("Operation not permitted"), "{output}");
    // The user's other terminals are not there: the sandbox has a devpts of its own.
    let mut holder = Command::new("python3")
        .args([
            "-c",
            "import os,time; m,s=os.openpty(); print(os.ttyname(s), flush=True); time.sleep(30)",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut name = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(holder.stdout.take().unwrap()),
        &mut name,
    )
    .unwrap();
    let (code, output) = fixture.run(&format!("exec 3<>{}", name.trim()));
    let _ = holder.kill();
    let _ = holder.wait();
    assert_ne!(code, 0, "another terminal was opened: {output}");
}

#[test]
fn metadata_outside_the_writable_roots_cannot_change() {
    let fixture = Fixture::new();
    let victim = fixture.outside().join("victim");
    for attempt in [
        format!("chmod 4777 {}", victim.display()),
        format!("touch -d 2001-01-01 {}", victim.display()),
        format!(
            "python3 -c \"import os; os.setxattr('{}', 'user.x', b'1')\"",
            victim.display()
        ),
    ] {
        let (code, output) = fixture.run(&attempt);
        assert_ne!(code, 0, "{attempt}: {output}");
    }
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&victim).unwrap().permissions().mode();
    assert_eq!(mode & 0o7000, 0, "no setuid bit: {mode:o}");
    // In read-only mode the workspace itself is read-only, metadata included.
    let sandbox = fixture.sandbox(SandboxSettings::default(), false);
    let (code, output) = fixture.run_in(&sandbox, SandboxMode::ReadOnly, "chmod 000 keel.toml");
    assert_ne!(code, 0, "{output}");
    // Inside the workspace, it is the command's own.
    let (code, output) = fixture.run("touch mine && chmod 600 mine");
    assert_eq!(code, 0, "{output}");
}

#[test]
fn a_git_redirect_made_by_a_command_is_undone_and_nested_namespaces_are_refused() {
    let fixture = Fixture::new();
    let sandbox = fixture.sandbox(SandboxSettings::default(), false);
    let absent = sandbox.planted_absent_now();
    let (code, output) = fixture.run_in(
        &sandbox,
        SandboxMode::WorkspaceWrite,
        "echo ../elsewhere > .git/commondir",
    );
    assert_eq!(code, 0, "{output}");
    assert_eq!(
        sandbox.undo_planted(&absent),
        [keel_sandbox::Undone {
            path: fixture.workspace.join(".git/commondir"),
            how: keel_sandbox::Undo::Removed,
        }]
    );
    assert!(!fixture.workspace.join(".git/commondir").exists());
    // One the user makes between commands (another terminal) is theirs: not undone.
    std::fs::write(fixture.workspace.join(".git/commondir"), "../mine\n").unwrap();
    let absent = sandbox.planted_absent_now();
    let (code, output) = fixture.run_in(&sandbox, SandboxMode::WorkspaceWrite, "true");
    assert_eq!(code, 0, "{output}");
    assert!(sandbox.undo_planted(&absent).is_empty());
    assert!(fixture.workspace.join(".git/commondir").exists());
    std::fs::remove_file(fixture.workspace.join(".git/commondir")).unwrap();
    for attempt in [
        "unshare -U true",
        "python3 -c \"import os; os.unshare(os.CLONE_NEWUSER)\"",
    ] {
        let (code, output) = fixture.run(attempt);
        assert_ne!(code, 0, "{attempt}: {output}");
    }
}

#[test]
fn a_symlink_left_in_the_temp_dir_leads_no_mount_out() {
    let fixture = Fixture::new();
    let temp = fixture.keel_home.join("tmp/this");
    // The workspace is under /tmp: attaching it under the new /tmp makes directories in the
    // temp dir, named like its path. A command plants a link where the first one goes.
    let first = fixture
        .workspace
        .strip_prefix("/tmp")
        .unwrap()
        .components()
        .next()
        .unwrap();
    std::os::unix::fs::symlink(fixture.outside(), temp.join(first)).unwrap();
    let sandbox = fixture.sandbox(SandboxSettings::default(), true);
    let (code, output) = fixture.run_in(&sandbox, SandboxMode::WorkspaceWrite, "pwd");
    assert_eq!(code, 0, "{output}");
    let outside_now: Vec<_> = std::fs::read_dir(fixture.outside())
        .unwrap()
        .map(|entry| entry.unwrap().file_name())
        .collect();
    assert_eq!(outside_now, ["victim"], "nothing made outside");
}

#[test]
fn sockets_in_the_home_are_hidden() {
    let fixture = Fixture::new();
    std::fs::create_dir_all(fixture.home.join(".agent")).unwrap();
    let socket = fixture.home.join(".agent/agent.sock");
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    listener.set_nonblocking(true).unwrap();
    let (code, output) = fixture.run(&format!(
        "python3 -c \"import socket; s=socket.socket(socket.AF_UNIX); s.connect('{}')\"",
        socket.display()
    ));
    assert_ne!(code, 0, "{output}");
    assert!(listener.accept().is_err(), "nothing reached the agent");
}

#[test]
fn descriptors_keel_was_handed_do_not_reach_the_command() {
    use std::os::fd::AsRawFd;
    let fixture = Fixture::new();
    let file = std::fs::File::open(fixture.home.join(".ssh/id_rsa")).unwrap();
    let fd = file.as_raw_fd();
    // As a careless parent leaves it: inherited across exec.
    #[allow(unsafe_code)]
    // SAFETY: clearing a flag of a descriptor this test owns.
    unsafe {
        libc::fcntl(fd, libc::F_SETFD, 0);
    }
    let (code, output) = fixture.run(&format!("cat <&{fd}"));
    assert_ne!(code, 0, "{output}");
    assert!(!output.contains("PRIVATE-KEY"), "{output}");
    drop(file);
}

#[test]
fn a_root_replaced_by_a_link_confines_nothing_to_where_it_leads() {
    let fixture = Fixture::new();
    // A writable root holding the workspace: a command could swap the workspace for a link.
    let settings = SandboxSettings {
        allow_write: vec![fixture.root.display().to_string()],
        ..SandboxSettings::default()
    };
    let sandbox = fixture.sandbox(settings, false);
    let (code, output) = fixture.run_in(&sandbox, SandboxMode::WorkspaceWrite, "true");
    assert_eq!(code, 0, "{output}");
    let moved = fixture.root.join("ws-moved");
    std::fs::rename(&fixture.workspace, &moved).unwrap();
    std::os::unix::fs::symlink(fixture.outside(), &fixture.workspace).unwrap();
    let mut command = Command::new("true");
    let refused = sandbox
        .confine(&mut command, SandboxMode::WorkspaceWrite)
        .unwrap_err();
    assert!(refused.to_string().contains("no longer leads"), "{refused}");
}

/// The network namespace of a `readlink` confined by `confine`.
fn network_of(
    confine: impl FnOnce(&mut Command) -> Result<keel_sandbox::Confinement, keel_sandbox::SandboxError>,
) -> String {
    let mut command = Command::new("readlink");
    command.arg("/proc/self/ns/net");
    let confinement = confine(&mut command).unwrap();
    let output = on_lasting_thread(move || command.output())
        .unwrap()
        .unwrap_or_else(|error| panic!("{}", confinement.explain(error)));
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

#[test]
fn a_sessions_commands_share_one_network_namespace_of_their_own() {
    let fixture = Fixture::new();
    let sandbox = fixture.sandbox(SandboxSettings::default(), false);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let host = std::fs::read_link("/proc/self/ns/net").unwrap();
    let script = format!(
        "readlink /proc/self/ns/net; python3 -c \"import socket; s=socket.socket(); \
         s.bind(('127.0.0.1',0)); s.listen(); c=socket.create_connection(s.getsockname()); \
         a,_=s.accept(); print('own loopback')\"; exec 3<>/dev/tcp/127.0.0.1/{port} \
         && echo REACHED-HOST"
    );
    let mut seen = Vec::new();
    for _ in 0..3 {
        let (_, output) = fixture.run_in(&sandbox, SandboxMode::WorkspaceWrite, &script);
        assert!(output.contains("own loopback"), "{output}");
        assert!(!output.contains("REACHED-HOST"), "{output}");
        seen.push(output.lines().next().unwrap().to_string());
    }
    assert_ne!(seen[0], host.display().to_string(), "not the host's");
    assert!(
        seen.iter().all(|ns| *ns == seen[0]),
        "one per session: {seen:?}"
    );
    assert!(listener.accept().is_err());
    let other = fixture.sandbox(SandboxSettings::default(), false);
    let (_, output) = fixture.run_in(
        &other,
        SandboxMode::WorkspaceWrite,
        "readlink /proc/self/ns/net",
    );
    assert_ne!(output.trim(), seen[0], "another session has its own");
    // A server (long-lived, third-party) shares no loopback with the commands or another.
    let policy = sandbox
        .server_policy(keel_sandbox::ServerConfinement::WorkspaceWrite, "files")
        .unwrap();
    assert_eq!(policy.network, keel_sandbox::Network::Off);
    let servers: Vec<String> = (0..2)
        .map(|_| network_of(|command| sandbox.confine_policy(command, &policy)))
        .collect();
    assert!(!servers.contains(&seen[0]), "{servers:?} vs {}", seen[0]);
    assert_ne!(servers[0], servers[1]);
    // Without a PID namespace a command's survivors would linger there: nothing is shared.
    let without_pid = keel_sandbox::detected().without("pidns");
    let alone: Vec<String> = (0..2)
        .map(|_| {
            network_of(|command| {
                sandbox.confine_with(command, SandboxMode::WorkspaceWrite, &without_pid)
            })
        })
        .collect();
    assert!(!alone.contains(&seen[0]), "{alone:?} vs {}", seen[0]);
    assert_ne!(alone[0], alone[1]);
}

#[test]
fn an_mcp_server_reads_the_hosts_tmp_but_not_its_sockets_and_writes_only_its_own() {
    let fixture = Fixture::new();
    let sandbox = fixture.sandbox(SandboxSettings::default(), true);
    std::fs::write(fixture.root.join("server.js"), "SERVER-CODE").unwrap();
    std::fs::create_dir_all(fixture.root.join("sockets")).unwrap();
    let socket = fixture.root.join("sockets/agent.sock");
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    listener.set_nonblocking(true).unwrap();
    // A Kerberos ticket cache in the host's /tmp (where the default one lives).
    let ticket = tempfile::Builder::new()
        .prefix("krb5cc_keeltest")
        .tempfile_in("/tmp")
        .unwrap();
    std::fs::write(ticket.path(), "TICKET-GRANTING-TICKET").unwrap();
    let policy = sandbox
        .server_policy(
            keel_sandbox::ServerConfinement::Mcp,
            "every\0config.toml\0node server.js",
        )
        .unwrap();
    // The user's own caches, which the user's unconfined tools run code from.
    for cache in [".npm", ".cache"] {
        std::fs::create_dir_all(fixture.home.join(cache)).unwrap();
    }
    let script = format!(
        "cat {root}/server.js; echo; python3 -c \"import socket; s=socket.socket(socket.AF_UNIX); \
         s.connect('{sock}')\" || echo REFUSED; echo w > $TMPDIR/mine && echo WROTE-TEMP; \
         echo x > {root}/ws/new || echo NO-WORKSPACE; \
         echo x > {home}/.npm/planted || echo NO-USER-NPM; \
         echo x > {home}/.cache/planted || echo NO-USER-CACHE; \
         mkdir -p $npm_config_cache/_npx $XDG_CACHE_HOME/uv && echo OWN-CACHES; \
         cat {ticket}",
        root = fixture.root.display(),
        sock = socket.display(),
        home = fixture.home.display(),
        ticket = ticket.path().display(),
    );
    let mut command = Command::new("bash");
    command
        .arg("-c")
        .arg(&script)
        .current_dir(&fixture.workspace);
    let confinement = sandbox.confine_policy(&mut command, &policy).unwrap();
    let output = on_lasting_thread(move || command.output())
        .unwrap()
        .unwrap_or_else(|error| panic!("{}", confinement.explain(error)));
    let text = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    assert!(
        text.contains("SERVER-CODE"),
        "the host's /tmp is readable: {text}"
    );
    assert!(text.contains("REFUSED"), "{text}");
    assert!(listener.accept().is_err(), "nothing reached the socket");
    assert!(text.contains("WROTE-TEMP"), "{text}");
    assert!(text.contains("NO-WORKSPACE"), "{text}");
    assert!(!fixture.workspace.join("new").exists());
    assert!(
        text.contains("NO-USER-NPM") && text.contains("NO-USER-CACHE"),
        "{text}"
    );
    assert!(text.contains("OWN-CACHES"), "{text}");
    assert!(!text.contains("TICKET-GRANTING"), "{text}");
    let caches: Vec<PathBuf> = std::fs::read_dir(fixture.keel_home.join("cache/mcp"))
        .unwrap()
        .flatten()
        .map(|entry| entry.path())
        .collect();
    assert_eq!(caches.len(), 1, "{caches:?}");
    assert!(
        caches[0]
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("every-")
    );
    assert!(caches[0].join("npm/_npx").is_dir());
    assert!(caches[0].join("xdg/uv").is_dir());
    // Another server writes a cache of its own, not this one.
    let other = sandbox
        .server_policy(
            keel_sandbox::ServerConfinement::Mcp,
            "every\0.mcp.json\0node other.js",
        )
        .unwrap();
    assert_eq!(other.writable.len(), 1);
    assert!(
        !other.writable[0].starts_with(&caches[0]),
        "{:?}",
        other.writable
    );
}

#[test]
fn only_the_harmless_devices_open_and_procs_machine_wide_corners_are_read_only() {
    let fixture = Fixture::new();
    let (code, output) = fixture
        .run("head -c 4 /dev/urandom | wc -c && echo x > /dev/null && head -c 2 /dev/zero | wc -c");
    assert_eq!(code, 0, "{output}");
    assert_eq!(output.split_whitespace().collect::<Vec<_>>(), ["4", "2"]);
    // A device this process may open (as root: the kernel log, a disk, the console screen)
    // stays closed to the command.
    let opens = |path: &str| {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
            .open(path)
            .is_ok()
    };
    let reachable: Vec<&str> = [
        "/dev/kmsg",
        "/dev/loop0",
        "/dev/vcs1",
        "/dev/mem",
        "/dev/sda",
    ]
    .into_iter()
    .filter(|path| opens(path))
    .collect();
    if reachable.is_empty() {
        eprintln!("no device beyond the harmless ones opens here: the refusal is not exercised");
    }
    let open = |device: &str| {
        format!(
            "python3 -c \"import os; os.open('{device}', os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)\""
        )
    };
    for device in &reachable {
        let (code, output) = fixture.run(&open(device));
        assert_ne!(code, 0, "{device} opened: {output}");
    }
    // One the user allows (`allow_write = ["/dev/kvm"]`) opens.
    if let Some(device) = reachable.iter().find(|path| path.starts_with("/dev/loop")) {
        let settings = SandboxSettings {
            allow_write: vec![device.to_string()],
            ..SandboxSettings::default()
        };
        let sandbox = fixture.sandbox(settings, false);
        let (code, output) = fixture.run_in(&sandbox, SandboxMode::WorkspaceWrite, &open(device));
        assert_eq!(code, 0, "{device} allowed: {output}");
    }
    // Whatever else refuses a write there, the mount itself is read-only.
    let (code, output) = fixture.run("cat /proc/self/mountinfo");
    assert_eq!(code, 0, "{output}");
    let corners = ["/proc/sys", "/proc/sysrq-trigger", "/proc/irq"];
    for corner in corners.into_iter().filter(|path| Path::new(path).exists()) {
        let line = output
            .lines()
            .find(|line| line.split(' ').nth(4) == Some(corner))
            .unwrap_or_else(|| panic!("{corner} is no mount of its own:\n{output}"));
        let options = line.split(' ').nth(5).unwrap();
        assert!(options.split(',').any(|o| o == "ro"), "{corner}: {line}");
    }
}

#[test]
fn no_setuid_or_setgid_file_is_made_in_the_workspace() {
    let fixture = Fixture::new();
    let made = |name: &str| fixture.workspace.join(name);
    for (name, attempt) in [
        ("a", "touch a && chmod 4755 a"),
        ("b", "touch b && chmod g+s b"),
        ("c", "cp /bin/true c && chmod u+s c"),
        (
            "d",
            "python3 -c \"import os; os.close(os.open('d', os.O_CREAT | os.O_WRONLY, 0o4755))\"",
        ),
        (
            "e",
            "python3 -c \"import os, stat; os.mknod('e', stat.S_IFREG | 0o2755)\"",
        ),
        (
            "f",
            "python3 -c \"import os; fd = os.open('f', os.O_CREAT | os.O_WRONLY, 0o755); os.fchmod(fd, 0o4755)\"",
        ),
        ("g", "install -m 4755 /bin/true g"),
    ] {
        let (code, output) = fixture.run(attempt);
        assert_ne!(code, 0, "{attempt}: {output}");
        use std::os::unix::fs::PermissionsExt;
        if let Ok(metadata) = std::fs::metadata(made(name)) {
            let mode = metadata.permissions().mode();
            assert_eq!(mode & 0o6000, 0, "{attempt} made {mode:o}");
        }
    }
    // Ordinary modes are the command's own; openat2 looks missing, so callers fall back.
    let (code, output) = fixture.run(
        "touch h && chmod 755 h && python3 -c \"import os; os.close(os.open('i', os.O_CREAT | os.O_WRONLY, 0o600))\" \
         && python3 -c \"import ctypes, os; libc = ctypes.CDLL(None, use_errno=True); \
         r = libc.syscall(437, -100, b'h', None, 0); print(r, ctypes.get_errno())\"",
    );
    assert_eq!(code, 0, "{output}");
    assert_eq!(output.trim(), format!("-1 {}", libc::ENOSYS), "{output}");
}

#[test]
fn a_hidden_path_gone_before_the_spawn_leaves_nothing_to_hide_and_fails_nothing() {
    let fixture = Fixture::new();
    let sandbox = fixture.sandbox(SandboxSettings::default(), false);
    let gone_dir = fixture.outside().join("sockets-of-a-server-that-quit");
    let gone_file = fixture.outside().join("ticket");
    std::fs::create_dir_all(&gone_dir).unwrap();
    std::fs::write(&gone_file, "x").unwrap();
    let mut policy = sandbox.policy(SandboxMode::WorkspaceWrite);
    policy
        .forbid_read
        .extend([gone_dir.clone(), gone_file.clone()]);
    let mut command = Command::new("bash");
    command
        .arg("-c")
        .arg("echo ran")
        .current_dir(&fixture.workspace);
    let confinement = sandbox.confine_policy(&mut command, &policy).unwrap();
    // Planned while they existed; gone before the command starts.
    std::fs::remove_dir(&gone_dir).unwrap();
    std::fs::remove_file(&gone_file).unwrap();
    let output = on_lasting_thread(move || command.output())
        .unwrap()
        .unwrap_or_else(|error| panic!("{}", confinement.explain(error)));
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "ran");
}

#[test]
fn a_hidden_directory_holding_the_workspace_hides_all_else_in_it_even_what_comes_later() {
    let fixture = Fixture::outside_tmp();
    let earlier = fixture.root.join("trial-1");
    std::fs::create_dir_all(&earlier).unwrap();
    std::fs::write(earlier.join("answer"), "EARLIER-TRIAL").unwrap();
    // The fixture's root holds the workspace and the temp dir: hidden whole, they stay.
    let settings = SandboxSettings {
        forbid_read: vec![fixture.root.display().to_string()],
        ..SandboxSettings::default()
    };
    let sandbox = fixture.sandbox(settings, true);
    let later = fixture.root.join("trial-3");
    let script = format!(
        "while [ ! -e go ]; do sleep 0.02; done; \
         {{ cat {later}/answer; cat {earlier}/answer; ls {root}; echo made > made.txt; \
         cat made.txt; echo x >> .git/config; }} > seen.txt 2>&1",
        later = later.display(),
        earlier = earlier.display(),
        root = fixture.root.display(),
    );
    let (confinement, mut child) = fixture.start_in(&sandbox, SandboxMode::WorkspaceWrite, &script);
    // A later trial appears beside it while it runs.
    std::fs::create_dir_all(&later).unwrap();
    std::fs::write(later.join("answer"), "LATER-TRIAL").unwrap();
    std::fs::write(fixture.workspace.join("go"), "").unwrap();
    child.wait().unwrap();
    confinement.ended();
    let seen = std::fs::read_to_string(fixture.workspace.join("seen.txt")).unwrap();
    assert!(!seen.contains("EARLIER-TRIAL"), "{seen}");
    assert!(!seen.contains("LATER-TRIAL"), "{seen}");
    assert!(
        !seen
            .lines()
            .any(|line| ["trial-1", "outside", "home"].contains(&line)),
        "listed: {seen}"
    );
    assert!(seen.contains("made"), "the workspace is written: {seen}");
    assert_eq!(
        std::fs::read_to_string(fixture.workspace.join(".git/config")).unwrap(),
        "[core]\n",
        "a protected path inside it stays protected: {seen}"
    );
    // The next command of the session, in the namespaces already made, sees no more.
    let (code, output) = fixture.run_in(
        &sandbox,
        SandboxMode::WorkspaceWrite,
        &format!(
            "cat {}/answer; cat made.txt; echo t > /tmp/t && cat /tmp/t",
            later.display()
        ),
    );
    assert!(!output.contains("LATER-TRIAL"), "{output}");
    assert!(
        output.contains("made") && output.contains('t'),
        "{code}: {output}"
    );
    // The file tools follow the same rule.
    let policy = sandbox.policy(SandboxMode::WorkspaceWrite);
    assert!(policy.forbids_reading(&later.join("answer")).is_some());
    assert!(
        policy
            .forbids_reading(&fixture.workspace.join("made.txt"))
            .is_none()
    );
}
