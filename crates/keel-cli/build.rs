//! Sets `keel_e2e_*` cfgs for the tests that drive real browsers, the ACP SDK and npm MCP
//! servers: without their kit they are ignored, with the reason (see `build-support/`).
//!
//! And, for a release build on x86_64 Linux with Rust 1.90 or later (linked by lld, Rust's
//! default linker there since), has the linker put the functions a session runs next to each
//! other (`link/hot-functions.txt`, made by `bench/hot_functions.py`): the kernel maps 64 KiB
//! around each page of code first touched, so code spread across the binary costs resident
//! memory far beyond its size. A name the list has that the build does not (code changed
//! since) is passed over. `KEEL_NO_HOT_LAYOUT=1` leaves the layout to the linker (a linker
//! of your own that has no `--symbol-ordering-file`).

#[path = "../../build-support/e2e_kits.rs"]
mod e2e_kits;
use e2e_kits::{Kit, Need};

fn main() {
    lay_out_hot_code_together();
    e2e_kits::declare(&[
        Kit {
            name: "node",
            needs: &[Need::Node],
        },
        Kit {
            name: "browser",
            needs: &[
                Need::Node,
                Need::Chromium,
                Need::Package("crates/keel-serve/e2e/node_modules/playwright-core"),
            ],
        },
        Kit {
            name: "acp",
            needs: &[
                Need::Node,
                Need::Package("crates/keel-acp/e2e/node_modules/@agentclientprotocol/sdk"),
            ],
        },
        e2e_kits::MCP_SERVERS,
    ]);
}

/// The linker's order for the functions a session runs (release builds on x86_64 Linux).
fn lay_out_hot_code_together() {
    println!("cargo:rerun-if-changed=link/hot-functions.txt");
    println!("cargo:rerun-if-env-changed=KEEL_NO_HOT_LAYOUT");
    let release = std::env::var("PROFILE").is_ok_and(|profile| profile == "release");
    let target = std::env::var("TARGET").unwrap_or_default();
    let Ok(manifest) = std::env::var("CARGO_MANIFEST_DIR") else {
        return;
    };
    let opted_out = std::env::var_os("KEEL_NO_HOT_LAYOUT").is_some_and(|value| value != "0");
    if !release || target != "x86_64-unknown-linux-gnu" || opted_out || !rustc_links_with_lld() {
        return;
    }
    let order = std::path::Path::new(&manifest).join("link/hot-functions.txt");
    if order.is_file() {
        println!(
            "cargo:rustc-link-arg-bin=keel=-Wl,--symbol-ordering-file={}",
            order.display()
        );
        println!("cargo:rustc-link-arg-bin=keel=-Wl,--no-warn-symbol-ordering");
    }
}

/// Whether this rustc links with lld by default on x86_64 Linux (1.90 and later).
fn rustc_links_with_lld() -> bool {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let Ok(output) = std::process::Command::new(rustc).arg("-V").output() else {
        return false;
    };
    // "rustc 1.95.0 (59807616e 2026-04-14)"
    let version = String::from_utf8_lossy(&output.stdout);
    let mut numbers = version
        .split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .split(['.', '-'])
        .map(|part| part.parse::<u32>().unwrap_or(0));
    let (major, minor) = (numbers.next().unwrap_or(0), numbers.next().unwrap_or(0));
    (major, minor) >= (1, 90)
}
