//! The documentation a user reads: every relative link in README.md and docs/ resolves to a
//! file in the repository, the README's first lines hold the quick start's two commands, and
//! docs/events.md lists exactly the event types keel emits.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// README.md and every markdown file under docs/.
fn documents() -> Vec<PathBuf> {
    let root = repository();
    let mut documents = vec![root.join("README.md")];
    let mut stack = vec![root.join("docs")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|ext| ext == "md") {
                documents.push(path);
            }
        }
    }
    documents
}

/// The targets of `[text](target)` links in `markdown`.
fn links(markdown: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = markdown;
    while let Some(start) = rest.find("](") {
        let after = &rest[start + 2..];
        let Some(end) = after.find(')') else { break };
        found.push(after[..end].to_string());
        rest = &after[end..];
    }
    found
}

#[test]
fn every_relative_link_resolves_inside_the_repository() {
    let root = repository();
    let mut checked = 0;
    for document in documents() {
        let text = std::fs::read_to_string(&document).unwrap();
        for link in links(&text) {
            if link.starts_with("http://")
                || link.starts_with("https://")
                || link.starts_with("mailto:")
                || link.starts_with('#')
            {
                continue;
            }
            let path = link.split('#').next().unwrap();
            let target = document.parent().unwrap().join(path);
            let resolved = target
                .canonicalize()
                .unwrap_or_else(|_| panic!("{}: `{link}` does not resolve", document.display()));
            assert!(
                resolved.starts_with(&root),
                "{}: `{link}` leads outside the repository",
                document.display()
            );
            checked += 1;
        }
    }
    assert!(checked > 20, "links were found and checked ({checked})");
}

#[test]
fn the_readme_starts_with_the_quick_starts_two_commands() {
    let readme = std::fs::read_to_string(repository().join("README.md")).unwrap();
    let head: Vec<&str> = readme.lines().take(40).collect();
    let tests = readme
        .split("## Tests")
        .nth(1)
        .and_then(|section| section.split("```sh").nth(1))
        .and_then(|block| block.lines().nth(1))
        .unwrap()
        .trim()
        .to_string();
    // A command line inside a shell block, not prose that mentions it.
    let mut in_block = false;
    let commands: Vec<&str> = head
        .iter()
        .filter(|line| {
            if line.starts_with("```") {
                in_block = line.starts_with("```sh");
                return false;
            }
            in_block
        })
        .map(|line| line.split('#').next().unwrap_or("").trim())
        .collect();
    assert!(
        commands.iter().any(
            |command| (command.ends_with(" demo") && command.contains("keel"))
                || *command == "cargo run --release -- demo"
        ),
        "the demo command is a command in the first 40 lines: {commands:?}"
    );
    assert!(
        commands.iter().any(|command| command.starts_with(&tests)),
        "the test command (`{tests}`, as ## Tests has it) is a command in the first 40 lines"
    );
}

#[test]
fn docs_events_lists_exactly_the_event_types_keel_emits() {
    let source =
        std::fs::read_to_string(repository().join("crates/keel-types/src/event.rs")).unwrap();
    let body = source
        .split("pub enum EventBody")
        .nth(1)
        .unwrap()
        .split("\n}\n")
        .next()
        .unwrap();
    let emitted: BTreeSet<String> = body
        .lines()
        .filter_map(|line| line.trim().strip_prefix("#[serde(rename = \""))
        .filter_map(|rest| rest.split('"').next())
        .map(str::to_string)
        .collect();
    let variants = body
        .lines()
        .filter(|line| {
            let line = line.trim_start();
            line.starts_with(|c: char| c.is_ascii_uppercase()) && !line.starts_with("///")
        })
        .count();
    assert_eq!(variants, emitted.len(), "every variant has a wire name");
    let doc = std::fs::read_to_string(repository().join("docs/events.md")).unwrap();
    let documented: BTreeSet<String> = doc
        .lines()
        .filter_map(|line| line.strip_prefix("| `"))
        .filter_map(|rest| rest.split('`').next())
        .map(str::to_string)
        .collect();
    assert_eq!(documented, emitted);
}

#[test]
fn keel_mock_says_how_to_point_keel_at_it_and_that_works() {
    use std::io::BufRead;
    let keel = env!("CARGO_BIN_EXE_keel");
    let mut mock = std::process::Command::new(keel)
        .args(["mock", "--scenario", "basic"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = std::io::BufReader::new(mock.stderr.take().unwrap());
    let (found, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in stderr.lines().map_while(Result::ok) {
            if line.contains("DEEPSEEK_BASE_URL=") {
                let _ = found.send(line);
            }
        }
    });
    let command = lines.recv_timeout(std::time::Duration::from_secs(20));
    let Ok(command) = command else {
        let _ = mock.kill();
        panic!("keel mock never said how to point keel at it");
    };
    let base_url = command
        .split_whitespace()
        .find_map(|word| word.strip_prefix("DEEPSEEK_BASE_URL="))
        .unwrap()
        .to_string();
    let home = tempfile::tempdir().unwrap();
    let run = std::process::Command::new(keel)
        .args(["run", "hello"])
        .current_dir(home.path())
        .env("KEEL_HOME", home.path())
        .env("DEEPSEEK_BASE_URL", &base_url)
        .env("DEEPSEEK_API_KEY", "anything")
        .env_remove("KEEL_MODEL")
        .output()
        .unwrap();
    let _ = mock.kill();
    let _ = mock.wait();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(!run.stdout.is_empty(), "an answer from the mock");
}

/// The GitHub anchor of a markdown heading: lowercased, spaces to `-`, other punctuation gone.
fn anchor_of(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// Every Rust file of the workspace's crates.
fn rust_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut stack = vec![repository().join("crates")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if path.is_dir() && name != "node_modules" && name != "target" {
                stack.push(path);
            } else if name.ends_with(".rs") {
                files.push(path);
            }
        }
    }
    files
}

#[test]
fn every_docs_citation_in_the_code_names_a_heading_that_exists() {
    let root = repository();
    let mut cited = 0;
    for file in rust_files() {
        let text = std::fs::read_to_string(&file).unwrap();
        // The design documents a clone of keel does not have are never cited.
        for foreign in ["CONTRACT", "PRODUCT"].map(|name| format!("{name}.md")) {
            assert!(
                !text.contains(&foreign),
                "{} cites {foreign}",
                file.display()
            );
        }
        let mut rest = text.as_str();
        while let Some(start) = rest.find("docs/") {
            let after = &rest[start + 5..];
            let end = after
                .find(|c: char| !(c.is_alphanumeric() || "-_.#".contains(c)))
                .unwrap_or(after.len());
            let cited_here = after[..end].trim_end_matches('.');
            rest = &after[end..];
            let Some((name, anchor)) = cited_here.split_once(".md") else {
                continue;
            };
            let doc = root.join("docs").join(format!("{name}.md"));
            let Ok(markdown) = std::fs::read_to_string(&doc) else {
                // Paths inside a test's own fixture (`docs/readme.md`) are not citations.
                assert!(
                    anchor.is_empty(),
                    "{}: no {}",
                    file.display(),
                    doc.display()
                );
                continue;
            };
            cited += 1;
            if let Some(anchor) = anchor.strip_prefix('#') {
                let headings: BTreeSet<String> = markdown
                    .lines()
                    .filter_map(|line| {
                        line.trim_start_matches('#')
                            .strip_prefix(' ')
                            .filter(|_| line.starts_with('#'))
                    })
                    .map(anchor_of)
                    .collect();
                assert!(
                    headings.contains(anchor),
                    "{} cites docs/{name}.md#{anchor}, which has no such heading",
                    file.display()
                );
            }
        }
    }
    assert!(cited > 40, "the code cites keel's docs ({cited} found)");
}

#[test]
fn the_crate_table_says_what_each_crate_may_depend_on() {
    let root = repository();
    let architecture = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    let mut checked = 0;
    for row in architecture
        .lines()
        .filter(|line| line.starts_with("| `keel-"))
    {
        let cells: Vec<&str> = row.split(" | ").collect();
        let name = cells[0].trim_start_matches("| `").trim_end_matches('`');
        // `keel-a`, `keel-b` [`keel-c`]: development-only ones in brackets.
        let last = cells.last().unwrap();
        let (ordinary, development) = last.split_once('[').unwrap_or((last, ""));
        let names = |text: &str| -> Vec<String> {
            text.split(|c: char| !(c.is_alphanumeric() || c == '-'))
                .filter(|word| word.starts_with("keel-"))
                .map(str::to_string)
                .collect()
        };
        let said: BTreeSet<String> = names(ordinary)
            .into_iter()
            .chain(
                names(development)
                    .into_iter()
                    .map(|name| format!("[{name}]")),
            )
            .collect();
        let manifest = std::fs::read_to_string(root.join("crates").join(name).join("Cargo.toml"))
            .unwrap_or_else(|_| panic!("docs/architecture.md names {name}, which has no crate"));
        let mut section = "";
        let mut actual = BTreeSet::new();
        for line in manifest.lines() {
            if line.starts_with('[') {
                section = line;
            } else if let Some(dependency) = line.split(['.', ' ', '=']).next()
                && dependency.starts_with("keel-")
                && dependency != name
            {
                match section {
                    "[dependencies]" => actual.insert(dependency.to_string()),
                    "[dev-dependencies]" if !manifest_has(&manifest, dependency) => {
                        actual.insert(format!("[{dependency}]"))
                    }
                    _ => false,
                };
            }
        }
        assert_eq!(said, actual, "docs/architecture.md's row for {name}");
        checked += 1;
    }
    assert!(checked >= 16, "every crate has its row ({checked})");
    // The terminal's view crate draws: it links no engine, store, sandbox or MCP.
    let tui = std::fs::read_to_string(root.join("crates/keel-tui/Cargo.toml")).unwrap();
    let keel_crates: BTreeSet<&str> = tui
        .lines()
        .filter_map(|line| line.split(['.', ' ', '=']).next())
        .filter(|name| name.starts_with("keel-") && *name != "keel-tui")
        .collect();
    assert_eq!(keel_crates, BTreeSet::from(["keel-render", "keel-types"]));
}

/// Whether `dependency` is an ordinary dependency in `manifest` (then a dev entry adds nothing).
fn manifest_has(manifest: &str, dependency: &str) -> bool {
    let start = manifest.find("[dependencies]").unwrap_or(0);
    let section = &manifest[start..];
    let end = section[1..].find("\n[").map_or(section.len(), |at| at + 1);
    section[..end]
        .lines()
        .any(|line| line.split(['.', ' ', '=']).next() == Some(dependency))
}

/// The module path of each source file of the crate at `src` (`lib.rs`/`main.rs`/`mod.rs`
/// name their folder's module), test files left out.
fn modules_of(src: &Path) -> Vec<(Vec<String>, PathBuf)> {
    let mut found = Vec::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                if name != "tests" {
                    stack.push(path);
                }
                continue;
            }
            if !name.ends_with(".rs") || name == "tests.rs" || name.ends_with("_tests.rs") {
                continue;
            }
            let relative = path.strip_prefix(src).unwrap().with_extension("");
            let mut module: Vec<String> = relative
                .components()
                .map(|part| part.as_os_str().to_string_lossy().into_owned())
                .collect();
            if matches!(
                module.last().map(String::as_str),
                Some("lib" | "main" | "mod")
            ) {
                module.pop();
            }
            found.push((module, path));
        }
    }
    found
}

/// The `crate::…` paths a file's non-test code names, a `use crate::{a, b::c}` group counting
/// as each of its members.
fn crate_paths(code: &str) -> Vec<Vec<String>> {
    let code = code.split("#[cfg(test)]").next().unwrap_or(code);
    let mut paths = Vec::new();
    let mut rest = code;
    while let Some(start) = rest.find("crate::") {
        let preceded = rest[..start].chars().last();
        let after = &rest[start + "crate::".len()..];
        rest = after;
        if preceded.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let end = after
            .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
            .unwrap_or(after.len());
        let head: Vec<String> = after[..end]
            .split("::")
            .filter(|part| !part.is_empty())
            .map(str::to_string)
            .collect();
        if after[end..].starts_with('{') && after[..end].ends_with("::") {
            let group = &after[end + 1..after[end..].find('}').map_or(after.len(), |at| end + at)];
            for member in group.split(',') {
                let mut path = head.clone();
                let member = member.split(" as ").next().unwrap_or("").trim();
                path.extend(
                    member
                        .split("::")
                        .filter(|part| !part.is_empty() && *part != "self")
                        .map(str::to_string),
                );
                paths.push(path);
            }
        } else {
            paths.push(head);
        }
    }
    paths
}

#[test]
fn no_crate_has_an_import_circle_between_its_files() {
    for crate_dir in std::fs::read_dir(repository().join("crates")).unwrap() {
        let src = crate_dir.unwrap().path().join("src");
        if !src.is_dir() {
            continue;
        }
        let modules = modules_of(&src);
        let index: std::collections::BTreeMap<Vec<String>, usize> = modules
            .iter()
            .enumerate()
            .map(|(at, (module, _))| (module.clone(), at))
            .collect();
        let edges: Vec<BTreeSet<usize>> = modules
            .iter()
            .enumerate()
            .map(|(from, (_, path))| {
                let code = std::fs::read_to_string(path).unwrap();
                crate_paths(&code)
                    .into_iter()
                    .filter_map(|named| {
                        (1..=named.len())
                            .rev()
                            .find_map(|length| index.get(&named[..length]).copied())
                    })
                    .filter(|to| *to != from)
                    .collect()
            })
            .collect();
        // A circle exists where a file reaches itself again.
        for start in 0..modules.len() {
            let mut seen = BTreeSet::new();
            let mut stack: Vec<usize> = edges[start].iter().copied().collect();
            while let Some(next) = stack.pop() {
                assert!(
                    next != start,
                    "{} reaches itself again through its imports",
                    modules[start].1.display()
                );
                if seen.insert(next) {
                    stack.extend(edges[next].iter().copied());
                }
            }
        }
    }
}

/// A crate whose integration tests are one binary (`autotests = false`, `tests/all.rs`) runs
/// only the files `all.rs` names: a file left out would never run, and would look as if it did.
#[test]
fn every_test_file_of_a_one_binary_crate_is_a_module_of_its_all_rs() {
    let crates = repository().join("crates");
    let mut one_binary = Vec::new();
    for entry in std::fs::read_dir(&crates).unwrap() {
        let dir = entry.unwrap().path();
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap_or_default();
        if !manifest.contains("autotests = false") {
            continue;
        }
        let all = std::fs::read_to_string(dir.join("tests/all.rs")).unwrap_or_else(|_| {
            panic!(
                "{} sets autotests = false without tests/all.rs",
                dir.display()
            )
        });
        let listed: BTreeSet<&str> = all
            .lines()
            .filter_map(|line| line.strip_prefix("mod ")?.strip_suffix(';'))
            .collect();
        for file in std::fs::read_dir(dir.join("tests")).unwrap() {
            let path = file.unwrap().path();
            let stem = path.file_stem().unwrap().to_string_lossy().to_string();
            if path.extension().is_some_and(|ext| ext == "rs") && stem != "all" {
                assert!(
                    listed.contains(stem.as_str()),
                    "{} is not a module of tests/all.rs, so its tests never run",
                    path.display()
                );
            }
        }
        one_binary.push(dir.file_name().unwrap().to_string_lossy().to_string());
    }
    one_binary.sort();
    assert_eq!(one_binary, ["keel-agent", "keel-cli"]);
}
