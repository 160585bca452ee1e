//! `keel "PROMPT"`: the interactive session started with a prompt, as people start their
//! agents (docs/features.md#commands).
//!
//! Invariants:
//! - A command's name always wins (clap matches it first); what reaches here is a prompt.
//! - A first word typed without spaces that is within an edit distance of 2 of a command's
//!   name (1 for a name of four letters or fewer, so `add` or `do` stay words, not `acp` or
//!   `demo`) is a usage error naming the command (`keel sesions` is a typo, not a prompt);
//!   quoted with a space in it, it is a prompt.
//! - keel's own options go before the prompt: one found after it is a usage error that says
//!   so, never silently sent to the model as words.

use crate::UsageError;
use clap::CommandFactory;

/// The prompt of `keel WORDS…`, or the usage error that says what was meant.
pub fn prompt_of(words: &[String]) -> Result<String, UsageError> {
    let command = crate::cli::Cli::command();
    let prompt = words.join(" ");
    let Some(first) = words.first() else {
        return Err(UsageError(
            "an empty prompt: type what keel should do".into(),
        ));
    };
    if prompt.trim().is_empty() {
        return Err(UsageError(
            "an empty prompt: type what keel should do".into(),
        ));
    }
    if !first.chars().any(char::is_whitespace) {
        let names = command
            .get_subcommands()
            .map(|sub| sub.get_name().to_string())
            .chain(std::iter::once("help".to_string()));
        let near = |name: &String| {
            let most = if name.chars().count() <= 4 { 1 } else { 2 };
            keel_types::names::edit_distance(first, name) <= most
        };
        if let Some(name) = names
            .filter(near)
            .min_by_key(|name| keel_types::names::edit_distance(first, name))
        {
            let asking = if words.len() > 1 {
                format!(
                    " (to ask the model, quote the prompt: keel \"{}\")",
                    keel_render::visible_line(&prompt)
                )
            } else {
                String::new()
            };
            return Err(UsageError(format!(
                "`{}` is not a command: did you mean `keel {name}`?{asking}",
                keel_render::visible_line(first),
            )));
        }
    }
    let options: Vec<String> = command
        .get_arguments()
        .filter_map(|argument| argument.get_long().map(|long| format!("--{long}")))
        .chain(["-c".to_string()])
        .collect();
    if let Some(option) = words.iter().skip(1).find(|word| {
        let name = word.split('=').next().unwrap_or(word);
        options.iter().any(|known| known == name)
    }) {
        return Err(UsageError(format!(
            "`{}` comes after the prompt: keel's options go before it (keel {} \"PROMPT\")",
            keel_render::visible_line(option),
            keel_render::visible_line(option)
        )));
    }
    Ok(prompt)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    fn words(text: &[&str]) -> Vec<String> {
        text.iter().map(|word| (*word).to_string()).collect()
    }

    #[test]
    fn words_become_one_prompt() {
        assert_eq!(
            prompt_of(&words(&["fix the failing test"])).unwrap(),
            "fix the failing test"
        );
        assert_eq!(
            prompt_of(&words(&["explain", "this", "repository"])).unwrap(),
            "explain this repository"
        );
    }

    #[test]
    fn a_near_command_name_is_a_typo_unless_quoted_with_a_space() {
        for (typed, meant) in [
            ("sesions", "keel sessions"),
            ("confg", "keel config"),
            ("serv", "keel serve"),
            ("runn", "keel run"),
            ("moc", "keel mock"),
        ] {
            let error = prompt_of(&words(&[typed])).unwrap_err().0;
            assert!(
                error.contains(&format!("did you mean `{meant}`")),
                "{error}"
            );
        }
        // With words after it, the first word is still checked.
        assert!(prompt_of(&words(&["sesions", "--json"])).is_err());
        // Quoted with a space: a prompt.
        assert!(prompt_of(&words(&["sesions are slow, why"])).is_ok());
        // Far from every name: a prompt; and short words two edits from a short name too.
        assert!(prompt_of(&words(&["refactor"])).is_ok());
        for word in ["add", "ask", "do", "sum", "more"] {
            assert!(prompt_of(&words(&[word, "a", "test"])).is_ok(), "{word}");
        }
    }

    #[test]
    fn an_option_after_the_prompt_is_refused_naming_it() {
        let error = prompt_of(&words(&["fix it", "--yes"])).unwrap_err().0;
        assert!(error.contains("`--yes` comes after the prompt"), "{error}");
        let error = prompt_of(&words(&["fix", "it", "--model=x/y"]))
            .unwrap_err()
            .0;
        assert!(error.contains("--model"), "{error}");
        // Words that only look like options are the prompt's.
        assert!(prompt_of(&words(&["why does", "--frobnicate", "fail"])).is_ok());
    }

    #[test]
    fn an_empty_prompt_is_refused() {
        assert!(prompt_of(&words(&["   "])).is_err());
    }
}
