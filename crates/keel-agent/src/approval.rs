//! Approval of tool calls that the permission policy marks `ask`.
//!
//! Invariant: without a person to ask, the answer is no (fail closed), unless the user said
//! `--yes` up front.

use std::future::Future;
use std::pin::Pin;

#[derive(Clone, Debug)]
pub struct ApprovalRequest {
    pub tool: String,
    pub subject: String,
    pub arguments: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Approval {
    Allow,
    Deny,
}

pub trait Approver: Send + Sync {
    fn approve<'a>(
        &'a self,
        request: &'a ApprovalRequest,
    ) -> Pin<Box<dyn Future<Output = Approval> + Send + 'a>>;
}

/// For `keel run`: nobody to ask, so deny (or allow everything with `--yes`).
pub struct HeadlessApprover {
    pub approve_all: bool,
}

impl Approver for HeadlessApprover {
    fn approve<'a>(
        &'a self,
        _request: &'a ApprovalRequest,
    ) -> Pin<Box<dyn Future<Output = Approval> + Send + 'a>> {
        let answer = if self.approve_all {
            Approval::Allow
        } else {
            Approval::Deny
        };
        Box::pin(async move { answer })
    }
}
