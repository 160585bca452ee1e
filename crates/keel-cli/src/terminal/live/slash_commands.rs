//! Slash commands in the live TUI: the session driver runs them and returns what to show,
//! which goes into the scrollback through the view; only a command's question (a picker)
//! puts the region away while it is asked.
//!
//! Invariants:
//! - A command that switches the controller (`/model`, `/resume`, `/fork`, `/clear`) waits
//!   for a running turn to end; after a switch the session's events, menu and completion
//!   follow the new controller, and the mode chosen with Shift+Tab holds.
//! - Keys typed while a command runs wait in the key reader, Enter included.

use super::Session;
use crate::Outcome;
use crate::terminal::completion::LineHelper;
use crate::terminal::shown::{Answered, Question, Reply, Shown, Tone};
use keel_agent::SurfaceCommand;
use keel_render::Style;

impl Session {
    pub(super) async fn run_command(&mut self, command: SurfaceCommand) -> Option<Outcome> {
        match command {
            SurfaceCommand::Quit => return Some(Outcome::Completed),
            SurfaceCommand::Transcript => {
                self.transcript();
                return None;
            }
            _ => {}
        }
        let switches = matches!(
            command,
            // `/model` alone may switch too (its picker).
            SurfaceCommand::Model(_)
                | SurfaceCommand::Resume(Some(_))
                | SurfaceCommand::Fork(_)
                | SurfaceCommand::Clear
        );
        if switches && self.turn.is_some() {
            self.view.say(
                "a turn is running: switch after it ends (Esc stops it)",
                Style::fg(keel_render::Color::Yellow),
            );
            return None;
        }
        let mode = self
            .controller()
            .map(|controller| controller.permission_mode());
        let mut reply = self.driver.command(command).await;
        let outcome = loop {
            match reply {
                Ok(Reply::Done(shown, outcome)) => {
                    self.show(&shown);
                    break outcome;
                }
                Ok(Reply::Turn(shown, input)) => {
                    self.show(&shown);
                    let said = match &input {
                        keel_agent::Input::Prompt(prompt) => prompt.clone(),
                        _ => String::new(),
                    };
                    self.start_turn(input, &said);
                    break None;
                }
                Ok(Reply::Ask(question)) => match self.ask(question) {
                    Answered::Run(next) => reply = Box::pin(self.driver.command(next)).await,
                    Answered::Show(shown) => {
                        self.show(&shown);
                        break None;
                    }
                },
                Err(error) => {
                    self.view.say(
                        &format!("error: {}", keel_render::visible(&format!("{error:#}"))),
                        Tone::Error.style(),
                    );
                    break None;
                }
            }
        };
        if switches && let Some(controller) = self.controller() {
            self.events = controller.subscribe();
            self.view.menu =
                keel_tui::SlashMenu::new(crate::terminal::completion::menu_entries(&controller));
            self.completion = LineHelper::for_session(&controller);
            // The mode chosen with Shift+Tab holds across a model or session switch (the
            // model is told with the next prompt).
            if let Some(mode) = mode {
                controller.set_permission_mode(mode);
            }
        }
        self.refresh_status();
        outcome
    }

    /// What a command returns, into the scrollback under the command: words wrapped to the
    /// width in their tone's colour, styled lines as they are.
    fn show(&mut self, shown: &Shown) {
        for part in shown.parts() {
            match part {
                Ok((words, tone)) => {
                    for line in words.split('\n') {
                        self.view.say(line, tone.style());
                    }
                }
                Err(lines) => self.view.commit(lines.to_vec()),
            }
        }
    }

    /// A command's question (a picker), asked below the scrollback with the region put away;
    /// keys typed meanwhile wait for the input, Enter included.
    fn ask(&mut self, question: Question) -> Answered {
        self.put_region_away();
        // A picker reads keys as the terminal sends them by default (Ctrl-C as 0x03).
        crate::terminal::raw_terminal::plain_keys();
        let printing = crate::terminal::raw_terminal::CommandOutput::begin();
        let answered = question.ask_on_terminal(self.colors);
        drop(printing);
        self.take_region_back();
        answered
    }
}
