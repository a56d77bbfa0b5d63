//! Every `STEADFAST_*` name the project's code, scripts and docs use is listed in
//! `VARS`, and `docs/configuration.md` is the generated list.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        let p = e.path();
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if p.is_dir() {
            if !matches!(name, "target" | "build" | "install" | ".git" | "corpus" | "artifacts") {
                walk(&p, out);
            }
        } else if p.extension().is_some_and(|x| x == "rs" || x == "c" || x == "h" || x == "sh" || x == "py") {
            out.push(p);
        }
    }
}

/// `STEADFAST_` names in `text` (a trailing `_` or `*` marks a prefix, not a name).
fn names(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let b = text.as_bytes();
    let mut i = 0;
    while let Some(k) = text[i..].find("STEADFAST_") {
        let start = i + k;
        let mut end = start + "STEADFAST_".len();
        while end < b.len() && (b[end].is_ascii_uppercase() || b[end].is_ascii_digit() || b[end] == b'_') {
            end += 1;
        }
        let name = &text[start..end];
        let prefix = name.ends_with('_') || b.get(end) == Some(&b'*');
        let preceded = start > 0 && (b[start - 1].is_ascii_alphanumeric() || b[start - 1] == b'_');
        if !prefix && !preceded && name.len() > "STEADFAST_".len() {
            out.push(name.to_owned());
        }
        i = end;
    }
    out
}

/// Names that are not environment variables: `mpi.h`'s macro telling a program it is built
/// against Steadfast.
const NOT_VARIABLES: &[&str] = &["STEADFAST_MPI"];

#[test]
fn every_variable_the_code_names_is_listed() {
    let mut files = Vec::new();
    for d in ["crates", "scripts", "tests", "bench", "examples", "tools", "fuzz"] {
        walk(&root().join(d), &mut files);
    }
    let mut missing = Vec::new();
    for f in &files {
        let Ok(text) = std::fs::read_to_string(f) else { continue };
        for n in names(&text) {
            if steadfast_config::var(&n).is_none() && !NOT_VARIABLES.contains(&n.as_str()) && !missing.iter().any(|(m, _): &(String, PathBuf)| *m == n) {
                missing.push((n, f.clone()));
            }
        }
    }
    assert!(missing.is_empty(), "not listed in crates/config/src/lib.rs VARS: {missing:?}");
}

#[test]
fn configuration_doc_is_the_generated_list() {
    let doc = std::fs::read_to_string(root().join("docs/configuration.md")).unwrap_or_default();
    assert!(
        doc == steadfast_config::markdown(),
        "docs/configuration.md is stale: regenerate it with `install/bin/steadfast config --markdown > docs/configuration.md`"
    );
}
