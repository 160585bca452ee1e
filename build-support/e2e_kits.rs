//! Which end-to-end kits this machine has, decided when a crate's tests are built, so a test
//! whose kit is missing is reported by `cargo test` as **ignored**, with the reason, and never
//! as passed. Shared by the build scripts of the crates with such tests (`#[path]` include).
//!
//! Invariants:
//! - A kit's `cfg` (`keel_e2e_<name>`) is set only when everything it needs is here: `node` on
//!   `PATH` (and answering `--version`), Chromium (`$CHROMIUM`, or `chromium` on `PATH`), and
//!   each npm package path under the workspace.
//! - Under CI (`CI` set and not `0`/`false`) every kit's `cfg` is set, whatever is missing:
//!   there the tests run, and fail saying what is missing.
//! - The decision is remade when `PATH`, `CHROMIUM` or `CI` change, or when an `npm ci` adds or
//!   changes a kit's `node_modules`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// What a kit needs.
pub enum Need {
    /// `node` on `PATH`.
    Node,
    /// Chromium: `$CHROMIUM`, or `chromium` on `PATH`.
    Chromium,
    /// A file or directory installed by `npm ci`, relative to the workspace root
    /// (`crates/<crate>/e2e/node_modules/...`).
    Package(&'static str),
}

/// A kit: its name (the `cfg` is `keel_e2e_<name>`) and what it needs.
pub struct Kit {
    pub name: &'static str,
    pub needs: &'static [Need],
}

/// The npm MCP servers (`npm ci` in `crates/keel-mcp/e2e`): server-everything,
/// server-filesystem and the TypeScript SDK the growing server is built on.
pub const MCP_SERVERS: Kit = Kit {
    name: "mcp",
    needs: &[
        Need::Node,
        Need::Package(
            "crates/keel-mcp/e2e/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
        ),
        Need::Package(
            "crates/keel-mcp/e2e/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js",
        ),
        Need::Package("crates/keel-mcp/e2e/node_modules/@modelcontextprotocol/sdk"),
    ],
};

/// Print the cargo instructions for `kits`: the `check-cfg` declarations, the triggers to
/// decide again, and the `cfg` of each kit that is here (every one under CI).
pub fn declare(kits: &[Kit]) {
    let root = workspace_root();
    for variable in ["PATH", "CHROMIUM", "CI"] {
        println!("cargo::rerun-if-env-changed={variable}");
    }
    let ci = std::env::var("CI").is_ok_and(|value| !matches!(value.as_str(), "" | "0" | "false"));
    let node = on_path("node").is_some_and(|node| {
        Command::new(node)
            .arg("--version")
            .output()
            .is_ok_and(|output| output.status.success())
    });
    let chromium = std::env::var_os("CHROMIUM")
        .map(PathBuf::from)
        .filter(|path| path.is_file())
        .or_else(|| on_path("chromium"));
    if let Some(chromium) = &chromium {
        println!("cargo::rustc-env=KEEL_E2E_CHROMIUM={}", chromium.display());
    }
    let mut watched = Vec::new();
    for kit in kits {
        println!("cargo::rustc-check-cfg=cfg(keel_e2e_{})", kit.name);
        let mut missing = Vec::new();
        for need in kit.needs {
            match need {
                Need::Node if !node => missing.push("node".to_string()),
                Need::Chromium if chromium.is_none() => missing.push("chromium".to_string()),
                Need::Package(path) => {
                    let modules = package_modules(&root, path);
                    if !watched.contains(&modules) {
                        watch(&modules);
                        watched.push(modules);
                    }
                    if !root.join(path).exists() {
                        missing.push(path.to_string());
                    }
                }
                _ => {}
            }
        }
        if missing.is_empty() || ci {
            println!("cargo::rustc-cfg=keel_e2e_{}", kit.name);
        }
        if !missing.is_empty() && ci {
            println!(
                "cargo::warning=CI: the `{}` tests will fail: missing {}",
                kit.name,
                missing.join(", ")
            );
        }
    }
}

fn workspace_root() -> PathBuf {
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR").map_or_else(PathBuf::new, PathBuf::from);
    manifest.join("../..")
}

/// The first executable `name` on `PATH`.
fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

/// The `node_modules` directory a package path lies in.
fn package_modules(root: &Path, package: &str) -> PathBuf {
    let relative = package
        .split_once("/node_modules/")
        .map_or(package, |(dir, _)| dir);
    root.join(relative).join("node_modules")
}

/// Decide again when `npm ci` installs or changes the kit: watch npm's own record of the
/// installed tree when it is there, else the kit's directory (small without `node_modules`,
/// and changed when `npm ci` creates it).
fn watch(modules: &Path) {
    let record = modules.join(".package-lock.json");
    if record.is_file() {
        println!("cargo::rerun-if-changed={}", record.display());
    } else if let Some(kit_dir) = modules.parent() {
        println!("cargo::rerun-if-changed={}", kit_dir.display());
    }
}
