//! Measures a long session's costs, one mode per process so each peak RSS is its own:
//! `prepare DB N` writes a session of N items; `select DB` reads the same rows with a plain
//! SQLite `SELECT`; `resume DB` opens the session through keel (settle, load, decode) and
//! projects the next request; `compact DB` commits one compaction (a summary and a 20-item
//! tail as a new revision). Each prints `mode ms peak_kib detail` (rows read, request bytes,
//! or the commit's own milliseconds). Driven by bench/long_session.sh.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use keel_agent::{AgentSettings, HeadlessApprover, Host, SessionChoice};
use keel_llm::profile::{Account, DEFAULT_CONNECT_TIMEOUT};
use keel_llm::{KeySource, ProviderProfile, RetryPolicy};
use keel_store::{HistoryRewrite, Store};
use keel_tools::{PermissionMode, PermissionPolicy};
use keel_types::{
    AssistantItem, AssistantPart, Item, ReasoningProtocol, ReceiptState, Summary, ToolCall,
    ToolReceipt, ToolResult, WireProtocol,
};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

const SESSION: &str = "bench-session";

struct NoKey;
impl KeySource for NoKey {
    fn key(&self, _: &str) -> Option<String> {
        None
    }
}

fn peak_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// A realistic round: an assistant call with reasoning, then its ~600-byte result.
fn round(n: usize) -> [Item; 2] {
    let call = ToolCall {
        id: format!("call-{n}"),
        name: "read_file".into(),
        arguments: format!(r#"{{"path":"src/module_{n}.rs"}}"#),
    };
    let assistant = Item::Assistant(AssistantItem {
        parts: vec![
            AssistantPart::Reasoning {
                text: format!("Round {n}: read the next module to see how it handles errors."),
                replay: None,
            },
            AssistantPart::ToolCall(call),
        ],
    });
    let result = Item::ToolResult(ToolResult {
        call_id: format!("call-{n}"),
        name: "read_file".into(),
        content: format!(
            "fn handler_{n}() -> Result<(), Error> {{\n{}}}\n",
            "    step()?;\n".repeat(45)
        ),
        is_error: false,
    });
    [assistant, result]
}

fn prepare(db: &Path, items: usize) {
    let _ = std::fs::remove_file(db);
    let store = Store::open(db).unwrap();
    store
        .create_session(SESSION, "/bench", "deepseek", "deepseek-chat")
        .unwrap();
    store
        .append_items(
            SESSION,
            1,
            &[Item::User {
                text: "Review every module.".into(),
            }],
        )
        .unwrap();
    let rounds: Vec<Item> = (0..items / 2).flat_map(round).collect();
    let receipts: Vec<ToolReceipt> = (0..items / 2)
        .map(|n| ToolReceipt {
            call_id: format!("call-{n}"),
            tool: "read_file".into(),
            args_digest: String::new(),
            state: ReceiptState::Completed,
            turn: 1,
            seq: n as u64 + 1,
            summary: Some("read".into()),
            sandbox: None,
            child_session: None,
        })
        .collect();
    for chunk in rounds.chunks(500) {
        store.append_items(SESSION, 1, chunk).unwrap();
    }
    for receipt in &receipts {
        store.put_receipt(SESSION, receipt).unwrap();
    }
}

fn select(db: &Path) -> usize {
    let connection = rusqlite::Connection::open(db).unwrap();
    let mut statement = connection
        .prepare("SELECT revision, turn, item FROM items WHERE session_id = ?1 ORDER BY revision")
        .unwrap();
    let rows: Vec<(i64, i64, String)> = statement
        .query_map([SESSION], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    rows.len()
}

fn settings() -> AgentSettings {
    AgentSettings {
        profile: ProviderProfile {
            name: "deepseek".into(),
            protocol: WireProtocol::Chat,
            base_url: "http://127.0.0.1:9".into(),
            base_url_setting: String::new(),
            accounts: vec![Account {
                name: "default".into(),
                api_key_env: "K".into(),
            }],
            reasoning_protocol: ReasoningProtocol::Deepseek,
            retry: RetryPolicy::default(),
            idle_timeout: Duration::from_secs(60),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            max_output_tokens: 8192,
            native_web_search: false,
            max_event_bytes: keel_llm::profile::DEFAULT_MAX_EVENT_BYTES,
            context_window: None,
            price: None,
            region: None,
            reasoning_effort: None,
        },
        model: "deepseek-chat".into(),
        policy: PermissionPolicy::mode_only(PermissionMode::Auto),
        max_rounds: 10,
        compact_at: 0.85,
        workspace: std::env::temp_dir(),
        extra_dirs: vec![],
        holder: "bench".into(),
        secrets: Default::default(),
        untrusted: Vec::new(),
        sandbox: None,
        context: Default::default(),
        checkpoint_max_bytes: 256 * 1024 * 1024,
        action_policy: false,
        subagents: keel_agent::SubagentLimits::default(),
    }
}

fn resume(db: &Path) -> usize {
    let host = Host::open(db).unwrap();
    let controller = host
        .open_session(
            SessionChoice::Resume(SESSION.into()),
            settings(),
            keel_agent::SurfaceServices::new(
                Arc::new(NoKey),
                Arc::new(HeadlessApprover { approve_all: true }),
            ),
        )
        .unwrap();
    controller.next_request().unwrap().body.len()
}

/// Returns the milliseconds of the commit alone (the store is opened and read before).
fn compact(db: &Path) -> f64 {
    let store = Store::open(db).unwrap();
    let current = store.items(SESSION).unwrap();
    let tail: Vec<Item> = current[current.len() - 20..]
        .iter()
        .map(|stored| stored.item.clone().unwrap())
        .collect();
    let mut items = vec![(
        2,
        Item::Summary(Summary {
            text: "Reviewed the modules so far; every read completed.".into(),
            replaced: (current.len() - 20) as u64,
            plan: None,
        }),
    )];
    items.extend(tail.into_iter().map(|item| (1, item)));
    let replaces = store.current_revision(SESSION).unwrap();
    let started = Instant::now();
    store
        .rewrite_history(
            SESSION,
            &HistoryRewrite {
                replaces,
                items: &items,
                reason: "threshold",
                tokens_before: 1_000_000,
                tokens_after: 5_000,
                replaced: (current.len() - 20) as u64,
            },
        )
        .unwrap();
    started.elapsed().as_secs_f64() * 1000.0
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mode, db) = (args[0].as_str(), Path::new(&args[1]));
    let started = Instant::now();
    let detail = match mode {
        "prepare" => {
            prepare(db, args[2].parse().unwrap());
            0.0
        }
        "select" => select(db) as f64,
        "resume" => resume(db) as f64,
        "compact" => compact(db),
        other => panic!("unknown mode {other}"),
    };
    let elapsed = started.elapsed();
    println!(
        "{mode} {:.3} {} {detail}",
        elapsed.as_secs_f64() * 1000.0,
        peak_kib()
    );
}
