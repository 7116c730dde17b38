//! One sort for every record type. A sort is large in WebAssembly and the
//! standard library makes one copy of it per element type and comparison;
//! records are sorted here through one shared instance instead (positions
//! sorted through a comparison behind a trait object), stably, exactly as
//! `slice::sort_by` orders them.

use std::cmp::Ordering;

/// Sort `v` stably by `cmp`: the order `v.sort_by(cmp)` gives.
pub fn sort_by<T>(v: &mut Vec<T>, cmp: impl Fn(&T, &T) -> Ordering) {
    let order = positions(v.len(), &|a, b| cmp(&v[a], &v[b]));
    let mut slots: Vec<Option<T>> = v.drain(..).map(Some).collect();
    v.extend(order.into_iter().filter_map(|i| slots[i].take()));
}

/// The positions `0..n` in the stable order of `cmp`.
fn positions(n: usize, cmp: &dyn Fn(usize, usize) -> Ordering) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|a, b| cmp(*a, *b));
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorts_stably_as_the_standard_sort() {
        let mut seed = 7u64;
        for n in [0usize, 1, 2, 3, 20, 21, 100, 1000] {
            let v: Vec<(u8, usize)> = (0..n)
                .map(|i| {
                    seed = seed
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    ((seed >> 59) as u8, i)
                })
                .collect();
            let mut ours = v.clone();
            sort_by(&mut ours, |a, b| a.0.cmp(&b.0));
            let mut std = v;
            std.sort_by_key(|a| a.0);
            assert_eq!(ours, std, "{n} items");
        }
    }
}
