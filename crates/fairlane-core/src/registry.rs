//! The registry of a cluster's live tasks: what shutdown reaches parked
//! tasks through, and what the task counts and a graceful shutdown count.
//!
//! Each live task has an entry, a pointer to its [`TaskState`] (in the
//! task's own allocation), in a spin-locked slab, sharded by spawning
//! processor (the last shard for outside threads) so that spawns on
//! different processors do not contend. Its invariants:
//!
//! - An entry is only dereferenced under its shard's lock while it is in
//!   the registry, that is before the task's future is dropped, so before
//!   the task (and the state in it) can be freed.
//! - The entry is removed when the task's future is dropped
//!   ([`RegistrySlot`]'s `drop`, which finds the entry through the
//!   metadata). The task's own waker is given up after the removal, so it
//!   never keeps a finished task allocated.
//! - An entry stays with the cluster that spawned the task even if the task
//!   moves (`Executor::migrate_current`): a graceful shutdown counts the
//!   clusters one after the other, and an entry on the move could slip past
//!   both counts. A moved task keeps that cluster alive
//!   (`RegistryPlace::spawned_in`).
//! - A task whose future is dropped before it is registered finds
//!   [`UNREGISTERED`] and touches no registry.
//! - A shard's `background` is how many of its tasks are background tasks.
//! - A removal and a `TasksFinished` count are ordered by the shard lock:
//!   either the count saw the removal, or the removal sees `draining` and
//!   the waker stored before counting.

use core::ptr::NonNull;
use core::task::Waker;

use alloc::sync::Arc;
use slab::Slab;

use crate::cluster::Executor;
use crate::sync::{AtomicBool, Ordering, SpinLock};
use crate::task::TaskMeta;
use crate::Host;

/// Where a task is in its cluster's registry of live tasks.
pub(crate) struct RegistryPlace<H: Host> {
    /// The cluster whose registry holds the entry, when that is not the
    /// task's cluster (it moved: entries stay with the cluster that spawned
    /// the task, see `Executor::migrate_current`). `None` for a task that
    /// never moved, so that a spawn takes one reference on its cluster, not
    /// two.
    pub(crate) spawned_in: Option<Arc<Executor<H>>>,
    /// The registry shard in the low [`SHARD_BITS`] bits, the key in that
    /// shard's slab above them (51 bits: more than any slab can hold, also
    /// where `usize` has 32); [`UNREGISTERED`] until the entry exists. One
    /// word on 64-bit targets, so that the metadata (with the cell's
    /// header) fits in 128 bytes.
    pub(crate) entry: u64,
}

/// `RegistryPlace::entry` of a task not (yet) in the registry: its future
/// was dropped before `spawn_with` registered it.
pub(crate) const UNREGISTERED: u64 = u64::MAX;

/// Bits that hold a registry shard index (at most `MAX_PROCESSORS`).
pub(crate) const SHARD_BITS: u32 = usize::BITS - crate::MAX_PROCESSORS.leading_zeros();

impl<H: Host> RegistryPlace<H> {
    fn shard(&self) -> usize {
        (self.entry & ((1 << SHARD_BITS) - 1)) as usize
    }

    fn key(&self) -> usize {
        (self.entry >> SHARD_BITS) as usize
    }
}

/// Shared between a task's future, its handles and its registry entry: the
/// abort flag, and the task's waker so that an abort can get it polled (and
/// dropped). Part of the task's metadata.
pub(crate) struct TaskState {
    pub(crate) aborted: AtomicBool,
    /// Spawned as a background task: does not keep a graceful shutdown
    /// waiting (see [`Executor::tasks_finished`]).
    background: bool,
    /// Set when the task's future has been dropped (completed or cancelled).
    pub(crate) finished: AtomicBool,
    /// The task's own waker while its future lives: a reference the task
    /// holds on itself, given up when the future is dropped
    /// (`RegistrySlot::drop`), so it never keeps a finished task allocated.
    pub(crate) waker: SpinLock<Option<Waker>>,
}

impl TaskState {
    pub(crate) fn new(background: bool) -> Self {
        Self {
            aborted: AtomicBool::new(false),
            background,
            finished: AtomicBool::new(false),
            waker: SpinLock::new(None),
        }
    }

    pub(crate) fn abort(&self) {
        self.aborted.store(true, Ordering::Release);
        let waker = self.waker.lock().with(|w| w.clone());
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

/// A registry entry: the state of a live task.
pub(crate) struct RegistryEntry(pub(crate) NonNull<TaskState>);

// SAFETY: `TaskState` is `Sync`, and an entry is only dereferenced under its
// shard's lock while it is in the registry, that is before the task's future
// is dropped, so before the task (and the state in it) can be freed.
unsafe impl Send for RegistryEntry {}

pub(crate) type Registry = SpinLock<Shard>;

/// One shard of the registry of live tasks.
#[derive(Default)]
pub(crate) struct Shard {
    pub(crate) tasks: Slab<RegistryEntry>,
    /// How many of `tasks` are background tasks.
    pub(crate) background: usize,
}

impl<H: Host> Executor<H> {
    /// Live tasks, background ones only when `include_background`.
    pub(crate) fn count_tasks(&self, include_background: bool) -> usize {
        let count =
            |s: &mut Shard| s.tasks.len() - if include_background { 0 } else { s.background };
        self.registry
            .iter()
            .map(|shard| shard.lock().with(count))
            .sum()
    }
}

/// Removes a task from its cluster's registry, and marks it finished, when
/// its future is dropped.
pub(crate) struct RegistrySlot<H: Host> {
    /// The task's own metadata, in the allocation that also holds this slot
    /// (inside the future), which is freed only after the future is dropped.
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
        // SAFETY: the task's future is being dropped.
        let (cluster, reg) = unsafe { meta.registration() };
        if reg.entry == UNREGISTERED {
            // Dropped inside `spawn_with`, before it registered the task.
            drop(state.waker.lock().with(Option::take));
            return;
        }
        cluster.registry[reg.shard()].lock().with(|shard| {
            shard.background -= usize::from(state.background);
            shard.tasks.try_remove(reg.key());
        });
        // After the removal, under the shard lock that `TasksFinished` also
        // takes to count: either its count saw this removal, or this load
        // sees its `draining` store and the waker it stored before counting.
        if cluster.draining.load(Ordering::Acquire) {
            let waiter = cluster.drain_waiter.lock().with(Option::take);
            if let Some(waker) = waiter {
                waker.wake();
            }
        }
        // Out of the registry, so `cancel_all` no longer clones it. Not the
        // task's last reference: whoever drops the future holds one.
        drop(state.waker.lock().with(Option::take));
    }
}
