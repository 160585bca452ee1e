//! Render markdown from stdin the way keel shows it: `cargo run -p keel-render --example render
//! -- [WIDTH] [--html]`.

use std::io::Read;

fn main() -> std::io::Result<()> {
    let mut markdown = String::new();
    std::io::stdin().read_to_string(&mut markdown)?;
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|arg| arg == "--html") {
        print!("{}", keel_render::markdown_html(&markdown));
        return Ok(());
    }
    let width = args.iter().find_map(|arg| arg.parse().ok()).unwrap_or(80);
    let lines = keel_render::markdown_lines(&markdown, width);
    print!(
        "{}",
        keel_render::to_ansi(&lines, keel_render::Colors::from_env())
    );
    Ok(())
}
