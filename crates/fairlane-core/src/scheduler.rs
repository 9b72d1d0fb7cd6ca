//! The processor loop's search for work: the fast path, the slow path, a
//! short bounded spin, and idle sleep, in that order.
//!
//! [`Scheduler`] is generic over the queued item so that the loom models run
//! this very code with plain integers; [`Executor`](crate::Executor) puts tasks
//! in it.

use alloc::vec::Vec;

use crate::idle::Idle;
use crate::lane::Locality;
use crate::local::{stat, TAKEN_BY_HELP, TAKEN_BY_REBALANCE, TAKEN_BY_STEAL};
use crate::queue::{bump, ReadyQueue, Source, RELEASED, REMOVED};
use crate::sync::{fence, Ordering};
use crate::wake_slot::IntoRaw;
use crate::{Config, ConfigError, Host, Priority, ProcessorCounters, ProcessorId};

/// Runs in a row from the wake slot before the lanes are served again
/// (queue.md, "The wake slot").
pub(crate) const WOKEN_RUNS: u32 = 3;

/// What one scheduling iteration of [`Scheduler::next`] came to.
enum Round<T> {
    /// An item to run.
    Found(T),
    /// Nothing found; the iteration's clock reading.
    Empty(u64),
    /// The processor must return from `next` (closed, stopped or removed).
    Stop,
}

/// A ready queue, its processors' idle-sleep state, and the host they run on.
pub struct Scheduler<T, H> {
    queue: ReadyQueue<T>,
    idle: Idle,
    host: H,
    spin_rounds: u32,
    clock_period: u32,
    grow_after: u64,
}

impl<T: Locality + IntoRaw, H: Host> Scheduler<T, H> {
    /// Builds the queue and idle state for `config.processors` processors.
    pub fn new(config: Config, host: H) -> Result<Self, ConfigError> {
        config.validate()?;
        Ok(Self {
            queue: ReadyQueue::new(&config, |p| host.cache_domain(p)),
            idle: Idle::new(config.max_processors.max(config.processors)),
            host,
            spin_rounds: config.spin_rounds,
            clock_period: config.clock_period,
            grow_after: config.grow_after,
        })
    }

    /// The host this scheduler runs on.
    pub fn host(&self) -> &H {
        &self.host
    }

    /// Number of processors now.
    pub fn processors(&self) -> usize {
        self.queue.processors()
    }

    /// Number of processor slots (`Config::max_processors`).
    pub fn capacity(&self) -> usize {
        self.queue.capacity()
    }

    /// The identities of the processors now.
    pub fn processor_ids(&self) -> Vec<ProcessorId> {
        let _guard = self.read_side();
        self.queue.ids()
    }

    /// Whether `id` names a processor of this scheduler now.
    pub fn is_live(&self, id: ProcessorId) -> bool {
        let _guard = self.read_side();
        self.queue.is_live(id)
    }

    /// Whether `id` is one of this scheduler's processor identities (now or
    /// removed), not another scheduler's.
    pub(crate) fn owns(&self, id: ProcessorId) -> bool {
        self.queue.owns(id)
    }

    /// The resize lock's read side for the calling thread: nothing on a
    /// processor of this scheduler (it holds its flag while it runs),
    /// the remote counter elsewhere.
    fn read_side(&self) -> Option<crate::resize::RemoteGuard<'_>> {
        match self.current_processor() {
            Some(_) => None,
            None => Some(self.queue.resize_lock().read_remote()),
        }
    }

    /// The processor the calling thread runs, unless it has been removed:
    /// the thread of a removed processor finishes the poll it is in without
    /// holding a read side (see `resize.md`), so it acts as an outside
    /// thread.
    #[inline]
    fn current_processor(&self) -> Option<usize> {
        self.host
            .current_processor()
            .filter(|&p| !self.is_removed(p))
    }

    /// Whether slot `p`'s processor has been removed. Relaxed: the thread of
    /// `p` synchronised with the removal before it could run again (it
    /// re-entered the read side, or made the removal itself).
    #[inline]
    fn is_removed(&self, p: usize) -> bool {
        self.queue.local[p].stop.load(Ordering::Relaxed) & REMOVED != 0
    }

    /// Makes `item` ready. On a processor of this scheduler it goes to that
    /// processor's own lanes; from any other thread to a lane of `preferred`,
    /// else of a processor chosen round-robin. Then at most one sleeping
    /// processor is woken. Hands the item back if the scheduler is closed.
    /// (The loom models' push; tasks are pushed by `task::schedule`.)
    #[cfg(any(loom, test))]
    #[inline]
    pub fn push(&self, item: T, preferred: Option<usize>) -> Result<(), T> {
        match self.host.current_processor() {
            Some(p) => self.push_local(p, item, Priority::Normal),
            None => self.push_remote(item, preferred, Priority::Normal),
        }
    }

    /// A wake made on processor `p`'s thread, by the task being polled
    /// there, of another task: into `p`'s wake slot if it takes the item,
    /// else onto `p`'s lanes. (The loom models' wake inside a poll; tasks
    /// are woken by `task::schedule`, which knows which task is polled.)
    #[cfg(loom)]
    pub fn wake_in_poll(&self, p: usize, item: T) -> Result<(), T> {
        // Any pointer but null and the woken task's own (null here) marks
        // a poll in progress.
        let polled = core::ptr::NonNull::<u8>::dangling().as_ptr().cast();
        self.set_current(p, polled);
        let result = self
            .put_woken(p, item, Priority::Normal, core::ptr::null_mut())
            .or_else(|item| self.push_local(p, item, Priority::Normal));
        self.set_current(p, core::ptr::null_mut());
        result
    }

    /// [`push`](Self::push) from processor `p`'s own thread, into the lanes
    /// of `priority`.
    ///
    /// If `p` has been removed (the calling thread is finishing the poll it
    /// was in when it was), the item goes to the remaining processors as from
    /// an outside thread.
    #[inline]
    pub fn push_local(&self, p: usize, item: T, priority: Priority) -> Result<(), T> {
        if self.is_removed(p) {
            return self.push_remote(item, None, priority);
        }
        let item = if self.idle.in_own_park(p) && self.queue.processors() > 1 {
            // Made ready by this processor's own events while it sleeps.
            match self.hand_to_keeper(p, item, priority) {
                Ok(()) => return Ok(()),
                Err(item) => item,
            }
        } else {
            item
        };
        let filled = self.queue.push_local(p, item, priority)?;
        let local = &self.queue.local[p];
        if filled && local.in_events.load(Ordering::Relaxed) {
            // Between polls: this processor pops next, and announces what
            // it leaves behind then (idle.md, "Pushes between polls").
            local.unannounced.store(true, Ordering::Relaxed);
        } else if filled && self.queue.processors() == 1 {
            // The only processor pushes onto its own lanes: there is nobody
            // to wake but itself (idle.md, "A lone processor").
            self.idle.wake_self(p);
        } else if filled && !self.idle.wake_self(p) {
            // Not from inside this processor's own `park` (there, it ends
            // its own sleep and hands over on finding more work: idle.md,
            // "Pushes from inside `park`").
            self.notify_after_push(true);
        }
        Ok(())
    }

    /// Inside sleeping processor `p`'s `Host::park`, for an item its own
    /// events made ready: hands it to another processor that is awake,
    /// keeps up with its lanes and is watched by the host (`keep_watch`),
    /// so that the work of a lightly loaded cluster gathers on the
    /// processors that are awake and the others sleep on (`idle.md`, "Kept
    /// tasks"). Its task's next I/O is then submitted there too. That
    /// processor is woken as a restricted push wakes its target (a swap of
    /// its `sem`: if it is on its way to sleep, its commit fails). Hands
    /// the item back when no processor qualifies or the queue is closed.
    #[inline(never)]
    fn hand_to_keeper(&self, p: usize, item: T, priority: Priority) -> Result<(), T> {
        let now = self.host.now();
        // In the active list's order, the same for every sleeper: the work
        // gathers on the first processors that qualify.
        for i in 0..self.queue.processors() {
            let q = self.queue.active_slot(i);
            if q == p
                || self.idle.is_asleep(q)
                || !self.queue.keeps_up(q, now, self.grow_after)
                || !self.host.keep_watch(q)
            {
                continue;
            }
            self.queue.push_remote(Some(q), item, priority)?;
            stat::bump(&self.queue.local[p].counters.handoffs);
            self.queue.local[q].kept.store(true, Ordering::Relaxed);
            self.idle.wake(q, &self.host);
            return Ok(());
        }
        Err(item)
    }

    /// Tasks on processor `p`'s own lanes that no sleeper was told about
    /// (leftovers of its events, or found there after a sleep): kept
    /// unannounced if the host watches `p` (`Host::keep_watch`; `p` then
    /// announces them once they wait past `Config::grow_after`, in
    /// `check_kept`), else announced now (`idle.md`, "Kept tasks").
    fn announce_own(&self, p: usize) {
        let local = &self.queue.local[p];
        if local.kept.load(Ordering::Relaxed) || self.host.keep_watch(p) {
            local.kept.store(true, Ordering::Relaxed);
        } else {
            self.notify_after_push(true);
        }
    }

    /// While processor `p` keeps tasks unannounced: once its lanes are
    /// empty it stops; once their oldest task waited past
    /// `Config::grow_after`, it announces them (a filling push's handshake),
    /// so that a sleeping processor joins in. Either way the host's watch
    /// for them ends (`Host::end_watch`).
    #[inline(never)]
    fn check_kept(&self, p: usize, now: u64) {
        let local = &self.queue.local[p];
        if !self.queue.own_looks_nonempty(p) {
            local.kept.store(false, Ordering::Relaxed);
            self.host.end_watch(p);
        } else if self.queue.own_age(p, now) > self.grow_after {
            local.kept.store(false, Ordering::Relaxed);
            self.notify_after_push(true);
            self.host.end_watch(p);
        }
    }

    /// For a task woken on `p`'s thread, `me` being its pointer as given
    /// to `set_current`: puts a normal-priority task woken by another task
    /// being polled on `p` into `p`'s empty wake slot, to run next without
    /// passing through the lanes (queue.md, "The wake slot"). A wake outside
    /// any poll, or of the task being polled itself (`yield_now`'s), does
    /// not qualify. With other processors, the slot filled is announced as a
    /// filling push is, since they take from the slot of a processor stuck in
    /// its poll. Hands the item back when it does not put it, for
    /// [`push_local`](Self::push_local).
    #[inline]
    pub(crate) fn put_woken(
        &self,
        p: usize,
        item: T,
        priority: Priority,
        me: *mut (),
    ) -> Result<(), T> {
        let local = &self.queue.local[p];
        if priority != Priority::Normal || self.is_removed(p) {
            return Err(item);
        }
        let polled = local.current.load(Ordering::Relaxed);
        if polled.is_null() || polled == me {
            return Err(item);
        }
        self.queue
            .put_woken(p, item, local.now.load(Ordering::Relaxed))?;
        if self.queue.processors() > 1 {
            self.announce_woken();
        }
        Ok(())
    }

    /// The idle handshake's waker side for a filled wake slot (idle.md): a
    /// sleeper's final scan looks into every other processor's slot. Out of
    /// line, so that the schedule function stays small where it is not
    /// needed (a lone processor).
    #[inline(never)]
    fn announce_woken(&self) {
        self.notify_after_push(true);
    }

    /// Pushes a task taken from `p`'s wake slot onto the lanes (the
    /// remaining processors' if `p` was removed), or back into the slot if
    /// the queue closed (for `drain`). Called by `p`'s thread in `next`,
    /// which holds `p`'s read side of the resize lock even once `p` is
    /// removed (it gives it back when `next` has returned): the processor
    /// set cannot change under the push, and the outside threads' read side
    /// that `push_remote` takes would wait for a writer that waits for this
    /// very flag (resize.md, "Removing a processor").
    fn lane_woken(&self, p: usize, item: T) {
        let pushed = if self.is_removed(p) {
            self.queue
                .push_remote(None, item, Priority::Normal)
                .map(|filled| self.notify_after_push(filled))
        } else {
            self.push_local(p, item, Priority::Normal)
        };
        if let Err(item) = pushed {
            self.queue.restore_woken(p, item);
        }
    }

    /// [`push`](Self::push) from a thread that is not a processor, into the
    /// lanes of `priority`.
    pub fn push_remote(
        &self,
        item: T,
        preferred: Option<usize>,
        priority: Priority,
    ) -> Result<(), T> {
        let _guard = self.queue.resize_lock().read_remote();
        let filled = self.queue.push_remote(preferred, item, priority)?;
        self.notify_after_push(filled);
        Ok(())
    }

    /// Makes ready an item that only the processors `allowed` may take: it
    /// goes to the restricted lane of the calling processor if that is
    /// allowed, else of `preferred` if allowed, else of the first allowed
    /// processor that exists; that processor is woken if it sleeps.
    /// Returns [`PushError::NoneAllowed`] when no processor in `allowed`
    /// exists any more.
    pub fn push_restricted(
        &self,
        item: T,
        allowed: &[ProcessorId],
        preferred: Option<usize>,
    ) -> Result<(), PushError<T>> {
        let here = self.current_processor();
        let _guard = match here {
            Some(_) => None,
            None => Some(self.queue.resize_lock().read_remote()),
        };
        let allows = |p: usize| {
            allowed
                .iter()
                .any(|&id| id.index() == p && self.queue.is_live(id))
        };
        let (target, ts) = match here {
            Some(p) if allows(p) => {
                let ts = self.queue.local[p].now.load(Ordering::Relaxed);
                self.queue
                    .push_restricted(p, item, ts)
                    .map_err(PushError::Closed)?;
                // Our own lane. While running tasks we will find it; but a
                // push from inside `Host::park` (an I/O completion or a timer
                // this processor reaps while it sleeps) comes from the
                // sleeper itself, and only it can take the item: the sleep
                // must end. Only this thread moves its `sem` to ASLEEP, so
                // its own relaxed read is exact; the swap to WAKE is what
                // `Idle::sleep` waits for.
                self.idle.wake_self(p);
                return Ok(());
            }
            _ => {
                let target = preferred.filter(|&p| allows(p)).or_else(|| {
                    allowed
                        .iter()
                        .find(|&&id| self.queue.is_live(id))
                        .map(|id| id.index())
                });
                match target {
                    Some(target) => (target, self.queue.outside_stamp(target)),
                    None => return Err(PushError::NoneAllowed(item)),
                }
            }
        };
        self.queue
            .push_restricted(target, item, ts)
            .map_err(PushError::Closed)?;
        // Only `target` can take the item, so it is the one to wake, not the
        // idle list's top. The same handshake as `notify_after_push`: the
        // push is complete before the fence, and `target`'s `sem` is read
        // after it; its final scan covers its restricted lane.
        fence(Ordering::SeqCst);
        self.idle.wake(target, &self.host);
        Ok(())
    }

    /// The deferred half of the pushes `p` made in `Host::poll_events`,
    /// after its pop: if its own lanes still hold work (more was made
    /// ready than it took), the waker's handshake, as a filling push does
    /// it. Its fence orders those pushes, made before, ahead of the read of
    /// `top` (idle.md, "Pushes between polls").
    #[inline]
    fn announce_leftovers(&self, p: usize) {
        if self.queue.processors() > 1 && self.queue.own_looks_nonempty(p) {
            self.announce_own(p);
        }
    }

    /// Waker side of the idle handshake (idle.md): the push is complete (its
    /// lane lock released) before this fence; the published sleeper is read
    /// after it. Only a push that made its lane non-empty (`filled`) takes
    /// part: a push onto a lane that already held work adds nothing a
    /// sleeper's final scan could miss, since the push that filled the lane
    /// did the handshake (idle.md, "Only filling pushes wake").
    #[inline]
    fn notify_after_push(&self, filled: bool) {
        if filled {
            fence(Ordering::SeqCst);
            self.idle.notify_one(&self.host);
        }
    }

    /// The next item for processor `p`, sleeping while there is none.
    /// Returns `None` once the scheduler is closed.
    ///
    /// The calling thread must be between [`start`](Self::start) and
    /// [`finish`](Self::finish) for `p`.
    #[inline]
    pub fn next(&self, p: usize) -> Option<T> {
        // The first round may reuse the clock read of an earlier iteration
        // (see `Config::clock_period`). Rounds that find nothing, with their
        // spinning and sleeping, are out of line: a processor that keeps
        // finding work runs only this one round per call.
        match self.round(p, true, false) {
            Round::Found(item) => Some(item),
            Round::Stop => None,
            Round::Empty(now) => self.next_after_empty(p, now),
        }
    }

    /// [`next`](Self::next) after a round that found nothing at `now`: spins
    /// for `spin_rounds` rounds, then goes to idle sleep, and repeats until a
    /// round finds an item or the processor must stop.
    #[inline(never)]
    fn next_after_empty(&self, p: usize, mut now: u64) -> Option<T> {
        let local = &self.queue.local[p];
        let mut spins = 0;
        // Set after leaving the idle list: the next item found obliges us to
        // wake another sleeper if still more work is visible (idle.md, the
        // hand-over rule).
        let mut handing_over = false;
        loop {
            if spins < self.spin_rounds {
                spins += 1;
                for _ in 0..64 {
                    crate::sync::spin_hint();
                }
            } else {
                // Idle sleep, sleeper side (idle.md, steps 1-4).
                self.idle.publish(p);
                fence(Ordering::SeqCst);
                let found = if self.queue.is_closed() {
                    None
                } else {
                    self.queue.final_scan(p, now)
                };
                if found.is_none()
                    && !self.queue.is_closed()
                    && local.stop.load(Ordering::Acquire) == 0
                    && !self.queue.resize_lock().writer_waiting()
                    && self.idle.commit(p)
                {
                    bump(&local.counters.parks);
                    self.idle.sleep(p, &self.host, &local.counters.host_parks);
                    bump(&local.counters.wakeups);
                }
                self.idle.reset(p);
                self.idle.retract(p);
                fence(Ordering::SeqCst);
                if let Some(found) = found {
                    return Some(self.found(p, found, true));
                }
                handing_over = true;
                spins = 0;
            }
            // A round after one that found nothing reads the clock afresh.
            match self.round(p, false, handing_over) {
                Round::Found(item) => return Some(item),
                Round::Stop => return None,
                Round::Empty(at) => now = at,
            }
        }
    }

    /// One scheduling iteration of processor `p`: the clock, a resize's
    /// turn, closing and stopping, the wake slot, the host's events, then
    /// the own lanes, help and steals.
    #[inline(always)]
    fn round(&self, p: usize, may_reuse_clock: bool, handing_over: bool) -> Round<T> {
        let local = &self.queue.local[p];
        bump(&local.counters.iterations);
        // The iteration clock goes up by at least two every iteration (a
        // reused reading plus two), so that a task this iteration pushes is
        // stamped younger than every task queued before it, those pushed
        // from outside included, which take the clock less one
        // (`ReadyQueue::outside_stamp`, queue.md, "Time"). Two ticks are far
        // below an iteration's length on any clock fine enough to schedule
        // by, so the clock does not run ahead of the host's.
        let last = local.now.load(Ordering::Relaxed);
        let now = if may_reuse_clock && !local.clock_countdown.tick(self.clock_period) {
            last + 2
        } else {
            let now = self.host.now().max(last + 2);
            self.queue.beat(p, now);
            now
        };
        local.now.store(now, Ordering::Relaxed);
        if self.queue.resize_lock().writer_waiting() {
            // Step aside for a resize (resize.md).
            self.queue.resize_lock().exit(&local.reading);
            self.queue
                .resize_lock()
                .enter(&local.reading, || self.host.relax());
        }
        if self.queue.is_closed() || local.stop.load(Ordering::Acquire) != 0 {
            // A woken task left in the slot goes to the lanes (to the
            // remaining processors' if `p` was removed); once closed, it
            // stays in the slot, for `drain`.
            if let Some(item) = self.queue.take_woken(p) {
                self.lane_woken(p, item);
            }
            return Round::Stop;
        }
        if let Some(item) = self.queue.take_woken(p) {
            // The wake slot (queue.md, "The wake slot"): at most
            // `WOKEN_RUNS` runs in a row, and only while no other class
            // waits; else the woken task joins the lanes' tail.
            let runs = local.woken_runs.load(Ordering::Relaxed);
            if runs < WOKEN_RUNS && self.queue.only_normal_ready(p) {
                local.woken_runs.store(runs + 1, Ordering::Relaxed);
                return Round::Found(item);
            }
            self.lane_woken(p, item);
        }
        if local.woken_runs.load(Ordering::Relaxed) != 0 {
            local.woken_runs.store(0, Ordering::Relaxed);
        }
        local.in_events.store(true, Ordering::Relaxed);
        self.host.poll_events(p);
        local.in_events.store(false, Ordering::Relaxed);
        let found = self.queue.pop(p, now).or_else(|| self.queue.steal(p, now));
        if local.unannounced.load(Ordering::Relaxed) {
            local.unannounced.store(false, Ordering::Relaxed);
            self.announce_leftovers(p);
        }
        if local.kept.load(Ordering::Relaxed) {
            self.check_kept(p, now);
        }
        match found {
            Some(found) => Round::Found(self.found(p, found, handing_over)),
            None => Round::Empty(now),
        }
    }

    /// An item found by a round: counts where it came from, and does the
    /// hand-over rule after a sleep. An item from the own lanes outside a
    /// hand-over needs neither.
    #[inline(always)]
    fn found(&self, p: usize, (item, source): (T, Source), handing_over: bool) -> T {
        if source != Source::Own || handing_over {
            self.found_aside(p, &item, source, handing_over);
        }
        item
    }

    /// The rest of [`found`](Self::found), out of line: the count of a
    /// help or a steal, and the hand-over rule.
    #[inline(never)]
    fn found_aside(&self, p: usize, item: &T, source: Source, handing_over: bool) {
        let local = &self.queue.local[p];
        let counters = &local.counters;
        let taken_by = match source {
            Source::Own => 0,
            Source::Help => {
                bump(&counters.helps);
                if local.helped_by_rebalance.load(Ordering::Relaxed) {
                    stat::bump(&counters.rebalances);
                    TAKEN_BY_REBALANCE
                } else {
                    TAKEN_BY_HELP
                }
            }
            Source::Steal => {
                bump(&counters.steals);
                TAKEN_BY_STEAL
            }
        };
        if taken_by != 0 {
            local.taken.store(item.address(), Ordering::Relaxed);
            local.taken_by.store(taken_by, Ordering::Relaxed);
        }
        if handing_over {
            if self.queue.visible_beside_own_lanes(p) {
                self.idle.notify_one(&self.host);
            } else if self.queue.processors() > 1 && self.queue.own_shared_looks_nonempty(p) {
                self.announce_own(p);
            }
        }
    }

    /// Counts a task about to be polled on processor `p` that another
    /// processor polled last (the caller knows: the task records where it
    /// was polled), by the way it came to `p`: taken by `p` from another
    /// processor's lane or wake slot (a help, a rebalance, a steal: the
    /// last such take, by `address`, is this task), else placed on `p`'s own
    /// lanes or wake slot by a push: a wake on `p` (by the task `p` was
    /// polling or by `p`'s events), a sleeping processor's hand-off, or an
    /// outside push (which goes to the processor that last polled the
    /// task, so moves it only if that one was removed). Out of line: a task
    /// that stays where it was polled costs nothing here.
    #[cold]
    #[inline(never)]
    pub(crate) fn note_moved(&self, p: usize, address: usize) {
        let local = &self.queue.local[p];
        let counters = &local.counters;
        let taken_by = if local.taken.load(Ordering::Relaxed) == address {
            local.taken.store(0, Ordering::Relaxed);
            local.taken_by.load(Ordering::Relaxed)
        } else {
            0
        };
        stat::bump(match taken_by {
            TAKEN_BY_HELP => &counters.moved_help,
            TAKEN_BY_REBALANCE => &counters.moved_rebalance,
            TAKEN_BY_STEAL => &counters.moved_steal,
            _ => &counters.moved_wake,
        });
    }

    /// Runs `poll`, the poll of a task on processor `p`: counts it, and
    /// records `current` (the task, a type-erased pointer) as the task
    /// being polled there while it runs (see `set_current`).
    #[inline]
    pub(crate) fn poll_on(&self, p: usize, current: *mut (), poll: impl FnOnce()) {
        let local = &self.queue.local[p];
        bump(&local.counters.polls);
        local.current.store(current, Ordering::Relaxed);
        poll();
        local
            .current
            .store(core::ptr::null_mut(), Ordering::Relaxed);
    }

    /// Records the task being polled on `p` (a type-erased pointer), or
    /// none.
    #[inline]
    pub(crate) fn set_current(&self, p: usize, current: *mut ()) {
        self.queue.local[p]
            .current
            .store(current, Ordering::Relaxed);
    }

    /// The pointer last given to `set_current` on `p`.
    pub(crate) fn current(&self, p: usize) -> *mut () {
        self.queue.local[p].current.load(Ordering::Relaxed)
    }

    /// Closes the scheduler: later pushes hand their item back, and every
    /// processor returns `None` from [`next`](Self::next) (sleepers are woken).
    pub fn close(&self) {
        self.queue.close();
        for p in 0..self.capacity() {
            self.idle.wake(p, &self.host);
        }
    }

    /// Called by the thread about to run processor `p`, before its first
    /// [`next`](Self::next): takes `p`'s read side of the resize lock, which
    /// the thread keeps while it runs. Returns false if `p` is not a
    /// processor of this scheduler (never added, or removed since); the
    /// thread must then not run it (and, if it is `p`'s own thread, still
    /// call [`finish`](Self::finish)).
    pub fn start(&self, p: usize) -> bool {
        p < self.capacity() && self.enter_unless_removed(p)
    }

    /// Gives processor `p`'s read side back early, before
    /// [`finish`](Self::finish): the thread then pushes as an outside thread
    /// (its processor is removed or the cluster closed), while its slot
    /// stays taken until `finish`.
    pub fn leave(&self, p: usize) {
        self.queue.resize_lock().exit(&self.queue.local[p].reading);
    }

    /// Called by the thread that ran processor `p` once [`next`](Self::next)
    /// has returned `None`: gives the read side back. `owner` is true for
    /// `p`'s own thread (false for a stand-in that ran it for a while, see
    /// [`release`](Self::release)); once the owner has finished, a removed
    /// `p`'s slot can go to a new processor.
    pub fn finish(&self, p: usize, owner: bool) {
        let local = &self.queue.local[p];
        self.queue.resize_lock().exit(&local.reading);
        if owner && local.stop.load(Ordering::Acquire) & RELEASED == 0 {
            // Release: the slot's reuse (`add`, Acquire) comes after all we did.
            local.occupied.store(false, Ordering::Release);
        }
    }

    /// Makes the thread running processor `p` return `None` from
    /// [`next`](Self::next) (after the poll it is in), waking it if it
    /// sleeps; another thread can then run `p`. Same handshake as `close`:
    /// the flag is set before the `sem` swap that wakes, and the sleeper
    /// checks it after the `sem` read-modify-write that woke it (idle.md).
    pub fn release(&self, p: usize) {
        self.queue.local[p]
            .stop
            .fetch_or(RELEASED, Ordering::Release);
        self.idle.wake(p, &self.host);
    }

    /// Whether processor `p` is in idle sleep with no wake-up pending
    /// (see `Idle::is_asleep`).
    pub fn is_asleep(&self, p: usize) -> bool {
        self.idle.is_asleep(p)
    }

    /// Clears [`release`](Self::release) once the released thread has
    /// returned, so that `p` can run again, and takes `p`'s read side of the
    /// resize lock for the calling thread, which runs `p` again.
    ///
    /// Returns false if `p` was removed meanwhile: the thread then finishes
    /// its poll as an outside thread (its pushes go to the remaining
    /// processors), and its next [`next`](Self::next) returns `None`.
    pub fn reclaim(&self, p: usize) -> bool {
        let local = &self.queue.local[p];
        local.stop.fetch_and(!RELEASED, Ordering::Release);
        self.enter_unless_removed(p)
    }

    /// Takes `p`'s read side for the calling thread, and gives it back at
    /// once if `p` has been removed; returns whether it is held.
    fn enter_unless_removed(&self, p: usize) -> bool {
        let local = &self.queue.local[p];
        self.queue
            .resize_lock()
            .enter(&local.reading, || self.host.relax());
        // After `enter`'s Acquire: a removal made before is visible.
        if self.is_removed(p) {
            self.queue.resize_lock().exit(&local.reading);
            return false;
        }
        true
    }

    /// Adds a processor: activates a free slot and returns its identity;
    /// the caller then runs it ([`start`](Self::start), [`next`](Self::next)
    /// ..., [`finish`](Self::finish) with `owner`). `None` if all
    /// `max_processors` slots are in use (a removed processor's slot is
    /// free once its thread has finished).
    pub fn add_processor(&self) -> Option<ProcessorId> {
        if self.queue.is_closed() {
            return None;
        }
        self.resize(|queue| queue.add().map(|p| queue.id_of(p)))
    }

    /// Removes processor `id`: it stops taking work (its thread returns
    /// `None` from `next` after the poll it is in), and the items queued on
    /// its lanes move to the other processors' lanes, except items pushed
    /// with [`push_restricted`](Self::push_restricted), which are returned
    /// for the caller to place again. Waits for every processor to finish
    /// the poll it is in.
    pub fn remove_processor(&self, id: ProcessorId) -> Result<Vec<T>, RemoveError> {
        self.resize(|queue| {
            if !queue.is_live(id) {
                return Err(RemoveError::NoSuchProcessor);
            }
            if queue.processors() == 1 {
                return Err(RemoveError::LastProcessor);
            }
            Ok(queue.remove(id.index()))
        })
        .inspect(|_| {
            // Its thread may sleep: make it come round to its check.
            self.idle.wake(id.index(), &self.host);
        })
    }

    /// Runs `f` under the write side of the resize lock. A processor of
    /// this scheduler calling it gives up its own read side for the while,
    /// so that two of them resizing at once wait for each other in turn
    /// rather than forever.
    fn resize<R>(&self, f: impl FnOnce(&ReadyQueue<T>) -> R) -> R {
        let lock = self.queue.resize_lock();
        let me = self.current_processor();
        if let Some(p) = me {
            lock.exit(&self.queue.local[p].reading);
        }
        let guard = lock.write(
            self.queue.local.iter().map(|local| &local.reading),
            || {
                // Sleeping processors hold their flags: wake them all, so that
                // each comes round to its check of the writer bit.
                for p in 0..self.capacity() {
                    if self.queue.is_active(p) {
                        self.idle.wake(p, &self.host);
                    }
                }
            },
            || self.host.relax(),
        );
        let result = f(&self.queue);
        drop(guard);
        if let Some(p) = me {
            // Not if `f` removed `p` itself: see `current_processor`.
            self.enter_unless_removed(p);
        }
        result
    }

    /// Whether [`close`](Self::close) was called.
    pub fn is_closed(&self) -> bool {
        self.queue.is_closed()
    }

    /// Removes every queued item. After `close`, nothing is queued later.
    pub fn drain(&self) -> Vec<T> {
        self.queue.drain()
    }

    /// A snapshot of processor `p`'s counters.
    pub fn counters(&self, p: usize) -> ProcessorCounters {
        let c = &self.queue.local[p].counters;
        let get = |a: &crate::sync::AtomicU64| a.load(Ordering::Relaxed);
        let stat_get = |a: &stat::AtomicU64| a.load(Ordering::Relaxed);
        ProcessorCounters {
            iterations: get(&c.iterations),
            polls: get(&c.polls),
            parks: get(&c.parks),
            wakeups: get(&c.wakeups),
            host_parks: get(&c.host_parks),
            helps: get(&c.helps),
            steals: get(&c.steals),
            rebalances: stat_get(&c.rebalances),
            moved_help: stat_get(&c.moved_help),
            moved_rebalance: stat_get(&c.moved_rebalance),
            moved_steal: stat_get(&c.moved_steal),
            moved_wake: stat_get(&c.moved_wake),
            handoffs: stat_get(&c.handoffs),
        }
    }
}

/// Why [`Scheduler::push_restricted`] handed an item back.
#[derive(Debug)]
pub enum PushError<T> {
    /// The scheduler is closed.
    Closed(T),
    /// None of the allowed processors exists any more.
    NoneAllowed(T),
}

/// Why a processor could not be removed.
///
/// # Example
/// ```
/// let err = fairlane_core::RemoveError::LastProcessor;
/// assert!(err.to_string().contains("last processor"));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RemoveError {
    /// No processor of the cluster has this identity (never was, or already
    /// removed).
    NoSuchProcessor,
    /// It is the cluster's last processor: a cluster keeps at least one,
    /// since tasks spawned or woken later would have nowhere to run.
    LastProcessor,
}

impl core::fmt::Display for RemoveError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Self::NoSuchProcessor => "no processor of this cluster has that identity (it may have been removed already)",
            Self::LastProcessor => "cannot remove the last processor of a cluster: add another one first, or shut the runtime down",
        })
    }
}

impl core::error::Error for RemoveError {}

#[cfg(test)]
mod tests;
