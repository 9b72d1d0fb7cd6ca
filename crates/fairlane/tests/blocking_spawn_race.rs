//! The blocking pool loses no closure while its threads move between idle,
//! woken and busy: long-lived closures (parked on a channel) next to
//! closures spawned and finished in quick rounds all run.

mod common;

use common::{scaled, DEADLINE};
use fairlane::task::JoinSet;
use tokio::sync::mpsc;

type Senders = Vec<mpsc::Sender<()>>;

/// Two closures that each run until their channel closes.
fn make_writer() -> (Senders, JoinSet<()>) {
    let mut senders = vec![];
    let mut handles = JoinSet::new();
    for _ in 0..2 {
        let (tx, mut rx) = mpsc::channel::<()>(1);
        senders.push(tx);
        handles.spawn_blocking(move || while rx.blocking_recv().is_some() {});
    }
    (senders, handles)
}

async fn drive_writer(senders: Senders, mut handles: JoinSet<()>) {
    for tx in &senders {
        tx.send(()).await.unwrap();
    }
    drop(senders);
    while let Some(res) = handles.join_next().await {
        res.unwrap();
    }
}

async fn quick() {
    fairlane::task::spawn_blocking(|| {}).await.unwrap();
}

#[test]
fn closures_spawned_while_pool_threads_change_state_all_run() {
    for round in 0..200 {
        let rt = fairlane::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let completed = rt.block_on(async {
            fairlane::time::timeout(scaled(DEADLINE), async {
                quick().await;
                quick().await;
                let (persistent_senders, persistent_handles) = make_writer();
                for _ in 0..2 {
                    quick().await;
                    quick().await;
                    let (senders, mut handles) = make_writer();
                    drop(senders);
                    while let Some(res) = handles.join_next().await {
                        res.unwrap();
                    }
                }
                quick().await;
                quick().await;
                let (second_senders, second_handles) = make_writer();
                drive_writer(persistent_senders, persistent_handles).await;
                drive_writer(second_senders, second_handles).await;
            })
            .await
            .is_ok()
        });
        assert!(completed, "round {round}: a blocking closure was never run");
    }
}
