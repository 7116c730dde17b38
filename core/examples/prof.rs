fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let n: usize = a[0].parse().unwrap();
    let reqs: Vec<(String, Vec<u8>)> = a[1..]
        .chunks(2)
        .map(|c| (c[0].clone(), std::fs::read(&c[1]).unwrap()))
        .collect();
    let mut s = vec![];
    for _ in 0..n {
        let t = std::time::Instant::now();
        for (e, b) in &reqs {
            std::hint::black_box(foldline_core::api::call(e, b));
        }
        s.push(t.elapsed().as_secs_f64() * 1e6);
    }
    s.sort_by(|a, b| a.partial_cmp(b).unwrap());
    println!("{:.0} us", s[n / 2]);
}
