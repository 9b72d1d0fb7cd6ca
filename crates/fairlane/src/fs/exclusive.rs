//! [`Exclusive`]: the turn a [`File`](super::File) method that takes
//! `&self` holds while it waits for the file's background operation and
//! starts its own, so that two such calls (from tasks sharing the file)
//! neither both wait on the one operation (whose handle wakes only one
//! waiter) nor interleave their steps. Methods that take `&mut self` (the
//! I/O traits) need no turn: the borrow already excludes every `&self`
//! call.

use std::future::poll_fn;
use std::sync::{Mutex, MutexGuard};
use std::task::{Poll, Waker};

/// An asynchronous lock with no data: whoever holds the [`Turn`] has the
/// turn. Not first-come first-served: every waiter is woken when the turn
/// is given back, and whichever polls first takes it.
#[derive(Default)]
pub(super) struct Exclusive {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    held: bool,
    /// The tasks waiting for the turn: all are woken when it is given
    /// back, and the first to look takes it (a dropped waiter's waker is
    /// woken for nothing, which is harmless).
    waiters: Vec<Waker>,
}

/// The turn, given back when dropped.
pub(super) struct Turn<'a> {
    lock: &'a Exclusive,
}

impl Exclusive {
    /// The critical sections below cannot panic (short of running out of
    /// memory), so a poisoned lock carries no broken invariant.
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits for the turn.
    pub(super) async fn turn(&self) -> Turn<'_> {
        poll_fn(|cx| {
            let mut state = self.state();
            if state.held {
                if !state.waiters.iter().any(|w| w.will_wake(cx.waker())) {
                    state.waiters.push(cx.waker().clone());
                }
                Poll::Pending
            } else {
                state.held = true;
                Poll::Ready(())
            }
        })
        .await;
        Turn { lock: self }
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        let waiters = {
            let mut state = self.lock.state();
            state.held = false;
            std::mem::take(&mut state.waiters)
        };
        waiters.into_iter().for_each(Waker::wake);
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::pin::pin;
    use std::sync::Arc;
    use std::task::{Context, Wake};

    use super::*;

    struct Count(std::sync::atomic::AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// A waiter is woken when the turn is given back, and then takes it.
    #[test]
    fn a_waiter_gets_the_turn_when_it_is_given_back() {
        let lock = Exclusive::default();
        let count = Arc::new(Count(Default::default()));
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        let first = pin!(lock.turn());
        let Poll::Ready(turn) = first.poll(&mut cx) else {
            panic!("a free lock gives the turn at once")
        };
        let mut second = pin!(lock.turn());
        assert!(second.as_mut().poll(&mut cx).is_pending());
        drop(turn);
        assert_eq!(count.0.load(std::sync::atomic::Ordering::Relaxed), 1);
        assert!(second.as_mut().poll(&mut cx).is_ready());
    }
}
