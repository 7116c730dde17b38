//! `validate`: one entry point for everything that checks what others claim.
//!
//! A tagged request (`settle`, `resolve`, `declarations`, `stream`,
//! `failure`) keeps the exported names to three: plan, validate, select.

use foldline_derive::{Decode, Encode};
use serde::Serialize;

use crate::agree::{agree, Agreement};
use crate::boundary::Boundary;
use crate::declaration::Declaration;
use crate::error::Result;
use crate::resolve::{resolve, Resolution, ResolveRequest};
use crate::settle::{settle, SettleRequest};
use crate::stream::{classify, decide, FailureInput, FailureReport, StreamDecision, StreamReport};

/// Target and compactor declarations to compare.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeclarationPair {
    /// The target declaration.
    pub target: Declaration,
    /// The compactor declaration.
    pub compactor: Declaration,
}

/// A validate request, tagged by `kind`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum ValidateRequest {
    /// Settle a model output into a boundary.
    Settle(Box<SettleRequest>),
    /// Resolve the boundary chain.
    Resolve(Box<ResolveRequest>),
    /// Check that target and compactor declarations agree.
    Declarations(Box<DeclarationPair>),
    /// Decide what to do after a summary stream ended.
    Stream(StreamReport),
    /// Classify a failure into notice and audit reason.
    Failure(FailureInput),
}

/// The answer to a validate request, tagged by `kind`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum ValidateResponse {
    /// The settled boundary, ready to append.
    Settled {
        /// The boundary.
        boundary: Box<Boundary>,
    },
    /// The resolved chain.
    Resolved(Box<Resolution>),
    /// The declaration comparison.
    Declarations(Agreement),
    /// The stream decision.
    Stream {
        /// What to do next.
        decision: StreamDecision,
    },
    /// The classified failure.
    Failure(FailureReport),
}

/// Run one validation.
///
/// # Errors
/// The typed error of the failing check (see each module).
pub fn validate(req: &ValidateRequest) -> Result<ValidateResponse> {
    Ok(match req {
        ValidateRequest::Settle(s) => ValidateResponse::Settled {
            boundary: Box::new(settle(s)?),
        },
        ValidateRequest::Resolve(r) => ValidateResponse::Resolved(Box::new(resolve(r)?)),
        ValidateRequest::Declarations(p) => {
            ValidateResponse::Declarations(agree(&p.target, &p.compactor))
        }
        ValidateRequest::Stream(s) => ValidateResponse::Stream {
            decision: decide(s),
        },
        ValidateRequest::Failure(f) => ValidateResponse::Failure(classify(f)),
    })
}
