//! [`Around`]: any port, with a [`Hook`] before and after each of its operations. The
//! forwarding is written once per port trait (in this module's files); what a wrapper does
//! around a call is a hook: a fault plan ([`Faults`]), a latency ([`Latency`]), the
//! simulation's meters and timers, the budget tests' counters. Hooks compose: `(a, b)` runs
//! `a`'s before, then `b`'s; `b`'s after, then `a`'s.
//!
//! A call is a typed [`Call`], holding the operation's arguments; a hook that needs the answer
//! (a page's length) reads it from [`Answer`].

mod calls;
mod queue;
mod reminders;
mod stores;

use std::any::Any;
use std::borrow::Cow;
use std::future::Future;
use std::sync::Arc;

use reminders_core::clock::Clock;
use reminders_core::ports::{FaultPoint, Faults, OutgoingMessage, PortError};

pub use calls::Call;

/// A port wrapped in a hook: `Around { inner, hook }` implements every port trait `inner` does
/// (the ledger, the reminders table, the queues and dead letters, series, the gate).
#[derive(Debug, Clone)]
pub struct Around<T, H> {
    pub inner: T,
    pub hook: H,
}

impl<T, H> Around<T, H> {
    pub fn new(inner: T, hook: H) -> Self {
        Self { inner, hook }
    }
}

/// What a call answered, as a hook sees it: the value (downcast it to the operation's type),
/// or the error.
pub type Answer<'a> = Result<&'a (dyn Any + Send + Sync), &'a PortError>;

/// What runs around each call of a wrapped port. Every method has a default that does nothing.
pub trait Hook: Send + Sync {
    /// Before the call: an error answers the call without making it.
    fn before(&self, call: &Call<'_>) -> impl Future<Output = Result<(), PortError>> + Send {
        let _ = call;
        async { Ok(()) }
    }

    /// After the call made: an error replaces its answer (the effect happened, the caller
    /// hears of a failure: a lost response).
    fn after(&self, call: &Call<'_>, answer: Answer<'_>) -> Result<(), PortError> {
        let _ = (call, answer);
        Ok(())
    }

    /// Whether the reminders table's compound reads (a recipient's rules, a delivery's read)
    /// are made of their single reads through this hook, as the trait's defaults make them,
    /// rather than passed to the wrapped store as its own one call (one `BatchGetItem` on
    /// DynamoDB). The simulation's meter models them as single reads.
    fn splits_compound_reads(&self) -> bool {
        false
    }

    /// The batch a queue's send hands on, after [`Hook::before`]: the same, unless the hook
    /// moves it in time (the simulation's scheduler runs on a clock of its own, and its
    /// messages' delays count from when a real run would have sent them).
    fn batch<'m>(&self, messages: &'m [OutgoingMessage]) -> Cow<'m, [OutgoingMessage]> {
        Cow::Borrowed(messages)
    }
}

/// A shared hook (one meter for every port of a consumer).
impl<H: Hook> Hook for Arc<H> {
    fn before(&self, call: &Call<'_>) -> impl Future<Output = Result<(), PortError>> + Send {
        (**self).before(call)
    }

    fn after(&self, call: &Call<'_>, answer: Answer<'_>) -> Result<(), PortError> {
        (**self).after(call, answer)
    }

    fn splits_compound_reads(&self) -> bool {
        (**self).splits_compound_reads()
    }

    fn batch<'m>(&self, messages: &'m [OutgoingMessage]) -> Cow<'m, [OutgoingMessage]> {
        (**self).batch(messages)
    }
}

/// `(outer, inner)`: `outer`'s before, then `inner`'s; after the call, `inner`'s after, then
/// `outer`'s. Unlike two wrappers, a hook that fails ends the call there: the other hook's
/// after does not run. The compound reads are split if either hook models single reads, and
/// the batch is moved by `outer`, then by `inner`.
impl<A: Hook, B: Hook> Hook for (A, B) {
    async fn before(&self, call: &Call<'_>) -> Result<(), PortError> {
        self.0.before(call).await?;
        self.1.before(call).await
    }

    fn after(&self, call: &Call<'_>, answer: Answer<'_>) -> Result<(), PortError> {
        self.1.after(call, answer)?;
        self.0.after(call, answer)
    }

    fn splits_compound_reads(&self) -> bool {
        self.0.splits_compound_reads() || self.1.splits_compound_reads()
    }

    fn batch<'m>(&self, messages: &'m [OutgoingMessage]) -> Cow<'m, [OutgoingMessage]> {
        match self.0.batch(messages) {
            Cow::Borrowed(m) => self.1.batch(m),
            Cow::Owned(m) => Cow::Owned(self.1.batch(&m).into_owned()),
        }
    }
}

/// The fault plan around any port, the in-memory ones and the AWS adapters alike (where it
/// plays a lost response or an outage): checked before each call, and after each that
/// answered, under the operation's name ([`Call::name`]).
impl Hook for Faults {
    async fn before(&self, call: &Call<'_>) -> Result<(), PortError> {
        self.check(call.name(), FaultPoint::Before)
    }

    fn after(&self, call: &Call<'_>, answer: Answer<'_>) -> Result<(), PortError> {
        match answer {
            Ok(_) => self.check(call.name(), FaultPoint::After),
            Err(_) => Ok(()),
        }
    }
}

/// A wait of `latency` on `clock` before each call (virtual time with the manual clock): a
/// slow dependency, for tests of progress under load.
#[derive(Debug, Clone)]
pub struct Latency<C> {
    pub clock: C,
    pub latency: std::time::Duration,
}

impl<C: Clock> Hook for Latency<C> {
    async fn before(&self, _: &Call<'_>) -> Result<(), PortError> {
        self.clock.sleep(self.latency).await;
        Ok(())
    }
}

/// A port with a fault plan around each call.
pub type Faulty<T> = Around<T, Faults>;

/// A port whose every call first waits a latency.
pub type Slowed<T, C> = Around<T, Latency<C>>;

/// Forward one call: the hook before, the call, the hook after.
macro_rules! around {
    ($self:ident, $call:expr, $made:expr) => {{
        let call = $call;
        $self.hook.before(&call).await?;
        let out = $made.await;
        $self.hook.after(
            &call,
            out.as_ref()
                .map(|v| v as &(dyn std::any::Any + Send + Sync)),
        )?;
        out
    }};
}
use around;

/// Forward each listed method of a port trait through [`around!`]: one line a method, its
/// signature and the [`Call`] its hook sees. The arguments reach the wrapped port as they came
/// (`Clone::clone` of a reference copies the reference; an argument passed by value is cloned,
/// as the call the hooks see holds a borrow of it).
macro_rules! forward {
    ($(fn $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty as $call:expr;)*) => {$(
        async fn $name(&self, $($arg: $ty),*) -> Result<$ret, PortError> {
            around!(self, $call, self.inner.$name($(Clone::clone(&$arg)),*))
        }
    )*};
}
use forward;

#[cfg(test)]
mod tests;
