//! keel's scriptable, fault-injecting fake LLM provider: the test double of every other crate,
//! the engine of `keel demo`, and `keel mock` for anyone who wants to try keel without a key.
//!
//! Invariants: see each module. The wire formats mirror the real providers closely enough that
//! the same parsers that read DeepSeek, Anthropic and OpenAI read this server.

pub mod effort;
pub mod render;
pub mod scenario;
pub mod server;
pub mod stage;

pub use scenario::{Fault, Scenario, ScenarioError, ScriptedCall, Step, builtin};
pub use server::{CapturedRequest, MockServer};
