//! The error cases of resizing (beyond the maximum, the last processor, a
//! removed or stale identity) and of building clusters.

use std::io::ErrorKind;

use fairlane::task::current_processor;
use fairlane::Runtime;

use crate::common::clusters::{add_when_a_slot_is_free, assert_runs_on, build, sorted};
use crate::common::serial;

#[test]
fn resize_errors() {
    let rt = build(Runtime::builder().processors(2).max_processors(3));
    let cluster = rt.handle().cluster();
    let ids = cluster.processors();
    assert_eq!(ids.len(), 2);
    assert_ne!(ids[0], ids[1]);

    let added = cluster.add_processor().expect("a free slot");
    assert!(!ids.contains(&added));
    assert_eq!(
        sorted(cluster.processors()),
        sorted(vec![ids[0], ids[1], added])
    );
    let err = cluster.add_processor().expect_err("beyond max_processors");
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    assert_eq!(cluster.processors().len(), 3);

    cluster.remove_processor(ids[0]).expect("remove");
    cluster.remove_processor(added).expect("remove");
    assert_eq!(cluster.processors(), [ids[1]]);
    for gone in [ids[0], added] {
        let err = cluster
            .remove_processor(gone)
            .expect_err("an already-removed processor");
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    }
    let err = cluster
        .remove_processor(ids[1])
        .expect_err("the last processor");
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    assert_eq!(cluster.processors(), [ids[1]]);
    // The runtime keeps working on its last processor.
    assert_runs_on(&rt, &[ids[1]]);
    let sum = rt.block_on(async {
        let tasks: Vec<_> = (0..100u64)
            .map(|i| fairlane::spawn(async move { i }))
            .collect();
        let mut sum = 0;
        for t in tasks {
            sum += t.await.unwrap();
        }
        sum
    });
    assert_eq!(sum, 4950);
}

#[test]
fn a_removed_processors_id_is_never_reused() {
    let _serial = serial();
    let rt = build(Runtime::builder().processors(2).max_processors(2));
    let cluster = rt.handle().cluster();
    let ids = cluster.processors();
    let old = ids[1];
    cluster.remove_processor(old).expect("remove");
    // The only free slot is `old`'s, free once its thread has left.
    let new = add_when_a_slot_is_free(&cluster);
    assert_eq!(new.index(), old.index(), "the same slot");
    assert_ne!(new, old, "a new processor in an old slot is a new identity");
    assert_ne!(new.generation(), old.generation());
    assert_eq!(sorted(cluster.processors()), sorted(vec![ids[0], new]));
    // The stale id names nothing: not for removal, not for affinity.
    let err = cluster.remove_processor(old).expect_err("a stale id");
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    assert_eq!(sorted(cluster.processors()), sorted(vec![ids[0], new]));
    let err = fairlane::task::Builder::new()
        .affinity([old])
        .spawn_on(async {}, rt.handle())
        .expect_err("affinity naming a removed processor");
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    let err = rt
        .block_on(rt.spawn(async move { fairlane::task::set_affinity(Some([old])) }))
        .unwrap()
        .expect_err("set_affinity naming a removed processor");
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    // The new one works.
    let on = fairlane::task::Builder::new()
        .affinity([new])
        .spawn_on(async { current_processor() }, rt.handle())
        .expect("affinity to the new processor");
    assert_eq!(rt.block_on(on).unwrap(), Some(new));
    cluster.remove_processor(new).expect("remove the new one");
    assert_eq!(cluster.processors(), [ids[0]]);
}

#[test]
fn builder_rejects_bad_clusters() {
    let check = |builder: &mut fairlane::Builder, what: &str| {
        let err = builder.build().map(|_| ()).expect_err(what);
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{what}: {err}");
        err.to_string()
    };
    let msg = check(
        Runtime::builder()
            .processors(1)
            .cluster("b", 1)
            .cluster("b", 1),
        "a duplicate cluster name",
    );
    assert!(msg.contains("\"b\""), "{msg}");
    let msg = check(
        Runtime::builder().processors(1).cluster("default", 1),
        "a cluster named like the default one",
    );
    assert!(msg.contains("default"), "{msg}");
    check(
        Runtime::builder().processors(1).cluster("z", 0),
        "a cluster of 0 processors",
    );
    check(
        Runtime::builder().processors(2).max_processors(1),
        "max_processors below the starting processors",
    );
    check(
        Runtime::builder()
            .processors(1)
            .cluster("b", 3)
            .max_processors(2),
        "max_processors below another cluster's starting processors",
    );
    // A good one still builds, with its clusters in order.
    let rt = build(
        Runtime::builder()
            .processors(1)
            .cluster("b", 2)
            .cluster("c", 1),
    );
    let names: Vec<String> = rt.clusters().iter().map(|c| c.name().to_owned()).collect();
    assert_eq!(names, ["default", "b", "c"]);
    assert!(rt.cluster("nope").is_none());
    assert_eq!(rt.cluster("b").unwrap().processors().len(), 2);
    assert_eq!(rt.cluster("c").unwrap().processors().len(), 1);
    assert_eq!(rt.handle().cluster().name(), "default");
}
