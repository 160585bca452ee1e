//! `keel run`: one text turn against the configured provider.
//!
//! Invariants:
//! - A missing key is a configuration error (exit 2) that names the variable to set; it is
//!   checked before anything is sent.
//! - Ctrl-C cancels the turn: the in-flight request is dropped and nothing it streamed is kept
//!   (exit 130).
//! - Every event goes to the renderer in order; `--json` prints them all.

use crate::cli::CommonArgs;
use crate::render::Renderer;
use crate::settings;
use crate::{Outcome, UsageError};
use keel_llm::client::HttpClient;
use keel_llm::{AccountCursor, Dispatcher, EnvKeys, KeySource, ProjectionInput, ProviderProfile};
use keel_types::{Event, EventBody, FailureDiagnostic, FailureKind, InputKind, Item};
use rand::Rng;
use std::path::Path;

pub const SYSTEM_PROMPT: &str = "You are keel, a coding agent working in the user's terminal. \
Answer precisely and briefly. Report only what you actually know or did.";

/// Everything one turn needs.
pub struct TurnSetup<'a> {
    pub profile: &'a ProviderProfile,
    pub model: &'a str,
    pub workspace: &'a Path,
    pub keys: &'a dyn KeySource,
}

pub async fn run_command(common: &CommonArgs, prompt: &str) -> anyhow::Result<Outcome> {
    if let Some(command) = prompt.strip_prefix('/') {
        let name = command.split_whitespace().next().unwrap_or("");
        return Err(UsageError(format!(
            "unknown slash command `/{name}`: `keel run` has no slash commands yet (session \
             commands such as /recover-context arrive with sessions)"
        ))
        .into());
    }
    if prompt.trim().is_empty() {
        return Err(UsageError("the prompt is empty: say what keel should do".into()).into());
    }
    let workspace = settings::workspace(common)?;
    let config = settings::load_config(common, &workspace)?;
    let model = config.model()?;
    let profile = config.profile(&model.provider)?;
    require_key(&profile, &EnvKeys)?;
    let mut renderer = Renderer::new(common.json);
    let setup = TurnSetup {
        profile: &profile,
        model: &model.model,
        workspace: &workspace,
        keys: &EnvKeys,
    };
    execute_turn(&setup, prompt, &mut renderer).await
}

/// Refuse to start without a key for the first account.
pub fn require_key(profile: &ProviderProfile, keys: &dyn KeySource) -> Result<(), UsageError> {
    let Some(first) = profile.accounts.first() else {
        return Err(UsageError(format!(
            "provider `{}` has no account",
            profile.name
        )));
    };
    if keys.key(&first.api_key_env).is_some() {
        return Ok(());
    }
    Err(UsageError(format!(
        "no API key for provider `{}`: set the environment variable {} (or try `keel demo`, which \
         needs no key)",
        profile.name, first.api_key_env
    )))
}

fn new_session_id() -> String {
    let bytes: [u8; 8] = rand::rng().random();
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

pub async fn execute_turn(
    setup: &TurnSetup<'_>,
    prompt: &str,
    renderer: &mut Renderer,
) -> anyhow::Result<Outcome> {
    let session_id = new_session_id();
    let event = |turn: Option<u64>, body: EventBody| Event {
        session_id: session_id.clone(),
        turn,
        body,
    };
    renderer.emit(&event(
        None,
        EventBody::SessionStarted {
            workspace: setup.workspace.display().to_string(),
            model: format!("{}/{}", setup.profile.name, setup.model),
            provider: setup.profile.name.clone(),
            resumed: false,
        },
    ));
    renderer.emit(&event(
        Some(1),
        EventBody::TurnStarted {
            input_kind: InputKind::User,
        },
    ));
    let client = HttpClient::new(setup.profile.connect_timeout)?;
    let history = vec![Item::User {
        text: prompt.to_string(),
    }];
    let dispatcher = Dispatcher {
        client: &client,
        profile: setup.profile,
        keys: setup.keys,
    };
    let mut accounts = AccountCursor::new(setup.profile);
    let input = ProjectionInput {
        model: setup.model,
        system: SYSTEM_PROMPT,
        tools: &[],
        history: &history,
    };
    let result = {
        let mut emit = |body: EventBody| renderer.emit(&event(Some(1), body));
        let request = dispatcher.complete(&input, &mut accounts, &mut emit);
        tokio::select! {
            result = request => Some(result),
            _ = tokio::signal::ctrl_c() => None,
        }
    };
    match result {
        Some(Ok(outcome)) => {
            let completion = outcome.completion;
            renderer.emit(&event(
                Some(1),
                EventBody::LlmResponse {
                    finish_reason: completion.finish_reason.to_string(),
                    usage: completion.usage,
                },
            ));
            if completion.item.has_tool_calls() {
                renderer.notice(
                    "note: the model asked for tools, which `keel run` cannot run yet; its text \
                     answer is shown as is",
                );
            }
            // One request per turn until tools arrive: the turn's usage is this response's.
            let usage = completion.usage;
            renderer.emit(&event(
                Some(1),
                EventBody::TurnCompleted {
                    usage,
                    cache_hit_ratio: usage.cache_hit_ratio(),
                },
            ));
            Ok(Outcome::Completed)
        }
        Some(Err(diagnostic)) => {
            renderer.emit(&event(Some(1), EventBody::TurnFailed { diagnostic }));
            Ok(Outcome::TurnFailed)
        }
        None => {
            let diagnostic = FailureDiagnostic::new(FailureKind::Cancelled, None);
            renderer.emit(&event(Some(1), EventBody::TurnFailed { diagnostic }));
            Ok(Outcome::Cancelled)
        }
    }
}
