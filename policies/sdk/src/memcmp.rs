//! Byte comparisons for Wasm guests, eight bytes at a time: C's `memcmp` and `bcmp`,
//! and [`same_bytes`], the equality test the SDK's own walks and state checks use.
//!
//! Rust compiles every `==` and `cmp` of strings and byte slices (a node's name looked
//! up in a map, a job id matched, a state blob checked) to a call of C's `memcmp`. On
//! `wasm32-wasip2` that is wasi-libc's, which is musl's byte-at-a-time loop, a large
//! share of the guest's time in a profile of DRAGON's kept round on 1,000 nodes
//! (`docs/performance.md`), where the native build's glibc compares a vector at a
//! time. wasi-libc has a SIMD `memcmp` since 2025 (pull request 603), but only in
//! builds for `simd128`, and the wasi-libc the Rust toolchain ships is not one.
//!
//! A policy that links this SDK gets these definitions instead: the linker resolves
//! `memcmp` from the first archive that defines it, and Rust's libraries come before
//! libc. Native builds keep their C library's. A policy that also links an object file
//! defining them (C code built with its own libc) gets the linker's duplicate-symbol
//! error, naming them.

use std::cmp::Ordering;

/// Byte equality eight bytes at a time: Wasm's `memcmp` (wasi-libc) compares byte by
/// byte.
pub fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let (a_words, b_words) = (a.chunks_exact(8), b.chunks_exact(8));
    let tails_match = a_words.remainder() == b_words.remainder();
    tails_match
        && a_words.zip(b_words).all(|(x, y)| {
            u64::from_ne_bytes(x.try_into().expect("8 bytes"))
                == u64::from_ne_bytes(y.try_into().expect("8 bytes"))
        })
}

/// How `a` compares with `b`, byte by byte as unsigned values, over their common
/// length (both have `len` bytes in `memcmp`): the order of the first byte that
/// differs, read eight bytes at a time.
pub fn compare_prefix(a: &[u8], b: &[u8]) -> Ordering {
    let len = a.len().min(b.len());
    let (a, b) = (&a[..len], &b[..len]);
    let (a_words, b_words) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail_at = len - a_words.remainder().len();
    for (at, (x, y)) in a_words.zip(b_words).enumerate() {
        let x = u64::from_le_bytes(x.try_into().expect("8 bytes"));
        let y = u64::from_le_bytes(y.try_into().expect("8 bytes"));
        if x != y {
            // Little-endian: the lowest differing bit is in the first differing byte.
            let byte = at * 8 + (x ^ y).trailing_zeros() as usize / 8;
            return a[byte].cmp(&b[byte]);
        }
    }
    // Compared one by one (not as slices: that would call `memcmp` again).
    for at in tail_at..len {
        if a[at] != b[at] {
            return a[at].cmp(&b[at]);
        }
    }
    Ordering::Equal
}

/// C's `memcmp`: less than, equal to or greater than zero as the first `len` bytes at
/// `a` compare with those at `b`.
///
/// # Safety
///
/// `a` and `b` are each readable for `len` bytes (C's contract).
#[cfg(target_arch = "wasm32")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memcmp(a: *const u8, b: *const u8, len: usize) -> i32 {
    if len == 0 {
        // C allows null pointers with no bytes; a Rust slice does not.
        return 0;
    }
    // SAFETY: the caller's contract, above; `len` is not zero, so neither is null.
    let (a, b) = unsafe {
        (
            std::slice::from_raw_parts(a, len),
            std::slice::from_raw_parts(b, len),
        )
    };
    compare_prefix(a, b) as i32
}

/// C's `bcmp`: zero when the first `len` bytes at `a` and `b` are equal. LLVM calls it
/// for comparisons that only ask whether the bytes are equal.
///
/// # Safety
///
/// As [`memcmp`].
#[cfg(target_arch = "wasm32")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn bcmp(a: *const u8, b: *const u8, len: usize) -> i32 {
    // SAFETY: the same contract.
    unsafe { memcmp(a, b, len) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every position of a first difference, both ways, at every length around the
    /// eight-byte words and the tail.
    #[test]
    fn the_first_differing_byte_decides_wherever_it_is() {
        for len in 0..=33 {
            let a: Vec<u8> = (0..len).map(|i| (i * 37 % 251) as u8).collect();
            assert_eq!(compare_prefix(&a, &a.clone()), Ordering::Equal, "len {len}");
            for at in 0..len {
                for (x, y) in [(0u8, 255u8), (0x7f, 0x80), (1, 2)] {
                    let (mut lo, mut hi) = (a.clone(), a.clone());
                    (lo[at], hi[at]) = (x, y);
                    // Later bytes say the opposite: only the first difference counts.
                    for later in at + 1..len {
                        (lo[later], hi[later]) = (255, 0);
                    }
                    assert_eq!(
                        compare_prefix(&lo, &hi),
                        Ordering::Less,
                        "len {len} at {at}"
                    );
                    assert_eq!(
                        compare_prefix(&hi, &lo),
                        Ordering::Greater,
                        "len {len} at {at}"
                    );
                }
            }
        }
    }

    /// Slices of every length to 40 from a few bytes' alphabet (so equal prefixes of
    /// every length occur), against the standard library's order and equality. No
    /// proptest here: the SDK is vendored into policy crates with its dependencies alone.
    #[test]
    fn it_orders_and_compares_as_slices_do() {
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..20_000 {
            let len = (next() % 41) as usize;
            let a: Vec<u8> = (0..len)
                .map(|_| [0, 1, 0x80, 255][next() as usize % 4])
                .collect();
            let mut b = a.clone();
            for _ in 0..next() % 3 {
                if !b.is_empty() {
                    let at = next() as usize % b.len();
                    b[at] = [0, 1, 0x80, 255][next() as usize % 4];
                }
            }
            assert_eq!(compare_prefix(&a, &b), a.cmp(&b), "{a:?} against {b:?}");
            assert_eq!(same_bytes(&a, &b), a == b, "{a:?} against {b:?}");
            let half = &b[..b.len() / 2];
            assert_eq!(same_bytes(&a, half), a == half, "{a:?} against {half:?}");
        }
    }
}
