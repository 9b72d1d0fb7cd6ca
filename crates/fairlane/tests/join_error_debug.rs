//! `JoinError`'s `Debug` has tokio's shape: the task's id, then the
//! message of a string payload.

#[test]
fn join_errors_show_the_task_id_and_the_message() {
    let rt = fairlane::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        let handle = fairlane::spawn(async move {
            let value = 1234;
            panic!("payload: {value}")
        });
        let id = handle.id();
        let err = handle.await.unwrap_err();
        assert_eq!(
            format!("{err:?}"),
            format!("JoinError::Panic({id:?}, \"payload: 1234\", ...)")
        );

        let handle = fairlane::spawn(async { std::panic::panic_any(7i32) });
        let id = handle.id();
        let err = handle.await.unwrap_err();
        assert_eq!(format!("{err:?}"), format!("JoinError::Panic({id:?}, ...)"));

        let handle = fairlane::spawn(std::future::pending::<()>());
        let id = handle.id();
        handle.abort();
        let err = handle.await.unwrap_err();
        assert_eq!(format!("{err:?}"), format!("JoinError::Cancelled({id:?})"));
    });
}
