//! The ready queue: every processor's lanes, the push rule, and the pop
//! paths (own lanes, age-based helping, stealing, the final scan).
//!
//! The protocol, its invariants and why no task is lost are described in
//! `queue.md` beside this file.

use alloc::boxed::Box;
use alloc::vec::Vec;

use crossbeam_utils::CachePadded;

use crate::lane::{Lane, LaneInfo, Locality, PushOutcome};
use crate::local::NO_TARGET;
pub(crate) use crate::local::{bump, Local, RELEASED, REMOVED};
use crate::rand::below;
use crate::resize::ResizeLock;
use crate::sync::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use crate::wake_slot::{IntoRaw, WakeSlot};
use crate::{Config, Priority, ProcessorId};

/// Where a popped task came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Source {
    /// One of the processor's own lanes.
    Own,
    /// Another processor's lane that the age rule judged much older.
    Help,
    /// Another processor's lane, taken because this one had no work.
    Steal,
}

/// A lane offset within a processor of `normal` normal lanes: its high or
/// low lane one time in 16 each, a normal lane otherwise. Most programs use
/// no priorities, and a draw that lands on an empty class lane is a wasted
/// help check; the class lanes are still drawn often enough that a
/// processor stuck in a task that never yields has them helped too (and
/// steals, by processors with no work, scan every lane). The class comes
/// from the low bits of `r`, the normal lane from the high ones (see
/// `below`).
#[inline]
fn lane_offset(r: u32, normal: usize) -> usize {
    match r & 15 {
        0 => normal,
        1 => normal + 1,
        _ => below(u64::from(r), normal),
    }
}

/// A processor publishes its clock reading as its heartbeat at one reading
/// in `BEAT_PERIOD` (`ReadyQueue::beat`): with a reading every
/// `Config::clock_period` iterations while it finds work, a line written
/// that rarely stays in the caches of the processors that check it.
const BEAT_PERIOD: u32 = 4;

/// An owner is late once its heartbeat is older than `LATE_INTERVALS` of
/// the helper's own intervals between heartbeats: it missed a whole
/// heartbeat that a processor scheduling at the helper's pace would have
/// published. One interval would leave no margin: two processors
/// scheduling at the same pace would find each other late whenever the
/// owner's last interval ran a little longer than the helper's shortest
/// recent one.
const LATE_INTERVALS: u64 = 2;

/// One help check in `REBALANCE_PERIOD` reads the target lane even when its
/// owner's heartbeat is fresh (see `ReadyQueue::pop`).
const REBALANCE_PERIOD: u32 = 8;

/// A rebalance counts our own age as at least our interval between
/// heartbeats over `2^(REBALANCE_FLOOR_LOG2 + help_factor_log2)`, so that
/// the age rule then asks the target to be older than a quarter of our
/// interval: a head that waited less than a few of our iterations is not
/// behind. A larger floor would stop rebalancing short of evening out
/// processors whose tasks take turns faster than one interval.
const REBALANCE_FLOOR_LOG2: u32 = 2;

/// A help draw among `near` processors sharing the cache: which of them
/// (from the high bits of `r`'s low word) and which of its lanes (from its
/// high word). The two come from disjoint bits, so that every class lane
/// of every nearby processor can be drawn.
#[inline]
fn near_draw(r: u64, near: usize, normal: usize) -> (usize, usize) {
    (below(r, near), lane_offset((r >> 32) as u32, normal))
}

/// A ready queue identity never handed out before in this process.
fn next_identity() -> u64 {
    // `core`'s atomic, also under loom: a counter that only has to hand out
    // distinct numbers is not part of what the models check. `Relaxed`: the
    // read-modify-write alone makes every value distinct; nothing else is
    // published through it.
    static NEXT: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(0);
    NEXT.fetch_add(1, core::sync::atomic::Ordering::Relaxed)
}

/// The cluster's ready queue: per processor slot, `lanes_per_processor`
/// lanes of normal-priority tasks, then one lane of high- and one of
/// low-priority tasks, then the lane of tasks restricted to a set of
/// processors (`stride` lanes in all). There are `Config::max_processors`
/// slots; the active ones hold the cluster's processors (`resize.md`).
pub(crate) struct ReadyQueue<T> {
    /// Unique in the process (see `next_identity`): part of every
    /// `ProcessorId` of this queue, so that one of another cluster's is
    /// never taken for one of ours.
    identity: u64,
    lanes: Box<[CachePadded<Lane<T>>]>,
    info: Box<[CachePadded<LaneInfo>]>,
    pub(crate) local: Box<[CachePadded<Local>]>,
    /// Per slot, the wake slot (queue.md, "The wake slot"): a task woken by
    /// the task running on the slot's processor, with the owner's clock
    /// reading when it went in.
    woken: Box<[CachePadded<WakeSlot<T>>]>,
    /// Per slot, its owner's last published clock reading (`beat`): what a
    /// help check reads first. Apart from `Local`, which its owner writes
    /// on every iteration, and from `LaneInfo`, written on every pop.
    beats: Box<[CachePadded<AtomicU64>]>,
    lanes_per_processor: usize,
    /// Lanes per slot: `lanes_per_processor` + 3.
    stride: usize,
    /// The closed flag, the resize lock and the active-slot count: read on
    /// every scheduling iteration, written rarely, so one clean shared line.
    shared: CachePadded<QueueShared>,
    /// The active slots, `shared.active_count` of them, in ascending order.
    /// Written only under the resize lock's write side.
    active: Box<[AtomicUsize]>,
    /// Per slot: it holds a processor of the cluster. Written only under the
    /// resize lock's write side. Kept apart from `Local`, which its owner
    /// writes on every iteration: other processors read these flags (help
    /// draws, pushes naming a preferred processor), and reading them from
    /// the owner's hot line would cost the owner a miss on its next write.
    slot_active: Box<[AtomicBool]>,
    /// See `Config::priority_bound`.
    priority_bound: usize,
    help_period: u32,
    help_factor_log2: u32,
    steal_attempts: usize,
    /// Spreads pushes from outside threads that have no preferred processor.
    outside: CachePadded<AtomicUsize>,
    /// Per processor, the other processors sharing its last-level cache (as
    /// the host reports it): preferred help targets.
    near: Box<[Box<[usize]>]>,
}

pub(crate) struct QueueShared {
    /// Set once, at shutdown; checked under a lane's lock by every push.
    closed: AtomicBool,
    pub(crate) lock: ResizeLock,
    active_count: AtomicUsize,
}

impl<T: Locality + IntoRaw> ReadyQueue<T> {
    /// `cache_domain(p)` names processor `p`'s last-level cache.
    /// Slots `0..config.processors` start active (and occupied: their
    /// threads are the host's to start).
    pub(crate) fn new(config: &Config, cache_domain: impl Fn(usize) -> usize) -> Self {
        let stride = config.lanes_per_processor + 3;
        let capacity = config.max_processors.max(config.processors);
        let n = capacity * stride;
        let domains: Vec<usize> = (0..capacity).map(cache_domain).collect();
        let near = (0..capacity)
            .map(|p| {
                (0..capacity)
                    .filter(|&q| q != p && domains[q] == domains[p])
                    .collect()
            })
            .collect();
        let queue = Self {
            identity: next_identity(),
            lanes: (0..n).map(|_| CachePadded::new(Lane::new())).collect(),
            info: (0..n).map(|_| CachePadded::new(LaneInfo::new())).collect(),
            local: (0..capacity)
                .map(|p| {
                    CachePadded::new(Local::new(
                        0x9e37_79b9_7f4a_7c15u64.wrapping_mul(p as u64 + 1),
                    ))
                })
                .collect(),
            woken: (0..capacity)
                .map(|_| CachePadded::new(WakeSlot::new()))
                .collect(),
            beats: (0..capacity)
                .map(|_| CachePadded::new(AtomicU64::new(0)))
                .collect(),
            lanes_per_processor: config.lanes_per_processor,
            stride,
            priority_bound: config.priority_bound as usize,
            help_period: config.help_period,
            help_factor_log2: config.help_factor_log2,
            steal_attempts: config.steal_attempts,
            shared: CachePadded::new(QueueShared {
                closed: AtomicBool::new(false),
                lock: ResizeLock::new(),
                active_count: AtomicUsize::new(0),
            }),
            active: (0..capacity).map(|_| AtomicUsize::new(0)).collect(),
            slot_active: (0..capacity).map(|_| AtomicBool::new(false)).collect(),
            outside: CachePadded::new(AtomicUsize::new(0)),
            near,
        };
        for p in 0..config.processors {
            let local = &queue.local[p];
            queue.slot_active[p].store(true, Ordering::Relaxed);
            local.occupied.store(true, Ordering::Relaxed);
        }
        queue.rebuild_active();
        queue
    }

    /// Number of active processors.
    #[inline]
    pub(crate) fn processors(&self) -> usize {
        self.shared.active_count.load(Ordering::Relaxed)
    }

    /// Number of processor slots (`Config::max_processors`).
    pub(crate) fn capacity(&self) -> usize {
        self.local.len()
    }

    /// The resize lock.
    #[inline]
    pub(crate) fn resize_lock(&self) -> &ResizeLock {
        &self.shared.lock
    }

    /// The `i`-th active slot, `i < processors()`.
    #[inline]
    pub(crate) fn active_slot(&self, i: usize) -> usize {
        self.active[i].load(Ordering::Relaxed)
    }

    /// Whether `p` is an active slot.
    #[inline]
    pub(crate) fn is_active(&self, p: usize) -> bool {
        p < self.capacity() && self.slot_active[p].load(Ordering::Relaxed)
    }

    /// Whether `id` names a processor of the cluster now.
    pub(crate) fn is_live(&self, id: ProcessorId) -> bool {
        let p = id.index();
        self.owns(id)
            && self.is_active(p)
            && self.local[p].generation.load(Ordering::Relaxed) == id.generation()
    }

    /// Whether `id` is one of this cluster's (live or not).
    pub(crate) fn owns(&self, id: ProcessorId) -> bool {
        id.is_of(self.identity)
    }

    /// The identity of the processor in active slot `p`.
    pub(crate) fn id_of(&self, p: usize) -> ProcessorId {
        ProcessorId::new(
            self.identity,
            p,
            self.local[p].generation.load(Ordering::Relaxed),
        )
    }

    /// The identities of the active processors.
    pub(crate) fn ids(&self) -> Vec<ProcessorId> {
        (0..self.processors())
            .map(|i| self.id_of(self.active_slot(i)))
            .collect()
    }

    /// Rewrites the active list from the slots' `active` flags. Writer only.
    fn rebuild_active(&self) {
        let mut count = 0;
        for p in 0..self.capacity() {
            if self.slot_active[p].load(Ordering::Relaxed) {
                self.active[count].store(p, Ordering::Relaxed);
                count += 1;
            }
        }
        self.shared.active_count.store(count, Ordering::Relaxed);
    }

    /// Activates a free slot for a new processor and returns it, or `None`
    /// if every slot is taken. Call under the resize lock's write side.
    pub(crate) fn add(&self) -> Option<usize> {
        let p = (0..self.capacity()).find(|&p| {
            let local = &self.local[p];
            !self.slot_active[p].load(Ordering::Relaxed) && !local.occupied.load(Ordering::Acquire)
        })?;
        let local = &self.local[p];
        let generation = local.generation.load(Ordering::Relaxed);
        local
            .generation
            .store(generation.wrapping_add(1), Ordering::Relaxed);
        local.stop.store(0, Ordering::Relaxed);
        local.help_target.store(NO_TARGET, Ordering::Relaxed);
        local.occupied.store(true, Ordering::Relaxed);
        self.slot_active[p].store(true, Ordering::Relaxed);
        self.rebuild_active();
        Some(p)
    }

    /// Deactivates slot `p` and empties its lanes: tasks of its shared lanes
    /// move to the same class's lanes of the remaining processors (round-robin,
    /// keeping their push timestamps, so their age carries over); the tasks of
    /// its restricted lane are returned, for the caller to place by their
    /// allowed sets. Call under the resize lock's write side, with at least
    /// one other processor active.
    pub(crate) fn remove(&self, p: usize) -> Vec<T> {
        let local = &self.local[p];
        self.slot_active[p].store(false, Ordering::Relaxed);
        local.stop.fetch_or(REMOVED, Ordering::Relaxed);
        self.rebuild_active();
        let n = self.processors();
        let mut restricted = Vec::new();
        let mut next = 0;
        for offset in 0..self.stride {
            let l = p * self.stride + offset;
            let items = self.lanes[l].take_all(&self.info[l]);
            if offset == self.restricted_offset() {
                restricted.extend(items.into_iter().map(|(item, _)| item));
                continue;
            }
            for (item, ts) in items {
                let to = self.active_slot(next % n);
                next += 1;
                let l = to * self.stride + offset;
                // Pushed while no reader is in: only a closing queue can refuse.
                if let PushOutcome::Closed(item) | PushOutcome::Busy(item) =
                    self.lanes[l].push(&self.info[l], item, ts, true, || true)
                {
                    restricted.push(item);
                }
            }
        }
        restricted
    }

    /// The offset of the restricted lane within a slot.
    #[inline]
    fn restricted_offset(&self) -> usize {
        self.lanes_per_processor + 2
    }

    /// Pushes a task restricted to a set of processors onto processor `p`'s
    /// restricted lane, stamped `ts`. Only `p` ever pops it.
    pub(crate) fn push_restricted(&self, p: usize, item: T, ts: u64) -> Result<bool, T> {
        let offset = self.restricted_offset();
        self.push_to(p, offset..offset + 1, 0, item, ts)
    }

    /// Pushes on behalf of processor `p` onto its own lanes, alternating
    /// between them, try-locking and moving on when one is busy; if all are
    /// busy it waits for the one whose turn it was. Stamped with the
    /// processor's iteration clock. Gives the item back once the queue is
    /// closed. `Ok(true)`: the push made its lane non-empty.
    #[inline]
    pub(crate) fn push_local(&self, p: usize, item: T, priority: Priority) -> Result<bool, T> {
        let local = &self.local[p];
        let ts = local.now.load(Ordering::Relaxed);
        if priority == Priority::Normal {
            let start = Local::next(&local.push_cursor, self.lanes_per_processor);
            self.push_to(p, 0..self.lanes_per_processor, start, item, ts)
        } else {
            self.push_to(p, self.class_lanes(priority), 0, item, ts)
        }
    }

    /// Offsets, within a processor's lanes, of the lanes of `priority`.
    #[inline]
    fn class_lanes(&self, priority: Priority) -> core::ops::Range<usize> {
        let normal = self.lanes_per_processor;
        match priority {
            Priority::High => normal..normal + 1,
            Priority::Normal => 0..normal,
            Priority::Low => normal + 1..normal + 2,
        }
    }

    /// Pushes from a thread that is not one of this queue's processors: to a
    /// lane of `preferred` (the processor that last ran the task), else to a
    /// processor chosen round-robin.
    pub(crate) fn push_remote(
        &self,
        preferred: Option<usize>,
        item: T,
        priority: Priority,
    ) -> Result<bool, T> {
        let p = match preferred {
            Some(p) if self.is_active(p) => p,
            _ => self.active_slot(self.outside.fetch_add(1, Ordering::Relaxed) % self.processors()),
        };
        // The class's first lane (the next ones if it is busy): pushes from
        // outside keep their order among themselves.
        let ts = self.outside_stamp(p);
        self.push_to(p, self.class_lanes(priority), 0, item, ts)
    }

    /// The timestamp of a push onto processor `p`'s lanes from another
    /// thread: one below `p`'s iteration clock, so that every lane of `p`
    /// is stamped from one clock (queue.md, "Time"). The owner's pushes in
    /// its current iteration carry the clock itself, its earlier ones at
    /// most the clock less two (the clock goes up by two or more an
    /// iteration), so a task pushed from outside sits between the owner's
    /// iterations: behind what the owner pushed before, ahead of what it
    /// pushes after — a task it re-queues (a yield) goes behind it. A stale
    /// read of the clock only makes the task look older. Relaxed: a
    /// heuristic's input, like every stamp.
    #[inline]
    pub(crate) fn outside_stamp(&self, p: usize) -> u64 {
        self.local[p].now.load(Ordering::Relaxed).saturating_sub(1)
    }

    /// Pushes onto one of processor `p`'s lanes at `offsets`, starting with
    /// the `start`-th (`start` below their number).
    #[inline(always)]
    fn push_to(
        &self,
        p: usize,
        offsets: core::ops::Range<usize>,
        start: usize,
        item: T,
        ts: u64,
    ) -> Result<bool, T> {
        let l = p * self.stride + offsets.start + start;
        match self.lanes[l].push(&self.info[l], item, ts, false, || self.is_open()) {
            PushOutcome::Pushed { filled } => Ok(filled),
            PushOutcome::Closed(back) => Err(back),
            PushOutcome::Busy(back) => self.push_to_after_busy(p, offsets, start, back, ts),
        }
    }

    /// [`push_to`](Self::push_to) after the `start`-th lane was busy: the
    /// next lanes in turn, try-locking; the last round waits for the lock of
    /// the lane whose turn it was.
    #[inline(never)]
    fn push_to_after_busy(
        &self,
        p: usize,
        offsets: core::ops::Range<usize>,
        start: usize,
        mut item: T,
        ts: u64,
    ) -> Result<bool, T> {
        let count = offsets.len();
        let base = p * self.stride + offsets.start;
        let mut offset = start;
        for i in 1..=count {
            offset = if offset + 1 == count { 0 } else { offset + 1 };
            let l = base + offset;
            match self.lanes[l].push(&self.info[l], item, ts, i == count, || self.is_open()) {
                PushOutcome::Pushed { filled } => return Ok(filled),
                PushOutcome::Busy(back) => item = back,
                PushOutcome::Closed(back) => return Err(back),
            }
        }
        unreachable!("the last round of push_to waits for its lane")
    }

    /// Whether the queue is still open, for a push holding a lane's lock
    /// (which orders it with `close`).
    #[inline(always)]
    fn is_open(&self) -> bool {
        !self.shared.closed.load(Ordering::Relaxed)
    }

    /// Called by processor `p` with each clock reading it takes: publishes
    /// one in `BEAT_PERIOD` as its heartbeat, and keeps `p`'s estimate of
    /// its own interval between heartbeats. The estimate follows a shorter
    /// interval at once and a longer one by at most doubling per heartbeat,
    /// so one interval that spans a sleep or a long poll barely moves it.
    #[inline]
    pub(crate) fn beat(&self, p: usize, now: u64) {
        let local = &self.local[p];
        if local.beat_countdown.tick(BEAT_PERIOD) {
            let last = local.last_beat.load(Ordering::Relaxed);
            local.last_beat.store(now, Ordering::Relaxed);
            self.beats[p].store(now, Ordering::Relaxed);
            if last != 0 {
                let interval = now.saturating_sub(last);
                let estimate = local.beat_interval.load(Ordering::Relaxed);
                let estimate = if estimate == 0 {
                    interval
                } else {
                    interval.min(estimate.saturating_mul(2))
                };
                local.beat_interval.store(estimate, Ordering::Relaxed);
            }
        }
    }

    /// The fast path: a pending help target much older than our own lanes,
    /// else our own lanes, oldest head first. Every `help_period` pops a new help
    /// target is drawn for the next pop.
    ///
    /// The check reads the target's owner's heartbeat first, and the target
    /// lane itself (the line its owner writes on every pop) only if the
    /// heartbeat is late (the owner is stuck, preempted,
    /// asleep or in a long poll) or at one check in `REBALANCE_PERIOD` (the
    /// owner keeps scheduling, so only an uneven load can make its lanes
    /// much older than ours, and evening that out may be slower).
    #[inline]
    pub(crate) fn pop(&self, p: usize, now: u64) -> Option<(T, Source)> {
        let local = &self.local[p];

        let mut drawn = false;
        if self.help_period != 0 && self.processors() > 1 {
            let target = local.help_target.load(Ordering::Relaxed);
            if target != NO_TARGET {
                local.help_target.store(NO_TARGET, Ordering::Relaxed);
                if let Some(item) = self.help(p, target, now) {
                    return Some((item, Source::Help));
                }
            }
            if local.help_countdown.tick(self.help_period) {
                let target = self.random_help_target(p);
                local.help_target.store(target, Ordering::Relaxed);
                // The target is checked on the next pop: start fetching its
                // owner's heartbeat now, so the check does not wait for it.
                prefetch(&*self.beats[target / self.stride]);
                drawn = true;
            }
        }

        let item = self.pop_own(p, now)?;
        if drawn {
            local.note_address(item.address());
        }
        Some((item, Source::Own))
    }

    /// Own lanes. Classes: high before normal before low, except that a
    /// class whose head has waited `priority_bound` pops of other classes is
    /// served first (the bound of `Config::priority_bound`). Without high
    /// or low tasks this is just the normal lanes, at the cost of two loads.
    #[inline]
    fn pop_own(&self, p: usize, now: u64) -> Option<T> {
        let local = &self.local[p];
        let base = p * self.stride;
        let high = base + self.lanes_per_processor;
        let low = high + 1;
        let restricted = low + 1;
        let high_ready = self.info[high].looks_nonempty();
        let low_ready = self.info[low].looks_nonempty();
        let restricted_ready = self.info[restricted].looks_nonempty();
        if !high_ready && !low_ready {
            Self::reset(&local.low_waited);
            if let Some(item) = self.pop_normal(p, now, restricted_ready) {
                Self::reset(&local.normal_waited);
                return Some(item);
            }
            return None;
        }
        let normal_ready = restricted_ready || (base..high).any(|l| self.info[l].looks_nonempty());
        let bound = self.priority_bound;
        let order = if low_ready && local.low_waited.load(Ordering::Relaxed) >= bound {
            [Priority::Low, Priority::High, Priority::Normal]
        } else if normal_ready && local.normal_waited.load(Ordering::Relaxed) >= bound {
            [Priority::Normal, Priority::High, Priority::Low]
        } else {
            [Priority::High, Priority::Normal, Priority::Low]
        };
        for class in order {
            let item = match class {
                Priority::High => self.lanes[high].pop(&self.info[high], now, false),
                Priority::Normal => self.pop_normal(p, now, restricted_ready),
                Priority::Low => self.lanes[low].pop(&self.info[low], now, false),
            };
            if let Some(item) = item {
                // Count this pop against each class left waiting; a class
                // served (or empty) starts over.
                let count = |waited: &AtomicUsize, ready: bool, waiting_class: Priority| {
                    if !ready || class == waiting_class {
                        Self::reset(waited);
                    } else {
                        waited.store(waited.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
                    }
                };
                count(&local.normal_waited, normal_ready, Priority::Normal);
                count(&local.low_waited, low_ready, Priority::Low);
                return Some(item);
            }
        }
        None
    }

    /// Zeroes an owner-only counter, writing only if it is not zero already.
    #[inline]
    fn reset(counter: &AtomicUsize) {
        if counter.load(Ordering::Relaxed) != 0 {
            counter.store(0, Ordering::Relaxed);
        }
    }

    /// The normal lanes, oldest head first: pushes alternate between lanes,
    /// and serving the older head keeps the processor's lanes together a
    /// FIFO, so a task that yields in a loop waits behind every task that was
    /// ready before it, whichever lane it landed in. (Plain round-robin
    /// service would let a short lane's tasks run more often.) With
    /// `restricted`, the restricted lane takes part too: restricted tasks are
    /// served as normal-priority ones.
    #[inline(always)]
    fn pop_normal(&self, p: usize, now: u64, restricted: bool) -> Option<T> {
        let base = p * self.stride;
        let info = &self.info[base..base + self.stride];
        let best = self.oldest_normal(info, restricted, usize::MAX)?;
        if let Some(item) = self.lanes[base + best].pop(&info[best], now, false) {
            return Some(item);
        }
        self.pop_normal_after_miss(p, now, restricted, best)
    }

    /// [`pop_normal`](Self::pop_normal) after its first choice, `missed`,
    /// was busy (a helper holds it) or just emptied: the next oldest, and
    /// so on.
    #[inline(never)]
    fn pop_normal_after_miss(
        &self,
        p: usize,
        now: u64,
        restricted: bool,
        missed: usize,
    ) -> Option<T> {
        let base = p * self.stride;
        let info = &self.info[base..base + self.stride];
        let mut skip = missed;
        for _ in 1..self.lanes_per_processor + usize::from(restricted) {
            let best = self.oldest_normal(info, restricted, skip)?;
            if let Some(item) = self.lanes[base + best].pop(&info[best], now, false) {
                return Some(item);
            }
            skip = best;
        }
        None
    }

    /// Among a processor's normal lanes (and its restricted lane with
    /// `restricted`), whose `LaneInfo`s are `info`, the offset of the one
    /// with the oldest head but `skip`, if any looks non-empty.
    #[inline(always)]
    fn oldest_normal(
        &self,
        info: &[CachePadded<LaneInfo>],
        restricted: bool,
        skip: usize,
    ) -> Option<usize> {
        let mut best = usize::MAX;
        let mut best_head = crate::lane::EMPTY;
        let mut consider = |l: usize, head: u64| {
            if head < best_head && l != skip {
                best = l;
                best_head = head;
            }
        };
        match &info[..self.lanes_per_processor] {
            // The default: two normal lanes, compared without a loop.
            [first, second] => {
                consider(0, first.head());
                consider(1, second.head());
            }
            normal => {
                for (l, lane) in normal.iter().enumerate() {
                    consider(l, lane.head());
                }
            }
        }
        if restricted {
            let l = self.restricted_offset();
            consider(l, info[l].head());
        }
        (best_head != crate::lane::EMPTY).then_some(best)
    }

    /// The help check of `p`'s pending target (see `pop`): the age rule,
    /// applied at a rebalance check, or at any other check if the target's
    /// owner is late: its heartbeat is older than `LATE_INTERVALS` of our
    /// own intervals between heartbeats and than our own age, so it missed
    /// a heartbeat that a processor scheduling at our pace would have
    /// published. The intervals are tested first: an owner on time by them
    /// needs no own age computed. A rebalance measures against at least a
    /// quarter of our interval (`queue.md`, "Pop") and takes the task nearest
    /// our own work; a rescue takes the lane's head (`queue.md`, "Which
    /// task a rebalance takes"). A late owner's wake slot is helped by the
    /// same rule, after the lane.
    #[inline]
    fn help(&self, p: usize, target: usize, now: u64) -> Option<T> {
        let local = &self.local[p];
        let rebalance = local.rebalance_countdown.tick(REBALANCE_PERIOD);
        let owner = target / self.stride;
        let beat = self.beats[owner].load(Ordering::Relaxed);
        let lag = now.saturating_sub(beat);
        let interval = local.beat_interval.load(Ordering::Relaxed);
        let on_time = lag <= interval.saturating_mul(LATE_INTERVALS);
        if !rebalance && on_time {
            return None;
        }
        let own = self.own_age(p, now);
        let late = !on_time && lag > own;
        // A head that waited less than a quarter of our interval (a few of
        // our iterations) is not behind, even when our own lanes are empty
        // (age 0) while we run a chain of woken tasks; a late owner's is
        // measured against our real age.
        let bar = if late {
            own
        } else {
            own.max(interval >> (self.help_factor_log2 + REBALANCE_FLOOR_LOG2))
        };
        if (rebalance || late) && self.much_older(target, bar, now) {
            let (lane, info) = (&self.lanes[target], &self.info[target]);
            // A rescue takes the oldest task; a rebalance, which only evens
            // the load out, the one nearest our own work.
            let centroid = local.centroid.load(Ordering::Relaxed);
            let item = if late || centroid == 0 {
                lane.pop(info, now, false)
            } else {
                lane.pop_nearest(info, now, centroid)
            };
            if let Some(item) = item {
                // For the move counters only (`Scheduler::note_moved`).
                local.helped_by_rebalance.store(!late, Ordering::Relaxed);
                return Some(item);
            }
        }
        if late {
            local.helped_by_rebalance.store(false, Ordering::Relaxed);
            return self.help_woken(owner, own, now);
        }
        None
    }

    /// Whether processor `q` keeps up with its own lanes: its oldest one
    /// waited at most `bound`, and its heartbeat is at most `8 × bound` old
    /// (a processor stuck in a poll publishes none; one that keeps
    /// scheduling publishes one every few dozen iterations).
    pub(crate) fn keeps_up(&self, q: usize, now: u64, bound: u64) -> bool {
        let beat = self.beats[q].load(Ordering::Relaxed);
        now.saturating_sub(beat) <= bound.saturating_mul(8) && self.own_age(q, now) <= bound
    }

    /// The age of `p`'s oldest lane.
    #[inline]
    pub(crate) fn own_age(&self, p: usize, now: u64) -> u64 {
        (p * self.stride..(p + 1) * self.stride)
            .map(|l| self.info[l].age(now))
            .max()
            .unwrap_or(0)
    }

    /// The age rule: `age(target) > own × 2^factor`, where `own` is the age
    /// of our oldest lane.
    #[inline]
    fn much_older(&self, target: usize, own: u64, now: u64) -> bool {
        let theirs = self.info[target].age(now);
        // `theirs / 2^factor > own`, which cannot overflow; an empty lane's
        // age is 0.
        theirs != 0 && theirs >> self.help_factor_log2 > own
    }

    /// A random lane of another processor, one sharing our last-level cache
    /// 15 times in 16 when there is one (the rest keeps every lane of the
    /// cluster within reach of help).
    fn random_help_target(&self, p: usize) -> usize {
        let near = &self.near[p];
        let r = self.local[p].random();
        if near.is_empty() || r & 15 == 0 || near.len() + 1 == self.capacity() {
            return self.random_foreign_lane(p);
        }
        let (i, offset) = near_draw(r, near.len(), self.lanes_per_processor);
        let other = near[i];
        if !self.is_active(other) {
            return self.random_foreign_lane(p);
        }
        other * self.stride + offset
    }

    /// A random shared lane of another active processor (see
    /// `random_lane_offset`). Needs at least two active processors.
    fn random_foreign_lane(&self, p: usize) -> usize {
        let n = self.processors();
        let r = self.local[p].random();
        let i = below(r, n);
        let mut other = self.active_slot(i);
        if other == p {
            // Uniform among the others: skip ahead by 1..n-1.
            let j = i + 1 + below(r >> 32, n - 1);
            other = self.active_slot(if j >= n { j - n } else { j });
        }
        other * self.stride + self.random_lane_offset((r >> 16) as u32)
    }

    /// A lane offset within a processor (see [`lane_offset`]).
    #[inline]
    fn random_lane_offset(&self, r: u32) -> usize {
        lane_offset(r, self.lanes_per_processor)
    }

    /// The slow path: a few random single-lane try-pops on other processors,
    /// then one pass over every lane from a random offset.
    pub(crate) fn steal(&self, p: usize, now: u64) -> Option<(T, Source)> {
        if self.processors() > 1 {
            for _ in 0..self.steal_attempts {
                let l = self.random_foreign_lane(p);
                if self.info[l].looks_nonempty() {
                    if let Some(item) = self.lanes[l].pop(&self.info[l], now, false) {
                        return Some((item, Source::Steal));
                    }
                }
            }
        }
        let start = self.local[p].random() as usize;
        self.scan(p, start, now, false)
    }

    /// One pass over the lanes processor `p` may take from — every active
    /// processor's shared lanes and its own restricted lane — starting with
    /// the `start`-th active processor, popping the first that looks
    /// non-empty. With `wait`, busy lanes are waited for.
    fn scan(&self, p: usize, start: usize, now: u64, wait: bool) -> Option<(T, Source)> {
        let n = self.processors();
        for i in 0..n {
            let q = self.active_slot((start + i) % n);
            let lanes = if q == p {
                self.stride
            } else {
                self.restricted_offset()
            };
            for offset in 0..lanes {
                let l = q * self.stride + offset;
                if self.info[l].looks_nonempty() {
                    if let Some(item) = self.lanes[l].pop(&self.info[l], now, wait) {
                        let source = if q == p { Source::Own } else { Source::Steal };
                        return Some((item, source));
                    }
                }
            }
        }
        None
    }

    /// The idle protocol's final scan: every lane `p` may take from whose
    /// head says non-empty is locked (waiting, not trying) and popped.
    /// Called after `fence(SeqCst)`, which makes the head reads reliable
    /// (see `idle.md`).
    pub(crate) fn final_scan(&self, p: usize, now: u64) -> Option<(T, Source)> {
        // Own slot first: its position in the active list.
        let start = (0..self.processors())
            .position(|i| self.active_slot(i) == p)
            .unwrap_or(0);
        self.scan(p, start, now, true)
            .or_else(|| self.scan_woken(p).map(|item| (item, Source::Steal)))
    }

    /// Whether any of processor `p`'s own lanes looks non-empty.
    #[inline]
    pub(crate) fn own_looks_nonempty(&self, p: usize) -> bool {
        let base = p * self.stride;
        (base..base + self.stride).any(|l| self.info[l].looks_nonempty())
    }

    /// Whether any of processor `p`'s shared lanes (those others may take
    /// from: not its restricted lane) looks non-empty.
    pub(crate) fn own_shared_looks_nonempty(&self, p: usize) -> bool {
        let base = p * self.stride;
        (base..base + self.restricted_offset()).any(|l| self.info[l].looks_nonempty())
    }

    /// Whether any shared lane or wake slot of an active processor looks
    /// non-empty, `p`'s own lanes aside.
    pub(crate) fn visible_beside_own_lanes(&self, p: usize) -> bool {
        (0..self.processors()).any(|i| {
            let q = self.active_slot(i);
            (q != p && self.own_shared_looks_nonempty(q)) || self.woken[q].looks_full()
        })
    }

    /// Closes the queue: later pushes hand their item back.
    pub(crate) fn close(&self) {
        self.shared.closed.store(true, Ordering::SeqCst);
    }

    #[inline]
    pub(crate) fn is_closed(&self) -> bool {
        self.shared.closed.load(Ordering::Acquire)
    }

    /// Empties every lane and wake slot. After [`close`](Self::close),
    /// nothing is pushed onto a lane later: a push that takes a lane's lock
    /// after we did sees `closed` (the lock orders it after our store) and
    /// hands its item back instead. A wake slot is filled only by its
    /// processor's thread; what it holds when that thread has returned from
    /// `Scheduler::next` (which `Executor::cancel_all` waits for) is found
    /// here.
    pub(crate) fn drain(&self) -> Vec<T> {
        let mut out = Vec::new();
        for (lane, info) in self.lanes.iter().zip(self.info.iter()) {
            out.extend(lane.take_all(info).into_iter().map(|(item, _)| item));
        }
        out.extend(self.woken.iter().filter_map(|slot| slot.take()));
        out
    }

    /// Puts `item` into processor `p`'s wake slot if it is empty and the
    /// queue open; else hands it back. Only `p`'s own thread calls this,
    /// with its own clock reading.
    #[inline]
    pub(crate) fn put_woken(&self, p: usize, item: T, now: u64) -> Result<(), T> {
        if self.shared.closed.load(Ordering::Relaxed) {
            return Err(item);
        }
        self.woken[p].put(item, now)
    }

    /// Empties processor `p`'s wake slot: by `p`'s own thread at each
    /// scheduling iteration, or by another processor's final scan.
    #[inline]
    pub(crate) fn take_woken(&self, p: usize) -> Option<T> {
        self.woken[p].take()
    }

    /// Puts `item` back into `p`'s empty wake slot whatever the queue's
    /// state: for an item taken from it that the lanes refused because the
    /// queue closed, so that `drain` still finds it.
    pub(crate) fn restore_woken(&self, p: usize, item: T) {
        let now = self.local[p].now.load(Ordering::Relaxed);
        self.woken[p].restore(item, now);
    }

    /// The task in another processor `q`'s wake slot, if it has waited so
    /// much longer than our own oldest lane (age `own`) that the age rule
    /// would help it from a lane: for a help check that found `q` late.
    fn help_woken(&self, q: usize, own: u64, now: u64) -> Option<T> {
        let factor = self.help_factor_log2;
        self.woken[q].take_if(|ts| now.saturating_sub(ts) >> factor > own)
    }

    /// The task in any other active processor's wake slot: the last part of
    /// the final scan, read after its fence as the lanes' heads are.
    fn scan_woken(&self, p: usize) -> Option<T> {
        (0..self.processors())
            .map(|i| self.active_slot(i))
            .filter(|&q| q != p)
            .find_map(|q| self.take_woken(q))
    }

    /// Whether `p`'s high and low lanes look empty: a wake-slot run then
    /// keeps no other class waiting (`Config::priority_bound`).
    #[inline]
    pub(crate) fn only_normal_ready(&self, p: usize) -> bool {
        let high = p * self.stride + self.lanes_per_processor;
        !self.info[high].looks_nonempty() && !self.info[high + 1].looks_nonempty()
    }
}

/// Hints the CPU to bring `value`'s cache line in; a no-op where there is no
/// such instruction.
#[inline(always)]
fn prefetch<T>(value: &T) {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse"))]
    // SAFETY: a prefetch has no architectural effect (it cannot fault, even on
    // an invalid address); `value` is a valid reference anyway.
    unsafe {
        core::arch::x86_64::_mm_prefetch(
            value as *const T as *const i8,
            core::arch::x86_64::_MM_HINT_T0,
        );
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse")))]
    let _ = value;
}

#[cfg(all(test, not(loom)))]
mod tests;
