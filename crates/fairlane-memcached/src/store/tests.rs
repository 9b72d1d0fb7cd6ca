use std::sync::Arc;

use super::{item_charge, Config, Counted, ManualClock, Mode, Store, Stored};

fn store(memory_limit: usize, shards: usize) -> Store {
    Store::new(
        Config {
            memory_limit,
            item_size_max: 1 << 20,
            shards,
        },
        ManualClock::new(1_700_000_000),
    )
}

fn has(store: &Store, key: &str) -> bool {
    store.get(key.as_bytes(), |_| ()).is_some()
}

#[test]
fn the_least_recently_used_items_are_evicted_first() {
    // Room for three items, not four: the bytes of four with their
    // tables, less half an item.
    let value = [b'v'; 1000];
    let probe = store(usize::MAX, 1);
    for key in ["a", "b", "c", "d"] {
        probe.store(Mode::Set, key.as_bytes(), 0, 0, &value);
    }
    let store = store(probe.memory_used() - item_charge(1, 1000) / 2, 1);
    for key in ["a", "b", "c"] {
        assert_eq!(
            store.store(Mode::Set, key.as_bytes(), 0, 0, &value),
            Stored::Stored
        );
    }
    assert_eq!(store.stats().evictions, 0);
    // Using "a" makes "b" the least recently used.
    assert!(has(&store, "a"));
    store.store(Mode::Set, b"d", 0, 0, &value);
    assert!(!has(&store, "b"));
    for key in ["a", "c", "d"] {
        assert!(has(&store, key), "{key}");
    }
    let stats = store.stats();
    assert_eq!((stats.evictions, stats.curr_items), (1, 3));
    assert!(store.memory_used() <= store.memory_limit());
}

/// A value is limited by the whole memory, not by a shard's share of it.
#[test]
fn one_item_may_take_most_of_the_memory() {
    let store = store(8 << 20, 64);
    let big = vec![b'x'; 1 << 20];
    for i in 0..7 {
        let key = format!("big{i}");
        assert_eq!(
            store.store(Mode::Set, key.as_bytes(), 0, 0, &big),
            Stored::Stored
        );
    }
    let stats = store.stats();
    assert_eq!((stats.curr_items, stats.evictions), (7, 0));
}

/// Equal values, stored in order: nothing is evicted while they fit, and
/// past the limit the newest that fit survive (across shards).
#[test]
fn eviction_keeps_the_newest_items_across_shards() {
    for (limit, value, count) in [(8 << 20, 50_000, 400), (64 << 20, 600_000, 200)] {
        let store = store(limit, 64);
        let value = vec![b'v'; value];
        let fit = limit / item_charge(8, value.len());
        for i in 0..count {
            let key = format!("key{i:05}");
            assert_eq!(
                store.store(Mode::Set, key.as_bytes(), 0, 0, &value),
                Stored::Stored
            );
            if i < fit * 9 / 10 {
                assert_eq!(store.stats().evictions, 0, "{i} items, {fit} fit");
            }
            assert!(store.memory_used() <= limit);
        }
        let newest = (count - fit..count)
            .filter(|i| has(&store, &format!("key{i:05}")))
            .count();
        assert!(
            newest * 100 >= fit * 95,
            "of the newest {fit} that fit, {newest} survive"
        );
    }
}

#[test]
fn a_used_item_outlives_newer_unused_ones() {
    let store = store(8 << 20, 64);
    let value = vec![b'v'; 50_000];
    store.store(Mode::Set, b"kept", 0, 0, &value);
    for i in 0..400 {
        store.store(Mode::Set, format!("key{i}").as_bytes(), 0, 0, &value);
        assert!(has(&store, "kept"), "evicted after {i} stores");
    }
}

#[test]
fn a_set_refused_for_memory_removes_the_old_value() {
    let store = store(100_000, 4);
    assert_eq!(store.store(Mode::Set, b"big", 0, 0, b"old"), Stored::Stored);
    let huge = vec![b'x'; 200_000];
    assert_eq!(
        store.store(Mode::Set, b"big", 0, 0, &huge),
        Stored::OutOfMemory
    );
    assert!(!has(&store, "big"));
    // Other modes leave it.
    store.store(Mode::Set, b"big", 0, 0, b"old");
    assert_eq!(
        store.store(Mode::Replace, b"big", 0, 0, &huge),
        Stored::OutOfMemory
    );
    assert!(has(&store, "big"));
}

#[test]
fn reservations_count_against_the_limit() {
    let store = store(1 << 20, 8);
    let value = vec![b'v'; 100_000];
    for i in 0..8 {
        store.store(Mode::Set, format!("k{i}").as_bytes(), 0, 0, &value);
    }
    // Making room for the reservation evicts items.
    let room = store.reserve(700_000).expect("fits once items are evicted");
    assert!(store.stats().curr_items <= 3);
    assert_eq!(store.stats().reserved, 700_000);
    assert!(store.reserve(700_000).is_none());
    assert!(store.memory_used() <= 1 << 20);
    drop(room);
    assert_eq!(store.stats().reserved, 0);
    assert!(store.reserve(2 << 20).is_none(), "over the whole limit");
}

#[test]
fn values_shared_with_replies_stay_counted_until_let_go() {
    let store = store(1 << 20, 8);
    let value = vec![b'v'; 300_000];
    store.store(Mode::Set, b"k", 0, 0, &value);
    let shared: Arc<[u8]> = store.get(b"k", |item| item.value.clone()).unwrap();
    let before = store.memory_used();
    assert!(store.delete(b"k"));
    // Still held by the reply: still charged.
    assert_eq!(store.stats().pinned as usize, 300_000 + 16);
    assert!(store.memory_used() >= 300_000);
    drop(shared);
    // Released once the store needs the room.
    for i in 0..3 {
        store.store(Mode::Set, format!("n{i}").as_bytes(), 0, 0, &value);
    }
    assert_eq!(store.stats().pinned, 0);
    assert_eq!(store.stats().curr_items, 3);
    assert!(store.memory_used() <= 1 << 20 && before <= 1 << 20);
}

#[test]
fn counting_writes_in_place_padded_with_spaces() {
    let store = store(1 << 20, 1);
    store.store(Mode::Set, b"n", 0, 0, b"100");
    assert_eq!(store.count(b"n", 1, false), Counted::Value(99));
    assert_eq!(
        store.get(b"n", |item| item.value.to_vec()),
        Some(b"99 ".to_vec())
    );
    assert_eq!(store.count(b"n", 901, true), Counted::Value(1000));
    assert_eq!(
        store.get(b"n", |item| item.value.to_vec()),
        Some(b"1000".to_vec())
    );
    for (value, result) in [
        (&b" +5"[..], Counted::Value(6)),
        (b"-0", Counted::Value(1)),
        (b"7 x", Counted::Value(8)),
        (b"-1", Counted::NotANumber),
        (b"", Counted::NotANumber),
        (b"1x", Counted::NotANumber),
    ] {
        store.store(Mode::Set, b"n", 0, 0, value);
        assert_eq!(store.count(b"n", 1, true), result, "{value:?}");
    }
    let bytes = store.stats().bytes;
    store.delete(b"n");
    assert!(store.stats().bytes < bytes);
}

#[test]
fn flush_gives_everything_back() {
    let store = store(1 << 20, 4);
    for i in 0..100 {
        store.store(Mode::Set, format!("k{i}").as_bytes(), 0, 0, b"v");
    }
    store.flush(0);
    assert_eq!(store.stats().curr_items, 0);
    assert_eq!(store.memory_used(), 0);
}
