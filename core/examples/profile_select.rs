//! Profiling aid: a hot loop of plan + select on the W1 requests that
//! `tests/bench/run` writes to `target/bench` (`full`: select over all of W1).
fn main() {
    let plan = std::fs::read("target/bench/w1-plan.json").expect("run tests/bench/run first");
    let select = std::fs::read("target/bench/w1-select.json").unwrap_or_default();
    let full = std::fs::read("target/bench/w1-full-select.json").unwrap_or_default();
    let which = std::env::args().nth(1).unwrap_or_default();
    if let Some(path) = which.strip_prefix("file:") {
        let req = std::fs::read(path).unwrap();
        for _ in 0..50 {
            foldline_core::api::call("select", &req);
        }
        return;
    }
    for _ in 0..200 {
        if which == "full" {
            foldline_core::api::call("select", &full);
        } else {
            foldline_core::api::call("plan", &plan);
            foldline_core::api::call("select", &select);
        }
    }
}
