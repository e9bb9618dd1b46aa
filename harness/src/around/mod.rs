//! [`Around`]: any port, with a [`Hook`] around each of its operations. The forwarding is
//! written once per port trait (in this module's files); what a wrapper does around a call is a
//! hook: a fault plan ([`Faults`]), a latency ([`Latency`]), the simulation's meters and timers,
//! the budget tests' counters, the chaos worlds' models of each adapter (which draw the world's
//! dice). Hooks
//! compose: `(a, b)` is `a` around `b` around the call, as two wrappers would be.
//!
//! A call is a typed [`Call`], holding the operation's arguments; a hook that needs the answer
//! (a page's length) reads it from [`Answer`], and a hook that models an adapter (answers of its
//! own, a write the SDK sends again) writes [`Hook::around`] itself, reading and making answers
//! with [`cast`].

mod calls;
mod faults;
mod queue;
mod reminders;
mod stores;

use std::any::Any;
use std::borrow::Cow;
use std::future::Future;
use std::sync::Arc;

use reminders_core::clock::Clock;
use reminders_core::ports::{OutgoingMessage, PortError, SendFailure};

pub use calls::Call;
pub use faults::{Faults, SingleReads};

/// A port wrapped in a hook: `Around { inner, hook }` implements each port trait `inner` does
/// of the stores and queues: the ledger, the reminders table with its index by subscriber and
/// an erasure's deletes, series, the gate, the queues and dead letters, the event bus. (The
/// providers and the ledger's stream are not wrapped: the providers have plans of their own,
/// scripted or drawn.)
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

/// How a hook makes the call it is around (the wrapped port's call, with the inner hooks
/// around it), as often as it makes it. The call's future is boxed and `next` is a trait
/// object, so that a hook's future holds no type of the wrapped port's: the compiler can then
/// prove a spawned consumer's future `Send` for every lifetime of its borrows.
pub type Next<'n, R> = &'n (dyn Fn() -> Made<'n, R> + Send + Sync);

/// One making of a call: its answer to come.
pub type Made<'n, R> = std::pin::Pin<Box<dyn Future<Output = Result<R, PortError>> + Send + 'n>>;

/// What a port's call answers when it succeeds (any value a port returns): what
/// [`Hook::around`] hands back.
pub trait Value: Any + Send + Sync {}

impl<T: Any + Send + Sync> Value for T {}

/// What a call answered, as a hook sees it: the value (downcast it to the operation's type),
/// or the error.
pub type Answer<'a> = Result<&'a (dyn Any + Send + Sync), &'a PortError>;

/// What runs around each call of a wrapped port. Every method has a default that does nothing
/// but make the call.
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

    /// The whole call: `next` makes it (the wrapped port's call, with the inner hooks around
    /// it), and may be called again or not at all. The default is [`Hook::before`], the call,
    /// [`Hook::after`]. A hook that models an adapter writes this instead: it may send a write
    /// again (the SDK's retry of a request whose answer was lost), answer of its own (an item
    /// the table's TTL deleted), or change the answer (a planted bug).
    fn around<R: Value>(
        &self,
        call: &Call<'_>,
        next: Next<'_, R>,
    ) -> impl Future<Output = Result<R, PortError>> + Send {
        async move {
            self.before(call).await?;
            let out = next().await;
            self.after(call, out.as_ref().map(|v| v as &(dyn Any + Send + Sync)))?;
            out
        }
    }

    /// Whether the reminders table's compound reads (a recipient's rules and a delivery's read,
    /// one `BatchGetItem` on DynamoDB) are made of their single reads through this hook, as the
    /// trait's defaults make them, rather than passed to the wrapped store as its own one call.
    /// The simulation's meter models them as single reads, the chaos worlds' models play them,
    /// and a fault plan beside [`SingleReads`] meets them as the memory store makes them.
    fn splits_compound_reads(&self) -> bool {
        false
    }

    /// The entries of a queue's batch that fail on their own, as SQS answers some entries of a
    /// batch failed and sends the others: none, unless the hook plays that. The wrapper sends
    /// the rest (the queue judges only those: when every entry failed, it is not called), and
    /// answers these failures first, then the queue's own.
    fn failed_entries(&self, messages: &[OutgoingMessage]) -> Vec<SendFailure> {
        let _ = messages;
        Vec::new()
    }

    /// The batch a queue's send hands on: the same, unless the hook moves it in time (the
    /// simulation's scheduler runs on a clock of its own, and its messages' delays count from
    /// when a real run would have sent them).
    fn batch<'m>(&self, messages: &'m [OutgoingMessage]) -> Cow<'m, [OutgoingMessage]> {
        Cow::Borrowed(messages)
    }
}

/// `value` as the type `B` it is (a call's answer, whose type the hook knows from its
/// [`Call`]): the answer a hook reads from `next`, or makes of its own.
///
/// # Panics
///
/// If `A` is not `B`: a hook that matched a call to the wrong answer type.
pub fn cast<A: Any, B: Any>(value: A) -> B {
    let mut slot = Some(value);
    let slot: &mut dyn Any = &mut slot;
    match slot.downcast_mut::<Option<B>>() {
        Some(b) => b.take().expect("the value just put there"),
        None => panic!(
            "a hook read an answer as {}, but it is {}",
            std::any::type_name::<B>(),
            std::any::type_name::<A>()
        ),
    }
}

/// `value` read as the type `B` it is (see [`cast`]).
///
/// # Panics
///
/// If it is not a `B`.
pub fn read<B: Any>(value: &dyn Any) -> &B {
    value.downcast_ref().unwrap_or_else(|| {
        panic!(
            "a hook read an answer as {}, which it is not",
            std::any::type_name::<B>()
        )
    })
}

/// A call's future as [`Next`] makes it.
pub fn boxed<'a, R>(made: impl Future<Output = Result<R, PortError>> + Send + 'a) -> Made<'a, R> {
    Box::pin(made)
}

/// A shared hook (one meter for every port of a consumer).
impl<H: Hook> Hook for Arc<H> {
    fn before(&self, call: &Call<'_>) -> impl Future<Output = Result<(), PortError>> + Send {
        (**self).before(call)
    }

    fn after(&self, call: &Call<'_>, answer: Answer<'_>) -> Result<(), PortError> {
        (**self).after(call, answer)
    }

    fn around<R: Value>(
        &self,
        call: &Call<'_>,
        next: Next<'_, R>,
    ) -> impl Future<Output = Result<R, PortError>> + Send {
        (**self).around(call, next)
    }

    fn splits_compound_reads(&self) -> bool {
        (**self).splits_compound_reads()
    }

    fn failed_entries(&self, messages: &[OutgoingMessage]) -> Vec<SendFailure> {
        (**self).failed_entries(messages)
    }

    fn batch<'m>(&self, messages: &'m [OutgoingMessage]) -> Cow<'m, [OutgoingMessage]> {
        (**self).batch(messages)
    }
}

/// `(outer, inner)`: `outer` around `inner` around the call, as two wrappers would be. The
/// compound reads are split if either hook models single reads. A queue's send asks both, once
/// both hooks' `around` reached the call: the batch is moved by `outer`, then by `inner`, and
/// an entry fails if either fails it.
impl<A: Hook, B: Hook> Hook for (A, B) {
    async fn around<R: Value>(&self, call: &Call<'_>, next: Next<'_, R>) -> Result<R, PortError> {
        let inner = || boxed(self.1.around(call, next));
        self.0.around(call, &inner).await
    }

    fn splits_compound_reads(&self) -> bool {
        self.0.splits_compound_reads() || self.1.splits_compound_reads()
    }

    fn failed_entries(&self, messages: &[OutgoingMessage]) -> Vec<SendFailure> {
        let mut failed = self.0.failed_entries(messages);
        let rest: Vec<OutgoingMessage> = messages
            .iter()
            .filter(|m| failed.iter().all(|f| f.entry_id != m.entry_id))
            .cloned()
            .collect();
        failed.extend(self.1.failed_entries(&rest));
        failed
    }

    fn batch<'m>(&self, messages: &'m [OutgoingMessage]) -> Cow<'m, [OutgoingMessage]> {
        match self.0.batch(messages) {
            Cow::Borrowed(m) => self.1.batch(m),
            Cow::Owned(m) => Cow::Owned(self.1.batch(&m).into_owned()),
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

/// Forward one call through the hook: `$made` is the wrapped port's call, made as often as the
/// hook makes it.
macro_rules! around {
    ($self:ident, $call:expr, $made:expr) => {{
        let call = $call;
        let made = || $crate::around::boxed($made);
        $self.hook.around(&call, &made).await
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

/// Forward each listed compound read (the reminders table's rules and a delivery's read) as
/// [`forward!`] does, or, for a hook that
/// [splits them](Hook::splits_compound_reads), make it of its single calls through this
/// wrapper with `apart` (the trait's default).
macro_rules! compound {
    ($(fn $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty as $call:expr, apart $apart:path;)*) => {$(
        async fn $name(&self, $($arg: $ty),*) -> Result<$ret, PortError> {
            if self.hook.splits_compound_reads() {
                return $apart(self, $($arg),*).await;
            }
            around!(self, $call, self.inner.$name($(Clone::clone(&$arg)),*))
        }
    )*};
}
use compound;

#[cfg(test)]
mod tests;
