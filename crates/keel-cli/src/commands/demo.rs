//! `keel demo`: a real keel session against the built-in fake provider — no key, no network.
//!
//! Invariants:
//! - The same controller, tools, store, retry policy and renderer as a real session; only the
//!   provider is the in-process `keel mock` on loopback.
//! - It writes only under `$KEEL_HOME/demo/` (a scratch workspace and its own state file),
//!   recreated on every run.

use crate::cli::CommonArgs;
use crate::commands::run::run_turn;
use crate::render::Renderer;
use crate::{Outcome, settings};
use keel_agent::{AgentSettings, HeadlessApprover, Host, Input, SessionChoice};
use keel_config::{KeelConfig, Overrides};
use keel_llm::KeySource;
use keel_mock::{Fault, MockServer, Scenario, ScriptedCall, Step};
use keel_tools::{PermissionMode, PermissionPolicy};
use std::sync::Arc;
use std::time::Duration;

struct DemoKey;

impl KeySource for DemoKey {
    fn key(&self, _env_var: &str) -> Option<String> {
        Some("demo-key-not-secret".into())
    }
}

const PROMPT: &str = "greeting.txt has a typo. Fix it and show me the file.";

fn call(name: &str, args: serde_json::Value) -> Vec<ScriptedCall> {
    vec![ScriptedCall {
        name: name.into(),
        arguments: args.to_string(),
    }]
}

fn scenario() -> Scenario {
    let tools = |calls, reason: &str| Step::Tools {
        calls,
        reason: Some(reason.into()),
        finish_reason: None,
    };
    let mut scenario = Scenario::from_steps(vec![
        tools(call("read_file", serde_json::json!({"path": "greeting.txt"})), "First, read the file to find the typo."),
        tools(
            call("edit_file", serde_json::json!({"path": "greeting.txt", "old_string": "Helo", "new_string": "Hello"})),
            "Line 1 says `Helo`; replace it with `Hello`.",
        ),
        Step::Fault(Fault::Http {
            status: 503,
            body: r#"{"error":{"message":"server overloaded","type":"server_error"}}"#.into(),
            headers: Default::default(),
        }),
        tools(call("bash", serde_json::json!({"command": "cat greeting.txt"})), "Check the result by printing the file."),
        Step::Fault(Fault::Http { status: 400, body: String::new(), headers: Default::default() }),
        Step::Say {
            reason: Some("The command output shows the fixed line.".into()),
            text: "Fixed: `Helo` → `Hello` on line 1 of greeting.txt, and `cat` confirms the file now \
                   reads \"Hello, world!\"."
                .into(),
            finish_reason: None,
            usage: None,
        },
    ]);
    scenario.chunk_delay = Duration::from_millis(15);
    scenario
}

pub async fn run(common: &CommonArgs) -> anyhow::Result<Outcome> {
    let demo_dir = settings::keel_home()?.join("demo");
    let workspace = demo_dir.join("workspace");
    if demo_dir.exists() {
        std::fs::remove_dir_all(&demo_dir)?;
    }
    std::fs::create_dir_all(&workspace)?;
    std::fs::write(
        workspace.join("greeting.txt"),
        "Helo, world!\nThis file is part of the keel demo.\n",
    )?;

    let server = MockServer::start(([127, 0, 0, 1], 0).into(), scenario()).await?;
    let config_text = format!(
        "model = \"deepseek/deepseek-v4-flash\"\n[providers.deepseek]\nbase_url = \"{}\"\n\
         [providers.deepseek.retry]\nbase_delay_ms = 400\n",
        server.base_url()
    );
    let config =
        KeelConfig::from_texts(vec![("(demo)".into(), config_text)], Overrides::default())?;
    let model = config.model()?;
    // The demo's commands must not see the user's real keys either.
    let secrets = crate::session_setup::secrets(&config, crate::settings::keys().ok().as_ref());
    // Its commands run confined like any session's.
    let sandbox = settings::sandbox_setup(&config)?;
    let settings = AgentSettings {
        profile: config.profile(&model.provider)?,
        model: model.model,
        policy: PermissionPolicy::mode_only(PermissionMode::Auto),
        max_rounds: 10,
        compact_at: keel_config::DEFAULT_COMPACT_AT,
        workspace: workspace.clone(),
        extra_dirs: Vec::new(),
        holder: "keel demo".into(),
        secrets: secrets.clone(),
        untrusted: Vec::new(),
        sandbox: Some(sandbox.clone()),
        context: keel_agent::ContextSettings::default(),
        checkpoint_max_bytes: 256 * 1024 * 1024,
        action_policy: false,
        subagents: keel_agent::SubagentLimits::default(),
    };
    let host = Host::open(&demo_dir.join("state.db"))?;
    let approver = Arc::new(HeadlessApprover { approve_all: true });
    let open = |choice: SessionChoice, settings: AgentSettings| {
        host.open_session(
            choice,
            settings,
            keel_agent::SurfaceServices::new(Arc::new(DemoKey), approver.clone()),
        )
    };
    let second_settings = settings.clone();
    let controller = open(SessionChoice::New, settings)?;
    let session = controller.session().id.clone();
    let renderer = Renderer::new(common.json);
    renderer.hint(&format!(
        "keel demo — a real session against the built-in fake provider at {} (no key, no network)\n\
         workspace: {}\nOn the way the provider fails once with HTTP 503 (keel retries within its \
         bounded policy), then rejects the replay of the tool history with an empty HTTP 400.\n\n> {PROMPT}\n",
        server.base_url(),
        workspace.display()
    ));
    let quiet = || Renderer::new(common.json).without_session_hints();
    let mut outcome = run_turn(controller, quiet(), Input::Prompt(PROMPT.into())).await?;
    if matches!(outcome, Outcome::TurnFailed) {
        renderer.hint(
            "\nkeel stopped instead of guessing, recorded the incident, and offers an explicit \
             recovery. Running it now, as you would type it:\n> /recover-context\n",
        );
        let controller = open(SessionChoice::Resume(session), second_settings)?;
        let request = Input::ProtocolRecovery {
            recovery_id: None,
            guidance: None,
        };
        outcome = run_turn(controller, quiet(), request).await?;
    }
    let fixed = std::fs::read_to_string(workspace.join("greeting.txt")).unwrap_or_default();
    renderer.hint(&format!(
        "\ngreeting.txt now starts with: {:?}\n\nTo run keel on your own code with DeepSeek:\n  \
         export DEEPSEEK_API_KEY=sk-…\n  keel                      # interactive\n  keel run \"your task\"      # one turn",
        fixed.lines().next().unwrap_or("")
    ));
    Ok(outcome)
}
