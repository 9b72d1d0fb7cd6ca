use super::*;

fn queue(processors: usize, domain: impl Fn(usize) -> usize) -> ReadyQueue<u32> {
    let mut config = Config::new(processors);
    config.lanes_per_processor = 2;
    ReadyQueue::new(&config, domain)
}

#[test]
fn help_targets_prefer_the_shared_cache_but_reach_every_processor() {
    // Processors 0-3 share one cache, 4-7 another.
    let q = queue(8, |p| p / 4);
    let mut near = 0;
    let mut seen = [false; 8];
    for _ in 0..16_000 {
        let target = q.random_help_target(1) / q.stride;
        assert_ne!(target, 1, "a processor never helps itself");
        seen[target] = true;
        near += usize::from(target < 4);
    }
    // 15/16 drawn near, plus the uniform 1/16 landing near 3 times in 7.
    assert!(
        near > 14_500,
        "only {near} of 16000 targets shared the cache"
    );
    assert!(
        seen.iter().enumerate().all(|(p, &s)| s || p == 1),
        "{seen:?}"
    );
}

#[test]
fn one_cache_domain_draws_uniformly() {
    let q = queue(4, |_| 0);
    let mut counts = [0usize; 4];
    for _ in 0..12_000 {
        counts[q.random_help_target(0) / q.stride] += 1;
    }
    assert_eq!(counts[0], 0);
    assert!(counts[1..].iter().all(|&c| c > 3_000), "{counts:?}");
}

#[test]
fn own_lanes_are_served_oldest_head_first() {
    let q = queue(1, |_| 0);
    // Iterations of processor 0 (its clock 10, 12, 14: each iteration
    // at least two above the last), in each a push from outside, then
    // two of its own (alternating between its lanes). Whatever lane
    // each lands in, the pops follow the push order: a push from
    // outside is stamped one below the owner's clock, between the
    // owner's iterations.
    let mut item = 0u32;
    for now in [10, 12, 14] {
        q.local[0].now.store(now, Ordering::Relaxed);
        q.push_remote(Some(0), item, Priority::Normal).unwrap();
        q.push_local(0, item + 1, Priority::Normal).unwrap();
        item += 2;
    }
    let order: Vec<u32> = (0..6).map(|_| q.pop(0, 100).unwrap().0).collect();
    assert_eq!(order, [0, 1, 2, 3, 4, 5]);
    assert!(q.pop(0, 100).is_none());
}

/// A push from outside whose first lane is busy goes to the next one;
/// a push of the owner's in the same iteration onto the first lane must
/// still come after it, although lane order breaks ties in the first
/// lane's favour: the outside stamp is one below the owner's clock.
#[test]
fn an_outside_push_diverted_to_another_lane_stays_ahead_of_later_own_pushes() {
    let q = queue(1, |_| 0);
    q.local[0].now.store(10, Ordering::Relaxed);
    {
        let _busy = q.lanes[0].hold();
        q.push_remote(Some(0), 1, Priority::Normal).unwrap();
    }
    // Two own pushes: the cursor alternates, so one lands in lane 0.
    q.push_local(0, 2, Priority::Normal).unwrap();
    q.push_local(0, 3, Priority::Normal).unwrap();
    assert_eq!(
        q.pop(0, 100).unwrap().0,
        1,
        "an own push overtook the outside one"
    );
}

/// Processor 1's lanes hold tasks far older than processor 0's (their
/// ages about 550 and 50 at time 1,100), and processor 0, whose own
/// heartbeats come `own_interval` apart (0: none yet), checks a help
/// target on every pop. Counts its helps when processor 1's last
/// heartbeat was at `their_beat`.
fn helps_with_heartbeat(own_interval: u64, their_beat: u64) -> usize {
    let mut config = Config::new(2);
    config.help_period = 1;
    let q = ReadyQueue::new(&config, |_| 0);
    for (p, ts) in [(1, 0), (0, 1_000)] {
        q.local[p].now.store(ts, Ordering::Relaxed);
        for item in 0..40 {
            q.push_local(p, item, Priority::Normal).unwrap();
        }
    }
    let now = 1_100;
    if own_interval != 0 {
        // One clock reading in BEAT_PERIOD is a heartbeat: the first
        // and the last of these.
        for reading in 0..=BEAT_PERIOD {
            q.beat(
                0,
                if reading == 0 {
                    now - own_interval
                } else {
                    now
                },
            );
        }
        assert_eq!(
            q.local[0].beat_interval.load(Ordering::Relaxed),
            own_interval
        );
    }
    q.beat(1, their_beat);
    (0..33)
        .filter(|_| q.pop(0, now).unwrap().1 == Source::Help)
        .count()
}

#[test]
fn a_lane_whose_owner_keeps_scheduling_is_helped_only_at_rebalance_checks() {
    // 32 checks, one in REBALANCE_PERIOD of them a rebalance check.
    let fresh = helps_with_heartbeat(0, 1_100);
    assert!(fresh <= 32 / REBALANCE_PERIOD as usize, "{fresh} helps");
    // A heartbeat older than our own age (and no interval of our own
    // yet): every check that drew a normal lane (14 in 16) helps.
    let stale = helps_with_heartbeat(0, 1);
    assert!(stale >= 16, "only {stale} helps of a stuck processor");
}

#[test]
fn a_heartbeat_is_late_only_past_twice_the_helpers_own_interval() {
    // 300 old: past our own age, but not our interval of 400.
    let on_time = helps_with_heartbeat(400, 800);
    assert!(on_time <= 32 / REBALANCE_PERIOD as usize, "{on_time} helps");
    // 600 old: past one interval, not past two.
    let margin = helps_with_heartbeat(400, 500);
    assert!(margin <= 32 / REBALANCE_PERIOD as usize, "{margin} helps");
    // 1,099 old: past two.
    let late = helps_with_heartbeat(400, 1);
    assert!(late >= 16, "only {late} helps of a late processor");
}

/// Helps of processor 0, whose own lanes are empty and whose own
/// heartbeats come 400 ticks apart, in 32 help checks of processor 1's
/// lanes, filled at `pushed`, its heartbeat fresh: rebalance checks
/// only.
fn rebalances_from_empty_lanes(pushed: u64) -> usize {
    let mut config = Config::new(2);
    config.help_period = 1;
    let q = ReadyQueue::new(&config, |_| 0);
    q.local[1].now.store(pushed, Ordering::Relaxed);
    for item in 0..40 {
        q.push_local(1, item, Priority::Normal).unwrap();
    }
    let now = 1_100;
    for reading in 0..=BEAT_PERIOD {
        q.beat(0, if reading == 0 { now - 400 } else { now });
    }
    q.beat(1, now);
    (0..33)
        .filter(|_| matches!(q.pop(0, now), Some((_, Source::Help))))
        .count()
}

#[test]
fn a_rebalance_leaves_a_head_younger_than_a_quarter_of_the_helpers_interval() {
    // Waited 100 ticks (age 50): more than twice our empty lanes' age
    // of 0, but not behind by our own pace (the bar: 400 / 4 / 2).
    assert_eq!(rebalances_from_empty_lanes(1_000), 0);
    // Waited 300 (age 150): past the bar of 50, doubled.
    assert!(rebalances_from_empty_lanes(800) >= 1);
}

/// The first task processor 0 helps from processor 1, whose lanes hold
/// tasks 0 to 39, pushed at time 0, when its last heartbeat was at
/// `their_beat`; processor 0's own lane holds task 1,000, pushed at
/// 1,000 (its first pop makes 1,000 processor 0's centroid), and its
/// heartbeats come 100 ticks apart.
fn first_help(their_beat: u64) -> i32 {
    let mut config = Config::new(2);
    config.help_period = 1;
    let q = ReadyQueue::new(&config, |_| 0);
    for item in 0..40 {
        q.push_local(1, item, Priority::Normal).unwrap();
    }
    q.local[0].now.store(1_000, Ordering::Relaxed);
    q.push_local(0, 1_000, Priority::Normal).unwrap();
    let now = 1_100;
    for reading in 0..=BEAT_PERIOD {
        q.beat(0, if reading == 0 { now - 100 } else { now });
    }
    q.beat(1, their_beat);
    loop {
        match q.pop(0, now) {
            Some((item, Source::Help)) => return item,
            Some((item, _)) => {
                q.push_local(0, item, Priority::Normal).unwrap();
            }
            None => panic!("no help"),
        }
    }
}

#[test]
fn a_rebalance_takes_the_task_nearest_the_helpers_own_and_a_rescue_the_oldest() {
    // Each lane holds every other task, in order: the nearest to 1,000
    // is its last, 38 or 39.
    assert!(first_help(1_100) >= 38);
    // A late owner: the oldest task of the lane, 0 or 1.
    assert!(first_help(1) <= 1);
}

/// Whether 32 help checks of processor 0 (own lanes 100 ticks old, own
/// heartbeat interval 100) take the task in processor 1's wake slot,
/// put there at `put_at`, when processor 1's last heartbeat was at
/// `their_beat` and its lanes are empty.
fn slot_helped(their_beat: u64, put_at: u64) -> bool {
    let mut config = Config::new(2);
    config.help_period = 1;
    let q = ReadyQueue::new(&config, |_| 0);
    let now = 1_100;
    q.local[0].now.store(1_000, Ordering::Relaxed);
    for item in 0..40 {
        q.push_local(0, item, Priority::Normal).unwrap();
    }
    q.put_woken(1, 99, put_at).unwrap();
    for reading in 0..=BEAT_PERIOD {
        q.beat(0, if reading == 0 { now - 100 } else { now });
    }
    q.beat(1, their_beat);
    (0..33).any(|_| q.pop(0, now) == Some((99, Source::Help)))
}

#[test]
fn a_late_owners_wake_slot_is_helped_by_the_age_rule() {
    assert!(slot_helped(1, 0), "a late owner's old slot task stayed");
    // Not twice as old as our own lanes.
    assert!(!slot_helped(1, 1_000), "a young slot task was helped");
    // The owner is on time: its next iteration takes the task.
    assert!(!slot_helped(1_100, 0), "an on-time owner's slot was helped");
}

#[test]
fn the_heartbeat_interval_estimate_at_most_doubles_per_heartbeat() {
    let q = queue(2, |_| 0);
    let mut now = 0;
    let mut beat_after = |gap: u64| {
        now += gap;
        for _ in 0..BEAT_PERIOD {
            q.beat(0, now);
        }
        q.local[0].beat_interval.load(Ordering::Relaxed)
    };
    beat_after(100);
    assert_eq!(beat_after(100), 100);
    // A sleep between two heartbeats.
    assert_eq!(beat_after(1_000_000), 200);
    assert_eq!(beat_after(100), 100);
}

#[test]
fn a_closed_queue_hands_pushes_back_and_drains_everything() {
    let q = queue(2, |_| 0);
    q.push_remote(Some(1), 7, Priority::Normal).unwrap();
    q.close();
    assert_eq!(q.push_remote(Some(0), 8, Priority::Normal), Err(8));
    assert_eq!(q.drain(), [7]);
    assert!(!q.visible_beside_own_lanes(usize::MAX));
}

#[test]
fn help_draws_reach_every_lane_of_every_nearby_processor() {
    // With the processor index and the lane class drawn from shared
    // bits, a class lane was only ever drawn on the first nearby
    // processor.
    let (near, normal) = (3, 2);
    let mut seen = alloc::vec![[0usize; 4]; near];
    let rng = Local::new(0x9e37_79b9_7f4a_7c15);
    for _ in 0..100_000 {
        let (i, offset) = near_draw(rng.random(), near, normal);
        seen[i][offset] += 1;
    }
    for (i, lanes) in seen.iter().enumerate() {
        for (lane, &n) in lanes.iter().enumerate() {
            assert!(
                n > 0,
                "lane {lane} of nearby processor {i} never drawn: {seen:?}"
            );
        }
    }
}
