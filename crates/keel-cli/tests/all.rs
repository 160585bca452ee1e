//! keel-cli's integration tests, in one binary: each file in `tests/` is a module here (one link
//! instead of one per file; `docs/testing.md#one-test-binary-per-crate`). Run one file's tests
//! with `cargo test -p keel-cli --test all agent_loop::`. `Cargo.toml` sets `autotests = false`,
//! and `docs.rs` checks that every file in `tests/` is listed below.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

mod acp_client;
mod action_policy;
mod agent_loop;
mod agents;
mod allow_write_links;
mod approval_block;
mod approval_display;
mod approval_redaction;
mod bad_input;
mod browser_ui;
mod cli_basics;
mod command_rules;
mod compaction;
mod config_command;
mod custom_commands;
mod docs;
mod eval;
mod eval_isolation;
mod exit_codes;
mod fault_matrix;
mod home_workspace;
mod hooks;
mod hostile_provider;
mod instruction_owners;
mod interactive;
mod jobs;
mod kill_points;
mod live_tui;
mod live_tui_keys;
mod mcp;
mod mentions;
mod parse_errors;
mod piped_input;
mod plan_mode;
mod private_state;
mod project_context;
mod project_trust;
mod provider_errors;
mod read_only_commands;
mod reasoning_effort;
mod recovery;
mod rendered_output;
mod resume_view;
mod rewind;
mod rewind_git;
mod rewind_kept;
mod run_contract;
mod run_faults;
mod sandbox_escapes;
mod sandbox_fallbacks;
mod serve_api;
mod serve_lifecycle;
mod serve_slowloris;
mod serve_token;
mod session_spend;
mod skills;
mod slash_menu;
mod start_as_people_start;
mod streamed_answer;
mod tasks;
mod terminal_and_signals;
mod truer_footers;
mod trust_boundaries;
mod trust_paths;
mod web_fetch;
