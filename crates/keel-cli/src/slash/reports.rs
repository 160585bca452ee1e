//! The slash commands that report on the session (`/status`, `/permissions`, `/diff`) and
//! `/model`'s picker: each fills a `Shown` that the terminal surface draws under the command
//! that asked.
//!
//! Invariants:
//! - They read, never change: the session, the config and the store are as they were.
//! - Keys are never shown: a provider's key is named by its variable and where it comes from.
//! - Text from config files and the store (model names, rules, paths) is shown escaped.

use crate::cli::CommonArgs;
use crate::terminal::shown::{Answered, Question, Reply, Shown};
use keel_agent::Controller;
use keel_llm::KeyOrigin;
use keel_render::visible_line;

/// `/status`: model, endpoint, mode, sandbox, session, context and spend.
pub fn status(controller: &Controller, shown: &mut Shown) {
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
        shown.say(format!("  {name:<10} {value}"));
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
    match controller.window_use() {
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
pub fn permissions(controller: &Controller, common: &CommonArgs, shown: &mut Shown) {
    shown.say(format!(
        "  mode       {} (Shift+Tab cycles; deny and ask rules apply in every mode)",
        controller.permission_mode().as_str()
    ));
    let workspace = controller.settings().workspace.clone();
    let config = match crate::settings::load_config(common, &workspace) {
        Ok(config) => config,
        Err(error) => {
            shown.say(format!(
                "  cannot read the configuration: {}",
                visible_line(&format!("{error:#}"))
            ));
            return;
        }
    };
    let rules = config.rules();
    if rules.is_empty() {
        shown.say(
            "  rules      none: [permissions] allow / ask / deny in config.toml or a trusted \
             keel.toml add them",
        );
    }
    for rule in rules {
        shown.say(format!(
            "  {:<10} {}  ({})",
            rule.list.as_str(),
            visible_line(&rule.text),
            visible_line(&rule.source.to_string())
        ));
    }
    shown.say(format!(
        "  read-only commands (ls, git status, …) {}",
        if controller.settings().policy.asks_read_only_commands() {
            "ask (ask_read_only_commands = true)"
        } else {
            "run without asking when the sandbox is enforced"
        }
    ));
}

/// `/diff`: each file this session changed, as a numbered diff from what it was before; what
/// keel did not keep is named; outside git, that commands' changes are not known.
pub fn diff(controller: &Controller, shown: &mut Shown) {
    let diff = match controller.session_diff() {
        Ok(diff) => diff,
        Err(error) => {
            shown.error(visible_line(&error.to_string()));
            return;
        }
    };
    let width = crate::render::terminal_width();
    if diff.files.is_empty() && diff.unknown.is_empty() {
        shown.say("this session changed nothing in the workspace (or a rewind undid it)");
    }
    for file in &diff.files {
        let what = match (&file.before, &file.now) {
            (None, _) => "new",
            (_, None) => "deleted",
            _ => "changed",
        };
        let by = if file.by_command {
            ", outside the file tools"
        } else {
            ""
        };
        let head = keel_render::Line::new(vec![
            keel_render::Span::new(&visible_line(&file.path), keel_render::Style::PLAIN.bold()),
            keel_render::Span::new(&format!("  {what}{by}"), keel_render::Style::PLAIN.dim()),
        ]);
        let mut lines = vec![keel_render::Line::empty(), head];
        lines.extend(
            keel_render::FileDiff::new(
                file.before.as_deref(),
                file.now.as_deref().unwrap_or_default(),
            )
            .lines(width),
        );
        shown.lines(lines);
    }
    for (path, why) in &diff.unknown {
        shown.say(format!(
            "{}: changed, but keel did not keep what it was before ({})",
            visible_line(path),
            visible_line(why)
        ));
    }
    if !diff.commands_covered {
        shown.say(
            "not a git repository: these are the file tools' changes only; what commands \
             changed is not known here",
        );
    }
}

/// `/agents`: each agent a `task` may start — where it comes from, what it may use, and
/// whether its requests share this session's cached prefix (the same model does).
pub fn agents(controller: &Controller, shown: &mut Shown) {
    let settings = controller.settings();
    let current = format!("{}/{}", settings.profile.name, settings.model);
    let width = crate::render::terminal_width();
    let agents = controller.services().agents().clone();
    shown.say("agents the model can start with `task` (several at once run together)");
    for agent in agents.list() {
        let mode = match agent.mode_under(controller.permission_mode()) {
            (runs, true) => format!(
                "mode {} refused: runs in yours ({}), never looser",
                agent.permission_mode.map_or("", |mode| mode.as_str()),
                runs.as_str()
            ),
            (runs, false) if agent.permission_mode.is_some() => format!("mode {}", runs.as_str()),
            _ => "your mode".to_string(),
        };
        let cache = match &agent.model {
            Some(model) if !agent.shares_cache_with(&current) => format!(
                "model {}: its own cache (another model cannot share yours)",
                visible_line(model)
            ),
            _ => "shares your cache".to_string(),
        };
        shown.say(format!(
            "  {:<11}{} · {mode} · {cache}",
            visible_line(&agent.name),
            agent.source.as_str()
        ));
        let mut details = Vec::new();
        if let Some(path) = &agent.path {
            details.push(visible_line(&path.display().to_string()).into_owned());
        }
        details.push(match &agent.tools {
            keel_agent::AgentTools::Parent => "tools: yours".to_string(),
            keel_agent::AgentTools::Only(tools) => {
                let names: Vec<&str> = tools.iter().map(String::as_str).collect();
                format!("tools: {}", visible_line(&names.join(", ")))
            }
        });
        details.push(visible_line(&agent.description).into_owned());
        for detail in details {
            for line in hanging(&detail, 13, width) {
                shown.say(line);
            }
        }
    }
}

/// `text` wrapped at words to `width` columns, every line indented by `indent` (a word longer
/// than a line is cut by the terminal as usual). Hand-written: one use, plain ASCII-width
/// words of keel's own listings.
fn hanging(text: &str, indent: usize, width: usize) -> Vec<String> {
    let room = width.saturating_sub(indent).max(20);
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > room {
            lines.push(format!("{:indent$}{line}", ""));
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(format!("{:indent$}{line}", ""));
    }
    lines
}

/// `/model` without a model: the current one, then (on a terminal) the configured models to
/// pick from by number; an answer that names another one switches to it.
pub fn pick_model(controller: &Controller, common: &CommonArgs) -> Reply {
    use std::io::IsTerminal;
    let settings = controller.settings();
    let current = format!("{}/{}", settings.profile.name, settings.model);
    let mut shown = Shown::new();
    shown.say(format!("model: {}", visible_line(&current)));
    if !std::io::stdin().is_terminal() {
        return Reply::Done(shown, None);
    }
    let models = configured_models(controller, common);
    if models.len() < 2 {
        return Reply::Done(shown, None);
    }
    for (number, model) in models.iter().enumerate() {
        let mark = if *model == current { "*" } else { " " };
        shown.say(format!("{mark} {:>2}  {}", number + 1, visible_line(model)));
    }
    let prompt = format!(
        "switch to [a number; Enter keeps {}]: ",
        visible_line(&current)
    );
    Reply::Ask(Question::new(shown, prompt, move |answer| {
        let mut shown = Shown::new();
        let Some(answer) = answer else {
            return Answered::Show(shown);
        };
        let answer = answer.trim();
        let kept = format!("kept {}", visible_line(&current));
        match answer.parse::<usize>().ok().and_then(|n| n.checked_sub(1)) {
            _ if answer.is_empty() => shown.say(kept),
            Some(index) if index < models.len() && models[index] != current => {
                return Answered::Run(keel_agent::SurfaceCommand::Model(Some(
                    models[index].clone(),
                )));
            }
            Some(index) if index < models.len() => shown.say(kept),
            _ => shown.say(format!(
                "{kept}: `{}` is not a number from the list (/model PROVIDER/ID names any)",
                visible_line(answer)
            )),
        }
        Answered::Show(shown)
    }))
}

/// The models `/model` offers: the current provider's known models (the current one first
/// when the table does not have it), then those of every other configured provider that has
/// a key (in the environment or stored).
fn configured_models(controller: &Controller, common: &CommonArgs) -> Vec<String> {
    let mut models = crate::terminal::completion::argument_candidates(controller, "/model");
    let current_provider = controller.settings().profile.name.clone();
    let workspace = controller.settings().workspace.clone();
    let (Ok(config), Ok(keys)) = (
        crate::settings::load_config(common, &workspace),
        crate::settings::keys(),
    ) else {
        return models;
    };
    let Ok(resolved) = config.resolve() else {
        return models;
    };
    for provider in &resolved.providers {
        let keyed = provider
            .accounts
            .value
            .first()
            .is_some_and(|account| keys.origin(&account.api_key_env).is_some());
        if provider.name == current_provider || !keyed {
            continue;
        }
        for model in keel_llm::price::known_models(&provider.base_url.value) {
            let named = format!("{}/{model}", provider.name);
            if !models.contains(&named) {
                models.push(named);
            }
        }
    }
    models
}

/// `/jobs`: the session's background jobs — id, how long, how it ended (or that it runs), the
/// command and the last line it printed.
pub fn jobs(controller: &Controller, shown: &mut Shown) {
    let jobs = controller.jobs();
    if jobs.is_empty() {
        shown.say(
            "no background jobs in this session (the model starts one with bash \
             run_in_background)",
        );
        return;
    }
    let width = crate::render::terminal_width();
    let running = jobs.iter().filter(|job| job.ending.is_none()).count();
    shown.say(format!(
        "background jobs: {running} running of {} (`/jobs kill JOB` stops one)",
        jobs.len()
    ));
    for job in jobs {
        let elapsed = job
            .elapsed
            .map(|elapsed| format!(" · {}", short_duration(elapsed)))
            .unwrap_or_default();
        let state = match &job.ending {
            None => "running".to_string(),
            Some(ending) => ending.describe(),
        };
        shown.say(format!(
            "  {:<8}{state}{elapsed}",
            visible_line(&job.job).into_owned()
        ));
        for line in hanging(&format!("$ {}", visible_line(&job.command)), 10, width) {
            shown.say(line);
        }
        if let Some(last) = &job.last_line {
            for line in hanging(&format!("› {}", visible_line(last)), 10, width) {
                shown.say(line);
            }
        }
    }
}

/// `42 s`, `3 min 05 s`, `2 h 01 min`.
fn short_duration(elapsed: std::time::Duration) -> String {
    let seconds = elapsed.as_secs();
    match seconds {
        0..60 => format!("{seconds} s"),
        60..3600 => format!("{} min {:02} s", seconds / 60, seconds % 60),
        _ => format!("{} h {:02} min", seconds / 3600, seconds % 3600 / 60),
    }
}

/// `/skills`: each skill — where it comes from, whether the model may load it and whether it is
/// a `/NAME` command here, its description.
pub fn skills(controller: &Controller, shown: &mut Shown) {
    let skills = controller.services().skills().clone();
    let commands = controller.services().commands().clone();
    let width = crate::render::terminal_width();
    let mut any = false;
    for skill in skills.list() {
        if !any {
            shown.say("skills (the model loads one with `skill` when a task matches it)");
            any = true;
        }
        let slash = commands.list().any(|command| {
            command.name == skill.name && command.layer == keel_agent::CommandLayer::Skill
        });
        let uses = match (skill.model_invocable, slash) {
            (true, true) => format!("the model's · /{}", skill.name),
            (true, false) => "the model's".to_string(),
            (false, true) => format!("/{} only", skill.name),
            (false, false) => "neither the model's nor a command".to_string(),
        };
        shown.say(format!(
            "  {:<16}{} · {uses}",
            visible_line(&skill.name),
            skill.source.as_str()
        ));
        for detail in [
            visible_line(&skill.dir.display().to_string()).into_owned(),
            visible_line(&skill.description).into_owned(),
        ] {
            for line in hanging(&detail, 18, width) {
                shown.say(line);
            }
        }
    }
    if !any {
        shown.say(
            "no skills: put one in .keel/skills/NAME/SKILL.md or $KEEL_HOME/skills/NAME/SKILL.md \
             (front matter `name` and `description`; .claude/skills and .agents/skills are read too)",
        );
    }
}
