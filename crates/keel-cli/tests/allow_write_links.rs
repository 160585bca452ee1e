//! A trusted project's `[sandbox] allow_write` opens only what really lies inside its
//! workspace: an entry whose words are inside but which leads out through a link
//! (`cache -> ~`) is refused and said — by `keel trust` (with where it leads) and at start
//! (`trust/ignored`) — and a command cannot write through it. The user's
//! own `allow_write` may still name any path. Through the real binary.

use crate::common::*;
use serde_json::json;

#[test]
fn a_trusted_allow_write_that_leads_out_through_a_link_is_refused_and_said() {
    let write = "echo x > cache/PWNED; echo y > inside/ok.txt";
    let steps = json!({"steps": [
        {"tool": "bash", "args": {"command": write}},
        {"say": "done"},
        {"tool": "bash", "args": {"command": write}},
        {"say": "done"},
    ]});
    let (home, _mock) = scripted("chat", &steps.to_string(), "");
    let me = home.path().join("me");
    let project = me.join("project");
    std::fs::create_dir_all(project.join("build")).unwrap();
    std::os::unix::fs::symlink(&me, project.join("cache")).unwrap();
    // A link that stays inside the workspace is fine.
    std::os::unix::fs::symlink(project.join("build"), project.join("inside")).unwrap();
    std::fs::write(
        project.join("keel.toml"),
        "[sandbox]\nallow_write = [\"cache\", \"inside\"]\n",
    )
    .unwrap();
    let in_project = |args: &[&str]| {
        Run::from(
            home.keel(args)
                .current_dir(&project)
                .env("HOME", &me)
                .output()
                .unwrap(),
        )
    };
    let shown = in_project(&["trust"]);
    assert_eq!(shown.code(), 0, "{}", shown.stderr());
    let said = shown.stdout() + &shown.stderr();
    assert!(
        said.contains(&format!("cache → {}", me.display()))
            && said.contains("outside the workspace"),
        "keel trust shows where it leads: {said}"
    );
    let run = in_project(&["run", "--yes", "--json", "write it"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(
        !me.join("PWNED").exists(),
        "the home was written through the link"
    );
    assert_eq!(
        std::fs::read_to_string(project.join("build/ok.txt")).unwrap(),
        "y\n"
    );
    let ignored = run.events_of("trust/ignored");
    let refused = ignored
        .iter()
        .find(|event| event["key"] == "sandbox.allow_write")
        .unwrap_or_else(|| panic!("reported: {ignored:?}"));
    assert!(
        refused["reason"]
            .as_str()
            .unwrap()
            .contains("leads outside the workspace"),
        "{refused}"
    );
    // The user's own config may name the same place: it is the user's to open.
    home.append_config(&format!(
        "[sandbox]\nallow_write = [\"{}\"]\n",
        me.display()
    ));
    let mine = in_project(&["run", "--yes", "--json", "write it"]);
    assert_eq!(mine.code(), 0, "{}", mine.stderr());
    assert!(
        me.join("PWNED").exists(),
        "the user's own allow_write opens it"
    );
}
