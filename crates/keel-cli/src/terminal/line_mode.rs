//! `keel` in line mode: a line editor (rustyline) reads prompts and slash commands, the
//! session driver runs them, and a renderer prints the controller's events as they come.
//!
//! Invariants:
//! - At the prompt, Ctrl-C clears the line, and a second Ctrl-C in a row, or Ctrl-D, quits;
//!   SIGTERM and SIGHUP end keel at once, the terminal put back.
//! - Slash commands are parsed only at the start of a line; anything else goes to the model.
//! - Input that ends after a failed turn (a script running `keel "PROMPT"`) exits 1.

use crate::Outcome;
use crate::cli::CommonArgs;
use crate::render::Renderer;
use crate::session_setup::{open_controller, prepare, print_notices};
use crate::settings;
use crate::signals::StopSignals;
use crate::terminal::approval_prompt::TerminalApprover;
use crate::terminal::completion::{LineHelper, bind_newline_keys};
use crate::terminal::session_driver::{SessionDriver, ask_trust_first, print_where_you_were};
use crate::terminal::shown::{Answered, Reply};
use keel_agent::{Controller, Line};
use keel_render::visible_line;
use rustyline::error::ReadlineError;
use std::io::IsTerminal as _;
use std::sync::Arc;

fn start_rendering(controller: &Controller) -> tokio::task::JoinHandle<()> {
    let mut events = controller.subscribe();
    let session = controller.session().id.clone();
    tokio::spawn(async move {
        // A subagent's events come forwarded, under its own session id: shown as its own.
        let mut renderer = Renderer::new(false).for_session(&session);
        while let Some(event) = events.recv().await {
            renderer.emit(&event);
        }
    })
}

/// The line-mode session; `first` (from `keel "PROMPT"`) is sent as if typed.
pub async fn run(common: &CommonArgs, first: Option<String>) -> anyhow::Result<Outcome> {
    let asked = ask_trust_first(common)?;
    let setup = prepare(common, "keel (interactive)")?;
    print_notices(&setup);
    let approver = Arc::new(TerminalApprover {
        always: keel_agent::AlwaysAllowed::default(),
    });
    let controller = open_controller(setup, approver.clone())?;
    // The question already listed what the project files asked for; otherwise say it now.
    if !asked {
        controller.announce();
    }
    let saved_terminal = save_terminal();
    let history_path = settings::keel_home()?.join("history.txt");
    let config = rustyline::Config::builder()
        .completion_type(rustyline::CompletionType::List)
        .build();
    let mut editor: rustyline::Editor<LineHelper, rustyline::history::FileHistory> =
        rustyline::Editor::with_config(config)?;
    editor.set_helper(Some(LineHelper::for_session(&controller)));
    bind_newline_keys(&mut editor);
    let _ = editor.load_history(&history_path);
    // After the line editor, whose own SIGINT handler would otherwise take Ctrl-C from us.
    let signals = StopSignals::register()?;
    let mut driver =
        SessionDriver::new(common, controller, approver, signals, Some(start_rendering));
    driver.banner().print(crate::render::stderr_colors());
    if let Some(controller) = &driver.controller {
        print_where_you_were(controller, common, keel_render::Colors::from_env());
    }
    // Ctrl-C at the prompt clears the line; a second one in a row quits (as Ctrl-D does).
    let mut interrupted = false;
    let mut first = first;
    let outcome = loop {
        let line = if let Some(prompt) = first.take() {
            // `keel "PROMPT"`: shown as if typed at the prompt.
            println!("› {}", visible_line(&prompt));
            Ok(prompt)
        } else {
            let reading = tokio::task::spawn_blocking(move || {
                let line = editor.readline("› ");
                (editor, line)
            });
            // At the prompt nothing runs: SIGTERM / SIGHUP end keel at once (Ctrl-C is a key
            // here).
            let (returned, line) = tokio::select! {
                read = reading => read?,
                stop = driver.signals.next_terminating() => {
                    restore_terminal(saved_terminal.as_ref());
                    eprintln!("\nstopped by {}", stop.name());
                    // Leaving at once: the session's background jobs end first.
                    if let Some(controller) = &driver.controller {
                        controller.end_jobs();
                    }
                    std::process::exit(i32::from(stop.exit_code()));
                }
            };
            editor = returned;
            line
        };
        if !matches!(line, Err(ReadlineError::Interrupted)) {
            interrupted = false;
        }
        match line {
            Ok(line) => {
                let text = line.trim();
                let line = match &driver.controller {
                    Some(controller) => controller.parse_line(text),
                    None => Line::parse(text),
                };
                let quit = match line {
                    Line::Empty => continue,
                    Line::Input(input) => {
                        let _ = editor.add_history_entry(text);
                        driver.turn(input).await?
                    }
                    Line::Command(command) => {
                        let _ = editor.add_history_entry(text);
                        run_command(&mut driver, command).await?
                    }
                    Line::Unknown(name) => {
                        eprintln!(
                            "unknown command `{}`; /help lists them",
                            visible_line(&name)
                        );
                        None
                    }
                };
                if let Some(outcome) = quit {
                    break outcome;
                }
            }
            Err(ReadlineError::Interrupted) if interrupted => break Outcome::Completed,
            Err(ReadlineError::Interrupted) => {
                interrupted = true;
                eprintln!("(Ctrl-C again, or Ctrl-D, quits)");
            }
            // Input ended: a script that ran `keel "PROMPT"` learns whether its turn failed.
            Err(ReadlineError::Eof)
                if driver.last_turn_failed && !std::io::stdin().is_terminal() =>
            {
                break Outcome::TurnFailed;
            }
            Err(ReadlineError::Eof) => break Outcome::Completed,
            Err(error) => return Err(error.into()),
        }
    };
    let entries: Vec<String> = editor.history().iter().cloned().collect();
    crate::terminal::raw_terminal::save_history(&history_path, &entries);
    driver.stop_following();
    if let Some(controller) = &driver.controller {
        let id = &controller.session().id;
        eprintln!("session {id} is saved · resume it with: keel -c   (or: keel --session {id})");
    }
    Ok(outcome)
}

/// Run a slash command and print what it returns, asking its questions on the terminal.
async fn run_command(
    driver: &mut SessionDriver,
    command: keel_agent::SurfaceCommand,
) -> anyhow::Result<Option<Outcome>> {
    let colors = crate::render::stderr_colors();
    let mut reply = driver.command(command).await?;
    loop {
        match reply {
            Reply::Done(shown, outcome) => {
                shown.print(colors);
                return Ok(outcome);
            }
            Reply::Turn(shown, input) => {
                shown.print(colors);
                return driver.turn(input).await;
            }
            Reply::Ask(question) => match question.ask_on_terminal(colors) {
                Answered::Run(next) => reply = Box::pin(driver.command(next)).await?,
                Answered::Show(shown) => {
                    shown.print(colors);
                    return Ok(None);
                }
            },
        }
    }
}

/// The terminal's settings at start, to put back if a signal ends keel at the prompt.
fn save_terminal() -> Option<nix::sys::termios::Termios> {
    nix::sys::termios::tcgetattr(std::io::stdin()).ok()
}

fn restore_terminal(saved: Option<&nix::sys::termios::Termios>) {
    if let Some(saved) = saved {
        let _ = nix::sys::termios::tcsetattr(
            std::io::stdin(),
            nix::sys::termios::SetArg::TCSANOW,
            saved,
        );
    }
}
