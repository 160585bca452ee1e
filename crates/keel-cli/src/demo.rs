//! `keel demo`: a real keel turn against the built-in fake provider, no key and no network.
//!
//! Invariant: the demo talks to an in-process `keel mock` on loopback through the same client,
//! retry policy and renderer as a real run; it reads no config file and writes nothing.

use crate::Outcome;
use crate::cli::CommonArgs;
use crate::render::Renderer;
use crate::turn::{TurnSetup, execute_turn};
use keel_llm::{KeelConfig, KeySource, Overrides};
use keel_mock::{Fault, MockServer, Scenario, Step};
use std::time::Duration;

struct DemoKey;

impl KeySource for DemoKey {
    fn key(&self, _env_var: &str) -> Option<String> {
        Some("demo-key-not-secret".into())
    }
}

const PROMPT: &str =
    "In one paragraph: why does keel keep every request a byte prefix of the next?";

fn scenario() -> Scenario {
    let mut scenario = Scenario::from_steps(vec![
        Step::Fault(Fault::Http {
            status: 503,
            body: r#"{"error":{"message":"server overloaded","type":"server_error"}}"#.into(),
            headers: Default::default(),
        }),
        Step::Say {
            reason: Some(
                "The user asks about prefix caching. DeepSeek bills cached prefixes at a fraction \
                 of the price, so stable bytes matter."
                    .into(),
            ),
            text: "Because DeepSeek caches prompt prefixes: when each request starts with the \
                   exact bytes of the previous one, the provider serves that part from its cache, \
                   which is faster and much cheaper. keel only ever appends to history, projects it \
                   deterministically, and shows the cache-hit rate of every turn."
                .into(),
            finish_reason: None,
        },
    ]);
    scenario.chunk_delay = Duration::from_millis(25);
    scenario
}

pub async fn run(common: &CommonArgs) -> anyhow::Result<Outcome> {
    let server = MockServer::start(([127, 0, 0, 1], 0).into(), scenario()).await?;
    let config_text = format!(
        "model = \"deepseek/deepseek-v4-flash\"\n[providers.deepseek]\nbase_url = \"{}\"\n\
         [providers.deepseek.retry]\nbase_delay_ms = 300\n",
        server.base_url()
    );
    let config =
        KeelConfig::from_texts(vec![("(demo)".into(), config_text)], Overrides::default())?;
    let model = config.model()?;
    let profile = config.profile(&model.provider)?;
    let workspace = std::env::temp_dir();
    let mut renderer = Renderer::new(common.json);
    renderer.notice(&format!(
        "keel demo — a real turn against the built-in fake provider at {} (no key, no network)\n\
         The provider will fail once with HTTP 503; keel retries within its bounded policy.\n\n> {PROMPT}\n",
        server.base_url()
    ));
    let setup = TurnSetup {
        profile: &profile,
        model: &model.model,
        workspace: &workspace,
        keys: &DemoKey,
    };
    let outcome = execute_turn(&setup, PROMPT, &mut renderer).await?;
    renderer.notice(
        "\nTo run keel against DeepSeek: export DEEPSEEK_API_KEY=sk-… and run `keel run \"your task\"`.",
    );
    Ok(outcome)
}
