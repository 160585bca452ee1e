//! Skills through the real binary against `keel mock`: listed to the model by name and
//! description in the context block (never their bodies), loaded with the `skill` tool, sent by
//! the person as `/NAME args`; the system prompt and tool specs the same with and without
//! skills; a skill that leads out of the skill directories refused and said.

use crate::common::*;
use serde_json::{Value, json};
use std::path::Path;

fn skill(root: &Path, dir: &str, front: &str, body: &str) {
    let dir = root.join(dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("SKILL.md"), format!("---\n{front}\n---\n{body}\n")).unwrap();
}

/// A chat request's body, as JSON.
fn body(request: &Value) -> Value {
    serde_json::from_str(request["body"].as_str().unwrap()).unwrap()
}

/// The text of a chat request's messages.
fn said(request: &Value) -> String {
    body(request)["messages"].to_string()
}

#[test]
fn a_projects_skill_is_listed_by_description_and_its_body_comes_only_through_the_skill_tool() {
    let scenario = json!({"steps": [
        {"tool": "skill", "args": {"name": "pdf"}},
        {"tool": "skill", "args": {"name": "secret-recipe"}},
        {"say": "Loaded."}
    ]})
    .to_string();
    let (home, mock) = scripted("chat", &scenario, "");
    let skills = home.path().join(".keel/skills");
    skill(
        &skills,
        "pdf",
        "name: pdf\ndescription: Extract text and tables from PDF files\nallowed-tools: Bash",
        "PDF-BODY-MARKER: run scripts/extract.py on the file.",
    );
    skill(
        &skills,
        "secret-recipe",
        "name: secret-recipe\ndescription: Only for people\ndisable-model-invocation: true",
        "PEOPLE-ONLY-MARKER",
    );
    // The refused call is open work: not ready (1), as for any failed call.
    let run = home.run(&["run", "--yes", "--json", "summarise report.pdf"]);
    assert_eq!(run.code(), 1, "{}", run.stderr());
    assert!(
        run.stderr().contains("allowed-tools ignored"),
        "{}",
        run.stderr()
    );
    let requests = mock.requests();
    let first = said(&requests[0]);
    assert!(
        first.contains("- pdf: Extract text and tables from PDF files"),
        "{first}"
    );
    assert!(!first.contains("PDF-BODY-MARKER"), "the body is not listed");
    assert!(!first.contains("secret-recipe"), "{first}");
    // The tool's result: the body and where its files are.
    let second = said(&requests[1]);
    assert!(second.contains("PDF-BODY-MARKER"), "{second}");
    let dir = skills.join("pdf").canonicalize().unwrap();
    assert!(second.contains(&dir.display().to_string()), "{second}");
    // A skill the model may not invoke is no skill to it.
    let third = said(&requests[2]);
    assert!(!third.contains("PEOPLE-ONLY-MARKER"), "{third}");
    assert!(
        third.contains("there is no skill `secret-recipe`; the skills: pdf"),
        "{third}"
    );

    // The same session's prefix without skills: system prompt and tool specs are the bytes of
    // a home with none.
    let steps = json!({"steps": [{"say": "Plain."}]}).to_string();
    let (plain, plain_mock) = scripted("chat", &steps, "");
    assert_eq!(plain.run(&["run", "--yes", "hello"]).code(), 0);
    let without = &body(&plain_mock.requests()[0]);
    let with = &body(&requests[0]);
    assert_eq!(
        with["messages"][0], without["messages"][0],
        "the system prompt"
    );
    assert_eq!(with["tools"], without["tools"], "the tool specs");
}

#[test]
fn a_skill_is_a_slash_command_with_its_arguments_unless_a_command_of_its_name_wins() {
    let scenario = json!({"steps": [{"say": "Done."}, {"say": "Again."}]}).to_string();
    let (home, mock) = scripted("chat", &scenario, "");
    skill(
        &home.path().join("skills"),
        "release-notes",
        "name: release-notes\ndescription: Write release notes",
        "Write the release notes for version $ARGUMENTS.",
    );
    skill(
        &home.path().join("skills"),
        "status",
        "name: status\ndescription: Shadowed by the built-in",
        "never sent",
    );
    skill(
        &home.path().join("skills"),
        "review",
        "name: review\ndescription: Review a change\nuser-invocable: true",
        "Review the change; print fields with awk '{print $1}'.",
    );
    // A repository's command of a skill's name yields to your skill.
    std::fs::create_dir_all(home.path().join(".keel/commands")).unwrap();
    std::fs::write(
        home.path().join(".keel/commands/review.md"),
        "the project's review",
    )
    .unwrap();
    let run = home.run(&["run", "--yes", "/release-notes 2.1.0"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(
        run.stderr()
            .contains("skill `status` is not a slash command here: /status is a built-in command"),
        "{}",
        run.stderr()
    );
    let first = said(&mock.requests()[0]);
    assert!(
        first.contains("Write the release notes for version 2.1.0."),
        "{first}"
    );
    assert!(
        first.contains("[keel: the `release-notes` skill; its files are in "),
        "{first}"
    );
    assert!(
        run.stderr().contains("is replaced by your skill `review`"),
        "{}",
        run.stderr()
    );
    // A skill that does not place its arguments gets them after it; its `$1` is left alone.
    let again = home.run(&["run", "--yes", "/review the parser"]);
    assert_eq!(again.code(), 0, "{}", again.stderr());
    let second = said(&mock.requests()[1]);
    assert!(second.contains("awk '{print $1}'"), "{second}");
    assert!(second.contains("ARGUMENTS: the parser"), "{second}");
    assert!(!second.contains("the project's review"), "{second}");
}

#[test]
fn a_skill_that_leads_out_of_the_skill_directories_is_refused_and_said() {
    let scenario = json!({"steps": [
        {"tool": "skill", "args": {"name": "creds"}},
        {"say": "Nothing."}
    ]})
    .to_string();
    let (home, mock) = scripted("chat", &scenario, "");
    let user_home = tempfile::tempdir().unwrap();
    let claude = user_home.path().join(".claude");
    std::fs::create_dir_all(claude.join("skills")).unwrap();
    std::fs::write(
        claude.join(".credentials.json"),
        "---\nname: creds\ndescription: CREDENTIAL-MARKER\n---\nCREDENTIAL-MARKER\n",
    )
    .unwrap();
    // A project skill whose SKILL.md is a link to the credentials; a user skill directory that
    // is a link to `~/.claude` itself.
    let project = home.path().join(".keel/skills/creds");
    std::fs::create_dir_all(&project).unwrap();
    std::os::unix::fs::symlink(claude.join(".credentials.json"), project.join("SKILL.md")).unwrap();
    std::os::unix::fs::symlink(&claude, claude.join("skills/up")).unwrap();
    let run = home
        .keel(&["run", "--yes", "--json", "use the creds skill"])
        .env("HOME", user_home.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(
        run.status.code(),
        Some(1),
        "the refused call is open work: {stderr}"
    );
    assert!(
        stderr.contains("its SKILL.md leads to")
            && stderr.contains("outside the skill directories"),
        "{stderr}"
    );
    assert!(
        stderr.contains("skills/up ignored: it leads to"),
        "{stderr}"
    );
    let requests = mock.requests();
    for request in &requests {
        assert!(
            !said(request).contains("CREDENTIAL-MARKER"),
            "{}",
            said(request)
        );
    }
    assert!(said(&requests[1]).contains("there is no skill `creds`"));
}

#[test]
fn a_deny_rule_on_skill_holds() {
    let scenario = json!({"steps": [
        {"tool": "skill", "args": {"name": "pdf"}},
        {"say": "Refused."}
    ]})
    .to_string();
    let (home, mock) = scripted("chat", &scenario, "");
    home.append_config("[permissions]\ndeny = [\"skill(pdf)\"]\n");
    skill(
        &home.path().join("skills"),
        "pdf",
        "name: pdf\ndescription: Extract text",
        "PDF-BODY-MARKER",
    );
    let run = home.run(&["run", "--yes", "read it"]);
    assert_eq!(run.code(), 1, "{}", run.stderr());
    let second = said(&mock.requests()[1]);
    assert!(!second.contains("PDF-BODY-MARKER"), "{second}");
    assert!(second.contains("the skill was not loaded"), "{second}");
}

#[test]
fn a_resumed_session_is_told_of_skills_found_since_without_a_rewrite() {
    let scenario = json!({"steps": [{"say": "First."}, {"say": "Second."}]}).to_string();
    let (home, mock) = scripted("chat", &scenario, "");
    let first = home.run(&["run", "--yes", "--json", "hello"]);
    assert_eq!(first.code(), 0, "{}", first.stderr());
    let session = first.events()[0]["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    skill(
        &home.path().join(".keel/skills"),
        "changelog",
        "name: changelog\ndescription: Keep the changelog",
        "CHANGELOG-BODY",
    );
    let second = home.run(&["run", "--session", &session, "--yes", "go on"]);
    assert_eq!(second.code(), 0, "{}", second.stderr());
    let requests = mock.requests();
    let (before, after) = (body(&requests[0]), body(&requests[1]));
    let messages = after["messages"].as_array().unwrap();
    // Every message of the first request is the same bytes in the second.
    let earlier = before["messages"].as_array().unwrap();
    assert_eq!(&messages[..earlier.len()], &earlier[..]);
    let last = messages.last().unwrap().to_string();
    assert!(
        last.contains("skills found since this session began") && last.contains("`changelog`"),
        "{last}"
    );
    assert!(!last.contains("CHANGELOG-BODY"));
}
