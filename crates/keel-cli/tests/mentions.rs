//! `@path` in a prompt attaches the file, as `read_file` would return it, inside that prompt's
//! user item; refused files are named with the reason, and keel's key never goes out.

use crate::common::*;

#[test]
fn a_mentioned_file_reaches_the_request_inside_the_prompt() {
    let steps = serde_json::json!({"steps": [{"say": "read it"}]}).to_string();
    let (home, mock) = scripted("chat", &steps, "");
    std::fs::write(
        home.path().join("notes.txt"),
        "the secret word is pumpkin\n",
    )
    .unwrap();
    let run = home.run(&["run", "what does @notes.txt say? mail me at a@b.c"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let message = last_user_message(&mock);
    assert!(
        message.starts_with(
            "what does @notes.txt say? mail me at a@b.c\n\n<attached path=\"notes.txt\">\n"
        ),
        "{message}"
    );
    assert!(message.contains("the secret word is pumpkin"), "{message}");
    assert!(message.ends_with("</attached>"), "{message}");
    assert_eq!(
        message.matches("<attached").count(),
        1,
        "a@b.c is no mention"
    );
}

#[test]
fn a_mention_reads_nothing_a_tool_could_not_and_never_the_key() {
    let steps = serde_json::json!({"steps": [{"say": "ok"}, {"say": "ok"}]}).to_string();
    let (home, mock) = scripted("chat", &steps, "");
    let run = home.run(&["run", "show @/proc/self/environ"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let message = last_user_message(&mock);
    assert!(
        message.contains("[keel: @/proc/self/environ was not attached:"),
        "{message}"
    );
    assert!(!message.contains("test-key-1"), "{message}");
    // A project file holding keel's own key: attached, with the key redacted.
    std::fs::write(
        home.path().join(".env"),
        "DEEPSEEK_API_KEY=test-key-1\nOTHER=1\n",
    )
    .unwrap();
    let run = home.run(&["run", "check @.env"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let message = last_user_message(&mock);
    assert!(message.contains("<attached path=\".env\">"), "{message}");
    assert!(message.contains("OTHER=1"), "{message}");
    assert!(!message.contains("test-key-1"), "{message}");
    let db = std::fs::read(home.path().join("state/keel.db")).unwrap();
    assert!(
        !db.windows(b"test-key-1".len()).any(|w| w == b"test-key-1"),
        "the key is not stored either"
    );
}
