//! Records: the wire types of the contract — turns and their parts,
//! declarations and budgets, the activation frontier, a settled boundary, an
//! amendment, the journal's events, a content-addressed packet. They name
//! only the primitives (`canonical`, `error`, `decode`), never an operation.

pub mod amendment;
pub mod boundary;
pub mod declaration;
pub mod event;
pub mod frontier;
pub mod link;
pub mod packet;
pub mod provider;
pub mod turn;
