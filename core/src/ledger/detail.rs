//! The codes a history entry's `detail` carries beyond a status's own name (dead reasons and
//! defer classes are the others): typed here, so that readers (the CLI, the API's view)
//! match a variant, never a string.

/// A history entry's detail for a bookkeeping write or a hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Detail {
    /// `dead → dead`: a worker claimed the making of the DLQ copy.
    DlqCopyClaimed,
    /// `dead → dead`: the DLQ copy exists.
    DlqCopy,
    /// `sending → deferred`: held by the provider's breaker (nothing spent).
    HeldByBreaker,
    /// `sending → deferred`: held for the recipient's quiet hours (nothing spent).
    HeldForQuietHours,
    /// A TTL move by an edit, or by intake for a due time moved later.
    HorizonMoved,
}

impl Detail {
    pub const ALL: [Detail; 5] = [
        Detail::DlqCopyClaimed,
        Detail::DlqCopy,
        Detail::HeldByBreaker,
        Detail::HeldForQuietHours,
        Detail::HorizonMoved,
    ];

    /// As the ledger item stores it.
    pub const fn as_str(self) -> &'static str {
        match self {
            Detail::DlqCopyClaimed => "dlq_copy_claimed",
            Detail::DlqCopy => "dlq_copy",
            Detail::HeldByBreaker => crate::policy::breaker::HELD_BY_BREAKER,
            Detail::HeldForQuietHours => "held_for_quiet_hours",
            Detail::HorizonMoved => "horizon moved by an edit",
        }
    }

    /// The detail a stored entry names, if it is one of these.
    pub fn parse(s: &str) -> Option<Detail> {
        Detail::ALL.into_iter().find(|d| d.as_str() == s)
    }
}

/// The consumer's `last_error` of a hold for quiet hours begins so (then the RFC 3339 end):
/// how items held before holds were named (`held_by_breaker`) tell one.
pub const QUIET_HOURS_ERROR: &str = "quiet hours until ";

#[cfg(test)]
mod tests {
    use super::Detail;

    #[test]
    fn each_detail_reads_back_as_itself_and_nothing_else_does() {
        for d in Detail::ALL {
            assert_eq!(Detail::parse(d.as_str()), Some(d));
        }
        assert_eq!(Detail::parse("rejected"), None);
    }
}
