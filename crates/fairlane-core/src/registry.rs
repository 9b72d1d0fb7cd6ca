//! The registry of a cluster's live tasks: what shutdown reaches parked
//! tasks through, and what the task counts and a graceful shutdown count.
//!
//! Each live task is a node of an intrusive, doubly linked list: its
//! [`TaskState`] (in the task's own allocation) holds its links, so that
//! registering a task allocates nothing. The lists are spin-locked and
//! sharded by spawning processor (the last shard for outside threads) so
//! that spawns on different processors do not contend. Its invariants:
//!
//! - A task's links, and a shard's `head`, are only read or written under
//!   the lock of the shard whose list the task joins, is in or leaves.
//! - A task is in the list from its registration until its future is
//!   dropped ([`RegistrySlot`]'s `drop` unlinks it, finding its shard
//!   through the metadata), so before the task (and the state in it) can
//!   be freed: every node reachable from a shard's `head` under its lock
//!   is alive. The task's reference on itself is given up after the
//!   removal, so it never keeps a finished task allocated.
//! - A task stays in the registry of the cluster that spawned it even if
//!   it moves (`Executor::migrate_current`): a graceful shutdown counts the
//!   clusters one after the other, and a task on the move could slip past
//!   both counts. A moved task keeps that cluster alive
//!   (`Rare::spawned_in`).
//! - A task whose future is dropped before it is registered finds
//!   [`UNREGISTERED`] and touches no registry.
//! - A shard's `len` is the length of its list; `background` is how many
//!   of its tasks are background tasks.
//! - A removal and a `TasksFinished` count are ordered by the shard lock:
//!   either the count saw the removal, or the removal sees `draining` and
//!   the waker stored before counting.

use core::cell::UnsafeCell;
use core::ptr::NonNull;

use crate::cluster::Executor;
use crate::sync::{AtomicBool, AtomicU16, Ordering, SpinLock};
use crate::task::TaskMeta;
use crate::Host;

/// `TaskState::shard` of a task not (yet) in the registry: its future was
/// dropped before `spawn_with` registered it.
const UNREGISTERED: u16 = u16::MAX;

/// Shared between a task's future, its handles and the registry: the abort
/// flag, the task's reference on itself so that an abort can get it polled
/// (and dropped), and its links in the registry. Part of the task's
/// metadata.
pub(crate) struct TaskState {
    pub(crate) aborted: AtomicBool,
    /// Spawned as a background task: does not keep a graceful shutdown
    /// waiting (see [`Executor::tasks_finished`]).
    background: bool,
    /// Set when the task's future has been dropped (completed or cancelled).
    pub(crate) finished: AtomicBool,
    /// The registry shard whose list holds the task ([`UNREGISTERED`] until
    /// it is there; the `MAX_PROCESSORS + 1` shards fit). Stored by
    /// `Shard::insert` before the task is first scheduled, and read when its
    /// future is dropped: by the spawning thread, or by one that got the
    /// task after that through the ready queue's or the registry's locks,
    /// which order the store before the load.
    shard: AtomicU16,
    /// Whether the task holds a reference on itself: from its spawn while
    /// its future lives, given up when the future is dropped
    /// (`RegistrySlot::drop`), so it never keeps a finished task allocated.
    /// Under its lock, a held reference cannot be given up, so a waker made
    /// from the cell then takes a reference on a live task
    /// (`TaskMeta::own_waker`); a flag, not a stored waker, since the
    /// task's wakers are its cell's address and its type's vtable.
    pub(crate) own_ref: SpinLock<bool>,
    /// The task's links in its registry shard's list: the previous and the
    /// next task, `None` at either end. See the module's invariants for
    /// who may touch them.
    links: UnsafeCell<Links>,
}

#[derive(Default)]
struct Links {
    prev: Option<NonNull<TaskState>>,
    next: Option<NonNull<TaskState>>,
}

// SAFETY: every field but `links` is `Send` and `Sync`. `links` is read and
// written only under the lock of the shard whose list holds the task (the
// module's invariants), which orders every access to it, from whichever
// thread.
unsafe impl Send for TaskState {}
// SAFETY: as for `Send`.
unsafe impl Sync for TaskState {}

impl TaskState {
    pub(crate) fn new(background: bool) -> Self {
        Self {
            aborted: AtomicBool::new(false),
            background,
            finished: AtomicBool::new(false),
            shard: AtomicU16::new(UNREGISTERED),
            own_ref: SpinLock::new(false),
            links: UnsafeCell::new(Links::default()),
        }
    }
}

pub(crate) type Registry = SpinLock<Shard>;

/// One shard of the registry of live tasks: the head of a list of their
/// states.
#[derive(Default)]
pub(crate) struct Shard {
    head: Option<NonNull<TaskState>>,
    /// How many tasks are in the list.
    len: usize,
    /// How many of them are background tasks.
    background: usize,
}

// SAFETY: `head` points to the state of a live task in this shard's list,
// and is only followed under the shard's lock (the module's invariants).
unsafe impl Send for Shard {}

impl Shard {
    /// Adds `state` to the list, which is shard `index` of its registry.
    /// [`for_each`](Self::for_each) hands out the pointer as given: a
    /// task's state is given with its cell's provenance
    /// ([`TaskMeta::state_ptr`]), so that the cell can be found from it.
    ///
    /// # Safety
    /// Under this shard's lock; `state` is in no list, and stays alive, in
    /// place, until [`remove`](Self::remove) takes it out.
    pub(crate) unsafe fn insert(&mut self, node: NonNull<TaskState>, index: usize) {
        // SAFETY: alive (the caller's contract).
        let state = unsafe { node.as_ref() };
        debug_assert!(index < usize::from(UNREGISTERED));
        state.shard.store(index as u16, Ordering::Relaxed);
        // SAFETY: under the lock; `state` is in no list, so no other access
        // to its links exists, and `head` is alive (invariants).
        unsafe {
            *state.links.get() = Links {
                prev: None,
                next: self.head,
            };
            if let Some(head) = self.head {
                (*head.as_ref().links.get()).prev = Some(node);
            }
        }
        self.head = Some(node);
        self.len += 1;
        self.background += usize::from(state.background);
    }

    /// Takes `state` out of the list.
    ///
    /// # Safety
    /// Under this shard's lock, with `state` in this shard's list.
    pub(crate) unsafe fn remove(&mut self, state: &TaskState) {
        // SAFETY: under the lock; `state` and its neighbours are in this
        // list, so alive (invariants).
        unsafe {
            let Links { prev, next } = core::mem::take(&mut *state.links.get());
            match prev {
                Some(prev) => (*prev.as_ref().links.get()).next = next,
                None => self.head = next,
            }
            if let Some(next) = next {
                (*next.as_ref().links.get()).prev = prev;
            }
        }
        self.len -= 1;
        self.background -= usize::from(state.background);
    }

    /// Calls `f` with the state of every task in the list, as given to
    /// [`insert`](Self::insert); each is alive during its call.
    pub(crate) fn for_each(&mut self, mut f: impl FnMut(NonNull<TaskState>)) {
        let mut node = self.head;
        while let Some(state) = node {
            f(state);
            // SAFETY: every node of the list is alive: `insert` requires it
            // to stay alive until `remove` takes it out (invariants), and
            // `f` cannot remove it (that takes this shard's lock, which the
            // caller holds).
            node = unsafe { (*state.as_ref().links.get()).next };
        }
    }
}

impl<H: Host> Executor<H> {
    /// Live tasks, background ones only when `include_background`.
    pub(crate) fn count_tasks(&self, include_background: bool) -> usize {
        let count = |s: &mut Shard| s.len - if include_background { 0 } else { s.background };
        self.registry
            .iter()
            .map(|shard| shard.lock().with(count))
            .sum()
    }
}

/// Removes a task from its cluster's registry, marks it finished, and gives
/// up the task's reference on itself, when its future is dropped.
pub(crate) struct RegistrySlot<H: Host> {
    /// The task's own metadata, in the allocation that also holds this slot
    /// (inside the future), which is freed only after the future is dropped;
    /// with the cell's provenance (given by `raw::spawn`).
    pub(crate) meta: NonNull<TaskMeta<H>>,
}

// SAFETY: the slot only reads through `meta` (a `Sync` type, see
// `TaskMeta`), from whichever thread polls or drops the future.
unsafe impl<H: Host> Send for RegistrySlot<H> {}

impl<H: Host> RegistrySlot<H> {
    pub(crate) fn state(&self) -> &TaskState {
        // SAFETY: the metadata outlives the future holding this slot.
        unsafe { &self.meta.as_ref().state }
    }
}

impl<H: Host> Drop for RegistrySlot<H> {
    fn drop(&mut self) {
        // SAFETY: see `meta`.
        let meta = unsafe { self.meta.as_ref() };
        let state = &meta.state;
        state.finished.store(true, Ordering::Release);
        let shard = state.shard.load(Ordering::Relaxed);
        if shard == UNREGISTERED {
            // Dropped inside `spawn_with`, before it registered the task.
            // SAFETY: see `meta`; whoever drops the future holds a reference.
            unsafe { TaskMeta::drop_own_ref(self.meta) };
            return;
        }
        // SAFETY: the task's future is being dropped.
        let cluster = unsafe { meta.registry_cluster() };
        // SAFETY: under the lock of the shard that `spawn_with` inserted the
        // task into; its future is being dropped only now, so it is there.
        cluster.registry[usize::from(shard)]
            .lock()
            .with(|list| unsafe { list.remove(state) });
        // After the removal, under the shard lock that `TasksFinished` also
        // takes to count: either its count saw this removal, or this load
        // sees its `draining` store and the waker it stored before counting.
        if cluster.draining.load(Ordering::Acquire) {
            let waiter = cluster.drain_waiter.lock().with(Option::take);
            if let Some(waker) = waiter {
                waker.wake();
            }
        }
        // Out of the registry, so `cancel_all` no longer makes wakers from
        // it. Not the task's last reference: whoever drops the future holds
        // one.
        // SAFETY: see `meta`, and the line above.
        unsafe { TaskMeta::drop_own_ref(self.meta) };
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::{Shard, TaskState};
    use alloc::vec::Vec;
    use core::ptr::NonNull;

    /// The states a shard's list visits, by address.
    fn listed(shard: &mut Shard) -> Vec<*const TaskState> {
        let mut seen = Vec::new();
        shard.for_each(|state| seen.push(state.as_ptr().cast_const()));
        seen
    }

    #[test]
    fn the_list_links_and_unlinks_in_any_order_and_counts() {
        let states = [
            TaskState::new(false),
            TaskState::new(true),
            TaskState::new(false),
            TaskState::new(false),
        ];
        let [a, b, c, d] = &states;
        let mut shard = Shard::default();
        // SAFETY (every block below): no lock is needed, `&mut shard` is the
        // only access to the list; the states outlive it and do not move.
        for state in &states {
            unsafe { shard.insert(NonNull::from(state), 3) };
        }
        assert_eq!(
            listed(&mut shard),
            [d, c, b, a].map(|s| s as *const TaskState)
        );
        assert_eq!((shard.len, shard.background), (4, 1));
        assert!(states
            .iter()
            .all(|s| s.shard.load(super::Ordering::Relaxed) == 3));

        unsafe { shard.remove(b) }; // from the middle
        assert_eq!(listed(&mut shard), [d, c, a].map(|s| s as *const TaskState));
        assert_eq!((shard.len, shard.background), (3, 0));
        unsafe { shard.remove(d) }; // the head
        unsafe { shard.remove(a) }; // the tail
        assert_eq!(listed(&mut shard), [c as *const TaskState]);
        unsafe { shard.insert(NonNull::from(b), 3) }; // a state that left the list joins again
        assert_eq!(listed(&mut shard), [b, c].map(|s| s as *const TaskState));
        unsafe { shard.remove(c) };
        unsafe { shard.remove(b) };
        assert!(listed(&mut shard).is_empty());
        assert_eq!((shard.len, shard.background), (0, 0));
    }
}
