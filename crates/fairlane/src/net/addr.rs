//! Address resolution that never blocks a processor: numeric addresses are
//! parsed on the spot, host names are resolved on the blocking pool.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

/// What [`std::net::ToSocketAddrs`] accepts, resolved without blocking a
/// processor: socket addresses and `(ip, port)` pairs directly, and
/// `"host:port"` / `(host, port)` strings, whose host names are looked up on
/// the runtime's blocking pool.
///
/// This trait is sealed; its method is an implementation detail.
///
/// # Example
/// ```
/// fn takes<A: fairlane::net::ToSocketAddrs>(_: A) {}
/// takes("localhost:80");
/// takes(("127.0.0.1", 80));
/// takes(std::net::SocketAddr::from(([127, 0, 0, 1], 80)));
/// ```
pub trait ToSocketAddrs: sealed::Sealed {}

pub(crate) mod sealed {
    use super::*;

    /// How an address resolves.
    pub enum Resolve {
        Ready(Vec<SocketAddr>),
        /// A host name: look it up on the blocking pool.
        Lookup(String),
    }

    pub trait Sealed {
        fn resolve(&self) -> io::Result<Resolve>;
    }
}

use sealed::{Resolve, Sealed};

macro_rules! direct {
    ($($t:ty),*) => {$(
        impl ToSocketAddrs for $t {}
        impl Sealed for $t {
            fn resolve(&self) -> io::Result<Resolve> {
                Ok(Resolve::Ready(std::net::ToSocketAddrs::to_socket_addrs(self)?.collect()))
            }
        }
    )*};
}

direct!(
    SocketAddr,
    SocketAddrV4,
    SocketAddrV6,
    (IpAddr, u16),
    (Ipv4Addr, u16),
    (Ipv6Addr, u16)
);

impl ToSocketAddrs for &[SocketAddr] {}
impl Sealed for &[SocketAddr] {
    fn resolve(&self) -> io::Result<Resolve> {
        Ok(Resolve::Ready(self.to_vec()))
    }
}

impl ToSocketAddrs for str {}
impl Sealed for str {
    fn resolve(&self) -> io::Result<Resolve> {
        if let Ok(addr) = self.parse::<SocketAddr>() {
            return Ok(Resolve::Ready(vec![addr]));
        }
        Ok(Resolve::Lookup(self.to_owned()))
    }
}

impl ToSocketAddrs for String {}
impl Sealed for String {
    fn resolve(&self) -> io::Result<Resolve> {
        self.as_str().resolve()
    }
}

impl ToSocketAddrs for (&str, u16) {}
impl Sealed for (&str, u16) {
    fn resolve(&self) -> io::Result<Resolve> {
        let (host, port) = *self;
        if let Ok(ip) = host.parse::<IpAddr>() {
            return Ok(Resolve::Ready(vec![SocketAddr::new(ip, port)]));
        }
        Ok(Resolve::Lookup(format!("{host}:{port}")))
    }
}

impl ToSocketAddrs for (String, u16) {}
impl Sealed for (String, u16) {
    fn resolve(&self) -> io::Result<Resolve> {
        (self.0.as_str(), self.1).resolve()
    }
}

impl<T: ToSocketAddrs + ?Sized> ToSocketAddrs for &T {}
impl<T: Sealed + ?Sized> Sealed for &T {
    fn resolve(&self) -> io::Result<Resolve> {
        (**self).resolve()
    }
}

/// Resolves `addr` to at least one socket address.
pub(crate) async fn resolve<A: ToSocketAddrs>(addr: A) -> io::Result<Vec<SocketAddr>> {
    let addrs = match addr.resolve()? {
        Resolve::Ready(addrs) => addrs,
        Resolve::Lookup(host) => {
            let lookup = crate::task::spawn_blocking(move || {
                std::net::ToSocketAddrs::to_socket_addrs(&host).map(Iterator::collect::<Vec<_>>)
            });
            lookup
                .await
                .map_err(|e| io::Error::other(format!("address lookup failed: {e}")))??
        }
    };
    if addrs.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "could not resolve to any address",
        ));
    }
    Ok(addrs)
}

/// Resolves `host` (an address, or a `"name:port"` string looked up on the
/// blocking pool) to its socket addresses, as tokio's `lookup_host`.
///
/// # Errors
/// The lookup's error; `InvalidInput` for a string that is not
/// `host:port`, or a name with no address.
///
/// # Example
/// ```
/// # let rt = fairlane::Runtime::builder().processors(1).build()?;
/// # rt.block_on(async {
/// let addrs: Vec<_> = fairlane::net::lookup_host("127.0.0.1:80").await?.collect();
/// assert_eq!(addrs, ["127.0.0.1:80".parse().unwrap()]);
/// # Ok::<(), std::io::Error>(()) })?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub async fn lookup_host<T: ToSocketAddrs>(
    host: T,
) -> io::Result<impl Iterator<Item = SocketAddr> + std::fmt::Debug> {
    Ok(resolve(host).await?.into_iter())
}
