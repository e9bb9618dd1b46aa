//! Where an injected fault strikes a port call ([`FaultPoint`], as
//! [`super::PortError::Injected`] names it). The fault plans themselves, and the wrapper that
//! puts them around any port, are the harness's (`reminders_harness::around`): the in-memory
//! ports carry none.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultPoint {
    /// The call fails and nothing happened.
    Before,
    /// The effect happened, then the caller sees an error (a lost response).
    After,
}
