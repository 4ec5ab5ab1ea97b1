//! No crate of the workspace has modules that import each other in a circle.

use std::collections::BTreeSet;
use std::path::Path;

/// Crates whose circles are known and not yet broken (issue 47): each must still have one,
/// so that the entry goes when its circle does; no other crate may have any.
const KNOWN: &[&str] = &["shoal"];

#[test]
fn no_crate_has_a_circle_of_imports() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("crates/");
    let mut report = Vec::new();
    let mut with_circles = BTreeSet::new();
    let mut checked = 0;
    for entry in std::fs::read_dir(crates).expect("crates/ is readable") {
        let dir = entry.expect("an entry of crates/").path();
        if !dir.join("src").is_dir() {
            continue;
        }
        let name = dir.file_name().expect("a folder name").to_string_lossy().into_owned();
        let files = shoal_lint::read_crate(&dir).expect("sources are readable");
        checked += files.len();
        for circle in shoal_lint::circles(&shoal_lint::graph(&files)) {
            with_circles.insert(name.clone());
            if !KNOWN.contains(&name.as_str()) {
                let edges: Vec<String> = circle.iter().map(|(from, to)| format!("{from} → {to}")).collect();
                report.push(format!("{name}: {}", edges.join(", ")));
            }
        }
    }
    assert!(checked > 100, "only {checked} source files found under {}", crates.display());
    assert!(
        report.is_empty(),
        "modules importing each other in a circle (\"\" is the crate root):\n{}",
        report.join("\n")
    );
    let gone: Vec<&&str> = KNOWN.iter().filter(|k| !with_circles.contains(**k)).collect();
    assert!(gone.is_empty(), "{gone:?} no longer have a circle: take them out of KNOWN");
}
