//! The lock every in-memory port (and the harness's shared state) is kept under.

use std::sync::Mutex;

/// Lock a port's state, surviving a poisoned mutex (a test that panicked mid-call).
pub fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
