//! How much memory and time highlighting takes: the first code block (a grammar's tables are
//! touched for the first time), the same block again, then one line in every other language:
//! `cargo run --release -p keel-render --example syntax_memory`.

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|line| line.starts_with("VmRSS:"))
                .and_then(|line| line.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn main() {
    let before = rss_kib();
    let code = "fn main() {\n    let s = \"text\"; // comment\n    println!(\"{s}\");\n}\n";
    let started = std::time::Instant::now();
    keel_render::code_lines(Some("rust"), "x\n", 80);
    let loaded = (started.elapsed(), rss_kib().saturating_sub(before));
    let started = std::time::Instant::now();
    for _ in 0..200 {
        keel_render::code_lines(Some("rust"), code, 80);
    }
    let rust = (started.elapsed(), rss_kib().saturating_sub(before));
    let started = std::time::Instant::now();
    for language in [
        "python", "js", "bash", "json", "go", "c", "yaml", "toml", "ts", "cpp",
    ] {
        keel_render::code_lines(Some(language), "x = 1\n", 80);
    }
    let others = (started.elapsed(), rss_kib().saturating_sub(before));
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1000.0;
    println!(
        "first line of Rust: {:.1} ms, +{} KiB RSS; 200 Rust blocks: {:.1} ms, +{} KiB; ten more \
         languages: {:.1} ms, +{} KiB",
        ms(loaded.0),
        loaded.1,
        ms(rust.0),
        rust.1,
        ms(others.0),
        others.1
    );
}
