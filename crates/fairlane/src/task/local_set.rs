//! Tasks that need not be `Send`: a [`LocalSet`] owns them and runs them
//! inside the task (or the `block_on`) that polls it, on that one thread.
//! Nothing of theirs goes on the runtime's ready queue.
//!
//! The set keeps its tasks (their futures) in an `Rc` that never leaves its
//! thread, and two queues of tasks to poll: one on the thread, for wakes
//! there while the set is being polled and for spawns, and one behind a
//! mutex for wakes from anywhere else, which also wake the task polling
//! the set. A task's waker holds only what is safe to share (its
//! `Header`, in `local_set/task.rs`), so it is `Send + Sync`.
//!
//! Each poll of the set (a turn) moves the tasks woken from other threads
//! to the back of the local queue, then polls at most
//! [`TASKS_PER_TURN`] tasks; if some are still queued it wakes itself and
//! returns, so that the runtime's other tasks and the future given to
//! [`LocalSet::run_until`] get their turn.

mod task;

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};

pub(crate) use self::task::{Header as LocalHeader, LocalJoin};
use self::task::{Header, LocalTask, Ran};
use super::id::Id;
use super::JoinHandle;

/// Tasks polled in one turn of the set at most, before it lets its owner
/// (and the runtime) go on.
const TASKS_PER_TURN: usize = 64;

thread_local! {
    /// The set `spawn_local` spawns onto: the one being polled on this
    /// thread, or entered.
    static CURRENT: RefCell<Option<Entered>> = const { RefCell::new(None) };
}

#[derive(Clone)]
struct Entered {
    set: Rc<SetContext>,
    /// A poll of the set is under way: wakes on this thread may use its
    /// local queue, which the poll drains before it returns.
    polling: bool,
}

/// The part of a set that stays on its thread.
struct SetContext {
    shared: Arc<Shared>,
    /// Every task not yet finished, in spawn order.
    tasks: RefCell<BTreeMap<Id, Rc<LocalTask>>>,
    /// Tasks to poll, woken or spawned on this thread.
    queue: RefCell<VecDeque<Arc<Header>>>,
    /// The set was dropped: tasks spawned now are cancelled at once.
    closed: Cell<bool>,
}

/// The part of a set that its tasks' wakers reach, from any thread.
pub(crate) struct Shared {
    remote: Mutex<Remote>,
}

struct Remote {
    /// Tasks woken outside a poll of the set (from other threads, or from
    /// this one between polls).
    queue: VecDeque<Arc<Header>>,
    /// The waker of whoever polled the set last, to wake when a task is
    /// queued here; taken by that wake.
    waker: Option<Waker>,
    /// The set was dropped: wakes queue nothing.
    closed: bool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Remote> {
        // Nothing panics while the lock is held.
        self.remote.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues a woken task (its `scheduled` flag just set by this wake).
    fn schedule(task: Arc<Header>) {
        let mut task = Some(task);
        // On the set's thread while it is being polled: the local queue,
        // which that poll drains. (Not while the thread's locals are being
        // destroyed: then `try_with` fails and the task goes on.)
        let _ = CURRENT.try_with(|current| {
            if let Some(entered) = &*current.borrow() {
                let header = task.as_ref().expect("not taken yet");
                if entered.polling && Arc::ptr_eq(&entered.set.shared, header.set()) {
                    entered.set.queue.borrow_mut().extend(task.take());
                }
            }
        });
        let Some(task) = task else { return };
        let set = Arc::clone(task.set());
        let mut remote = set.lock();
        if remote.closed {
            drop(remote);
            return;
        }
        remote.queue.push_back(task);
        let waker = remote.waker.take();
        drop(remote);
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// Wakes whoever polled the set last: it has a task to poll.
    fn wake_owner(&self) {
        let waker = self.lock().waker.take();
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

impl SetContext {
    /// Makes this the thread's current set until the guard is dropped.
    fn enter(self: &Rc<Self>, polling: bool) -> EnterGuard {
        let entered = Entered {
            set: Rc::clone(self),
            polling,
        };
        // While the thread's locals are being destroyed (a set kept in a
        // thread-local is dropped with its thread) there is no current set.
        match CURRENT.try_with(|c| c.replace(Some(entered))) {
            Ok(previous) => EnterGuard {
                previous,
                entered: true,
            },
            Err(_) => EnterGuard {
                previous: None,
                entered: false,
            },
        }
    }

    fn spawn<F>(&self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        let id = Id::next();
        let (task, join) = LocalTask::new(future, id, &self.shared);
        if self.closed.get() {
            // The set is gone: the task ends at once, cancelled.
            task.cancel();
        } else {
            let header = Arc::clone(task.header());
            self.tasks.borrow_mut().insert(id, Rc::new(task));
            self.queue.borrow_mut().push_back(header);
            let polling = CURRENT
                .try_with(|c| {
                    c.borrow()
                        .as_ref()
                        .is_some_and(|e| e.polling && std::ptr::eq(&*e.set, self))
                })
                .unwrap_or(false);
            if !polling {
                self.shared.wake_owner();
            }
        }
        JoinHandle::local(join, id)
    }

    /// One turn of the set: polls the tasks queued, at most
    /// [`TASKS_PER_TURN`], and remembers `waker` to wake when a task is
    /// woken from elsewhere. True if tasks are still queued.
    fn turn(&self, waker: &Waker) -> bool {
        let old = {
            let mut remote = self.shared.lock();
            self.queue.borrow_mut().extend(remote.queue.drain(..));
            match &remote.waker {
                Some(w) if w.will_wake(waker) => None,
                _ => remote.waker.replace(waker.clone()),
            }
        };
        drop(old);
        for _ in 0..TASKS_PER_TURN {
            let Some(header) = self.queue.borrow_mut().pop_front() else {
                return false;
            };
            // A task that finished after it was queued is skipped.
            let Some(task) = self.tasks.borrow().get(&header.id()).cloned() else {
                continue;
            };
            match task.run() {
                Ran::Pending => {}
                // Still scheduled: queued again, behind the others.
                Ran::Busy => self.queue.borrow_mut().push_back(header),
                Ran::Finished => {
                    let finished = self.tasks.borrow_mut().remove(&header.id());
                    // Dropped out of the borrow: whatever it drops may spawn.
                    drop(finished);
                }
            }
        }
        !self.queue.borrow().is_empty()
    }

    /// Drops every task's future, here, and refuses new ones.
    fn close(&self) {
        self.closed.set(true);
        let (remote, waker) = {
            let mut remote = self.shared.lock();
            remote.closed = true;
            (std::mem::take(&mut remote.queue), remote.waker.take())
        };
        drop((remote, waker));
        // A future dropped here may spawn (it is cancelled at once) or
        // wake others (the set is closed: nothing is queued).
        loop {
            let tasks = std::mem::take(&mut *self.tasks.borrow_mut());
            if tasks.is_empty() {
                break;
            }
            for task in tasks.into_values() {
                task.cancel();
            }
        }
        let queue = std::mem::take(&mut *self.queue.borrow_mut());
        drop(queue);
    }
}

/// Puts the thread's previous current set back.
struct EnterGuard {
    previous: Option<Entered>,
    /// The thread's current set was changed (its locals were still there).
    entered: bool,
}

impl Drop for EnterGuard {
    fn drop(&mut self) {
        if !self.entered {
            return;
        }
        let ours = CURRENT.try_with(|c| c.replace(self.previous.take()));
        // Dropped out of the borrow.
        drop(ours);
    }
}

/// A set of tasks that need not be `Send`, run on the thread that polls
/// the set, as tokio's `LocalSet`.
///
/// Spawn onto it with [`LocalSet::spawn_local`], or with
/// [`task::spawn_local`](spawn_local) from inside it. Its tasks run only
/// while it is driven: inside [`run_until`](LocalSet::run_until) (or
/// [`block_on`](LocalSet::block_on)), or while the set itself is awaited
/// (it is a future that completes when all its tasks have). They then run
/// inside the task or `block_on` that drives it, a bounded number at a time
/// so that it is never starved, and never on another thread: nothing of
/// theirs goes on the runtime's shared queue. Their wakers may be woken
/// from any thread.
///
/// Dropping the set drops the futures of its unfinished tasks, on its
/// thread; their [`JoinHandle`]s then report them cancelled.
///
/// # Example
/// ```
/// use std::rc::Rc;
/// let rt = fairlane::runtime::Builder::new_current_thread().enable_all().build()?;
/// let local = fairlane::task::LocalSet::new();
/// let shared = Rc::new(5); // not `Send`
/// let doubled = local.block_on(&rt, async move {
///     let shared2 = Rc::clone(&shared);
///     fairlane::task::spawn_local(async move { *shared2 * 2 }).await.unwrap()
/// });
/// assert_eq!(doubled, 10);
/// # Ok::<(), std::io::Error>(())
/// ```
///
/// A set stays on the thread that made it:
/// ```compile_fail
/// let local = fairlane::task::LocalSet::new();
/// std::thread::spawn(move || drop(local)); // error: `LocalSet` is not `Send`
/// ```
pub struct LocalSet {
    context: Rc<SetContext>,
}

impl LocalSet {
    /// An empty set.
    ///
    /// # Example
    /// ```
    /// let local = fairlane::task::LocalSet::new();
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// rt.block_on(local); // no tasks: done at once
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn new() -> LocalSet {
        LocalSet {
            context: Rc::new(SetContext {
                shared: Arc::new(Shared {
                    remote: Mutex::new(Remote {
                        queue: VecDeque::new(),
                        waker: None,
                        closed: false,
                    }),
                }),
                tasks: RefCell::new(BTreeMap::new()),
                queue: RefCell::new(VecDeque::new()),
                closed: Cell::new(false),
            }),
        }
    }

    /// Makes this the thread's set for [`task::spawn_local`](spawn_local)
    /// until the guard is dropped. The tasks spawned meanwhile run when the
    /// set is next driven.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let local = fairlane::task::LocalSet::new();
    /// let handle = {
    ///     let _guard = local.enter();
    ///     fairlane::task::spawn_local(async { "ran" })
    /// };
    /// assert_eq!(local.block_on(&rt, handle).unwrap(), "ran");
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn enter(&self) -> LocalEnterGuard {
        LocalEnterGuard {
            _guard: self.context.enter(false),
        }
    }

    /// Spawns `future` onto this set, to run when the set is driven, and
    /// returns its handle.
    ///
    /// # Example
    /// ```
    /// use std::{cell::Cell, rc::Rc};
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let local = fairlane::task::LocalSet::new();
    /// let count = Rc::new(Cell::new(0));
    /// for _ in 0..3 {
    ///     let count = Rc::clone(&count);
    ///     local.spawn_local(async move { count.set(count.get() + 1) });
    /// }
    /// rt.block_on(local); // until every task has finished
    /// assert_eq!(count.get(), 3);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    #[track_caller]
    pub fn spawn_local<F>(&self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        self.context.spawn(future)
    }

    /// Runs `future` to completion on `rt`, on this thread, driving the
    /// set's tasks meanwhile: [`Runtime::block_on`](crate::Runtime::block_on)
    /// of [`run_until`](LocalSet::run_until).
    ///
    /// # Panics
    /// As `Runtime::block_on`: inside a runtime's task or `block_on`.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::runtime::Builder::new_multi_thread().build()?;
    /// let local = fairlane::task::LocalSet::new();
    /// let out = local.block_on(&rt, async {
    ///     let here = std::rc::Rc::new("local");
    ///     fairlane::task::spawn_local(async move { *here }).await.unwrap()
    /// });
    /// assert_eq!(out, "local");
    /// # Ok::<(), std::io::Error>(())
    /// ```
    #[track_caller]
    pub fn block_on<F: Future>(&self, rt: &crate::Runtime, future: F) -> F::Output {
        rt.block_on(self.run_until(future))
    }

    /// Drives `future` and the set's tasks together until `future`
    /// completes, and returns its output. Tasks still unfinished then stay
    /// in the set, to run when it is next driven.
    ///
    /// `future` is polled first at each turn, then up to a bounded number
    /// of the set's tasks.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(2).build()?;
    /// rt.block_on(async {
    ///     let local = fairlane::task::LocalSet::new();
    ///     let n = local
    ///         .run_until(async {
    ///             let cell = std::rc::Rc::new(std::cell::Cell::new(1));
    ///             let c = cell.clone();
    ///             fairlane::task::spawn_local(async move { c.set(2) }).await.unwrap();
    ///             cell.get()
    ///         })
    ///         .await;
    ///     assert_eq!(n, 2);
    /// });
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn run_until<F: Future>(&self, future: F) -> F::Output {
        let mut future = std::pin::pin!(future);
        std::future::poll_fn(|cx| {
            let _enter = self.context.enter(true);
            if let Poll::Ready(output) = future.as_mut().poll(cx) {
                return Poll::Ready(output);
            }
            if self.context.turn(cx.waker()) {
                crate::host::run_again(cx.waker());
            }
            Poll::Pending
        })
        .await
    }
}

impl Default for LocalSet {
    /// As [`LocalSet::new`].
    ///
    /// # Example
    /// ```
    /// let local = fairlane::task::LocalSet::default();
    /// # drop(local);
    /// ```
    fn default() -> Self {
        LocalSet::new()
    }
}

impl fmt::Debug for LocalSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalSet")
            .field("tasks", &self.context.tasks.borrow().len())
            .finish_non_exhaustive()
    }
}

/// Completes when every task of the set has finished (at once when it has
/// none), driving them meanwhile.
///
/// # Example
/// ```
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// let local = fairlane::task::LocalSet::new();
/// let (tx, rx) = tokio::sync::oneshot::channel();
/// local.spawn_local(async move { tx.send(std::rc::Rc::new(7)).unwrap() });
/// let got = local.spawn_local(async move { *rx.await.unwrap() });
/// rt.block_on(local);
/// assert!(got.is_finished());
/// # Ok::<(), std::io::Error>(())
/// ```
impl Future for LocalSet {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let _enter = self.context.enter(true);
        if self.context.turn(cx.waker()) {
            crate::host::run_again(cx.waker());
            Poll::Pending
        } else if self.context.tasks.borrow().is_empty() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

impl Drop for LocalSet {
    fn drop(&mut self) {
        // Entered, so that a future's destructor may call `spawn_local`.
        let _enter = self.context.enter(false);
        self.context.close();
    }
}

/// The guard of [`LocalSet::enter`]: the set stays the thread's current
/// one until it is dropped.
///
/// # Example
/// ```
/// let local = fairlane::task::LocalSet::new();
/// let guard: fairlane::task::LocalEnterGuard = local.enter();
/// let handle = fairlane::task::spawn_local(async {});
/// drop(guard);
/// drop(local); // drops the task unrun
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// assert!(rt.block_on(handle).unwrap_err().is_cancelled());
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct LocalEnterGuard {
    _guard: EnterGuard,
}

impl fmt::Debug for LocalEnterGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalEnterGuard").finish_non_exhaustive()
    }
}

/// Spawns a task that need not be `Send` onto the current [`LocalSet`],
/// as tokio's `task::spawn_local`: from one of its tasks, from the future
/// given to its [`run_until`](LocalSet::run_until) or
/// [`block_on`](LocalSet::block_on), or while its
/// [`enter`](LocalSet::enter) guard is held.
///
/// # Panics
/// Outside a `LocalSet`, with a message saying so.
///
/// # Example
/// ```
/// use std::rc::Rc;
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// let local = fairlane::task::LocalSet::new();
/// let total = local.block_on(&rt, async {
///     let data = Rc::new(vec![1, 2, 3]);
///     let task = fairlane::task::spawn_local({
///         let data = Rc::clone(&data);
///         async move {
///             // Nested: a local task spawns another one.
///             fairlane::task::spawn_local(async move { data.iter().sum::<i32>() })
///                 .await
///                 .unwrap()
///         }
///     });
///     task.await.unwrap() + data.len() as i32
/// });
/// assert_eq!(total, 9);
/// # Ok::<(), std::io::Error>(())
/// ```
///
/// The [`JoinHandle<T>`] is `Send` only if `T` is:
/// ```compile_fail
/// let local = fairlane::task::LocalSet::new();
/// let handle = local.spawn_local(async { std::rc::Rc::new(1) });
/// std::thread::spawn(move || drop(handle)); // error: `Rc` cannot be sent
/// ```
#[track_caller]
pub fn spawn_local<F>(future: F) -> JoinHandle<F::Output>
where
    F: Future + 'static,
    F::Output: 'static,
{
    match try_spawn_local(future) {
        Some(handle) => handle,
        None => panic!(
            "fairlane::task::spawn_local called outside a task::LocalSet: call it from a task of \
             a LocalSet, from the future given to LocalSet::run_until or LocalSet::block_on, or \
             while LocalSet::enter's guard is held"
        ),
    }
}

/// Spawns `future` onto the current set; `None` outside one.
pub(super) fn try_spawn_local<F>(future: F) -> Option<JoinHandle<F::Output>>
where
    F: Future + 'static,
    F::Output: 'static,
{
    let set = CURRENT
        .try_with(|c| c.borrow().as_ref().map(|e| Rc::clone(&e.set)))
        .ok()
        .flatten()?;
    Some(set.spawn(future))
}
