//! The cost of a Rust → Lisp call by name: look the function up in its namespace table at call
//! time (late binding, as every step of the agent is called), then call it; plain, and with one
//! around-advice. Baseline: calling the same function through a handle kept across calls, which
//! oml deliberately never does.

use divan::Bencher;
use oml::lisp::{Lisp, LispOptions, Output};

fn main() {
    divan::main();
}

fn host(advised: bool) -> Lisp {
    let lisp = Lisp::new(LispOptions {
        output: Output::Stderr,
        cache_dir: None,
    })
    .expect("host");
    let mut src = String::from("(fn agent.bench-step [x] \"Add one.\" (+ x 1))");
    if advised {
        src.push_str("(advise! agent.bench-step :around (fn [f x] (f x)))");
    }
    lisp.compile(&src, "bench")
        .expect("compiles")
        .call::<()>(())
        .expect("runs");
    lisp
}

#[divan::bench]
fn kept_handle_baseline(b: Bencher) {
    let lisp = host(false);
    let f = lisp.function("agent.bench-step").unwrap().unwrap();
    b.bench_local(|| f.call::<i64>(divan::black_box(1)).unwrap());
}

#[divan::bench]
fn call_by_name(b: Bencher) {
    let lisp = host(false);
    b.bench_local(|| {
        let f = lisp.function("agent.bench-step").unwrap().unwrap();
        f.call::<i64>(divan::black_box(1)).unwrap()
    });
}

#[divan::bench]
fn call_by_name_with_one_advice(b: Bencher) {
    let lisp = host(true);
    b.bench_local(|| {
        let f = lisp.function("agent.bench-step").unwrap().unwrap();
        f.call::<i64>(divan::black_box(1)).unwrap()
    });
}

#[divan::bench]
fn host_start(b: Bencher) {
    b.bench_local(|| host(false));
}
