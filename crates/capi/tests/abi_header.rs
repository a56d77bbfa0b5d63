//! Keeps `include/mpi.h`, `include/mpi-ext.h` and `mpi_abi::abi` in step.
//!
//! 1. Parses the headers' `#define`s and enum members and checks that every
//!    Rust constant has the header's value and C type, and that every header
//!    constant has a Rust twin.
//! 2. Checks that every `MPI_` prototype has an identical `PMPI_` twin.
//! 3. Compiles the headers with the system C and C++ compilers (C99 and C++11,
//!    warnings as errors), runs a C program that prints every constant and
//!    the C sizes of the ABI types and predefined C datatypes, and compares
//!    them with Rust. Skipped, with a message, when no compiler is found.

use mpi_abi::abi::{self, TypeKind};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

fn include_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../include")
}

fn read_header(name: &str) -> String {
    let path = include_dir().join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// A constant as written in a header: optional cast type and integer value.
#[derive(Clone, Debug, PartialEq, Eq)]
struct HeaderConst {
    c_type: Option<String>,
    value: i64,
}

/// Parses an integer literal: decimal or hex, optionally negative.
fn parse_int(text: &str) -> Option<i64> {
    let t = text.trim();
    let (neg, digits) = match t.strip_prefix('-') {
        Some(rest) => (true, rest.trim()),
        None => (false, t),
    };
    let v = if let Some(hex) = digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        i64::from_str_radix(hex, 16).ok()?
    } else {
        digits.parse::<i64>().ok()?
    };
    Some(if neg { -v } else { v })
}

/// Strips one pair of enclosing parentheses if they enclose the whole text.
fn strip_outer_parens(text: &str) -> Option<&str> {
    let t = text.trim();
    if !t.starts_with('(') || !t.ends_with(')') {
        return None;
    }
    let mut depth = 0;
    for (i, c) in t.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 && i != t.len() - 1 {
                    return None;
                }
            }
            _ => {}
        }
    }
    Some(&t[1..t.len() - 1])
}

/// Parses a macro body: `42`, `(-3)`, `((MPI_Comm)0x101)`, `((void *)1)`,
/// `((MPI_Offset)-1)`. Returns None for anything else (e.g. an alias).
fn parse_value(body: &str) -> Option<HeaderConst> {
    let mut t = body.trim();
    if let Some(v) = parse_int(t) {
        return Some(HeaderConst {
            c_type: None,
            value: v,
        });
    }
    while let Some(inner) = strip_outer_parens(t) {
        t = inner.trim();
        if let Some(v) = parse_int(t) {
            return Some(HeaderConst {
                c_type: None,
                value: v,
            });
        }
        // A cast: "(TYPE)VALUE"
        if t.starts_with('(') {
            let close = t.find(')')?;
            let ty = t[1..close].trim().to_string();
            let rest = t[close + 1..].trim();
            let value = parse_int(rest)?;
            return Some(HeaderConst {
                c_type: Some(ty),
                value,
            });
        }
    }
    None
}

/// All object-like macros and enum members of a header, aliases resolved.
fn header_constants(text: &str) -> BTreeMap<String, HeaderConst> {
    let mut raw: Vec<(String, String)> = Vec::new();
    let mut in_enum = false;
    for line in text.lines() {
        let line = strip_comment(line);
        let trimmed = line.trim();
        if let Some(rest) = trimmed.strip_prefix("#define") {
            let rest = rest.trim();
            let name_end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            let name = &rest[..name_end];
            let body = rest[name_end..].trim();
            if rest[name_end..].starts_with('(') || body.is_empty() {
                continue; // function-like macro or include guard
            }
            raw.push((name.to_string(), body.to_string()));
        } else if trimmed.starts_with("typedef enum") {
            in_enum = true;
        } else if in_enum && trimmed.starts_with('}') {
            in_enum = false;
        } else if in_enum {
            if let Some((name, value)) = trimmed.trim_end_matches(',').split_once('=') {
                raw.push((name.trim().to_string(), value.trim().to_string()));
            }
        }
    }
    let mut out = BTreeMap::new();
    let by_name: HashMap<String, String> = raw.iter().cloned().collect();
    for (name, body) in &raw {
        let mut body = body.clone();
        // Resolve alias chains such as MPI_LONG_LONG_INT -> MPI_LONG_LONG.
        for _ in 0..4 {
            match by_name.get(body.trim()) {
                Some(target) => body = target.clone(),
                None => break,
            }
        }
        let parsed =
            parse_value(&body).unwrap_or_else(|| panic!("cannot parse #define {name} {body}"));
        assert!(
            out.insert(name.clone(), parsed).is_none(),
            "{name} defined twice"
        );
    }
    out
}

fn strip_comment(line: &str) -> &str {
    match line.find("/*") {
        Some(i) => &line[..i],
        None => line,
    }
}

/// Every Rust constant with the C type the header must cast it to (None = plain integer).
fn rust_constants() -> Vec<(&'static str, Option<&'static str>, i64)> {
    let mut v = Vec::new();
    for table in abi::ALL_HANDLE_TABLES {
        for &(name, value) in table.entries {
            v.push((name, Some(table.c_type), value as i64));
        }
    }
    for table in [
        abi::VERSION_CONSTANTS,
        abi::ERROR_CLASS_CONSTANTS,
        abi::MISC_INT_CONSTANTS,
    ] {
        for &(name, value) in table {
            v.push((name, None, i64::from(value)));
        }
    }
    for &(name, value) in abi::ADDRESS_CONSTANTS {
        v.push((name, Some("<pointer>"), value as i64));
    }
    v.push((
        "MPI_DISPLACEMENT_CURRENT",
        Some("MPI_Offset"),
        abi::MPI_DISPLACEMENT_CURRENT,
    ));
    v
}

#[test]
fn every_rust_constant_matches_mpi_h_and_back() {
    let header = header_constants(&read_header("mpi.h"));
    let mut rust_names = BTreeSet::new();
    for (name, c_type, value) in rust_constants() {
        rust_names.insert(name);
        let Some(h) = header.get(name) else {
            panic!("{name} is in abi.rs but not in mpi.h");
        };
        assert_eq!(
            h.value, value,
            "{name}: mpi.h has {:#x}, abi.rs has {value:#x}",
            h.value
        );
        match c_type {
            Some("<pointer>") => {
                let ty = h.c_type.as_deref().unwrap_or("");
                assert!(
                    ty.ends_with('*') || ty.starts_with("MPI_T_"),
                    "{name}: expected a pointer cast, got {ty:?}"
                );
            }
            Some(ty) => assert_eq!(h.c_type.as_deref(), Some(ty), "{name}: wrong cast type"),
            None => assert_eq!(h.c_type, None, "{name}: unexpected cast"),
        }
    }
    let missing: Vec<&String> = header
        .keys()
        .filter(|n| !rust_names.contains(n.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "constants in mpi.h without a twin in abi.rs: {missing:?}"
    );
}

#[test]
fn every_extension_constant_matches_mpi_ext_h_and_back() {
    let header = header_constants(&read_header("mpi-ext.h"));
    let mut rust_names = BTreeSet::new();
    for &(name, value) in abi::EXT_INT_CONSTANTS {
        rust_names.insert(name);
        let h = header
            .get(name)
            .unwrap_or_else(|| panic!("{name} missing from mpi-ext.h"));
        assert_eq!(h.value, i64::from(value), "{name}");
        assert_eq!(h.c_type, None, "{name}");
    }
    let missing: Vec<&String> = header
        .keys()
        .filter(|n| !rust_names.contains(n.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "constants in mpi-ext.h without a twin in abi.rs: {missing:?}"
    );
    // Extension classes must not collide with standard ones and must stay predefined.
    let std_classes: BTreeSet<i32> = abi::ERROR_CLASS_CONSTANTS.iter().map(|c| c.1).collect();
    for class in [
        abi::MPIX_ERR_PROC_FAILED,
        abi::MPIX_ERR_PROC_FAILED_PENDING,
        abi::MPIX_ERR_REVOKED,
    ] {
        assert!(!std_classes.contains(&class));
        assert!(class < abi::MPI_ERR_LASTCODE);
    }
}

#[test]
fn tables_cover_every_datatype_op_and_error_class() {
    let header = header_constants(&read_header("mpi.h"));
    let aliases = ["MPI_LONG_LONG_INT", "MPI_C_COMPLEX"];

    let header_types: BTreeSet<(&str, i64)> = header
        .iter()
        .filter(|(n, h)| {
            h.c_type.as_deref() == Some("MPI_Datatype")
                && *n != "MPI_DATATYPE_NULL"
                && !aliases.contains(&n.as_str())
        })
        .map(|(n, h)| (n.as_str(), h.value))
        .collect();
    let table_types: BTreeSet<(&str, i64)> = abi::PREDEFINED_TYPES
        .iter()
        .map(|t| (t.name, t.handle as i64))
        .collect();
    assert_eq!(
        header_types, table_types,
        "PREDEFINED_TYPES differs from the datatypes of mpi.h"
    );

    let header_ops: BTreeSet<(&str, i64)> = header
        .iter()
        .filter(|(n, h)| h.c_type.as_deref() == Some("MPI_Op") && *n != "MPI_OP_NULL")
        .map(|(n, h)| (n.as_str(), h.value))
        .collect();
    let table_ops: BTreeSet<(&str, i64)> = abi::PREDEFINED_OPS
        .iter()
        .map(|&(h, n)| (n, h as i64))
        .collect();
    assert_eq!(
        header_ops, table_ops,
        "PREDEFINED_OPS differs from the ops of mpi.h"
    );

    let ext = header_constants(&read_header("mpi-ext.h"));
    let is_class = |n: &str| {
        (n == "MPI_SUCCESS"
            || n.starts_with("MPI_ERR_")
            || n.starts_with("MPI_T_ERR_")
            || n.starts_with("MPIX_ERR_"))
            && n != "MPI_ERR_LASTCODE"
    };
    let header_classes: BTreeSet<(&str, i64)> = header
        .iter()
        .chain(ext.iter())
        .filter(|(n, _)| {
            is_class(n) && !n.starts_with("MPI_ERR_PROC_FAILED") && *n != "MPI_ERR_REVOKED"
        })
        .map(|(n, h)| (n.as_str(), h.value))
        .collect();
    let table_classes: BTreeSet<(&str, i64)> = abi::ERROR_CLASSES
        .iter()
        .map(|&(v, n, _)| (n, i64::from(v)))
        .collect();
    assert_eq!(
        header_classes, table_classes,
        "ERROR_CLASSES differs from the error classes of the headers"
    );
}

/// Prototype lines: (function name, text after the name).
fn prototypes(text: &str, prefix: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let line = strip_comment(line).trim();
        if line.starts_with("typedef") || line.starts_with('#') || !line.ends_with(");") {
            continue;
        }
        let Some(open) = line.find('(') else { continue };
        let head = &line[..open];
        let Some(name) = head.split_whitespace().last() else {
            continue;
        };
        if let Some(rest) = name.strip_prefix(prefix) {
            let ret = head[..head.len() - name.len()].trim();
            out.insert(rest.to_string(), format!("{ret} | {}", &line[open..]));
        }
    }
    out
}

#[test]
fn every_binding_has_an_identical_pmpi_twin() {
    for (file, prefix) in [("mpi.h", "MPI_"), ("mpi-ext.h", "MPIX_")] {
        let text = read_header(file);
        let mpi = prototypes(&text, prefix);
        let pmpi = prototypes(&text, &format!("P{prefix}"));
        assert!(!mpi.is_empty(), "no prototypes found in {file}");
        let names: BTreeSet<&String> = mpi.keys().chain(pmpi.keys()).collect();
        let differ: Vec<String> = names
            .into_iter()
            .filter(|n| mpi.get(*n) != pmpi.get(*n))
            .map(|n| format!("{n}: {:?} vs P: {:?}", mpi.get(n), pmpi.get(n)))
            .collect();
        assert!(
            differ.is_empty(),
            "{file}: MPI and PMPI prototypes differ:\n{}",
            differ.join("\n")
        );
    }
    let mpi = prototypes(&read_header("mpi.h"), "MPI_");
    // Spot checks of the parts the library needs first.
    for name in [
        "Init",
        "Send_c",
        "Irecv",
        "Waitall",
        "Type_create_struct_c",
        "Ialltoallw",
        "Abi_get_version",
        "Comm_toint",
        "Wtime",
    ] {
        assert!(mpi.contains_key(name), "MPI_{name} missing");
    }
    eprintln!(
        "mpi.h declares {} MPI_ functions and as many PMPI_ twins",
        mpi.len()
    );
}

// ---------------------------------------------------------------------------
// Compiler checks
// ---------------------------------------------------------------------------

fn find_compiler(candidates: &[&str]) -> Option<String> {
    candidates
        .iter()
        .find(|c| {
            Command::new(c)
                .arg("--version")
                .output()
                .map(|o| o.status.success())
                .unwrap_or(false)
        })
        .map(|c| c.to_string())
}

fn scratch_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("steadfast-abi-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir)
        .unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
    dir
}

fn run(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// C expression that yields a constant's value as a long long.
fn c_value_expr(name: &str, c_type: Option<&str>) -> String {
    match c_type {
        None => format!("(long long)({name})"),
        Some(_) => format!("(long long)(intptr_t)({name})"),
    }
}

/// C datatypes whose layout the C compiler can confirm: (MPI name, C type).
const C_TYPES: &[(&str, &str)] = &[
    ("MPI_AINT", "MPI_Aint"),
    ("MPI_COUNT", "MPI_Count"),
    ("MPI_OFFSET", "MPI_Offset"),
    ("MPI_CHAR", "char"),
    ("MPI_SIGNED_CHAR", "signed char"),
    ("MPI_UNSIGNED_CHAR", "unsigned char"),
    ("MPI_WCHAR", "wchar_t"),
    ("MPI_SHORT", "short"),
    ("MPI_UNSIGNED_SHORT", "unsigned short"),
    ("MPI_INT", "int"),
    ("MPI_UNSIGNED", "unsigned"),
    ("MPI_LONG", "long"),
    ("MPI_UNSIGNED_LONG", "unsigned long"),
    ("MPI_LONG_LONG", "long long"),
    ("MPI_UNSIGNED_LONG_LONG", "unsigned long long"),
    ("MPI_INT8_T", "int8_t"),
    ("MPI_UINT8_T", "uint8_t"),
    ("MPI_INT16_T", "int16_t"),
    ("MPI_UINT16_T", "uint16_t"),
    ("MPI_INT32_T", "int32_t"),
    ("MPI_UINT32_T", "uint32_t"),
    ("MPI_INT64_T", "int64_t"),
    ("MPI_UINT64_T", "uint64_t"),
    ("MPI_FLOAT", "float"),
    ("MPI_DOUBLE", "double"),
    ("MPI_LONG_DOUBLE", "long double"),
    ("MPI_C_FLOAT_COMPLEX", "float _Complex"),
    ("MPI_C_DOUBLE_COMPLEX", "double _Complex"),
    ("MPI_C_LONG_DOUBLE_COMPLEX", "long double _Complex"),
    ("MPI_C_BOOL", "_Bool"),
];

/// C pair types: (MPI name, value C type).
const C_PAIRS: &[(&str, &str)] = &[
    ("MPI_FLOAT_INT", "float"),
    ("MPI_DOUBLE_INT", "double"),
    ("MPI_LONG_INT", "long"),
    ("MPI_2INT", "int"),
    ("MPI_SHORT_INT", "short"),
    ("MPI_LONG_DOUBLE_INT", "long double"),
];

fn c_program() -> String {
    let mut src = String::from(
        "#include <stddef.h>\n#include <stdio.h>\n#include <wchar.h>\n#include \"mpi.h\"\n#include \"mpi-ext.h\"\n\n",
    );
    for (i, (_, value_ty)) in C_PAIRS.iter().enumerate() {
        src.push_str(&format!("struct pair{i} {{ {value_ty} v; int i; }};\n"));
    }
    src.push_str("\nint main(void)\n{\n");
    for (name, c_type, _) in rust_constants() {
        src.push_str(&format!(
            "    printf(\"{name} %lld\\n\", {});\n",
            c_value_expr(name, c_type)
        ));
    }
    for &(name, _) in abi::EXT_INT_CONSTANTS {
        src.push_str(&format!(
            "    printf(\"{name} %lld\\n\", (long long)({name}));\n"
        ));
    }
    let sizes = [
        "MPI_Status",
        "MPI_Aint",
        "MPI_Offset",
        "MPI_Count",
        "MPI_Fint",
        "MPI_Comm",
        "MPI_Datatype",
        "MPI_Errhandler",
        "MPI_File",
        "MPI_Group",
        "MPI_Info",
        "MPI_Message",
        "MPI_Op",
        "MPI_Request",
        "MPI_Session",
        "MPI_Win",
        "MPI_T_cb_safety",
        "MPI_T_source_order",
    ];
    for ty in sizes {
        src.push_str(&format!(
            "    printf(\"sizeof {ty} %lld\\n\", (long long)sizeof({ty}));\n"
        ));
    }
    for field in ["MPI_SOURCE", "MPI_TAG", "MPI_ERROR", "MPI_internal"] {
        src.push_str(&format!(
            "    printf(\"offsetof {field} %lld\\n\", (long long)offsetof(MPI_Status, {field}));\n"
        ));
    }
    for (name, ty) in C_TYPES {
        src.push_str(&format!("    printf(\"type {name} %lld %lld\\n\", (long long)sizeof({ty}), (long long)sizeof({ty}));\n"));
    }
    for (i, (name, value_ty)) in C_PAIRS.iter().enumerate() {
        src.push_str(&format!(
            "    printf(\"pair {name} %lld %lld %lld\\n\", (long long)(sizeof({value_ty}) + sizeof(int)), (long long)sizeof(struct pair{i}), (long long)offsetof(struct pair{i}, i));\n"
        ));
    }
    src.push_str("    return 0;\n}\n");
    src
}

#[test]
fn c_compiler_agrees_with_rust() {
    let Some(cc) = find_compiler(&["cc", "gcc", "clang"]) else {
        eprintln!("SKIPPED c_compiler_agrees_with_rust: no C compiler (cc, gcc, clang) found");
        return;
    };
    let dir = scratch_dir("c");
    let src = dir.join("abi_check.c");
    let exe = dir.join("abi_check");
    std::fs::write(&src, c_program()).expect("write C source");
    run(Command::new(&cc)
        .args(["-std=c99", "-Wall", "-Wextra", "-pedantic", "-Werror", "-I"])
        .arg(include_dir())
        .arg(&src)
        .arg("-o")
        .arg(&exe));
    let output = run(&mut Command::new(&exe));
    let _ = std::fs::remove_dir_all(&dir);

    let mut seen = BTreeMap::new();
    for line in output.lines() {
        let parts: Vec<&str> = line.split_whitespace().collect();
        seen.insert(
            parts[..parts.len().saturating_sub(1)].join(" "),
            parts.last().copied().unwrap_or(""),
        );
        match parts.as_slice() {
            ["type", name, size, _] => {
                let ty = abi::PREDEFINED_TYPES
                    .iter()
                    .find(|t| t.name == *name)
                    .expect("type in table");
                assert_eq!(ty.size.to_string(), *size, "{name}: size");
                assert_eq!(ty.extent.to_string(), *size, "{name}: extent");
            }
            ["pair", name, size, extent, offset] => {
                let ty = abi::PREDEFINED_TYPES
                    .iter()
                    .find(|t| t.name == *name)
                    .expect("pair in table");
                assert_eq!(ty.size.to_string(), *size, "{name}: size");
                assert_eq!(ty.extent.to_string(), *extent, "{name}: extent");
                let TypeKind::Pair { index_offset, .. } = ty.kind else {
                    panic!("{name} is not a pair")
                };
                assert_eq!(index_offset.to_string(), *offset, "{name}: index offset");
            }
            _ => {}
        }
    }
    // Every constant as the C compiler evaluates it.
    for (name, _, value) in rust_constants() {
        assert_eq!(
            seen.get(name).copied(),
            Some(value.to_string().as_str()),
            "{name} as compiled"
        );
    }
    for &(name, value) in abi::EXT_INT_CONSTANTS {
        assert_eq!(
            seen.get(name).copied(),
            Some(value.to_string().as_str()),
            "{name} as compiled"
        );
    }
    // ABI type sizes.
    let expect = [
        ("sizeof MPI_Status", 32),
        ("sizeof MPI_Aint", 8),
        ("sizeof MPI_Offset", 8),
        ("sizeof MPI_Count", 8),
        ("sizeof MPI_Fint", 4),
        ("sizeof MPI_Comm", 8),
        ("sizeof MPI_Datatype", 8),
        ("sizeof MPI_Errhandler", 8),
        ("sizeof MPI_File", 8),
        ("sizeof MPI_Group", 8),
        ("sizeof MPI_Info", 8),
        ("sizeof MPI_Message", 8),
        ("sizeof MPI_Op", 8),
        ("sizeof MPI_Request", 8),
        ("sizeof MPI_Session", 8),
        ("sizeof MPI_Win", 8),
        ("sizeof MPI_T_cb_safety", 4),
        ("sizeof MPI_T_source_order", 4),
        ("offsetof MPI_SOURCE", 0),
        ("offsetof MPI_TAG", 4),
        ("offsetof MPI_ERROR", 8),
        ("offsetof MPI_internal", 12),
    ];
    for (key, want) in expect {
        assert_eq!(
            seen.get(key).copied(),
            Some(want.to_string().as_str()),
            "{key}"
        );
    }
    assert_eq!(std::mem::size_of::<abi::MPI_Status>(), 32);
    assert_eq!(std::mem::size_of::<abi::MPI_Aint>(), 8);
    assert_eq!(std::mem::size_of::<abi::MPI_Comm>(), 8);
    assert_eq!(std::mem::offset_of!(abi::MPI_Status, internal), 12);
    // The C program printed exactly what we asked for: no missing lines.
    let asked = rust_constants().len()
        + abi::EXT_INT_CONSTANTS.len()
        + expect.len()
        + C_TYPES.len()
        + C_PAIRS.len();
    assert_eq!(output.lines().count(), asked);
}

#[test]
fn headers_compile_as_cxx() {
    let Some(cxx) = find_compiler(&["c++", "g++", "clang++"]) else {
        eprintln!("SKIPPED headers_compile_as_cxx: no C++ compiler (c++, g++, clang++) found");
        return;
    };
    let dir = scratch_dir("cxx");
    let src = dir.join("abi_check.cpp");
    let exe = dir.join("abi_check_cxx");
    // Only constants and types are used, so the program links without the library.
    let program = r#"
#include "mpi.h"
#include "mpi-ext.h"
#include <cstdio>
static_assert(sizeof(MPI_Status) == 32, "MPI_Status is 32 bytes");
static_assert(sizeof(MPI_Aint) == 8, "MPI_Aint is 8 bytes");
static_assert(sizeof(MPI_Count) == 8, "MPI_Count is 8 bytes");
static_assert(sizeof(MPI_Comm) == sizeof(void *), "handles are pointers");
static_assert(sizeof(bool) == 1, "MPI_CXX_BOOL is 1 byte");
int main()
{
    MPI_Comm c = MPI_COMM_WORLD;
    MPI_Datatype t = MPI_CXX_BOOL;
    MPI_Status s;
    s.MPI_SOURCE = MPI_ANY_SOURCE;
    std::printf("%ld %ld %d %d\n", (long)(intptr_t)c, (long)(intptr_t)t, s.MPI_SOURCE, MPIX_ERR_REVOKED);
    return 0;
}
"#;
    std::fs::write(&src, program).expect("write C++ source");
    run(Command::new(&cxx)
        .args([
            "-std=c++11",
            "-Wall",
            "-Wextra",
            "-pedantic",
            "-Werror",
            "-I",
        ])
        .arg(include_dir())
        .arg(&src)
        .arg("-o")
        .arg(&exe));
    let out = run(&mut Command::new(&exe));
    let _ = std::fs::remove_dir_all(&dir);
    let want = format!(
        "{} {} {} {}\n",
        abi::MPI_COMM_WORLD,
        abi::MPI_CXX_BOOL,
        abi::MPI_ANY_SOURCE,
        abi::MPIX_ERR_REVOKED
    );
    assert_eq!(out, want);
}

#[test]
fn parser_reads_every_form_used_in_the_headers() {
    let h = header_constants(
        "#define A 12\n#define B (-3)\n#define C ((MPI_Comm)0x00000101)\n#define D ((void *)1)\n\
         #define E ((MPI_Offset)-1)\n#define F C\n#define G 0x3fff /* note */\n#define GUARD\n#define FN(x) x\n\
         typedef enum E2 {\n    X = 0x0f,\n    Y = 2\n} E2;\n",
    );
    let v = |n: &str| h.get(n).map(|c| (c.c_type.clone(), c.value));
    assert_eq!(v("A"), Some((None, 12)));
    assert_eq!(v("B"), Some((None, -3)));
    assert_eq!(v("C"), Some((Some("MPI_Comm".into()), 0x101)));
    assert_eq!(v("D"), Some((Some("void *".into()), 1)));
    assert_eq!(v("E"), Some((Some("MPI_Offset".into()), -1)));
    assert_eq!(v("F"), Some((Some("MPI_Comm".into()), 0x101)));
    assert_eq!(v("G"), Some((None, 0x3fff)));
    assert_eq!(v("X"), Some((None, 15)));
    assert_eq!(v("Y"), Some((None, 2)));
    assert_eq!(v("GUARD"), None);
    assert_eq!(v("FN"), None);
    assert_eq!(h.len(), 9);
}
