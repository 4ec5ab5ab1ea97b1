//! No crate of the workspace has modules that import each other in a circle.

use std::path::Path;

#[test]
fn no_crate_has_a_circle_of_imports() {
    // Cargo names the package's directory when it runs the test; the one built in is only
    // a fallback (a binary reused from another checkout would read that checkout).
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").into());
    let crates = Path::new(&manifest_dir).parent().expect("crates/");
    let mut report = Vec::new();
    let mut checked = 0;
    for entry in std::fs::read_dir(crates).expect("crates/ is readable") {
        let dir = entry.expect("an entry of crates/").path();
        if !dir.join("src").is_dir() {
            continue;
        }
        let files = shoal_lint::read_crate(&dir).expect("sources are readable");
        checked += files.len();
        for circle in shoal_lint::circles(&shoal_lint::graph(&files)) {
            let edges: Vec<String> = circle.iter().map(|(from, to)| format!("{from} → {to}")).collect();
            report.push(format!("{}: {}", dir.display(), edges.join(", ")));
        }
    }
    assert!(checked > 100, "only {checked} source files found under {}", crates.display());
    assert!(
        report.is_empty(),
        "modules importing each other in a circle (\"\" is the crate root):\n{}",
        report.join("\n")
    );
}
