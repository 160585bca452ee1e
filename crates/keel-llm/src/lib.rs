//! keel's provider layer: projection of the canonical history onto three wire protocols,
//! streaming and assembly of answers, failure classification, and bounded retries. It knows
//! `ProviderProfile`s and their presets, never TOML: `keel-config` builds the profiles.
//!
//! Invariants (each has tests in its module):
//! - Projection is a pure function: the same history prefix gives the same request bytes.
//! - Nothing of an incomplete stream is ever returned as a completed response.
//! - Failure diagnostics never carry a response body or a secret.

pub mod assemble;
pub mod classify;
pub mod client;
pub mod context_window;
pub mod dispatch;
pub mod effort;
mod explain;
pub mod key_store;
pub mod price;
pub mod profile;
pub mod projection;
pub mod retry;
pub mod said;
pub mod sse;

pub use assemble::{Completion, Delta};
pub use dispatch::{AccountCursor, DispatchOutcome, Dispatcher, EnvKeys, KeySource, key_problem};
pub use effort::ReasoningEffort;
pub use key_store::{HomeKeys, KeyOrigin, KeyStore, KeyStoreError};
pub use profile::{Account, ProviderProfile};
pub use projection::{ProjectedRequest, ProjectionInput, ToolSpec, project};
pub use retry::{RetryMode, RetryPolicy};
