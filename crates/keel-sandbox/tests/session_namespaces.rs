//! A session's commands join namespaces made once for it, by a holder that lives as long as
//! the session's sandbox: what they share, what ends with the session, and when a command
//! gets a new holder rather than mounts pinned to what is gone.

#![allow(clippy::unwrap_used, clippy::panic)]

mod fixture;

use fixture::Fixture;
use keel_sandbox::{SandboxMode, SandboxSettings};
use std::process::Command;
use std::time::{Duration, Instant};

/// Whether a process whose command line holds `marker` runs anywhere on the machine.
fn running(marker: &str) -> bool {
    std::process::Command::new("pgrep")
        .args(["-f", marker])
        .output()
        .unwrap()
        .status
        .success()
}

/// Wait up to 5 s for `marker`'s process to be gone; whether it went.
fn gone(marker: &str) -> bool {
    let started = Instant::now();
    while running(marker) {
        if started.elapsed() > Duration::from_secs(5) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    true
}

#[test]
fn a_sessions_commands_share_one_set_of_namespaces_and_leave_nothing_behind() {
    let fixture = Fixture::new();
    let sandbox = fixture.sandbox(SandboxSettings::default(), true);
    let host = std::fs::read_link("/proc/self/ns/pid").unwrap();
    let script = "readlink /proc/self/ns/pid /proc/self/ns/mnt /proc/self/ns/net";
    let (code, first) = fixture.run_in(&sandbox, SandboxMode::WorkspaceWrite, script);
    assert_eq!(code, 0, "{first}");
    assert!(!first.contains(&host.display().to_string()), "{first}");
    let (_, second) = fixture.run_in(&sandbox, SandboxMode::WorkspaceWrite, script);
    assert_eq!(first, second, "one set of namespaces per session");
    assert_eq!(sandbox.namespace_holders(), 1);
    // A process that left the command's process group (which keel kills when the command
    // ends) is killed when the command ends, as if the namespaces had been its own.
    let marker = format!("sleep 300.{}", std::process::id());
    let leave = format!("setsid {marker} >/dev/null 2>&1 & sleep 0.3");
    let (code, output) = fixture.run_in(&sandbox, SandboxMode::WorkspaceWrite, &leave);
    assert_eq!(code, 0, "{output}");
    assert!(gone(&marker), "{marker} outlived its command");
    // Not while another command of the session runs: the last one to end takes them all.
    let (confinement, mut long) =
        fixture.start_in(&sandbox, SandboxMode::WorkspaceWrite, "sleep 1.5");
    let (code, output) = fixture.run_in(&sandbox, SandboxMode::WorkspaceWrite, &leave);
    assert_eq!(code, 0, "{output}");
    assert!(running(&marker), "swept while another command ran");
    assert!(
        long.wait().unwrap().success(),
        "the other command was not swept"
    );
    assert!(running(&marker));
    drop(confinement);
    assert!(gone(&marker), "{marker} outlived the last command");
}

#[test]
fn a_hidden_directory_made_again_since_gets_a_new_holder_and_stays_hidden() {
    let fixture = Fixture::new();
    let sandbox = fixture.sandbox(SandboxSettings::default(), false);
    let key = fixture.home.join(".ssh/id_rsa");
    let read = format!("cat {}", key.display());
    let (code, output) = fixture.run_in(&sandbox, SandboxMode::WorkspaceWrite, &read);
    assert_ne!(code, 0, "{output}");
    assert_eq!(sandbox.namespace_holders(), 1);
    // The user moves the directory away and makes it again: the first holder hid the old
    // one, whose mount no longer covers the path.
    let ssh = fixture.home.join(".ssh");
    std::fs::rename(&ssh, fixture.home.join(".ssh-old")).unwrap();
    std::fs::create_dir(&ssh).unwrap();
    std::fs::write(&key, "NEW-KEY-MATERIAL").unwrap();
    let (code, output) = fixture.run_in(&sandbox, SandboxMode::WorkspaceWrite, &read);
    assert_ne!(code, 0, "{output}");
    assert!(!output.contains("NEW-KEY-MATERIAL"), "{output}");
    assert_eq!(
        sandbox.namespace_holders(),
        2,
        "a new holder for the new plan"
    );
    let (_, output) = fixture.run_in(&sandbox, SandboxMode::WorkspaceWrite, &read);
    assert!(!output.contains("NEW-KEY-MATERIAL"), "{output}");
    assert_eq!(
        sandbox.namespace_holders(),
        2,
        "and it serves the next command"
    );
    // Read-only mode mounts differently: a holder of its own, and back again.
    let (code, output) = fixture.run_in(&sandbox, SandboxMode::ReadOnly, "touch made");
    assert_ne!(code, 0, "{output}");
    assert_eq!(sandbox.namespace_holders(), 3);
    let (code, output) = fixture.run_in(&sandbox, SandboxMode::WorkspaceWrite, "touch made");
    assert_eq!(code, 0, "{output}");
    assert_eq!(sandbox.namespace_holders(), 3);
}

#[test]
fn a_one_off_sandbox_makes_its_namespaces_for_each_command() {
    let fixture = Fixture::new();
    let sandbox = keel_sandbox::Sandbox::new(
        SandboxSettings::default(),
        keel_sandbox::Places {
            workspace: fixture.workspace.clone(),
            keel_home: fixture.keel_home.clone(),
            home: Some(fixture.home.clone()),
            ..keel_sandbox::Places::default()
        },
    );
    let script = "readlink /proc/self/ns/pid; cat ../home/.ssh/id_rsa";
    let (code, first) = fixture.run_in(&sandbox, SandboxMode::WorkspaceWrite, script);
    assert_ne!(code, 0, "{first}");
    assert!(!first.contains("PRIVATE-KEY"), "{first}");
    let (_, second) = fixture.run_in(&sandbox, SandboxMode::WorkspaceWrite, script);
    assert_ne!(first.lines().next(), second.lines().next());
    assert_eq!(sandbox.namespace_holders(), 0);
}

#[test]
fn a_path_removed_and_linked_back_on_the_host_retires_the_holder_whose_mounts_went_with_it() {
    let fixture = Fixture::new();
    std::fs::write(fixture.home.join(".netrc"), "NETRC-SECRET").unwrap();
    let sandbox = fixture.sandbox(SandboxSettings::default(), false);
    let netrc = fixture.home.join(".netrc");
    let script = format!("cat {}; echo '[core] x' >> .git/config", netrc.display());
    let (code, output) = fixture.run_in(&sandbox, SandboxMode::WorkspaceWrite, &script);
    assert_ne!(code, 0, "{output}");
    assert!(!output.contains("NETRC-SECRET"), "{output}");
    assert_eq!(sandbox.namespace_holders(), 1);
    // Unlinked and linked back: the same inode at the same path, but the mounts that hid and
    // protected it in the holder's namespace went with the name (as git's lock-and-rename of
    // `.git/config` takes them).
    for path in [netrc.clone(), fixture.workspace.join(".git/config")] {
        let kept = path.with_extension("kept");
        std::fs::hard_link(&path, &kept).unwrap();
        std::fs::remove_file(&path).unwrap();
        std::fs::hard_link(&kept, &path).unwrap();
        std::fs::remove_file(&kept).unwrap();
    }
    let (code, output) = fixture.run_in(&sandbox, SandboxMode::WorkspaceWrite, &script);
    assert_ne!(code, 0, "{output}");
    assert!(!output.contains("NETRC-SECRET"), "{output}");
    let config = std::fs::read_to_string(fixture.workspace.join(".git/config")).unwrap();
    assert_eq!(config, "[core]\n", "the protected file was written");
    assert_eq!(sandbox.namespace_holders(), 2, "a new holder");
    assert_eq!(
        sandbox.namespace_holder_pids().len(),
        1,
        "the old one ended"
    );
}

#[test]
fn a_holder_that_died_is_replaced_and_keels_terminal_signals_do_not_reach_it() {
    let fixture = Fixture::new();
    let sandbox = fixture.sandbox(SandboxSettings::default(), true);
    let (code, output) = fixture.run_in(&sandbox, SandboxMode::WorkspaceWrite, "true");
    assert_eq!(code, 0, "{output}");
    let [holder] = sandbox.namespace_holder_pids()[..] else {
        panic!("one holder");
    };
    // A process group of its own: Ctrl-C in keel's terminal goes to keel's group only.
    let group = std::fs::read_to_string(format!("/proc/{holder}/stat")).unwrap();
    let group: u32 = group
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .nth(2)
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(group, holder);
    let killed = Command::new("kill")
        .args(["-KILL", &holder.to_string()])
        .status();
    assert!(killed.unwrap().success());
    std::thread::sleep(Duration::from_millis(100));
    let (code, output) = fixture.run_in(&sandbox, SandboxMode::WorkspaceWrite, "echo after");
    assert_eq!((code, output.trim()), (0, "after"));
    assert_eq!(sandbox.namespace_holders(), 2);
}

#[test]
fn the_directories_on_the_way_to_a_workspace_under_tmp_cannot_be_moved_for_a_decoy() {
    let fixture = Fixture::new();
    // The fixture lives under the host's /tmp, which the session's temp dir replaces: the
    // directories down to the workspace are made in the temp dir.
    assert!(fixture.workspace.starts_with("/tmp"));
    let sandbox = fixture.sandbox(SandboxSettings::default(), true);
    let top = fixture
        .root
        .ancestors()
        .find(|dir| dir.parent() == Some(std::path::Path::new("/tmp")))
        .unwrap()
        .to_path_buf();
    let decoy = format!(
        "mv {top} /tmp/moved-away; echo moved=$?; mkdir -p {ws} && pwd -P > {ws}/planted",
        top = top.display(),
        ws = fixture.workspace.display()
    );
    let (_, output) = fixture.run_in(&sandbox, SandboxMode::WorkspaceWrite, &decoy);
    assert!(output.contains("busy"), "{output}");
    assert!(output.contains("moved=1"), "{output}");
    let (code, output) =
        fixture.run_in(&sandbox, SandboxMode::WorkspaceWrite, "echo real > written");
    assert_eq!(code, 0, "{output}");
    assert_eq!(
        std::fs::read_to_string(fixture.workspace.join("written")).unwrap(),
        "real\n",
        "the next command wrote the real workspace"
    );
}

#[test]
fn a_program_on_no_path_is_an_error_naming_it_and_never_a_file_in_the_workspace() {
    let fixture = Fixture::new();
    let sandbox = fixture.sandbox(SandboxSettings::default(), false);
    std::fs::write(
        fixture.workspace.join("planted-tool"),
        "#!/bin/sh\necho ran\n",
    )
    .unwrap();
    let mut command = Command::new("planted-tool");
    command
        .current_dir(&fixture.workspace)
        .env("PATH", "/usr/bin:/bin");
    let error = sandbox
        .confine(&mut command, SandboxMode::WorkspaceWrite)
        .map(|_| ())
        .unwrap_err();
    assert!(error.to_string().contains("planted-tool"), "{error}");
    assert!(error.to_string().contains("no such program"), "{error}");
    // What the command's own changes say is what runs: a removed variable is not there.
    let mut command = Command::new("sh");
    command
        .args(["-c", "echo \"[${KEEL_TEST_SECRET:-unset}]\""])
        .current_dir(&fixture.workspace)
        .env("KEEL_TEST_SECRET", "visible")
        .env_remove("KEEL_TEST_SECRET");
    let confinement = sandbox
        .confine(&mut command, SandboxMode::WorkspaceWrite)
        .unwrap();
    let output = keel_sandbox::on_lasting_thread(move || command.output())
        .unwrap()
        .unwrap();
    drop(confinement);
    assert_eq!(String::from_utf8_lossy(&output.stdout), "[unset]\n");
}

#[test]
fn a_program_the_sandbox_hides_fails_to_start_and_says_why() {
    let fixture = Fixture::new();
    let sandbox = fixture.sandbox(SandboxSettings::default(), false);
    let hidden = fixture.home.join(".ssh/tool");
    std::fs::write(&hidden, "#!/bin/sh\necho ran\n").unwrap();
    std::fs::set_permissions(&hidden, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    // keel sees it; the command's namespaces do not (`~/.ssh` is hidden there).
    let mut command = Command::new(&hidden);
    command.current_dir(&fixture.workspace);
    let confinement = sandbox
        .confine(&mut command, SandboxMode::WorkspaceWrite)
        .unwrap();
    let spawned = keel_sandbox::on_lasting_thread(move || command.output()).unwrap();
    let error = spawned.map(|output| output.stdout).unwrap_err();
    let said = confinement.explain(error).to_string();
    assert!(
        said.contains("starting the command in the session's namespaces: No such file"),
        "{said}"
    );
    // The session goes on.
    let (code, output) = fixture.run_in(&sandbox, SandboxMode::WorkspaceWrite, "echo next");
    assert_eq!((code, output.trim()), (0, "next"));
}

#[test]
fn a_command_killed_or_let_go_of_while_it_runs_leaves_nothing_behind() {
    let fixture = Fixture::new();
    let sandbox = fixture.sandbox(SandboxSettings::default(), true);
    for (case, kill_first) in [("killed", true), ("let go of", false)] {
        let marker = format!("sleep 301.{}{}", std::process::id(), u8::from(kill_first));
        let (confinement, mut child) = fixture.start_in(
            &sandbox,
            SandboxMode::WorkspaceWrite,
            &format!("setsid {marker} >/dev/null 2>&1 & sleep 30"),
        );
        std::thread::sleep(Duration::from_millis(300));
        assert!(running(&marker), "{case}: started");
        if kill_first {
            // As keel's timeout does: the command's outer process killed, not waited for.
            child.kill().unwrap();
        }
        drop(confinement);
        assert!(gone(&marker), "{case}: {marker} outlived its command");
        let status = child.wait().unwrap();
        assert!(!status.success(), "{case}: the command itself was ended");
    }
}

#[test]
fn roots_side_by_side_under_tmp_stay_whole_and_the_directories_above_them_writable() {
    let fixture = Fixture::new();
    let other = fixture.root.join("other");
    std::fs::create_dir_all(&other).unwrap();
    let settings = SandboxSettings {
        allow_write: vec![other.display().to_string()],
        ..SandboxSettings::default()
    };
    let sandbox = fixture.sandbox(settings, true);
    let script = format!(
        "echo ws > here && echo other > {other}/there && mkdir ../beside && echo ok",
        other = other.display()
    );
    let (code, output) = fixture.run_in(&sandbox, SandboxMode::WorkspaceWrite, &script);
    assert_eq!(code, 0, "{output}");
    assert_eq!(
        std::fs::read_to_string(fixture.workspace.join("here")).unwrap(),
        "ws\n"
    );
    assert_eq!(
        std::fs::read_to_string(other.join("there")).unwrap(),
        "other\n"
    );
    // `../beside` is in the session's temp dir (the fixture's root is under the host's /tmp).
    assert!(!fixture.root.join("beside").exists());
}

#[test]
fn every_command_of_a_session_shares_one_network_whatever_its_mode() {
    let fixture = Fixture::new();
    let sandbox = fixture.sandbox(SandboxSettings::default(), true);
    let network = "readlink /proc/self/ns/net /proc/self/ns/user";
    let (code, writing) = fixture.run_in(&sandbox, SandboxMode::WorkspaceWrite, network);
    assert_eq!(code, 0, "{writing}");
    let (code, reading) = fixture.run_in(&sandbox, SandboxMode::ReadOnly, network);
    assert_eq!(code, 0, "{reading}");
    assert_eq!(sandbox.namespace_holders(), 2, "two plans, two holders");
    assert_eq!(writing, reading, "one network and one user namespace");
    let host = std::fs::read_link("/proc/self/ns/net").unwrap();
    assert!(
        !writing.contains(&host.display().to_string()),
        "not the host's network"
    );
    // A server one mode's command runs is reached from the other's, on the loopback.
    let port = 20000 + std::process::id() % 20000;
    let serve = format!(
        "python3 -c \"import socket; s = socket.socket(); s.bind(('127.0.0.1', {port})); \
         s.listen(); c, _ = s.accept(); c.sendall(b'hello from the server'); c.close()\""
    );
    let (confinement, mut server) = fixture.start_in(&sandbox, SandboxMode::WorkspaceWrite, &serve);
    let reach = format!(
        "for i in $(seq 50); do python3 -c \"import socket; s = socket.create_connection(('127.0.0.1', {port})); \
         print(s.recv(100).decode())\" 2>/dev/null && exit 0; sleep 0.1; done; exit 1"
    );
    let (code, said) = fixture.run_in(&sandbox, SandboxMode::ReadOnly, &reach);
    assert_eq!(code, 0, "{said}");
    assert!(said.contains("hello from the server"), "{said}");
    assert!(server.wait().unwrap().success());
    drop(confinement);
    // The host's loopback is not the session's: nothing there answers.
    let outside = std::net::TcpStream::connect(("127.0.0.1", port as u16));
    assert!(outside.is_err(), "the server was on the host's loopback");
}

#[test]
fn a_job_serves_the_sessions_other_commands_outlives_their_sweeps_and_ends_with_its_process() {
    let fixture = Fixture::new();
    let sandbox = fixture.sandbox(SandboxSettings::default(), true);
    let port = 20000 + (std::process::id() + 7) % 20000;
    let marker = format!("job-marker-{}", std::process::id());
    // A server that answers every connection, as a dev server would, until it is killed.
    let serve = format!(
        "exec python3 -c \"import socket, sys; sys.argv.append('{marker}'); s = socket.socket(); \
         s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('127.0.0.1', {port})); \
         s.listen()\nwhile True:\n c, _ = s.accept(); c.sendall(b'hello from the job'); c.close()\""
    );
    let mut command = Command::new("bash");
    command
        .arg("-c")
        .arg(&serve)
        .current_dir(&fixture.workspace);
    let confinement = sandbox
        .confine_job(&mut command, SandboxMode::WorkspaceWrite)
        .unwrap();
    let mut job = keel_sandbox::on_lasting_thread(move || command.spawn())
        .unwrap()
        .unwrap();
    let reach = format!(
        "for i in $(seq 50); do python3 -c \"import socket; s = socket.create_connection(('127.0.0.1', {port})); \
         print(s.recv(100).decode())\" 2>/dev/null && exit 0; sleep 0.1; done; exit 1"
    );
    // A foreground command that starts and ends (its sweep runs) leaves the job alone, and a
    // read-only one after it reaches the job's server.
    let (code, said) = fixture.run_in(&sandbox, SandboxMode::WorkspaceWrite, &reach);
    assert_eq!(code, 0, "{said}");
    assert!(said.contains("hello from the job"), "{said}");
    let (code, said) = fixture.run_in(&sandbox, SandboxMode::ReadOnly, &reach);
    assert_eq!(code, 0, "{said}");
    assert!(said.contains("hello from the job"), "{said}");
    assert!(running(&marker), "the job outlived the foreground commands");
    assert!(job.try_wait().unwrap().is_none());
    // And it does not hold their sweep back: what a foreground command leaves goes when it
    // ends, while the job runs on.
    let left = format!("sleep 300.{}7", std::process::id());
    let leave = format!("setsid {left} >/dev/null 2>&1 & sleep 0.3");
    let (code, output) = fixture.run_in(&sandbox, SandboxMode::WorkspaceWrite, &leave);
    assert_eq!(code, 0, "{output}");
    assert!(gone(&left), "{left} outlived its command while a job ran");
    assert!(running(&marker));
    // Killing its process ends it and everything in its namespace.
    job.kill().unwrap();
    let _ = job.wait();
    drop(confinement);
    assert!(gone(&marker), "the job's server outlived its process");
}
