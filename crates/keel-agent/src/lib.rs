//! keel's engine: sessions, their agents and their turns, shared by every front end.
//!
//! Where things are:
//! - `host` opens sessions over one store; `controller` is the face a surface drives one
//!   session through; `agent` is one session's own state (`agent_state`), events
//!   (`event_bus`), cancellation, spend and permission mode; `services` is what every agent of
//!   a session shares; `settings` is what a session is run with, as plain data.
//! - A turn: `admitted` (taken and checked) → `turn` (its rounds, as a `turn_run::TurnRun`) →
//!   `exchange` (one request and its answer) → `tools_round` (the calls of one answer) →
//!   `approval`, `confinement`, `unconfined`, `checkpoint`, `snapshot` (what a call needs).
//! - Around turns: `compaction`, `recovery`, `rewind`, `modes` (plan mode), `instructions`
//!   (instructions), `custom_commands` and `input` (what a typed line means).
//!
//! Invariants:
//! - One turn at a time per session (a second `submit` is refused as busy), and one process
//!   per session (the store lease).
//! - Cancellation bumps a generation counter; whatever belongs to an older generation (a
//!   late reply, a tool result) is never committed and never starts a tool.
//! - Loading a session settles interrupted receipts (`started` → `unknown`, `pending` →
//!   `not_started`) and gives every unanswered tool call a result that says so; nothing is
//!   re-run.
//! - Events reach every subscriber in one order; all but the streaming deltas are also indexed
//!   in the store for replay.
//! - Inside the crate, `use crate::…` names the module that defines a thing, never a
//!   re-export of this file.

mod admitted;
mod agent;
mod agent_definitions;
mod agent_role;
mod agent_state;
mod approval;
mod call;
mod cancellation;
mod checkpoint;
mod child_agent;
mod claim;
mod claude_names;
mod command_steps;
mod compaction;
mod confinement;
mod context_commands;
mod controller;
mod custom_commands;
mod engine_tools;
mod error;
mod event_bus;
mod hook_points;
mod hook_set;
mod hook_transcript;
mod hooks;
mod host;
mod input;
mod instructions;
mod jobs;
mod kept_versions;
mod load;
mod markdown_files;
mod mode_notes;
mod model_request;
mod modes;
mod opening;
mod orphan_processes;
mod progress;
mod prompt;
mod recovery;
mod request_prefix;
mod rewind;
mod rewrite;
mod services;
mod session_diff;
mod settings;
mod skills;
mod snapshot;
mod spend;
mod subscribers;
mod task_report;
mod task_tool;
mod token_meter;
mod tool_results;
mod tools_round;
mod transcript;
mod turn;
mod turn_run;
mod unconfined;
mod window_parts;

pub use admitted::AdmittedTurn;
pub use agent_definitions::{AgentDefinition, AgentDefinitions, AgentSource, AgentTools};
pub use agent_role::AgentRole;
pub use approval::{
    AlwaysAllowed, Approval, ApprovalRequest, Approver, HeadlessApprover, LONGEST_NOTE,
    always_label, always_scopes,
};
pub use confinement::SandboxSetup;
pub use custom_commands::{CommandLayer, CustomCommand, CustomCommands};
pub use error::AgentError;
pub use hook_set::Hooks;
pub use host::Host;
pub use input::{INIT_PROMPT, Input, Line, SLASH_COMMANDS, SurfaceCommand, builtin_names};
pub use instructions::{ContextReport, Reloaded, instruction_paths};
pub use jobs::JobsKept;
pub use keel_store::{RevisionInfo, SessionInfo, SessionOverview, StoreError, StoredItem};
pub use keel_types::person_text;
pub use prompt::{KIMI_ACTION_POLICY, SYSTEM_PROMPT, action_policy_for};
pub use recovery::readiness::{RERUN_WITH_YES, Readiness};
pub use recovery::record::{RecordState, RecoveryRecord, StoredRecord};
/// How a stored recovery record is read and written (the fuzz targets check both).
pub use recovery::record::{decode as decode_record, encode as encode_record};
pub use recovery::refusal::RecoveryRefusal;
pub use request_prefix::RequestPrefix;
pub use rewind::{BetweenTurns, RewindReport, RewindScope};
pub use session_diff::{ChangedFile, SessionDiff};
pub use skills::{Skill, SkillSource, Skills};
pub use snapshot::retire_old_stores as retire_old_snapshot_stores;
pub use spend::{SessionSpend, SurfaceSpend};
pub use transcript::Transcript;
pub use turn_run::TurnOutcome;
pub use window_parts::WindowParts;

pub use controller::{ChildOpened, Controller};
pub use recovery::admission::PendingAction;
pub use services::{Services, SurfaceServices};
pub use settings::{
    AgentSettings, ContextSettings, DEFAULT_INSTRUCTION_BYTES, SessionChoice, SubagentLimits,
};
