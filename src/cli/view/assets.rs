//! The page's files, embedded in the binary: no build step, nothing read from disk at run time.

/// `(content type, body)` of the page file `name` (`""` is the page itself).
pub(super) fn get(name: &str) -> Option<(&'static str, &'static str)> {
    const JS: &str = "text/javascript; charset=utf-8";
    Some(match name {
        "" | "index.html" => ("text/html; charset=utf-8", include_str!("page/index.html")),
        "style.css" => ("text/css; charset=utf-8", include_str!("page/style.css")),
        "model.js" => (JS, include_str!("page/model.js")),
        "waterfall.js" => (JS, include_str!("page/waterfall.js")),
        "render.js" => (JS, include_str!("page/render.js")),
        "app.js" => (JS, include_str!("page/app.js")),
        _ => return None,
    })
}
