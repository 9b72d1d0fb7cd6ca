//! [`JoinSet`]: a set of spawned tasks whose outputs come back in the order
//! they finish.
//!
//! Each task's [`JoinHandle`] is polled with a waker of its own, which
//! records the task's key in the set's `notified` list and wakes the task
//! awaiting [`JoinSet::join_next`]; `join_next` polls only the handles named
//! there, so a set of many tasks costs per finished task, not per task. A
//! new handle starts out notified (its first poll registers its waker). A
//! stale key (the task was removed, its slot reused) makes one extra poll of
//! whatever is there now, which is harmless.

use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Wake, Waker};

use slab::Slab;

use super::{AbortHandle, Id, JoinError, JoinHandle};

/// A set of tasks spawned on the current runtime, joined in the order they
/// finish. Dropping the set aborts every task still in it (as tokio's
/// `JoinSet` does); [`detach_all`](JoinSet::detach_all) lets them run on.
///
/// # Example
/// ```
/// use fairlane::task::JoinSet;
/// # let rt = fairlane::Runtime::builder().processors(2).build()?;
/// # rt.block_on(async {
/// let mut set = JoinSet::new();
/// for i in 0..10u64 {
///     set.spawn(async move { i * i });
/// }
/// let mut sum = 0;
/// while let Some(result) = set.join_next().await {
///     sum += result.unwrap();
/// }
/// assert_eq!(sum, 285);
/// # });
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct JoinSet<T> {
    tasks: Slab<Entry<T>>,
    shared: Arc<RuntimeShared>,
}

struct Entry<T> {
    handle: JoinHandle<T>,
    waker: Waker,
}

#[derive(Default)]
struct RuntimeShared {
    state: Mutex<SharedState>,
}

#[derive(Default)]
struct SharedState {
    /// Keys of tasks whose handles may be ready.
    notified: Vec<usize>,
    /// The task awaiting `join_next`.
    waiter: Option<Waker>,
}

impl RuntimeShared {
    fn lock(&self) -> MutexGuard<'_, SharedState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The waker one task's handle is polled with.
struct EntryWaker {
    key: usize,
    shared: Arc<RuntimeShared>,
}

impl Wake for EntryWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let waiter = {
            let mut st = self.shared.lock();
            st.notified.push(self.key);
            st.waiter.take()
        };
        if let Some(w) = waiter {
            w.wake();
        }
    }
}

impl<T> JoinSet<T> {
    /// An empty set.
    ///
    /// # Example
    /// ```
    /// let set: fairlane::task::JoinSet<()> = fairlane::task::JoinSet::new();
    /// assert!(set.is_empty());
    /// ```
    pub fn new() -> Self {
        JoinSet {
            tasks: Slab::new(),
            shared: Arc::default(),
        }
    }

    /// How many tasks are in the set (finished ones not yet joined count).
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let mut set = fairlane::task::JoinSet::new();
    /// set.spawn(async {});
    /// assert_eq!(set.len(), 1);
    /// # });
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn len(&self) -> usize {
        self.tasks.len()
    }

    /// Whether the set holds no task.
    ///
    /// # Example
    /// ```
    /// let set: fairlane::task::JoinSet<u8> = Default::default();
    /// assert!(set.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    /// Adds an already spawned task, e.g. one made by
    /// [`task::Builder`](crate::task::Builder) with a name or a priority.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let mut set = fairlane::task::JoinSet::new();
    /// let task = fairlane::task::Builder::new().name("worker").spawn(async { 1 })?;
    /// set.insert(task);
    /// assert_eq!(set.join_next().await.unwrap().unwrap(), 1);
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn insert(&mut self, handle: JoinHandle<T>) -> AbortHandle {
        let abort = handle.abort_handle();
        let entry = self.tasks.vacant_entry();
        let key = entry.key();
        let waker = Waker::from(Arc::new(EntryWaker {
            key,
            shared: self.shared.clone(),
        }));
        entry.insert(Entry { handle, waker });
        // Polled by the next `join_next`, which registers its waker.
        self.shared.lock().notified.push(key);
        abort
    }

    /// Spawns `future` on the current runtime into the set.
    ///
    /// # Panics
    /// Outside a fairlane runtime, as [`spawn`](crate::spawn) does.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// rt.block_on(async {
    ///     let mut set = fairlane::task::JoinSet::new();
    ///     let abort = set.spawn(std::future::pending::<u8>());
    ///     set.spawn(async { 2 });
    ///     abort.abort();
    ///     let mut outcomes = Vec::new();
    ///     while let Some(out) = set.join_next().await {
    ///         outcomes.push(out.ok());
    ///     }
    ///     outcomes.sort();
    ///     assert_eq!(outcomes, [None, Some(2)]);
    /// });
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn spawn<F>(&mut self, future: F) -> AbortHandle
    where
        F: Future<Output = T> + Send + 'static,
        T: Send + 'static,
    {
        self.insert(crate::spawn(future))
    }

    /// Spawns `future` (which need not be `Send`) onto the current
    /// [`LocalSet`](crate::task::LocalSet), as a task of the set.
    ///
    /// # Panics
    /// Outside a `LocalSet`, as [`spawn_local`](crate::task::spawn_local)
    /// does.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let local = fairlane::task::LocalSet::new();
    /// let n = local.block_on(&rt, async {
    ///     let mut set = fairlane::task::JoinSet::new();
    ///     for i in 0..3 {
    ///         set.spawn_local(async move { *std::rc::Rc::new(i) });
    ///     }
    ///     let mut n = 0;
    ///     while let Some(out) = set.join_next().await {
    ///         n += out.unwrap();
    ///     }
    ///     n
    /// });
    /// assert_eq!(n, 3);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    #[track_caller]
    pub fn spawn_local<F>(&mut self, future: F) -> AbortHandle
    where
        F: Future<Output = T> + 'static,
        T: 'static,
    {
        self.insert(crate::task::spawn_local(future))
    }

    /// Spawns `future` (which need not be `Send`) onto `local`, as a task
    /// of the set; it runs when `local` is driven.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let local = fairlane::task::LocalSet::new();
    /// let mut set = fairlane::task::JoinSet::new();
    /// set.spawn_local_on(async { std::rc::Rc::new("here") }, &local);
    /// let out = local.block_on(&rt, set.join_next()).unwrap().unwrap();
    /// assert_eq!(*out, "here");
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn spawn_local_on<F>(&mut self, future: F, local: &crate::task::LocalSet) -> AbortHandle
    where
        F: Future<Output = T> + 'static,
        T: 'static,
    {
        self.insert(local.spawn_local(future))
    }

    /// Runs `f` on the blocking pool, as a task of the set.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let mut set = fairlane::task::JoinSet::new();
    /// set.spawn_blocking(|| std::fs::metadata("/").is_ok());
    /// assert!(set.join_next().await.unwrap().unwrap());
    /// # });
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn spawn_blocking<F>(&mut self, f: F) -> AbortHandle
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.insert(crate::task::spawn_blocking(f))
    }

    /// Spawns `future` on the runtime of `handle` (from any thread), as a
    /// task of the set.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let mut set = fairlane::task::JoinSet::new();
    /// set.spawn_on(async { 4 }, rt.handle()); // outside the runtime
    /// assert_eq!(rt.block_on(set.join_next()).unwrap().unwrap(), 4);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn spawn_on<F>(&mut self, future: F, handle: &crate::Handle) -> AbortHandle
    where
        F: Future<Output = T> + Send + 'static,
        T: Send + 'static,
    {
        self.insert(handle.spawn(future))
    }

    /// Runs `f` on the blocking pool of `handle`'s runtime (from any
    /// thread), as a task of the set.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let mut set = fairlane::task::JoinSet::new();
    /// set.spawn_blocking_on(|| 2 + 2, rt.handle());
    /// assert_eq!(rt.block_on(set.join_next()).unwrap().unwrap(), 4);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn spawn_blocking_on<F>(&mut self, f: F, handle: &crate::Handle) -> AbortHandle
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.insert(handle.spawn_blocking(f))
    }

    /// Waits for the next task to finish and removes it from the set; `None`
    /// once the set is empty. An aborted task gives a [`JoinError`] for
    /// which `is_cancelled()` holds, a panicked one one for which
    /// `is_panic()` does.
    ///
    /// Cancel-safe: dropping the future loses no output (the task stays in
    /// the set until a `join_next` returns it).
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// rt.block_on(async {
    ///     let mut set = fairlane::task::JoinSet::new();
    ///     set.spawn(async { panic!("boom") });
    ///     assert!(set.join_next().await.unwrap().unwrap_err().is_panic());
    ///     assert!(set.join_next().await.is_none()); // empty
    /// });
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn join_next(&mut self) -> Option<Result<T, JoinError>> {
        poll_fn(|cx| self.poll_join_next(cx)).await
    }

    /// [`join_next`](Self::join_next), with the [`Id`] of the task that
    /// finished (a failed task's is its [`JoinError::id`]).
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// rt.block_on(async {
    ///     let mut set = fairlane::task::JoinSet::new();
    ///     let id = set.spawn(async { "out" }).id();
    ///     let (finished, out) = set.join_next_with_id().await.unwrap().unwrap();
    ///     assert_eq!((finished, out), (id, "out"));
    /// });
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn join_next_with_id(&mut self) -> Option<Result<(Id, T), JoinError>> {
        poll_fn(|cx| self.poll_join_next_with_id(cx)).await
    }

    /// The output of a task that has already finished, if any, without
    /// waiting.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let mut set = fairlane::task::JoinSet::new();
    /// set.spawn(async { 5 });
    /// let out = loop {
    ///     if let Some(out) = set.try_join_next() { break out; }
    ///     fairlane::yield_now().await;
    /// };
    /// assert_eq!(out.unwrap(), 5);
    /// # });
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn try_join_next(&mut self) -> Option<Result<T, JoinError>> {
        Some(self.try_join_next_with_id()?.map(|(_, out)| out))
    }

    /// [`try_join_next`](Self::try_join_next), with the [`Id`] of the task
    /// that finished.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let mut set = fairlane::task::JoinSet::new();
    /// let id = set.spawn(async { 5 }).id();
    /// let out = loop {
    ///     if let Some(out) = set.try_join_next_with_id() { break out; }
    ///     fairlane::yield_now().await;
    /// };
    /// assert_eq!(out.unwrap(), (id, 5));
    /// # });
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn try_join_next_with_id(&mut self) -> Option<Result<(Id, T), JoinError>> {
        match self.poll_join_next_with_id(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(out) => out,
            Poll::Pending => None,
        }
    }

    /// Polls the handles that were woken; see [`JoinSet::join_next`].
    ///
    /// # Example
    /// ```
    /// use fairlane::task::JoinSet;
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let out = rt.block_on(async {
    ///     let mut set = JoinSet::new();
    ///     set.spawn(async { 3 });
    ///     std::future::poll_fn(|cx| set.poll_join_next(cx)).await
    /// });
    /// assert_eq!(out.unwrap().unwrap(), 3);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn poll_join_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<T, JoinError>>> {
        self.poll_join_next_with_id(cx)
            .map(|out| Some(out?.map(|(_, value)| value)))
    }

    /// [`poll_join_next`](Self::poll_join_next), with the [`Id`] of the
    /// task that finished.
    ///
    /// # Example
    /// ```
    /// use fairlane::task::JoinSet;
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// rt.block_on(async {
    ///     let mut set = JoinSet::new();
    ///     let id = set.spawn(async { 3 }).id();
    ///     let out = std::future::poll_fn(|cx| set.poll_join_next_with_id(cx)).await;
    ///     assert_eq!(out.unwrap().unwrap(), (id, 3));
    /// });
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn poll_join_next_with_id(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<(Id, T), JoinError>>> {
        if self.tasks.is_empty() {
            return Poll::Ready(None);
        }
        // Registered before the list is taken: a wake after the take finds
        // this waiter and wakes it, so no notification falls between.
        let notified = {
            let mut st = self.shared.lock();
            if !st.waiter.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                st.waiter = Some(cx.waker().clone());
            }
            std::mem::take(&mut st.notified)
        };
        let mut found = None;
        let mut rest = notified.into_iter();
        for key in rest.by_ref() {
            let Some(entry) = self.tasks.get_mut(key) else {
                continue; // stale: already joined
            };
            let mut task_cx = Context::from_waker(&entry.waker);
            if let Poll::Ready(out) = Pin::new(&mut entry.handle).poll(&mut task_cx) {
                let id = entry.handle.id();
                self.tasks.remove(key);
                found = Some(out.map(|value| (id, value)));
                break;
            }
        }
        // Keys not looked at this time wait for the next call.
        let rest: Vec<usize> = rest.collect();
        if !rest.is_empty() {
            self.shared.lock().notified.extend(rest);
        }
        match found {
            Some(out) => Poll::Ready(Some(out)),
            None => Poll::Pending,
        }
    }

    /// Waits for every task and returns their outputs in the order they
    /// finished.
    ///
    /// # Panics
    /// If a task panicked, with that task's panic (as tokio's `join_all`);
    /// an aborted task is a panic too. Use `join_next` to handle each.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(2).build()?;
    /// # rt.block_on(async {
    /// let mut set = fairlane::task::JoinSet::new();
    /// for i in 0..3 { set.spawn(async move { i }); }
    /// let mut all = set.join_all().await;
    /// all.sort();
    /// assert_eq!(all, [0, 1, 2]);
    /// # });
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn join_all(mut self) -> Vec<T> {
        let mut out = Vec::with_capacity(self.len());
        while let Some(result) = self.join_next().await {
            match result {
                Ok(value) => out.push(value),
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                Err(e) => panic!("a task of the JoinSet failed: {e}"),
            }
        }
        out
    }

    /// Aborts every task in the set. They stay in it: `join_next` returns
    /// each (a cancelled error, or the output of one that had finished).
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let mut set = fairlane::task::JoinSet::new();
    /// set.spawn(std::future::pending::<()>());
    /// set.abort_all();
    /// assert!(set.join_next().await.unwrap().unwrap_err().is_cancelled());
    /// # });
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn abort_all(&mut self) {
        for (_, entry) in &self.tasks {
            entry.handle.abort();
        }
    }

    /// Aborts every task and waits until all have finished; the set is
    /// empty afterwards.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let mut set = fairlane::task::JoinSet::new();
    /// set.spawn(std::future::pending::<()>());
    /// set.shutdown().await;
    /// assert!(set.is_empty());
    /// # });
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn shutdown(&mut self) {
        self.abort_all();
        while self.join_next().await.is_some() {}
    }

    /// Removes every task from the set without aborting it: they run on,
    /// detached.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let mut set = fairlane::task::JoinSet::new();
    /// set.spawn(async {});
    /// set.detach_all();
    /// assert!(set.is_empty());
    /// # });
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn detach_all(&mut self) {
        self.tasks.clear();
        self.shared.lock().notified.clear();
    }
}

impl<T> Default for JoinSet<T> {
    fn default() -> Self {
        JoinSet::new()
    }
}

impl<T> Drop for JoinSet<T> {
    fn drop(&mut self) {
        self.abort_all();
    }
}

impl<T> std::fmt::Debug for JoinSet<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JoinSet").field("len", &self.len()).finish()
    }
}

impl<T, F> Extend<F> for JoinSet<T>
where
    F: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    /// Spawns each future into the set.
    fn extend<I: IntoIterator<Item = F>>(&mut self, iter: I) {
        for future in iter {
            self.spawn(future);
        }
    }
}

impl<T, F> FromIterator<F> for JoinSet<T>
where
    F: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    /// Spawns each future into a new set.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let set: fairlane::task::JoinSet<u32> = (0..4).map(|i| async move { i }).collect();
    /// assert_eq!(set.join_all().await.len(), 4);
    /// # });
    /// # Ok::<(), std::io::Error>(())
    /// ```
    fn from_iter<I: IntoIterator<Item = F>>(iter: I) -> Self {
        let mut set = JoinSet::new();
        set.extend(iter);
        set
    }
}
