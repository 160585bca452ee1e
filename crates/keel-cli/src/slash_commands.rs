//! The slash commands that report on the session: `/status` and `/permissions` (both
//! surfaces of the terminal print them on stderr, under the command that asked).
//!
//! Invariants:
//! - They read, never change: the session, the config and the store are as they were.
//! - Keys are never shown: a provider's key is named by its variable and where it comes from.
//! - Text from config files and the store (model names, rules, paths) is shown escaped.

use crate::cli::CommonArgs;
use keel_agent::Controller;
use keel_llm::KeyOrigin;
use keel_render::visible_line;

/// `/status`: model, endpoint, mode, sandbox, session, context and spend.
pub fn status(controller: &Controller) {
    let settings = controller.settings();
    let profile = &settings.profile;
    let key = profile.accounts.first().map_or_else(
        || "no account".to_string(),
        |account| {
            let origin = crate::settings::keys()
                .ok()
                .and_then(|keys| keys.origin(&account.api_key_env));
            let said = match origin {
                Some(KeyOrigin::Environment) => "set",
                Some(KeyOrigin::Stored) => "stored by keel auth login",
                None => "not set",
            };
            format!("${} ({said})", account.api_key_env)
        },
    );
    let rows = [
        (
            "model",
            visible_line(&format!("{}/{}", profile.name, settings.model)).into_owned(),
        ),
        (
            "endpoint",
            format!(
                "{} ({})",
                visible_line(&profile.base_url),
                profile.protocol.as_str()
            ),
        ),
        ("key", key),
        ("mode", controller.permission_mode().as_str().to_string()),
        ("sandbox", sandbox_line(settings)),
        ("session", controller.session().id.clone()),
        (
            "workspace",
            visible_line(&settings.workspace.display().to_string()).into_owned(),
        ),
        ("context", context_line(controller)),
        ("spend", spend_line(controller)),
    ];
    for (name, value) in rows {
        eprintln!("  {name:<10} {value}");
    }
}

fn sandbox_line(settings: &keel_agent::AgentSettings) -> String {
    match &settings.sandbox {
        None => "none (commands run unconfined)".into(),
        Some(setup) => {
            let mode = setup.settings.mode;
            if mode == keel_sandbox::SandboxMode::Off {
                "off (your config: commands run unconfined)".into()
            } else if keel_sandbox::detected().meet_minimum(setup.settings.allow_network) {
                format!(
                    "{} (enforced{})",
                    mode.name(),
                    if setup.settings.allow_network {
                        ", network allowed"
                    } else {
                        ", no network"
                    }
                )
            } else {
                format!("{} (not enforceable on this machine)", mode.name())
            }
        }
    }
}

fn context_line(controller: &Controller) -> String {
    match controller.context_use() {
        Some(context) => format!(
            "{}% of the window ({} of {} tokens); /compact frees it",
            context.percent(),
            context.used,
            context.window
        ),
        None => "not measured yet (or the model's window is unknown)".into(),
    }
}

fn spend_line(controller: &Controller) -> String {
    match controller.session_usage() {
        Ok(spend) => {
            let money = spend
                .cost_display()
                .unwrap_or_else(|| "no price known for this model".into());
            format!(
                "{} · {money}",
                keel_tui::usage_line(&spend.usage, spend.usage.cache_hit_ratio())
            )
        }
        Err(error) => format!("cannot read it: {}", visible_line(&error.to_string())),
    }
}

/// `/permissions`: the mode, whether read-only commands ask, and each rule with its source
/// (the configuration as it reads now).
pub fn permissions(controller: &Controller, common: &CommonArgs) {
    eprintln!(
        "  mode       {} (Shift+Tab cycles; deny and ask rules apply in every mode)",
        controller.permission_mode().as_str()
    );
    let workspace = controller.settings().workspace.clone();
    let config = match crate::settings::load_config(common, &workspace) {
        Ok(config) => config,
        Err(error) => {
            eprintln!(
                "  cannot read the configuration: {}",
                visible_line(&format!("{error:#}"))
            );
            return;
        }
    };
    let rules = config.rules();
    if rules.is_empty() {
        eprintln!(
            "  rules      none: [permissions] allow / ask / deny in config.toml or a trusted \
             keel.toml add them"
        );
    }
    for rule in rules {
        eprintln!(
            "  {:<10} {}  ({})",
            rule.list.as_str(),
            visible_line(&rule.text),
            visible_line(&rule.source.to_string())
        );
    }
    eprintln!(
        "  read-only commands (ls, git status, …) {}",
        if controller.settings().policy.asks_read_only_commands() {
            "ask (ask_read_only_commands = true)"
        } else {
            "run without asking when the sandbox is enforced"
        }
    );
}
