//! Checks of the workspace's sources that the compiler does not make.
//!
//! [`circles`] reads a crate's modules (one per file under `src/`) and the paths each one
//! names (`use` declarations and paths in code starting with `crate::`, `super::`, `self::`
//! or a child module's name) and reports every set of modules that depend on each other in
//! a circle. A path that lands on a name another module imported (a re-export, or a `use`
//! in the crate root) counts as a dependency on the module that name comes from. Code
//! after `#[cfg(test)]` is left out: tests may look at anything. It reads text, not the
//! compiler's resolution: a method called on a value of a type from another module is not
//! seen, only the paths written.
//!
//! Depends on nothing but the standard library, and nothing depends on it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// A module by its path inside the crate (`""` for the root, `"s3::common"`).
pub type ModulePath = String;

/// Each module of a crate and the modules it names.
pub type Graph = BTreeMap<ModulePath, BTreeSet<ModulePath>>;

/// The modules of the crate whose sources are `files` (path relative to `src/`, text).
pub fn graph(files: &[(String, String)]) -> Graph {
    let sources: BTreeMap<ModulePath, String> = files
        .iter()
        .map(|(path, text)| (module_of(path), flatten_inline(&without_tests(&strip_comments(text)))))
        .collect();
    let modules: BTreeSet<&str> = sources.keys().map(String::as_str).collect();
    let imports: BTreeMap<&str, BTreeMap<String, Vec<String>>> =
        sources.iter().map(|(module, text)| (module.as_str(), imported_names(module, text, &modules))).collect();
    let mut graph = Graph::new();
    for (module, text) in &sources {
        let mut named = BTreeSet::new();
        for path in paths(module, text, &modules) {
            if let Some(target) = landing(&path, &modules, &imports, 0)
                && target != *module
            {
                named.insert(target);
            }
        }
        graph.insert(module.clone(), named);
    }
    graph
}

/// The circles of `graph`: each set of two or more modules that reach each other, with
/// the edges among them.
pub fn circles(graph: &Graph) -> Vec<Vec<(ModulePath, ModulePath)>> {
    let mut found = Vec::new();
    for component in strongly_connected(graph) {
        if component.len() < 2 {
            continue;
        }
        let members: BTreeSet<&ModulePath> = component.iter().collect();
        let edges = component
            .iter()
            .flat_map(|from| {
                graph[from].iter().filter(|to| members.contains(to)).map(move |to| (from.clone(), to.clone()))
            })
            .collect();
        found.push(edges);
    }
    found
}

/// The sources of the crate at `dir` (its `src/` folder), relative path and text.
pub fn read_crate(dir: &Path) -> std::io::Result<Vec<(String, String)>> {
    let src = dir.join("src");
    let mut files = Vec::new();
    let mut stack = vec![src.clone()];
    while let Some(folder) = stack.pop() {
        for entry in std::fs::read_dir(&folder)? {
            let path = entry?.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let relative = path.strip_prefix(&src).expect("under src").to_string_lossy().replace('\\', "/");
                files.push((relative, std::fs::read_to_string(&path)?));
            }
        }
    }
    files.sort();
    Ok(files)
}

/// `a/b.rs` → `a::b`; `a/mod.rs`, `lib.rs` and `main.rs` name their folder's module.
fn module_of(file: &str) -> ModulePath {
    let mut parts: Vec<&str> = file.trim_end_matches(".rs").split('/').collect();
    if matches!(parts.last(), Some(&("mod" | "lib" | "main"))) {
        parts.pop();
    }
    parts.join("::")
}

/// `text` without `//` comments (doc comments included) and string literals' contents.
fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let mut in_string = false;
        let mut previous = ' ';
        let mut kept = String::new();
        let chars: Vec<char> = line.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            if in_string {
                if c == '"' && previous != '\\' {
                    in_string = false;
                    kept.push('"');
                }
                previous = if previous == '\\' && c == '\\' { ' ' } else { c };
                i += 1;
                continue;
            }
            if c == '/' && chars.get(i + 1) == Some(&'/') {
                break;
            }
            if c == '"' && previous != '\'' {
                in_string = true;
            }
            kept.push(c);
            previous = c;
            i += 1;
        }
        out.push_str(&kept);
        out.push('\n');
    }
    out
}

/// `text` with the paths inside inline modules (`mod name { … }`) written as from the
/// file's module: their `super::` steps out of the inline module only.
fn flatten_inline(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut depth = 0usize;
    let mut inline_opened: Vec<usize> = Vec::new();
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if rest.starts_with("'{'") || rest.starts_with("'}'") {
            out.push_str(&rest[..3]);
            rest = &rest[3..];
            continue;
        }
        if let Some(after) = rest.strip_prefix("mod ")
            && out.chars().last().is_none_or(|p| !(p.is_alphanumeric() || p == '_'))
        {
            let name_end = after.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(after.len());
            if after[name_end..].trim_start().starts_with('{') {
                inline_opened.push(depth + 1);
            }
        }
        let inside = inline_opened.len();
        if inside > 0 && rest.starts_with("super::") && out.chars().last().is_none_or(|p| !is_path_byte(p as u8)) {
            let mut steps = 0;
            while steps < inside && rest.starts_with("super::") {
                rest = &rest["super::".len()..];
                steps += 1;
            }
            out.push_str("self::");
            continue;
        }
        match c {
            '{' => depth += 1,
            '}' => {
                if inline_opened.last() == Some(&depth) {
                    inline_opened.pop();
                }
                depth = depth.saturating_sub(1);
            }
            _ => {}
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// `text` up to its first `#[cfg(test)]`.
fn without_tests(text: &str) -> String {
    text.split("#[cfg(test)]").next().unwrap_or_default().to_owned()
}

/// Each `use` declaration of `text` (the text between `use` and `;`).
fn use_declarations(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(at) = find_word(rest, "use") {
        let after = &rest[at + 3..];
        match after.find(';') {
            Some(end) => {
                found.push(after[..end].split_whitespace().collect::<Vec<_>>().join(" "));
                rest = &after[end..];
            }
            None => break,
        }
    }
    found
}

/// Where the keyword `word` starts in `text` as a word of its own.
fn find_word(text: &str, word: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut from = 0;
    while let Some(found) = text[from..].find(word) {
        let at = from + found;
        let before = at.checked_sub(1).map(|i| bytes[i]);
        let after = bytes.get(at + word.len()).copied();
        let boundary = |b: Option<u8>| b.is_none_or(|b| !(b.is_ascii_alphanumeric() || b == b'_' || b == b':'));
        if boundary(before) && after.is_some_and(|b| b == b' ' || b == b'\n') {
            return Some(at);
        }
        from = at + word.len();
    }
    None
}

/// The paths of a use tree, each with the name it binds (`None` for a glob).
fn expand_use_tree(tree: &str) -> Vec<(Vec<String>, Option<String>)> {
    let tree = tree.trim().trim_start_matches("::");
    let mut out = Vec::new();
    expand_into(&[], tree, &mut out);
    out
}

fn expand_into(prefix: &[String], tree: &str, out: &mut Vec<(Vec<String>, Option<String>)>) {
    let tree = tree.trim();
    if tree.is_empty() {
        return;
    }
    if let Some(open) = tree.find('{') {
        let head: Vec<String> =
            tree[..open].split("::").map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect();
        let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
        let path: Vec<String> = prefix.iter().cloned().chain(head).collect();
        for part in split_top_level(inner) {
            expand_into(&path, part, out);
        }
        return;
    }
    let (path_text, alias) = match tree.split_once(" as ") {
        Some((p, a)) => (p, Some(a.trim().to_owned())),
        None => (tree, None),
    };
    let mut path: Vec<String> = prefix.to_vec();
    path.extend(path_text.split("::").map(str::trim).filter(|s| !s.is_empty()).map(String::from));
    match path.last().map(String::as_str) {
        Some("*") => {
            path.pop();
            out.push((path, None));
        }
        Some("self") => {
            path.pop();
            let name = alias.or_else(|| path.last().cloned());
            out.push((path, name));
        }
        Some(last) => {
            let name = alias.unwrap_or_else(|| last.to_owned());
            out.push((path, Some(name)));
        }
        None => {}
    }
}

/// `a, b::{c, d}, e` split at the commas outside braces.
fn split_top_level(text: &str) -> Vec<&str> {
    let (mut depth, mut start, mut parts) = (0usize, 0usize, Vec::new());
    for (i, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

/// A path as written in `module` made absolute (segments from the crate root), if it
/// starts inside the crate: `crate::`, `super::`, `self::`, or a child module of `module`.
fn absolute(module: &str, path: &[String], modules: &BTreeSet<&str>) -> Option<Vec<String>> {
    let here: Vec<String> = if module.is_empty() { vec![] } else { module.split("::").map(String::from).collect() };
    let first = path.first()?;
    match first.as_str() {
        "crate" => Some(path[1..].to_vec()),
        "self" => Some(here.iter().cloned().chain(path[1..].iter().cloned()).collect()),
        "super" => {
            let ups = path.iter().take_while(|s| *s == "super").count();
            let base = here.get(..here.len().checked_sub(ups)?)?.to_vec();
            Some(base.into_iter().chain(path[ups..].iter().cloned()).collect())
        }
        child => {
            let candidate: Vec<String> = here.iter().cloned().chain([child.to_owned()]).collect();
            modules
                .contains(candidate.join("::").as_str())
                .then(|| candidate.into_iter().chain(path[1..].iter().cloned()).collect())
        }
    }
}

/// The names each module imports, and from where (absolute paths).
fn imported_names(module: &str, text: &str, modules: &BTreeSet<&str>) -> BTreeMap<String, Vec<String>> {
    let mut names = BTreeMap::new();
    for declaration in use_declarations(text) {
        for (path, name) in expand_use_tree(&declaration) {
            if let (Some(name), Some(path)) = (name, absolute(module, &path, modules)) {
                names.insert(name, path);
            }
        }
    }
    names
}

/// Every in-crate path `module` names, absolute.
fn paths(module: &str, text: &str, modules: &BTreeSet<&str>) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    for declaration in use_declarations(text) {
        for (path, _) in expand_use_tree(&declaration) {
            found.extend(absolute(module, &path, modules));
        }
    }
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        let starts_word = (c.is_ascii_alphabetic() || c == b'_') && (i == 0 || !is_path_byte(bytes[i - 1]));
        if !starts_word {
            i += 1;
            continue;
        }
        let mut end = i;
        while end < bytes.len() && is_path_byte(bytes[end]) {
            end += 1;
        }
        let segments: Vec<String> = text[i..end].split("::").filter(|s| !s.is_empty()).map(String::from).collect();
        if segments.len() > 1 {
            found.extend(absolute(module, &segments, modules));
        }
        i = end;
    }
    found
}

fn is_path_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b':'
}

/// The module an absolute path lands in: its longest prefix that is a module, followed
/// through the name it imported when the next segment is one (at most 8 steps).
fn landing(
    path: &[String],
    modules: &BTreeSet<&str>,
    imports: &BTreeMap<&str, BTreeMap<String, Vec<String>>>,
    depth: usize,
) -> Option<ModulePath> {
    let length = (0..=path.len()).rev().find(|&n| modules.contains(path[..n].join("::").as_str()))?;
    let module = path[..length].join("::");
    if depth < 8
        && let Some(next) = path.get(length)
        && let Some(source) = imports.get(module.as_str()).and_then(|names| names.get(next))
    {
        let rest: Vec<String> = source.iter().chain(path[length + 1..].iter()).cloned().collect();
        if let Some(target) = landing(&rest, modules, imports, depth + 1) {
            return Some(target);
        }
    }
    Some(module)
}

/// Tarjan's strongly connected components of `graph`.
fn strongly_connected(graph: &Graph) -> Vec<Vec<ModulePath>> {
    struct State<'a> {
        graph: &'a Graph,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        components: Vec<Vec<ModulePath>>,
    }
    fn visit<'a>(state: &mut State<'a>, node: &'a str) {
        let next = state.index.len();
        state.index.insert(node, next);
        state.low.insert(node, next);
        state.stack.push(node);
        state.on_stack.insert(node);
        let graph = state.graph;
        for target in graph.get(node).into_iter().flatten() {
            let target = target.as_str();
            if !graph.contains_key(target) {
                continue;
            }
            if !state.index.contains_key(target) {
                visit(state, target);
                let low = state.low[target].min(state.low[node]);
                state.low.insert(node, low);
            } else if state.on_stack.contains(target) {
                let low = state.index[target].min(state.low[node]);
                state.low.insert(node, low);
            }
        }
        if state.low[node] == state.index[node] {
            let mut component = Vec::new();
            while let Some(member) = state.stack.pop() {
                state.on_stack.remove(member);
                component.push(member.to_owned());
                if member == node {
                    break;
                }
            }
            component.sort();
            state.components.push(component);
        }
    }
    let mut state = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        components: Vec::new(),
    };
    for node in graph.keys() {
        if !state.index.contains_key(node.as_str()) {
            visit(&mut state, node);
        }
    }
    state.components
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crate_of(files: &[(&str, &str)]) -> Graph {
        graph(&files.iter().map(|(p, t)| (p.to_string(), t.to_string())).collect::<Vec<_>>())
    }

    #[test]
    fn a_circle_through_use_lines_is_found() {
        let g = crate_of(&[
            ("lib.rs", "mod a;\nmod b;\nmod c;\n"),
            ("a.rs", "use crate::b::{Thing, other::{X as Y}};\n"),
            ("b.rs", "use super::c::*;\n"),
            ("c.rs", "fn f() { crate::a::g(); }\n"),
        ]);
        let found = circles(&g);
        assert_eq!(found.len(), 1, "{g:?}");
        let members: BTreeSet<&str> = found[0].iter().map(|(from, _)| from.as_str()).collect();
        assert_eq!(members, BTreeSet::from(["a", "b", "c"]));
    }

    #[test]
    fn a_chain_is_no_circle_and_comments_tests_and_strings_do_not_count() {
        let g = crate_of(&[
            ("lib.rs", "pub mod a;\npub mod b;\npub use a::Thing;\n"),
            (
                "a.rs",
                "// use crate::b::X;\nconst S: &str = \"crate::b::X\";\n#[cfg(test)]\nmod tests { use crate::b::X; }\n",
            ),
            ("b.rs", "use crate::Thing;\n"),
        ]);
        assert_eq!(g["b"], BTreeSet::from(["a".to_owned()]), "a re-export in the root counts as its source");
        assert!(g["a"].is_empty(), "{g:?}");
        assert!(circles(&g).is_empty());
    }

    #[test]
    fn super_in_an_inline_module_is_the_file_module() {
        let g = crate_of(&[
            ("lib.rs", "mod a;\n"),
            ("a.rs", "static S: u8 = 0;\nmod inner {\n    use super::S;\n    fn f() { let c = '{'; }\n}\nfn g() {}\n"),
        ]);
        assert!(g["a"].is_empty(), "{g:?}");
    }

    #[test]
    fn a_parent_and_child_naming_each_other_form_a_circle() {
        let g = crate_of(&[
            ("lib.rs", "mod s3;\n"),
            ("s3/mod.rs", "mod common;\nstruct Front;\nfn f() { common::helper(); }\n"),
            ("s3/common.rs", "use super::Front;\n"),
        ]);
        assert_eq!(circles(&g).len(), 1, "{g:?}");
    }
}
