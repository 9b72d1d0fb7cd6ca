//! Owned buffers for completion-based I/O.
//!
//! The kernel reads from or writes into a buffer after the call that
//! started the operation has returned, and possibly after the future that
//! owns it was dropped. So operations take buffers by value and hand them
//! back with the result, and the traits below promise that the memory does
//! not move while the buffer value moves.

/// A buffer an operation may read from (the write side): its bytes stay at
/// the same address however the value is moved.
///
/// # Safety
/// [`stable_ptr`](IoBuf::stable_ptr) must point to [`bytes_init`](IoBuf::bytes_init)
/// initialised bytes that stay valid and unmoved while the value lives,
/// even when it is moved, as long as it is not mutated through its own API.
///
/// # Example
/// ```
/// use fairlane::io::IoBuf;
/// let buf = b"hello".to_vec();
/// assert_eq!(buf.bytes_init(), 5);
/// ```
pub unsafe trait IoBuf: Send + 'static {
    /// Where the bytes start.
    ///
    /// # Example
    /// ```
    /// use fairlane::io::IoBuf;
    /// let buf = b"hello".to_vec();
    /// let ptr = buf.stable_ptr();
    /// let moved = buf;
    /// assert_eq!(moved.stable_ptr(), ptr);
    /// // SAFETY: `ptr` points to `moved`'s 5 initialised bytes.
    /// assert_eq!(unsafe { *ptr }, b'h');
    /// ```
    fn stable_ptr(&self) -> *const u8;
    /// How many bytes are initialised (and written by a write operation).
    ///
    /// # Example
    /// ```
    /// use fairlane::io::IoBuf;
    /// assert_eq!(b"hello".to_vec().bytes_init(), 5);
    /// assert_eq!(Vec::<u8>::with_capacity(64).bytes_init(), 0);
    /// ```
    fn bytes_init(&self) -> usize;
}

/// A buffer an operation may write into (the read side).
///
/// A read fills the buffer from its start, up to
/// [`bytes_total`](IoBufMut::bytes_total) bytes (a `Vec`'s capacity), and
/// then marks the bytes it wrote as initialised (a `Vec`'s length becomes
/// the count read).
///
/// # Safety
/// [`stable_mut_ptr`](IoBufMut::stable_mut_ptr) must point to
/// `bytes_total()` writable bytes that stay valid and unmoved while the value
/// lives, even when it is moved.
///
/// # Example
/// ```
/// use fairlane::io::IoBufMut;
/// let buf: Vec<u8> = Vec::with_capacity(64);
/// assert!(buf.bytes_total() >= 64);
/// ```
pub unsafe trait IoBufMut: IoBuf {
    /// Where the writable bytes start.
    ///
    /// # Example
    /// ```
    /// use fairlane::io::IoBufMut;
    /// let mut buf: Vec<u8> = Vec::with_capacity(4);
    /// let ptr = buf.stable_mut_ptr();
    /// // SAFETY: `ptr` points to at least 4 writable bytes; 2 are written.
    /// unsafe {
    ///     ptr.write(b'o');
    ///     ptr.add(1).write(b'k');
    ///     buf.set_init(2);
    /// }
    /// assert_eq!(buf, b"ok");
    /// ```
    fn stable_mut_ptr(&mut self) -> *mut u8;
    /// How many bytes may be written.
    ///
    /// # Example
    /// ```
    /// use fairlane::io::{IoBuf, IoBufMut};
    /// let buf: Vec<u8> = Vec::with_capacity(64);
    /// assert!(buf.bytes_total() >= 64);
    /// assert_eq!(buf.bytes_init(), 0);
    /// ```
    fn bytes_total(&self) -> usize;
    /// Records that the first `n` bytes were written.
    ///
    /// # Safety
    /// The first `n` bytes (`n <= bytes_total()`) must be initialised.
    ///
    /// # Example
    /// ```
    /// use fairlane::io::{IoBuf, IoBufMut};
    /// let mut buf: Vec<u8> = Vec::with_capacity(8);
    /// // SAFETY: the first 3 of the (at least) 8 writable bytes are written.
    /// unsafe {
    ///     buf.stable_mut_ptr().write_bytes(b'x', 3);
    ///     buf.set_init(3);
    /// }
    /// assert_eq!(buf.bytes_init(), 3);
    /// assert_eq!(buf, b"xxx");
    /// ```
    unsafe fn set_init(&mut self, n: usize);
}

// SAFETY: a Vec's heap block does not move when the Vec value moves; its
// first `len` bytes are initialised.
unsafe impl IoBuf for Vec<u8> {
    fn stable_ptr(&self) -> *const u8 {
        self.as_ptr()
    }
    fn bytes_init(&self) -> usize {
        self.len()
    }
}

// SAFETY: as for `IoBuf`; the whole capacity is allocated and writable.
unsafe impl IoBufMut for Vec<u8> {
    fn stable_mut_ptr(&mut self) -> *mut u8 {
        self.as_mut_ptr()
    }
    fn bytes_total(&self) -> usize {
        self.capacity()
    }
    unsafe fn set_init(&mut self, n: usize) {
        // SAFETY: the caller promises the first `n` bytes are initialised,
        // and `n <= capacity`.
        unsafe { self.set_len(n) }
    }
}

// SAFETY: a boxed slice's heap block does not move with the box.
unsafe impl IoBuf for Box<[u8]> {
    fn stable_ptr(&self) -> *const u8 {
        self.as_ptr()
    }
    fn bytes_init(&self) -> usize {
        self.len()
    }
}

// SAFETY: every byte of a boxed slice is initialised and writable.
unsafe impl IoBufMut for Box<[u8]> {
    fn stable_mut_ptr(&mut self) -> *mut u8 {
        self.as_mut_ptr()
    }
    fn bytes_total(&self) -> usize {
        self.len()
    }
    unsafe fn set_init(&mut self, _n: usize) {}
}

// SAFETY: static data never moves nor is freed.
unsafe impl IoBuf for &'static [u8] {
    fn stable_ptr(&self) -> *const u8 {
        self.as_ptr()
    }
    fn bytes_init(&self) -> usize {
        self.len()
    }
}

// SAFETY: static data never moves nor is freed.
unsafe impl IoBuf for &'static str {
    fn stable_ptr(&self) -> *const u8 {
        self.as_ptr()
    }
    fn bytes_init(&self) -> usize {
        self.len()
    }
}

// SAFETY: a String's heap block does not move when the String moves.
unsafe impl IoBuf for String {
    fn stable_ptr(&self) -> *const u8 {
        self.as_ptr()
    }
    fn bytes_init(&self) -> usize {
        self.len()
    }
}

/// The initialised bytes of `buf` as a slice.
pub(crate) fn init_slice<B: IoBuf>(buf: &B) -> &[u8] {
    // SAFETY: the trait promises `bytes_init` initialised bytes at
    // `stable_ptr`, valid while `buf` is borrowed.
    unsafe { std::slice::from_raw_parts(buf.stable_ptr(), buf.bytes_init()) }
}
