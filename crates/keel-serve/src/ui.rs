//! The browser UI: a page, a script and a style sheet, embedded in the binary (no CDN, no
//! network, no build step).
//!
//! Invariants: the assets are served as they are in `ui/`, with their content type and
//! `no-store`, so a reload always gets the UI of the running binary; a strict content security
//! policy allows only these assets and forbids framing the page.

use axum::http::header;
use axum::response::{IntoResponse, Response};

const INDEX: &str = include_str!("../ui/index.html");
const SCRIPT: &str = include_str!("../ui/app.js");
const STYLE: &str = include_str!("../ui/app.css");

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-store"),
            // Only our own assets, and never inside another site's frame (clickjacking on the
            // approval buttons).
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
            ),
            (header::X_FRAME_OPTIONS, "DENY"),
        ],
        body,
    )
        .into_response()
}

pub async fn index() -> Response {
    asset("text/html; charset=utf-8", INDEX)
}

pub async fn script() -> Response {
    asset("text/javascript; charset=utf-8", SCRIPT)
}

pub async fn style() -> Response {
    asset("text/css; charset=utf-8", STYLE)
}

/// Every asset of the first screen, for the size budget test.
#[cfg(test)]
fn first_screen() -> [&'static str; 3] {
    [INDEX, SCRIPT, STYLE]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first screen's budget is 60 KiB gzip; the assets' raw size bounds their gzip size
    /// from above, so staying under the budget raw proves it without a compressor.
    #[test]
    fn the_first_screen_fits_the_size_budget() {
        let total: usize = first_screen().iter().map(|asset| asset.len()).sum();
        assert!(total <= 60 * 1024, "first screen is {total} bytes");
    }

    #[test]
    fn model_text_is_never_written_as_html() {
        // HTML is set in exactly two places, each from keel-render's sanitised output sent by
        // the server (`html` of a message or of an answer so far, `diff_html` of a waiting call
        // or a preview); everything else is text (`textContent`).
        let writes: Vec<&str> = SCRIPT
            .lines()
            .filter(|line| line.contains("innerHTML"))
            .map(str::trim)
            .collect();
        assert_eq!(
            writes,
            ["box.innerHTML = html;", "diff.innerHTML = html;"],
            "the UI writes HTML only from the renderer"
        );
        assert!(!SCRIPT.contains("insertAdjacentHTML"));
        assert!(
            !INDEX.contains("http://") && !INDEX.contains("https://"),
            "no CDN"
        );
    }
}
