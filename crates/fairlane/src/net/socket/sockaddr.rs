//! [`SockAddrBuf`]: socket addresses in the kernel's form.

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{SocketAddr, SocketAddrV4, SocketAddrV6};

/// A socket address in the kernel's form, boxed so that its address is
/// stable while an operation uses it.
#[derive(Clone, Copy)]
pub(crate) struct SockAddrBuf {
    pub(crate) storage: libc::sockaddr_storage,
    pub(crate) len: libc::socklen_t,
}

impl SockAddrBuf {
    pub(crate) fn empty() -> Box<SockAddrBuf> {
        Box::new(SockAddrBuf {
            // SAFETY: all-zero bytes are a valid `sockaddr_storage`.
            storage: unsafe { zeroed() },
            len: size_of::<libc::sockaddr_storage>() as libc::socklen_t,
        })
    }

    pub(crate) fn from_addr(addr: &SocketAddr) -> Box<SockAddrBuf> {
        let mut buf = Self::empty();
        match addr {
            SocketAddr::V4(a) => {
                let sin = libc::sockaddr_in {
                    sin_family: libc::AF_INET as libc::sa_family_t,
                    sin_port: a.port().to_be(),
                    sin_addr: libc::in_addr {
                        s_addr: u32::from_ne_bytes(a.ip().octets()),
                    },
                    sin_zero: [0; 8],
                };
                // SAFETY: `sockaddr_storage` is larger than and aligned for
                // `sockaddr_in`.
                unsafe {
                    std::ptr::write(&mut buf.storage as *mut _ as *mut libc::sockaddr_in, sin)
                };
                buf.len = size_of::<libc::sockaddr_in>() as libc::socklen_t;
            }
            SocketAddr::V6(a) => {
                let sin6 = libc::sockaddr_in6 {
                    sin6_family: libc::AF_INET6 as libc::sa_family_t,
                    sin6_port: a.port().to_be(),
                    sin6_flowinfo: a.flowinfo(),
                    sin6_addr: libc::in6_addr {
                        s6_addr: a.ip().octets(),
                    },
                    sin6_scope_id: a.scope_id(),
                };
                // SAFETY: `sockaddr_storage` is larger than and aligned for
                // `sockaddr_in6`.
                unsafe {
                    std::ptr::write(&mut buf.storage as *mut _ as *mut libc::sockaddr_in6, sin6)
                };
                buf.len = size_of::<libc::sockaddr_in6>() as libc::socklen_t;
            }
        }
        buf
    }

    /// A Unix-domain address for `path`; a path whose first byte is NUL
    /// names an abstract socket (Linux), as with tokio.
    pub(crate) fn from_path(path: &std::path::Path) -> io::Result<Box<SockAddrBuf>> {
        use std::os::linux::net::SocketAddrExt;
        use std::os::unix::ffi::OsStrExt;
        let bytes = path.as_os_str().as_bytes();
        if let Some((0, name)) = bytes.split_first() {
            let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
            return Self::from_unix_addr(&addr);
        }
        let mut buf = Self::empty();
        // SAFETY: `sockaddr_storage` is larger than and aligned for
        // `sockaddr_un`; zeroed bytes are a valid one.
        let sun = unsafe { &mut *(&mut buf.storage as *mut _ as *mut libc::sockaddr_un) };
        if bytes.is_empty() || bytes.len() >= sun.sun_path.len() || bytes.contains(&0) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a Unix socket path must be non-empty, shorter than 108 bytes, without NUL",
            ));
        }
        sun.sun_family = libc::AF_UNIX as libc::sa_family_t;
        for (dst, &src) in sun.sun_path.iter_mut().zip(bytes) {
            *dst = src as libc::c_char;
        }
        buf.len = (size_of::<libc::sa_family_t>() + bytes.len() + 1) as libc::socklen_t;
        Ok(buf)
    }

    /// The kernel's form of std's Unix-domain address: a path or an
    /// abstract name; `InvalidInput` for an unnamed one (nothing to bind
    /// to or connect to).
    pub(crate) fn from_unix_addr(
        addr: &std::os::unix::net::SocketAddr,
    ) -> io::Result<Box<SockAddrBuf>> {
        use std::os::linux::net::SocketAddrExt;
        if let Some(path) = addr.as_pathname() {
            return Self::from_path(path);
        }
        let Some(name) = addr.as_abstract_name() else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "an unnamed Unix-domain address names no socket",
            ));
        };
        let mut buf = Self::empty();
        // SAFETY: `sockaddr_storage` is larger than and aligned for
        // `sockaddr_un`; zeroed bytes are a valid one.
        let sun = unsafe { &mut *(&mut buf.storage as *mut _ as *mut libc::sockaddr_un) };
        if name.len() >= sun.sun_path.len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "an abstract Unix socket name must be shorter than 108 bytes",
            ));
        }
        sun.sun_family = libc::AF_UNIX as libc::sa_family_t;
        // The leading NUL (already zero) marks an abstract name.
        for (dst, &src) in sun.sun_path[1..].iter_mut().zip(name) {
            *dst = src as libc::c_char;
        }
        buf.len = (size_of::<libc::sa_family_t>() + 1 + name.len()) as libc::socklen_t;
        Ok(buf)
    }

    /// A Unix-domain address: a path, an abstract name, or unnamed.
    pub(crate) fn unix_addr(&self) -> io::Result<std::os::unix::net::SocketAddr> {
        use std::os::linux::net::SocketAddrExt;
        use std::os::unix::ffi::OsStrExt;
        use std::os::unix::net::SocketAddr as UnixAddr;
        let header = size_of::<libc::sa_family_t>();
        // An unnamed sender: the kernel writes no address at all.
        let unnamed = (self.len as usize) <= header;
        if !unnamed && i32::from(self.storage.ss_family) != libc::AF_UNIX {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "the address is not a Unix-domain address",
            ));
        }
        // SAFETY: the family says the storage holds a `sockaddr_un`.
        let sun = unsafe { &*(&self.storage as *const _ as *const libc::sockaddr_un) };
        let len = (self.len as usize)
            .saturating_sub(header)
            .min(sun.sun_path.len());
        // SAFETY: `c_char` and `u8` have the same size and layout.
        let path: &[u8] = unsafe { std::slice::from_raw_parts(sun.sun_path.as_ptr().cast(), len) };
        match path.first() {
            // Unnamed: std gives no constructor, but an unbound socket's
            // own address is one (made once).
            None => {
                static UNNAMED: std::sync::OnceLock<UnixAddr> = std::sync::OnceLock::new();
                if let Some(a) = UNNAMED.get() {
                    return Ok(a.clone());
                }
                let a = std::os::unix::net::UnixDatagram::unbound()?.local_addr()?;
                Ok(UNNAMED.get_or_init(|| a).clone())
            }
            Some(0) => UnixAddr::from_abstract_name(&path[1..]),
            Some(_) => {
                let end = path.iter().position(|&b| b == 0).unwrap_or(path.len());
                UnixAddr::from_pathname(std::ffi::OsStr::from_bytes(&path[..end]))
            }
        }
    }

    pub(crate) fn ip_addr(&self) -> io::Result<SocketAddr> {
        match i32::from(self.storage.ss_family) {
            libc::AF_INET => {
                // SAFETY: the family says the storage holds a `sockaddr_in`.
                let sin = unsafe { &*(&self.storage as *const _ as *const libc::sockaddr_in) };
                Ok(SocketAddr::V4(SocketAddrV4::new(
                    sin.sin_addr.s_addr.to_ne_bytes().into(),
                    u16::from_be(sin.sin_port),
                )))
            }
            libc::AF_INET6 => {
                // SAFETY: the family says the storage holds a `sockaddr_in6`.
                let sin6 = unsafe { &*(&self.storage as *const _ as *const libc::sockaddr_in6) };
                Ok(SocketAddr::V6(SocketAddrV6::new(
                    sin6.sin6_addr.s6_addr.into(),
                    u16::from_be(sin6.sin6_port),
                    sin6.sin6_flowinfo,
                    sin6.sin6_scope_id,
                )))
            }
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "the peer's address is not an IP address",
            )),
        }
    }
}
