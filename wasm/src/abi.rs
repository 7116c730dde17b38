//! The raw ABI for hosts without JS glue (wasmtime).
//!
//! Protocol: the host calls `foldline_alloc(len)` twice to get buffers for the
//! entry name and the JSON request, writes them into linear memory, calls
//! `foldline_call(entry_ptr, entry_len, input_ptr, input_len)`, which returns
//! `(result_ptr << 32) | result_len`, reads the canonical JSON envelope there,
//! and frees all three buffers with `foldline_free(ptr, len)`. The call frees
//! nothing the host allocated.
//!
//! Since ABI 1.2, held events as the JS exports have them (`crate::held`):
//! `foldline_call_held(id, count, entry…, input…, update…)` (a third buffer
//! for the hold update; length 0 for none) and `foldline_forget(id)`.

use foldline_core::api;

/// ABI major version.
#[no_mangle]
pub extern "C" fn foldline_abi_major() -> u32 {
    crate::ABI_MAJOR
}

/// ABI minor version.
#[no_mangle]
pub extern "C" fn foldline_abi_minor() -> u32 {
    crate::ABI_MINOR
}

/// Allocate `len` bytes; returns the pointer (0 for `len == 0`).
#[no_mangle]
pub extern "C" fn foldline_alloc(len: u32) -> u32 {
    if len == 0 {
        return 0;
    }
    let mut v = vec![0u8; len as usize].into_boxed_slice();
    let ptr = v.as_mut_ptr();
    std::mem::forget(v);
    ptr as usize as u32
}

/// Free a buffer returned by [`foldline_alloc`] or [`foldline_call`].
///
/// # Safety
/// `ptr` and `len` must come from one allocation of this module, freed once.
#[no_mangle]
pub unsafe extern "C" fn foldline_free(ptr: u32, len: u32) {
    if ptr == 0 || len == 0 {
        return;
    }
    // SAFETY: the host returns exactly what `foldline_alloc` / `foldline_call` gave it.
    let slice = std::ptr::slice_from_raw_parts_mut(ptr as usize as *mut u8, len as usize);
    drop(unsafe { Box::from_raw(slice) });
}

/// Call an entry point with JSON bytes; returns `(ptr << 32) | len` of the
/// canonical JSON envelope, owned by the host until it frees it.
///
/// # Safety
/// The pointers must reference `len` readable bytes of this module's memory.
#[no_mangle]
pub unsafe extern "C" fn foldline_call(
    entry_ptr: u32,
    entry_len: u32,
    input_ptr: u32,
    input_len: u32,
) -> u64 {
    // SAFETY: the host wrote these buffers through `foldline_alloc`.
    let entry = unsafe { bytes(entry_ptr, entry_len) };
    let input = unsafe { bytes(input_ptr, input_len) };
    let out = match std::str::from_utf8(entry) {
        Ok(name) => api::call(name, input),
        Err(_) => api::call("", b"{}"),
    };
    handed_over(out)
}

/// [`foldline_call`] with the events held under `id` in front of the
/// request's own, `update` (a hold request; length 0: none) applied first;
/// `count` is the number of events the host believes are held (another is
/// `invalid_request`). See `crate::held::call`.
///
/// # Safety
/// As [`foldline_call`], for all three buffers.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn foldline_call_held(
    id: u32,
    count: u32,
    entry_ptr: u32,
    entry_len: u32,
    input_ptr: u32,
    input_len: u32,
    update_ptr: u32,
    update_len: u32,
) -> u64 {
    // SAFETY: the host wrote these buffers through `foldline_alloc`.
    let (entry, input, update) = unsafe {
        (
            bytes(entry_ptr, entry_len),
            bytes(input_ptr, input_len),
            bytes(update_ptr, update_len),
        )
    };
    let out = crate::held::call(
        id,
        count,
        std::str::from_utf8(entry).unwrap_or(""),
        input,
        update,
    );
    handed_over(out)
}

/// Drop what is held under `id`.
#[no_mangle]
pub extern "C" fn foldline_forget(id: u32) {
    crate::held::forget(id)
}

/// An answer handed to the host: `(ptr << 32) | len`, freed by it.
fn handed_over(out: Vec<u8>) -> u64 {
    let len = out.len() as u32;
    let boxed = out.into_boxed_slice();
    let ptr = Box::into_raw(boxed) as *mut u8 as usize as u32;
    ((ptr as u64) << 32) | len as u64
}

unsafe fn bytes<'a>(ptr: u32, len: u32) -> &'a [u8] {
    if ptr == 0 || len == 0 {
        return &[];
    }
    // SAFETY: see callers.
    unsafe { std::slice::from_raw_parts(ptr as usize as *const u8, len as usize) }
}
