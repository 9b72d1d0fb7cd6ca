//! The process's descriptor limit, for tests of servers that run out of
//! descriptors. The limit is the process's: a test binary that lowers it
//! runs its tests one at a time. Shared with the echo example's test
//! (included there by path).

/// The descriptor limit (`RLIMIT_NOFILE`) now.
pub fn nofile() -> libc::rlimit {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one `rlimit` into the live local.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0);
    lim
}

/// Sets the descriptor limit.
pub fn set_nofile(lim: libc::rlimit) {
    // SAFETY: setrlimit reads one `rlimit` from the live local.
    let r = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) };
    assert_eq!(r, 0, "setrlimit: {}", std::io::Error::last_os_error());
}

/// The lowest descriptor number free now: with the soft limit set to it,
/// the process can open no new descriptor.
pub fn lowest_free_fd() -> libc::rlim_t {
    // SAFETY: dup of standard input and close of the duplicate, which
    // nobody else knows of.
    unsafe {
        let fd = libc::fcntl(0, libc::F_DUPFD_CLOEXEC, 0);
        assert!(fd >= 0, "dup: {}", std::io::Error::last_os_error());
        libc::close(fd);
        fd as libc::rlim_t
    }
}
