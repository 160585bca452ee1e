//! A session's commands join namespaces made once for it, by a holder that lives as long as
//! the session's sandbox: what they share, what ends with the session, and when a command
//! gets a new holder rather than mounts pinned to what is gone.

#![allow(clippy::unwrap_used, clippy::panic)]

mod fixture;

use fixture::Fixture;
use keel_sandbox::{SandboxMode, SandboxSettings};
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
    let mut long = std::process::Command::new("bash");
    long.args(["-c", "sleep 1.5"])
        .current_dir(&fixture.workspace);
    let confinement = sandbox
        .confine(&mut long, SandboxMode::WorkspaceWrite)
        .unwrap();
    let mut long = keel_sandbox::on_lasting_thread(move || long.spawn())
        .unwrap()
        .unwrap();
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
