//! The msgperf command: parse, run, exit (0 ok, 1 a case failed, 2 bad usage, 130 interrupted).

fn main() {
    let code = msgperf::cli::main_with_args(std::env::args().collect());
    std::process::exit(code);
}
