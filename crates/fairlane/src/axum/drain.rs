//! The graceful shutdown of [`WithGracefulShutdown`](super::WithGracefulShutdown):
//! the accept loop raises a [`Drain`] once its signal came, every connection
//! task holds a [`Watch`] that tells it so (it then asks hyper for the
//! connection's graceful shutdown), and the loop waits until the last
//! `Watch` is dropped.
//!
//! One mutex holds the watches' wakers (in a slab, so that a connection
//! that ends takes its entry with it, however long the server runs) and
//! the loop's waker. A flag beside it lets a connection's poll skip the
//! lock once its waker is registered.

use std::future::poll_fn;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use slab::Slab;

/// The accept loop's side: raise once, then wait for the watches to go.
pub(super) struct Drain {
    shared: Arc<Shared>,
}

/// A connection's side: whether the drain was raised.
pub(super) struct Watch {
    shared: Arc<Shared>,
    /// Its entry among the watches.
    key: usize,
    /// The waker its entry holds, if any (so that a poll with the same
    /// waker needs no lock).
    registered: Option<Waker>,
}

struct Shared {
    /// Set by `raise` before it wakes the watches (under the lock, which
    /// is what orders it against a registration; see `Watch::poll_raised`).
    raised: AtomicBool,
    state: Mutex<State>,
}

struct State {
    /// One entry per live watch: the waker of the connection task, once
    /// it waited; taken by `raise`.
    watches: Slab<Option<Waker>>,
    /// The accept loop waiting in `drained`.
    drained: Option<Waker>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Nothing here panics with the lock held; a poisoned lock (a panic
        // in a waker's `clone`) still holds consistent state.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drain {
    pub(super) fn new() -> Drain {
        Drain {
            shared: Arc::new(Shared {
                raised: AtomicBool::new(false),
                state: Mutex::new(State {
                    watches: Slab::new(),
                    drained: None,
                }),
            }),
        }
    }

    /// A watch for a new connection.
    pub(super) fn watch(&self) -> Watch {
        let key = self.shared.lock().watches.insert(None);
        Watch {
            shared: self.shared.clone(),
            key,
            registered: None,
        }
    }

    /// Tells every watch, now and later, that the drain is raised.
    pub(super) fn raise(&self) {
        // Release: a watch that reads `true` without the lock needs nothing
        // from before this store, but the pairing documents the order the
        // fast path relies on: the flag is set before any waker is taken.
        self.shared.raised.store(true, Ordering::Release);
        let wakers: Vec<Waker> = {
            let mut state = self.shared.lock();
            state
                .watches
                .iter_mut()
                .filter_map(|(_, w)| w.take())
                .collect()
        };
        for w in wakers {
            w.wake();
        }
    }

    /// Ready once every watch is dropped.
    pub(super) async fn drained(&self) {
        poll_fn(|cx| {
            let mut state = self.shared.lock();
            if state.watches.is_empty() {
                return Poll::Ready(());
            }
            state.drained = Some(cx.waker().clone());
            Poll::Pending
        })
        .await
    }
}

impl Watch {
    /// Whether the drain was raised; if not, `cx`'s waker is woken when it
    /// is.
    pub(super) fn poll_raised(&mut self, cx: &Context<'_>) -> bool {
        // Acquire pairs with `raise`'s store. Seeing `false` here while a
        // raise is under way is harmless: either this watch's waker is
        // registered (the raise wakes it, and that poll sees the flag: the
        // task's wake-up orders it), or the check below is made again under
        // the lock, after which a raise can no longer miss the waker.
        if self.shared.raised.load(Ordering::Acquire) {
            return true;
        }
        if self
            .registered
            .as_ref()
            .is_some_and(|w| w.will_wake(cx.waker()))
        {
            return false;
        }
        let mut state = self.shared.lock();
        // Under the lock `raise` takes after setting the flag: a raise either
        // finished taking the wakers (and the flag shows here) or takes this
        // one too.
        if self.shared.raised.load(Ordering::Acquire) {
            return true;
        }
        state.watches[self.key] = Some(cx.waker().clone());
        self.registered = Some(cx.waker().clone());
        false
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let waiter = {
            let mut state = self.shared.lock();
            state.watches.remove(self.key);
            if state.watches.is_empty() {
                state.drained.take()
            } else {
                None
            }
        };
        if let Some(w) = waiter {
            w.wake();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;
    use std::pin::pin;
    use std::sync::atomic::AtomicUsize;
    use std::task::Wake;

    /// A waker that counts its wake-ups.
    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn counting() -> (Arc<Count>, Waker) {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        (count.clone(), Waker::from(count))
    }

    #[test]
    fn raise_wakes_every_waiting_watch_and_later_ones_see_it() {
        let drain = Drain::new();
        let (count, waker) = counting();
        let cx = Context::from_waker(&waker);
        let mut watches: Vec<Watch> = (0..3).map(|_| drain.watch()).collect();
        for w in &mut watches {
            assert!(!w.poll_raised(&cx));
            // A second poll with the same waker registers nothing new.
            assert!(!w.poll_raised(&cx));
        }
        drain.raise();
        assert_eq!(count.0.load(Ordering::SeqCst), 3);
        assert!(watches.iter_mut().all(|w| w.poll_raised(&cx)));
        assert!(drain.watch().poll_raised(&cx));
    }

    #[test]
    fn drained_waits_for_the_last_watch() {
        let drain = Drain::new();
        let (count, waker) = counting();
        let cx = &mut Context::from_waker(&waker);
        let (a, b) = (drain.watch(), drain.watch());
        drain.raise();
        let mut drained = pin!(drain.drained());
        assert!(drained.as_mut().poll(cx).is_pending());
        drop(a);
        assert_eq!(count.0.load(Ordering::SeqCst), 0);
        assert!(drained.as_mut().poll(cx).is_pending());
        drop(b);
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        assert!(drained.as_mut().poll(cx).is_ready());
    }

    #[test]
    fn ended_watches_leave_no_entry() {
        let drain = Drain::new();
        let (_, waker) = counting();
        let cx = Context::from_waker(&waker);
        for _ in 0..100 {
            let mut w = drain.watch();
            assert!(!w.poll_raised(&cx));
        }
        assert!(drain.shared.lock().watches.is_empty());
    }
}
