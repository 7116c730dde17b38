//! History: the journal folded into exact effective turns (corrections and
//! late deliveries applied), which of them count (pinned, admitted, eligible), the groups a tail is cut at, who said what in a room, the covered-history
//! amendment derived from a chain's snapshot, and whether two declarations
//! agree. Built on the records and their rendered forms (an amendment is
//! bounded by its envelope's size).

pub mod agree;
pub mod amend;
pub mod group;
pub mod reconstruct;
pub mod speakers;
pub mod standing;
