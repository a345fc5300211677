//! The engine's modules form layers (the crate docs list them): a module
//! may use modules of its own layer or of the layers below, never one
//! above, and no two modules may use each other, however indirectly. The
//! check reads the sources: every `crate::<module>` path outside comments
//! is an edge from the module whose file holds it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The layers, lowest first.
const LAYERS: &[&[&str]] = &[
    &["config", "observe"],
    &[
        "event_time",
        "dedup",
        "lookups",
        "exchange",
        "isolate",
        "operator_state",
    ],
    &["versions"],
    &["pipeline"],
    &["open"],
    &["explain"],
    &["cluster"],
];

type Graph = BTreeMap<String, BTreeSet<String>>;

#[test]
fn modules_depend_only_downward_and_have_no_cycle() {
    let graph = graph(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    let layer_of = |m: &str| LAYERS.iter().position(|l| l.contains(&m));
    let mut problems = Vec::new();
    for (from, tos) in &graph {
        let Some(own) = layer_of(from) else {
            problems.push(format!("module `{from}` is in no layer of LAYERS"));
            continue;
        };
        for to in tos {
            match layer_of(to) {
                Some(l) if l > own => problems.push(format!("`{from}` uses `{to}`, a layer above")),
                _ => {}
            }
        }
    }
    for cycle in cycles(&graph) {
        problems.push(format!("cycle: {}", cycle.join(" -> ")));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn grouped_imports_and_paths_count_comments_do_not() {
    let text = "use crate::{config::X, observe};\n// crate::pipeline\nlet a = crate::versions::f(\"s3://b\");";
    let found: Vec<String> = used_modules(text).into_iter().collect();
    assert_eq!(found, ["config", "observe", "versions"]);
}

#[test]
fn the_check_finds_a_cycle() {
    let graph: Graph = [("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")]
        .into_iter()
        .fold(Graph::new(), |mut g, (f, t)| {
            g.entry(f.into()).or_default().insert(t.into());
            g
        });
    assert_eq!(cycles(&graph), vec![vec!["a", "b", "c", "a"]]);
}

/// Edges between top-level modules, read from the files under `src`.
fn graph(src: &Path) -> Graph {
    let mut graph = Graph::new();
    for file in rust_files(src) {
        let relative = file.strip_prefix(src).expect("under src");
        let first = relative.components().next().expect("a path");
        let module = first
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_string();
        if module == "lib" || module == "module_graph" {
            continue;
        }
        let text = std::fs::read_to_string(&file).expect("a readable source file");
        let edges = graph.entry(module.clone()).or_default();
        for name in used_modules(&text) {
            if name != module {
                edges.insert(name);
            }
        }
    }
    graph
}

/// The top-level modules `text` names as `crate::name` or in
/// `use crate::{a, b::c}`, outside comment lines.
fn used_modules(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let code = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    for (i, _) in code.match_indices("crate::") {
        if code[..i]
            .chars()
            .last()
            .is_some_and(|c| c.is_alphanumeric() || c == '_')
        {
            continue;
        }
        let rest = &code[i + "crate::".len()..];
        let group = match rest.strip_prefix('{') {
            Some(inner) => &inner[..inner.find('}').unwrap_or(inner.len())],
            None => rest,
        };
        for item in group.split(',') {
            let name: String = item
                .trim_start()
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() && name.chars().next().is_some_and(|c| c.is_lowercase()) {
                names.insert(name);
            }
            if rest.starts_with('{') {
                continue;
            }
            break;
        }
    }
    names
}

fn rust_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).expect("src is readable") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files.sort();
    files
}

/// Every cycle through the graph's strongly connected parts, each as the
/// path from its smallest module back to itself.
fn cycles(graph: &Graph) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    let mut seen = BTreeSet::new();
    for start in graph.keys() {
        if seen.contains(start) {
            continue;
        }
        if let Some(path) = path_back(graph, start, start, &mut BTreeSet::new()) {
            seen.extend(path.iter().cloned());
            let mut cycle = vec![start.clone()];
            cycle.extend(path);
            found.push(cycle);
        }
    }
    found
}

/// A path from `at` to `target` (depth first, in name order), if any.
fn path_back(
    graph: &Graph,
    at: &str,
    target: &str,
    visited: &mut BTreeSet<String>,
) -> Option<Vec<String>> {
    for next in graph.get(at).into_iter().flatten() {
        if next == target {
            return Some(vec![next.clone()]);
        }
        if visited.insert(next.clone()) {
            if let Some(mut rest) = path_back(graph, next, target, visited) {
                rest.insert(0, next.clone());
                return Some(rest);
            }
        }
    }
    None
}
