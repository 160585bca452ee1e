//! What the sandbox costs per command over an unconfined `bash -c true`, all measured in one
//! run (`cargo bench -p keel-sandbox --bench spawn_cost`). Every command is spawned from the
//! sandbox's spawner thread, confined or not, so only the confinement differs.
//!
//! First the target: a session's commands under the default policy (joining the session's
//! namespaces, as keel runs them) against unconfined spawns, alternated — within 1 ms. Then
//! what each layer adds, cumulatively, alternated among themselves. Up to the PID namespace
//! a command makes its own namespaces; from it on it joins the session's.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use keel_sandbox::{Layers, Places, Sandbox, SandboxMode, SandboxSettings, on_lasting_thread};
use std::time::{Duration, Instant};

const ROUNDS: usize = 300;

fn spawn_once(sandbox: &Sandbox, layers: Option<&Layers>, workspace: &std::path::Path) -> Duration {
    let mut command = std::process::Command::new("bash");
    command.args(["-c", "true"]).current_dir(workspace);
    let started = Instant::now();
    // Kept until the command has ended, as keel keeps it: its end (the sweep of what the
    // command left in the session's namespaces) is part of the cost.
    let confinement = layers.map(|layers| {
        sandbox
            .confine_with(&mut command, SandboxMode::WorkspaceWrite, layers)
            .unwrap()
    });
    let status = on_lasting_thread(move || command.status())
        .unwrap()
        .unwrap();
    assert!(status.success());
    if let Some(confinement) = confinement {
        confinement.ended();
    }
    started.elapsed()
}

/// The median of `ROUNDS` spawns, interleaved with the others to share the machine's noise.
fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let workspace = root.join("workspace");
    let keel_home = root.join("keel-home");
    std::fs::create_dir_all(workspace.join(".git/hooks")).unwrap();
    std::fs::create_dir_all(keel_home.join("tmp/bench")).unwrap();
    let sandbox = Sandbox::new(
        SandboxSettings::default(),
        Places {
            workspace: workspace.clone(),
            extra_dirs: Vec::new(),
            keel_home: keel_home.clone(),
            home: std::env::var_os("HOME").map(Into::into),
            temp_dir: Some(keel_home.join("tmp/bench")),
            referenced_files: Vec::new(),
            socket_dirs: Vec::new(),
        },
    )
    .sharing_namespaces();
    let all = keel_sandbox::detected();
    let none = Layers::NONE;
    let landlock = Layers {
        landlock_abi: all.landlock_abi,
        ..none
    };
    let seccomp = Layers {
        seccomp: all.seccomp,
        ..landlock
    };
    let mounts = Layers {
        user_namespace: all.user_namespace,
        ..seccomp
    };
    let pid = Layers {
        pid_namespace: all.pid_namespace,
        ..mounts
    };
    let ipc = Layers {
        ipc_namespace: all.ipc_namespace,
        ..pid
    };
    let configs: Vec<(&str, Option<Layers>)> = vec![
        ("unconfined bash -c true", None),
        ("+ Landlock", Some(landlock)),
        ("+ seccomp", Some(seccomp)),
        ("+ user and mount namespaces", Some(mounts)),
        ("+ PID namespace (the session's, joined)", Some(pid)),
        ("+ IPC namespace", Some(ipc)),
        ("+ network namespace (the default policy)", Some(all)),
    ];
    let default = configs.len() - 1;
    let mut paired: [Vec<Duration>; 2] = [Vec::new(), Vec::new()];
    for _ in 0..ROUNDS {
        paired[0].push(spawn_once(&sandbox, None, &workspace));
        paired[1].push(spawn_once(
            &sandbox,
            configs[default].1.as_ref(),
            &workspace,
        ));
    }
    let [unconfined, confined] = paired.map(median);
    let extra = confined.as_secs_f64() - unconfined.as_secs_f64();
    println!("the default policy, median of {ROUNDS} each (target: within 1 ms):");
    println!(
        "  unconfined {:.3} ms, confined {:.3} ms: {:+.3} ms, {:.2}×",
        unconfined.as_secs_f64() * 1000.0,
        confined.as_secs_f64() * 1000.0,
        extra * 1000.0,
        confined.as_secs_f64() / unconfined.as_secs_f64()
    );
    let mut samples: Vec<Vec<Duration>> = vec![Vec::new(); configs.len()];
    for _ in 0..ROUNDS {
        for (index, (_, layers)) in configs.iter().enumerate() {
            samples[index].push(spawn_once(&sandbox, layers.as_ref(), &workspace));
        }
    }
    let medians: Vec<Duration> = samples.into_iter().map(median).collect();
    let base = medians[0];
    println!("spawn + wait, median of {ROUNDS} (layers added cumulatively):");
    for ((name, _), median) in configs.iter().zip(&medians) {
        let extra = median.as_secs_f64() - base.as_secs_f64();
        println!(
            "  {name:<45} {:>7.3} ms   {:>+7.3} ms   {:>5.2}×",
            median.as_secs_f64() * 1000.0,
            extra * 1000.0,
            median.as_secs_f64() / base.as_secs_f64()
        );
    }
    let preparing = {
        let started = Instant::now();
        for _ in 0..ROUNDS {
            let mut command = std::process::Command::new("bash");
            let _ = sandbox.confine(&mut command, SandboxMode::WorkspaceWrite);
        }
        started.elapsed() / ROUNDS as u32
    };
    println!(
        "  planning alone (policy, ruleset, filter; no spawn): {:.3} ms",
        preparing.as_secs_f64() * 1000.0
    );
}
