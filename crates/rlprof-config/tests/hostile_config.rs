//! Hostile configs (issue 28, defects 8-11): YAML and interpolation bombs, inputs nested deep
//! enough to overflow a recursive parser, exponential defaults lists, NUL bytes and byte order
//! marks. Each is generated here and must end in a clean configuration error that names the
//! file (or the override) and the limit it passed, on a 2 MiB thread stack (what a test thread
//! or a worker thread has), never in a panic, an abort or a stack overflow.

use std::path::Path;

use rlprof_config::ConfigError;
use rlprof_config::{
    self as config, MAX_COMPOSED_NODES, MAX_DEFAULTS_FILES, MAX_INTERPOLATED_BYTES,
    MAX_INTERPOLATION_DEPTH, MAX_KEY_SEGMENTS, MAX_RESOLVED_DEPTH, MAX_RESOLVED_NODES,
    MAX_VALUE_DEPTH, Node, Selection, build_plan, load_document, load_document_str,
};
use rlprof_profiler::plan::Tool;

/// The stack of a test thread (and of threads spawned without a size).
const SMALL_STACK: usize = 2 << 20;

/// Runs `f` on a thread with a 2 MiB stack, whatever `RUST_MIN_STACK` says.
fn on_small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(SMALL_STACK)
        .spawn(f)
        .expect("spawn")
        .join()
        .expect("the config reader panicked or overflowed")
}

/// The configuration errors of loading `text` (named `origin`) with `overrides`.
fn text_errors(text: String, origin: &'static str, overrides: Vec<String>) -> String {
    on_small_stack(move || match load_document_str(&text, origin, &overrides) {
        Err(ConfigError::Invalid(v)) => v.join("\n"),
        Err(other) => panic!("expected configuration errors, got {other}"),
        Ok(_) => panic!("the hostile config was accepted"),
    })
}

/// The configuration errors of loading the file `path` with `overrides`.
fn file_errors(path: &Path, overrides: Vec<String>) -> String {
    let path = path.to_path_buf();
    on_small_stack(move || match load_document(Some(&path), &overrides) {
        Err(ConfigError::Invalid(v)) => v.join("\n"),
        Err(other) => panic!("expected configuration errors, got {other}"),
        Ok(_) => panic!("the hostile config was accepted"),
    })
}

fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write");
    p
}

/// `n` copies of `item` separated by `sep`.
fn repeat(item: &str, n: usize, sep: &str) -> String {
    vec![item; n].join(sep)
}

fn assert_has(errors: &str, wanted: &[&str]) {
    for w in wanted {
        assert!(
            errors.contains(w),
            "expected {w:?} in the error, got:\n{}",
            &errors[..errors.len().min(2000)]
        );
    }
}

// --- 8. YAML and interpolation bombs -----------------------------------------------------------

/// `levels` anchored lists of `width` items, each item an alias of the list before: the last
/// one expands to `width^levels` nodes.
fn billion_laughs(levels: usize, width: usize) -> String {
    let mut out = format!("l0: &l0 [{}]\n", repeat("lol", width, ", "));
    for i in 1..levels {
        let items = repeat(&format!("*l{}", i - 1), width, ", ");
        out.push_str(&format!("l{i}: &l{i} [{items}]\n"));
    }
    out
}

#[test]
fn billion_laughs_alias_bomb_is_refused_with_the_file_and_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "laughs.yaml", &billion_laughs(9, 9));
    let e = file_errors(&path, vec![]);
    assert_has(
        &e,
        &[
            "laughs.yaml",
            &config::yaml::MAX_NODES.to_string(),
            "aliases",
        ],
    );
    // The same text read without composition (the trainer's reader) is refused as well.
    let e = config::parse_yaml(&billion_laughs(9, 9)).expect_err("bomb accepted");
    assert!(e.message.contains("aliases"), "{}", e.message);
}

#[test]
fn small_alias_expansions_are_still_read() {
    // 4 levels of 4: 4^4 = 256 leaves, far under the limit, read as PyYAML reads them.
    let doc = config::parse_yaml(&billion_laughs(4, 4)).expect("small aliases");
    let mut n = &doc["l3"];
    for _ in 0..3 {
        assert_eq!(n.as_list().map(<[Node]>::len), Some(4));
        n = &n.as_list().unwrap()[3];
    }
    assert_eq!(n.as_list().unwrap()[0], Node::Str("lol".into()));
}

#[test]
fn anchors_nested_in_anchors_count_their_copies() {
    // Each anchor keeps a copy of its subtree: 200 anchors around one 5,000-item list copy it 200
    // times (a million nodes) without a single alias.
    let mut text = String::from("a: ");
    for i in 0..200 {
        text.push_str(&format!("&a{i} ["));
    }
    text.push_str(&repeat("0", 5_000, ", "));
    text.push_str(&"]".repeat(200));
    text.push('\n');
    let e = text_errors(text, "anchors.yaml", vec![]);
    assert_has(&e, &["anchors.yaml", &config::yaml::MAX_NODES.to_string()]);
}

#[test]
fn anchors_nested_in_anchors_are_counted_once_each() {
    // 60 anchors one inside another keep 60 small copies (about 1,800 nodes): read.
    let mut text = String::from("a: ");
    for i in 0..60 {
        text.push_str(&format!("&a{i} {{b: "));
    }
    text.push('1');
    text.push_str(&"}".repeat(60));
    text.push_str("\nc: *a30\n");
    let doc = config::parse_yaml(&text).expect("nested anchors");
    let mut n = &doc["c"];
    for _ in 0..29 {
        n = &n["b"];
    }
    assert_eq!(n["b"], Node::Int(1));
}

#[test]
fn string_interpolation_bomb_is_refused_with_the_limit() {
    // "${a}" ten times, nested nine levels deep: 10^9 copies of the first string.
    let mut text = String::from("s0: abcdefghij\n");
    for i in 1..=9 {
        text.push_str(&format!(
            "s{i}: '{}'\n",
            format!("${{s{}}}", i - 1).repeat(10)
        ));
    }
    let e = text_errors(text, "strings.yaml", vec![]);
    assert_has(
        &e,
        &[
            "strings.yaml",
            &format!("{} MiB", MAX_INTERPOLATED_BYTES >> 20),
        ],
    );
}

#[test]
fn container_interpolation_bomb_is_refused_with_the_limit() {
    // Lists of ten references to the list before: 10^9 nodes once resolved.
    let mut text = format!("n0: [{}]\n", repeat("1", 10, ", "));
    for i in 1..=9 {
        let items = repeat(&format!("'${{n{}}}'", i - 1), 10, ", ");
        text.push_str(&format!("n{i}: [{items}]\n"));
    }
    let e = text_errors(text, "nodes.yaml", vec![]);
    assert_has(&e, &["nodes.yaml", &MAX_RESOLVED_NODES.to_string()]);
}

#[test]
fn small_interpolation_fan_out_still_resolves() {
    let text =
        "s0: ab\ns1: '${s0}${s0}${s0}'\ns2: '${s1}-${s1}'\nn0: [1, 2]\nn1: ['${n0}', '${n0}']\n";
    let doc = load_document_str(text, "ok.yaml", &[]).expect("resolves");
    assert_eq!(doc["s2"], Node::Str("ababab-ababab".into()));
    let n1 = doc["n1"].as_list().unwrap();
    assert_eq!(n1.len(), 2);
    assert_eq!(n1[1], Node::List(vec![Node::Int(1), Node::Int(2)]));
}

// --- 9. Stack overflows ------------------------------------------------------------------------

#[test]
fn a_ten_thousand_key_interpolation_chain_is_refused() {
    let mut text = String::new();
    for i in 0..10_000 {
        text.push_str(&format!("k{i}: ${{k{}}}\n", i + 1));
    }
    text.push_str("k10000: end\n");
    let e = text_errors(text, "chain.yaml", vec![]);
    assert_has(
        &e,
        &[
            "chain.yaml",
            &format!("deeper than {MAX_INTERPOLATION_DEPTH} levels"),
            "k0 -> k1 -> k2",
        ],
    );
}

#[test]
fn a_chain_under_the_limit_resolves() {
    let n = MAX_INTERPOLATION_DEPTH - 4;
    let mut text = String::new();
    for i in 0..n {
        text.push_str(&format!("k{i}: ${{k{}}}\n", i + 1));
    }
    text.push_str(&format!("k{n}: end\n"));
    let doc = on_small_stack(move || load_document_str(&text, "chain.yaml", &[]).unwrap());
    assert_eq!(doc["k0"], Node::Str("end".into()));
}

#[test]
fn fifty_thousand_nested_interpolations_are_refused() {
    let text = format!(
        "x: '{}a{}'\na: b\n",
        "${".repeat(50_000),
        "}".repeat(50_000)
    );
    let e = text_errors(text, "nested.yaml", vec![]);
    assert_has(
        &e,
        &[
            "nested.yaml",
            "x: interpolations nested deeper than",
            &MAX_INTERPOLATION_DEPTH.to_string(),
        ],
    );
}

#[test]
fn containers_interpolated_into_each_other_past_the_depth_limit_are_refused() {
    // Ten keys, each a 100-level mapping whose innermost value is the next key: 1,000 levels
    // once resolved, with a chain of only ten interpolations.
    let mut text = String::new();
    for i in 0..10 {
        let open = "{x: ".repeat(100);
        let close = "}".repeat(100);
        text.push_str(&format!("k{i}: {open}'${{k{}}}'{close}\n", i + 1));
    }
    text.push_str("k10: end\n");
    let e = text_errors(text, "deep.yaml", vec![]);
    assert_has(
        &e,
        &[
            "deep.yaml",
            &format!("deeper than {MAX_RESOLVED_DEPTH} levels"),
        ],
    );
}

#[test]
fn the_longest_accepted_chain_through_the_deepest_accepted_tree_fits_a_small_stack() {
    // Almost MAX_INTERPOLATION_DEPTH keys, each an 8-level mapping around the next key: nearly
    // MAX_RESOLVED_DEPTH levels once resolved, every recursive step of resolution at once.
    let keys = MAX_INTERPOLATION_DEPTH - 2;
    let nest = 8;
    assert!(keys * nest < MAX_RESOLVED_DEPTH - 8);
    let mut text = String::new();
    for i in 0..keys {
        let open = "{x: ".repeat(nest);
        let close = "}".repeat(nest);
        text.push_str(&format!("k{i}: {open}'${{k{}}}'{close}\n", i + 1));
    }
    text.push_str(&format!("k{keys}: end\n"));
    let depth = on_small_stack(move || {
        let doc = load_document_str(&text, "deep.yaml", &[]).unwrap();
        let _ = config::show_json(&doc);
        let _ = config::show_yaml(&doc);
        let mut n = &doc["k0"];
        let mut depth = 0;
        while let Some(next) = n.get("x") {
            n = next;
            depth += 1;
        }
        assert_eq!(n, &Node::Str("end".into()));
        depth
    });
    assert_eq!(depth, keys * nest);
}

fn override_errors(ov: String) -> String {
    text_errors("a0: 1\n".into(), "base.yaml", vec![ov])
}

#[test]
fn an_override_list_thirty_thousand_deep_is_refused() {
    let ov = format!("+a={}{}", "[".repeat(30_000), "]".repeat(30_000));
    let e = override_errors(ov);
    assert_has(
        &e,
        &[
            "override '+a=[[[",
            &format!("nested deeper than {MAX_VALUE_DEPTH} levels"),
            "(60003 characters)",
        ],
    );
    // Quoted as far as a terminal line allows, not 60,000 characters.
    assert!(e.len() < 1_000, "{} characters", e.len());
}

#[test]
fn an_override_dict_twenty_thousand_deep_is_refused() {
    let ov = format!("+a={}1{}", "{a:".repeat(20_000), "}".repeat(20_000));
    let e = override_errors(ov);
    assert_has(
        &e,
        &[
            "override '+a={a:{a:",
            &format!("nested deeper than {MAX_VALUE_DEPTH} levels"),
        ],
    );
}

#[test]
fn an_unclosed_deep_override_is_refused_at_the_limit() {
    let e = override_errors(format!("+a={}", "[".repeat(30_000)));
    assert_has(
        &e,
        &[&format!("nested deeper than {MAX_VALUE_DEPTH} levels")],
    );
}

#[test]
fn an_override_key_of_thirty_thousand_parts_is_refused() {
    let ov = format!("+{}=1", repeat("a", 30_000, "."));
    let e = override_errors(ov);
    assert_has(
        &e,
        &["override '+a.a.a.", &format!("at most {MAX_KEY_SEGMENTS}")],
    );
}

#[test]
fn overrides_at_the_depth_limit_are_accepted() {
    let value = format!(
        "{}1{}",
        "[".repeat(MAX_VALUE_DEPTH),
        "]".repeat(MAX_VALUE_DEPTH)
    );
    let key = repeat("b", MAX_KEY_SEGMENTS, ".");
    let ovs = vec![format!("+a={value}"), format!("+{key}=2")];
    let doc = on_small_stack(move || {
        let doc = load_document_str("a0: 1\n", "base.yaml", &ovs).unwrap();
        // Everything downstream walks the deepest accepted tree on a small stack too.
        let _ = config::show_json(&doc);
        let _ = config::show_yaml(&doc);
        doc
    });
    let mut n = &doc["a"];
    for _ in 0..MAX_VALUE_DEPTH - 1 {
        n = &n.as_list().unwrap()[0];
    }
    assert_eq!(n.as_list(), Some(&[Node::Int(1)][..]));
    let mut n = &doc;
    for _ in 0..MAX_KEY_SEGMENTS {
        n = &n["b"];
    }
    assert_eq!(n, &Node::Int(2));
}

#[test]
fn oc_decode_of_a_value_five_thousand_deep_is_refused() {
    let text = format!(
        "x: \"${{oc.decode:'{}1{}'}}\"\n",
        "[".repeat(5_000),
        "]".repeat(5_000)
    );
    let e = text_errors(text, "decode.yaml", vec![]);
    assert_has(
        &e,
        &[
            "x: oc.decode:",
            &format!("nested deeper than {MAX_VALUE_DEPTH} levels"),
        ],
    );
}

#[test]
fn oc_decode_nested_five_thousand_times_is_refused() {
    let text = format!(
        "x: \"{}'1'{}\"\n",
        "${oc.decode:".repeat(5_000),
        "}".repeat(5_000)
    );
    let e = text_errors(text, "decode.yaml", vec![]);
    assert_has(
        &e,
        &[
            "decode.yaml",
            &format!("interpolations nested deeper than {MAX_INTERPOLATION_DEPTH} levels"),
        ],
    );
}

#[test]
fn oc_decode_still_decodes() {
    let doc = load_document_str(
        "v: '[1, {a: 2}]'\nx: ${oc.decode:${v}}\n",
        "decode.yaml",
        &[],
    )
    .unwrap();
    assert_eq!(doc["x"].as_list().map(<[Node]>::len), Some(2));
    assert_eq!(doc["x"].as_list().unwrap()[1]["a"], Node::Int(2));
}

#[test]
fn yaml_at_its_depth_limit_composes_on_a_small_stack() {
    let depth = config::yaml::MAX_DEPTH - 1;
    let text = format!(
        "a: {}1{}\nb: ${{a}}\n",
        "[".repeat(depth - 1),
        "]".repeat(depth - 1)
    );
    let doc = on_small_stack(move || {
        let doc = load_document_str(&text, "deep.yaml", &[]).unwrap();
        let _ = config::show_json(&doc);
        let _ = config::show_yaml(&doc);
        doc
    });
    assert_eq!(doc["a"], doc["b"]);
}

// --- 10. Exponential defaults lists -------------------------------------------------------------

#[test]
fn an_exponential_defaults_dag_is_refused_at_the_file_limit() {
    // 24 levels of two files, each including both files of the next level: no cycle, no
    // nesting past 24, and 2^25 inclusions.
    let dir = tempfile::tempdir().unwrap();
    for level in 0..24 {
        for side in ["a", "b"] {
            let defaults = if level < 23 {
                format!(
                    "defaults:\n  - n{}a\n  - n{}b\n  - _self_\n",
                    level + 1,
                    level + 1
                )
            } else {
                String::new()
            };
            write(
                dir.path(),
                &format!("n{level}{side}.yaml"),
                &format!("{defaults}v{level}{side}: {level}\n"),
            );
        }
    }
    let primary = write(
        dir.path(),
        "primary.yaml",
        "defaults:\n  - n0a\n  - n0b\n  - _self_\nroot: 1\n",
    );
    let e = file_errors(&primary, vec![]);
    assert_has(
        &e,
        &[
            &format!("more than {MAX_DEFAULTS_FILES} config files"),
            ".yaml: ",
        ],
    );
}

#[test]
fn a_big_file_included_many_times_is_refused_at_the_node_limit() {
    // One file of 300,000 nodes (under the per-document limit) placed at four packages: its
    // content is copied four times, past the composition's limit.
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "big.yaml",
        &format!("items: [{}]\n", repeat("0", 300_000, ",")),
    );
    let primary = write(
        dir.path(),
        "primary.yaml",
        "defaults:\n  - big@p1\n  - big@p2\n  - big@p3\n  - big@p4\n  - _self_\n",
    );
    let e = file_errors(&primary, vec![]);
    assert_has(
        &e,
        &[
            "big.yaml: ",
            &format!("more than {MAX_COMPOSED_NODES} nodes"),
        ],
    );
}

#[test]
fn a_shared_defaults_file_included_a_few_times_still_composes() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "leaf.yaml", "shared: 1\n");
    write(
        dir.path(),
        "mid.yaml",
        "defaults:\n  - leaf\n  - _self_\nmid: 2\n",
    );
    let primary = write(
        dir.path(),
        "primary.yaml",
        "defaults:\n  - mid\n  - leaf\n  - _self_\nroot: 3\n",
    );
    let sel = Selection {
        file: Some(primary),
        ..Selection::default()
    };
    let doc = config::compose_tree(&sel, None, &[]).unwrap();
    assert_eq!(doc["shared"], Node::Int(1));
    assert_eq!(doc["mid"], Node::Int(2));
    assert_eq!(doc["root"], Node::Int(3));
}

#[test]
fn a_package_deeper_than_the_limit_is_refused_with_the_file() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "leaf.yaml", "x: 1\n");
    let package = repeat("p", 20_000, ".");
    let primary = write(
        dir.path(),
        "primary.yaml",
        &format!("defaults:\n  - leaf@{package}\n  - _self_\n"),
    );
    let e = file_errors(&primary, vec![]);
    assert_has(
        &e,
        &[
            "primary.yaml",
            &format!("at most {}", config::MAX_PACKAGE_DEPTH),
        ],
    );
}

// --- 11. NUL bytes and byte order marks ---------------------------------------------------------

#[test]
fn a_nul_byte_is_refused_with_its_position_instead_of_truncating() {
    let dir = tempfile::tempdir().unwrap();
    let text = "global_profiler:\n  tool: npu\0\n  steps: [1]\n";
    let position = text.chars().position(|c| c == '\0').unwrap();
    let path = write(dir.path(), "nul.yaml", text);
    let e = file_errors(&path, vec![]);
    assert_has(
        &e,
        &[
            "nul.yaml:2:12:",
            "unacceptable character #x0000: special characters are not allowed",
            &format!("position {position}"),
        ],
    );
}

#[test]
fn characters_pyyaml_refuses_are_refused_and_the_others_read() {
    for bad in [
        '\u{1}', '\u{7}', '\u{1b}', '\u{7f}', '\u{9f}', '\u{fffe}', '\u{ffff}',
    ] {
        let e = config::parse_yaml(&format!("a: x{bad}y\n")).expect_err("accepted");
        assert!(
            e.message
                .contains(&format!("unacceptable character #x{:04x}", u32::from(bad))),
            "{bad:?}: {}",
            e.message
        );
        assert_eq!((e.line, e.column), (1, 5), "{bad:?}");
    }
    let doc = config::parse_yaml("a: \"x\ty\"\nb: \u{e9}\u{a0}\u{1f600}\r\nc: 1\n").unwrap();
    assert_eq!(doc["a"], Node::Str("x\ty".into()));
    assert_eq!(doc["c"], Node::Int(1));
}

#[test]
fn a_leading_byte_order_mark_is_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        "bom.yaml",
        "\u{feff}global_profiler:\n  tool: npu\n  steps: [1]\nactor_rollout_ref:\n  actor:\n    profiler: {enable: true}\n",
    );
    let doc = load_document(Some(&path), &[]).unwrap();
    let keys: Vec<&String> = doc.as_map().unwrap().keys().collect();
    assert_eq!(keys, ["global_profiler", "actor_rollout_ref"]);
    let plan = build_plan(&doc).unwrap();
    assert_eq!(plan.tool, Some(Tool::Npu));
    assert_eq!(plan.steps, vec![1]);
    assert!(
        plan.warnings.iter().all(|w| !w.contains("global_profiler")),
        "{:?}",
        plan.warnings
    );
}

#[test]
fn a_byte_order_mark_before_a_package_header_is_skipped() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "leaf.yaml", "\u{feff}# @package inner\nx: 1\n");
    let primary = write(
        dir.path(),
        "primary.yaml",
        "defaults:\n  - leaf\n  - _self_\n",
    );
    let doc = load_document(Some(&primary), &[]).unwrap();
    assert_eq!(doc["inner"]["x"], Node::Int(1));
}
