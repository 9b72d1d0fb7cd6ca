//! The open connections, for the graceful shutdown: told to stop
//! together (each as soon as it is between commands), waited for together.

use std::future::poll_fn;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use slab::Slab;

/// The open connections: told to stop together, waited for together.
#[derive(Default)]
pub(super) struct Connections {
    stopping: AtomicBool,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// Each open connection's waker, while it waits between commands.
    wakers: Slab<Option<Waker>>,
    /// The task waiting for every connection to close.
    closed: Option<Waker>,
}

/// A connection's place in [`Connections`]; dropping it counts the
/// connection closed.
pub(super) struct Registration {
    connections: Arc<Connections>,
    key: usize,
    /// The waker stored under `key`, to store another only when it changes.
    waker: Option<Waker>,
}

impl Connections {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn register(self: &Arc<Self>) -> Registration {
        let key = self.lock().wakers.insert(None);
        Registration {
            connections: self.clone(),
            key,
            waker: None,
        }
    }

    pub(super) fn open(&self) -> usize {
        self.lock().wakers.len()
    }

    /// Tells every connection to stop once it is between commands, and
    /// waits up to `grace` for them to close; returns how many are left.
    pub(super) async fn stop(&self, grace: Duration) -> usize {
        // Release, with the Acquire in `poll_stopped`: a connection that
        // stored its waker after this store sees the flag on its second
        // look; one that stored it before is woken below (the lock orders
        // the two).
        self.stopping.store(true, Ordering::Release);
        let wakers: Vec<Waker> = self
            .lock()
            .wakers
            .iter_mut()
            .filter_map(|(_, w)| w.take())
            .collect();
        wakers.into_iter().for_each(Waker::wake);
        let all_closed = poll_fn(|cx| {
            let mut inner = self.lock();
            if inner.wakers.is_empty() {
                Poll::Ready(())
            } else {
                inner.closed = Some(cx.waker().clone());
                Poll::Pending
            }
        });
        let _ = fairlane::time::timeout(grace, all_closed).await;
        self.open()
    }
}

impl Registration {
    pub(super) fn stopping(&self) -> bool {
        self.connections.stopping.load(Ordering::Acquire)
    }

    /// Ready once the server stops.
    pub(super) fn poll_stopped(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if self.stopping() {
            return Poll::Ready(());
        }
        if !self.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            self.waker = Some(cx.waker().clone());
            self.connections.lock().wakers[self.key] = self.waker.clone();
        }
        // `stop` may have taken the wakers between the first look and the
        // store above: look again.
        if self.stopping() {
            return Poll::Ready(());
        }
        Poll::Pending
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut inner = self.connections.lock();
        inner.wakers.remove(self.key);
        if inner.wakers.is_empty() {
            if let Some(w) = inner.closed.take() {
                w.wake();
            }
        }
    }
}
