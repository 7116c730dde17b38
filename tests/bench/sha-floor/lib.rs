//! `alloc(len)` reserves `len` bytes of linear memory and answers where;
//! `hash(ptr, len)` hashes them with sha2's SHA-256 and answers the first
//! byte of the digest (so the work cannot be skipped).

use sha2::{Digest, Sha256};

/// Reserve `len` bytes, kept for the life of the instance.
#[no_mangle]
pub extern "C" fn alloc(len: usize) -> *mut u8 {
    Box::leak(vec![0u8; len].into_boxed_slice()).as_mut_ptr()
}

/// SHA-256 of the `len` bytes at `ptr`; the digest's first byte.
///
/// # Safety
/// `ptr..ptr + len` was reserved by [`alloc`].
#[no_mangle]
pub unsafe extern "C" fn hash(ptr: *const u8, len: usize) -> u32 {
    let bytes = unsafe { std::slice::from_raw_parts(ptr, len) };
    u32::from(Sha256::digest(bytes)[0])
}
