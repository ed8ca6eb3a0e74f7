//! Hydra 1.3 / OmegaConf 2.3 behaviour on the long tail, on small configs: the override
//! grammar (lexer rules, typing, grammar functions, sweeps), struct mode, list items, the
//! defaults list (group members as the config name, option lists, override keys, duplicate and
//! null choices) and resolvers. Each expectation is what Hydra's documentation and sources say;
//! `crates/rlprof-cli/tests/hydra_corpus.rs` compares against Hydra itself.

use rlprof_config::{ConfigError, Node, Selection, compose_tree, load_document_str};
use std::path::Path;

const BASE: &str = "
trainer:
  project_name: p
  experiment_name: e
  nnodes: 1
  logger: [console, wandb]
  flag: true
optim:
  betas: [0.9, 0.999]
  lr: 0.1
";

fn load(ov: &[&str]) -> Result<Node, ConfigError> {
    let ov: Vec<String> = ov.iter().map(|s| s.to_string()).collect();
    load_document_str(BASE, "base.yaml", &ov)
}

fn ok(ov: &[&str]) -> Node {
    load(ov).unwrap_or_else(|e| panic!("{ov:?}: {e}"))
}

fn refused(ov: &[&str]) -> String {
    match load(ov) {
        Err(e) => e.problems().join("\n"),
        Ok(t) => panic!("{ov:?} was accepted: {}", t.show()),
    }
}

#[test]
fn primitives_are_typed_as_hydra_types_them() {
    let t = ok(&[
        "+trainer.a=1_000",
        "+trainer.b=1e-6",
        "+trainer.c=007",
        "+trainer.d=TrUe",
        "+trainer.e=1.0.0",
        "+trainer.f=a b  c",
        "+trainer.g='x, y'",
        "+trainer.h=a\\,b",
        "+trainer.i=.5",
        "+trainer.j=5.",
        "+trainer.k=nullx",
    ]);
    let tr = &t["trainer"];
    assert_eq!(tr["a"], Node::Int(1000));
    assert_eq!(tr["b"], Node::Float(1e-6));
    assert_eq!(tr["c"], Node::Str("007".into()));
    assert_eq!(tr["d"], Node::Bool(true));
    assert_eq!(tr["e"], Node::Str("1.0.0".into()));
    assert_eq!(tr["f"], Node::Str("a b  c".into()));
    assert_eq!(tr["g"], Node::Str("x, y".into()));
    assert_eq!(tr["h"], Node::Str("a,b".into()));
    assert_eq!(tr["i"], Node::Float(0.5));
    assert_eq!(tr["j"], Node::Float(5.0));
    assert_eq!(tr["k"], Node::Str("nullx".into()));
}

#[test]
fn quoted_values_stand_alone_and_unescape_before_quotes() {
    let t = ok(&[
        "trainer.project_name='it\\'s'",
        "trainer.experiment_name=\"a\\\\\"",
    ]);
    assert_eq!(t["trainer"]["project_name"], Node::Str("it's".into()));
    assert_eq!(t["trainer"]["experiment_name"], Node::Str("a\\".into()));
    // Two quoted strings side by side are not one value.
    refused(&["trainer.project_name='x''y'"]);
}

#[test]
fn what_the_lexer_does_not_know_is_refused_unless_quoted() {
    for v in [
        "~/path",
        "héllo",
        "<path_to_config>",
        "a#b",
        "a;b",
        "${a.${b}}",
    ] {
        let e = refused(&[&format!("trainer.project_name={v}")]);
        assert!(e.contains("trainer.project_name"), "{v}: {e}");
    }
    let t = ok(&[
        "trainer.project_name='~/path'",
        "trainer.experiment_name='héllo'",
    ]);
    assert_eq!(t["trainer"]["project_name"], Node::Str("~/path".into()));
    assert_eq!(t["trainer"]["experiment_name"], Node::Str("héllo".into()));
    // Whitespace inside a key.
    refused(&["trainer.nnodes =1"]);
}

#[test]
fn escaped_interpolation_is_literal_text() {
    let t = ok(&["trainer.experiment_name=\\${trainer.project_name}"]);
    assert_eq!(
        t["trainer"]["experiment_name"],
        Node::Str("${trainer.project_name}".into())
    );
    let t = ok(&["trainer.experiment_name=${trainer.project_name}_x"]);
    assert_eq!(t["trainer"]["experiment_name"], Node::Str("p_x".into()));
}

#[test]
fn grammar_functions_cast_and_sort() {
    let t = ok(&[
        "+trainer.a=int(3.7)",
        "+trainer.b=float(1)",
        "+trainer.c=str(true)",
        "+trainer.d=bool('false')",
        "+trainer.e=sort([3,1,2])",
        "+trainer.f=sort([b,a],reverse=true)",
        "+trainer.g=int([1.5,'2'])",
        "+trainer.h=shuffle([7])",
        "+trainer.i=str(1e-6)",
    ]);
    let tr = &t["trainer"];
    assert_eq!(tr["a"], Node::Int(3));
    assert_eq!(tr["b"], Node::Float(1.0));
    assert_eq!(tr["c"], Node::Str("true".into()));
    assert_eq!(tr["d"], Node::Bool(false));
    assert_eq!(
        tr["e"],
        Node::List(vec![Node::Int(1), Node::Int(2), Node::Int(3)])
    );
    assert_eq!(
        tr["f"],
        Node::List(vec![Node::Str("b".into()), Node::Str("a".into())])
    );
    assert_eq!(tr["g"], Node::List(vec![Node::Int(1), Node::Int(2)]));
    assert_eq!(tr["h"], Node::List(vec![Node::Int(7)]));
    assert_eq!(tr["i"], Node::Str("1e-06".into()));
    for bad in ["int(abc)", "bool(abc)", "int()", "nope(1)", "int(x=1)"] {
        refused(&[&format!("+trainer.z={bad}")]);
    }
}

#[test]
fn sweeps_need_multirun() {
    for v in [
        "1,2",
        "range(1,5)",
        "choice(a,b)",
        "glob(*)",
        "interval(0,1)",
        "int(1,2)",
    ] {
        let e = refused(&[&format!("trainer.nnodes={v}")]);
        assert!(e.contains("multirun"), "{v}: {e}");
    }
}

#[test]
fn struct_mode_refuses_keys_the_yaml_does_not_have() {
    let e = refused(&["trainer.nope=1"]);
    assert!(e.contains("+trainer.nope=1"), "{e}");
    // A dict override merges only into keys that exist; with `+` it may add.
    refused(&["trainer={nope:1}"]);
    let t = ok(&["trainer={nnodes:2}", "+optim={extra:1}"]);
    assert_eq!(t["trainer"]["nnodes"], Node::Int(2));
    assert_eq!(t["trainer"]["project_name"], Node::Str("p".into()));
    assert_eq!(t["optim"]["extra"], Node::Int(1));
    // A dict does not merge into a list, nor a list into a mapping.
    refused(&["trainer.logger={a:1}"]);
    refused(&["optim=[1]"]);
    // `+` on an existing scalar is refused; `++` sets it.
    refused(&["+trainer.nnodes=2"]);
    assert_eq!(
        ok(&["++trainer.nnodes=2"])["trainer"]["nnodes"],
        Node::Int(2)
    );
}

#[test]
fn list_items_are_addressed_by_index() {
    let t = ok(&["optim.betas.0=0.8", "trainer.logger.1=tensorboard"]);
    assert_eq!(
        t["optim"]["betas"],
        Node::List(vec![Node::Float(0.8), Node::Float(0.999)])
    );
    assert_eq!(
        t["trainer"]["logger"].as_list().unwrap()[1],
        Node::Str("tensorboard".into())
    );
    refused(&["optim.betas.2=0.5"]);
    refused(&["optim.betas.x=0.5"]);
}

#[test]
fn delete_compares_as_python_does() {
    let t = ok(&[
        "~trainer.nnodes=1.0",
        "~trainer.flag=1",
        "~trainer.logger=[console,wandb]",
    ]);
    let tr = t["trainer"].as_map().unwrap();
    assert!(!tr.contains_key("nnodes") && !tr.contains_key("flag") && !tr.contains_key("logger"));
    refused(&["~trainer.nnodes=2"]);
    // An empty value is a value: '' is not 1.
    refused(&["~trainer.nnodes="]);
}

#[test]
fn omegaconf_resolvers() {
    let t = ok(&[
        "+trainer.keys=${oc.dict.keys:optim}",
        "+trainer.values=${oc.dict.values:optim}",
        "+trainer.made=${oc.create:'[1, 2]'}",
        "+trainer.old=${oc.deprecated:trainer.nnodes}",
        "+trainer.year=${now:%Y}",
    ]);
    let tr = &t["trainer"];
    assert_eq!(
        tr["keys"],
        Node::List(vec![Node::Str("betas".into()), Node::Str("lr".into())])
    );
    assert_eq!(tr["values"].as_list().unwrap()[1], Node::Float(0.1));
    assert_eq!(tr["made"], Node::List(vec![Node::Int(1), Node::Int(2)]));
    assert_eq!(tr["old"], Node::Int(1));
    let year = tr["year"].as_str().unwrap();
    assert!(year.len() == 4 && year.starts_with('2'), "{year}");
    // An unquoted resolver argument holds no `~`.
    refused(&["+trainer.z=${oc.env:NO_SUCH_VARIABLE_X,~/x}"]);
}

/// A config tree: `main.yaml` with `critic@critic: dp`, `engine: fsdp`, and a group member with
/// a relative default, as verl's tree has them.
fn tree(dir: &Path) {
    let w = |p: &str, t: &str| {
        let f = dir.join(p);
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(f, t).unwrap();
    };
    w(
        "main.yaml",
        "defaults:\n  - critic@critic: dp\n  - engine: fsdp\n  - _self_\ntop: 1\n",
    );
    w(
        "critic/dp.yaml",
        "defaults:\n  - ../optim@optim: adam\n  - _self_\nkind: dp\n",
    );
    w("critic/mega.yaml", "kind: mega\n");
    w("optim/adam.yaml", "lr: 0.1\n");
    w("optim/sgd.yaml", "lr: 0.5\nmomentum: 0.9\n");
    w("engine/fsdp.yaml", "name: fsdp\n");
    w("engine/mega.yaml", "name: mega\nextra: 1\n");
}

fn compose(dir: &Path, name: &str, ov: &[&str]) -> Result<Node, ConfigError> {
    let sel = Selection {
        file: None,
        config_path: Some(dir.to_path_buf()),
        config_name: Some(name.to_string()),
    };
    let ov: Vec<String> = ov.iter().map(|s| s.to_string()).collect();
    compose_tree(&sel, None, &ov)
}

#[test]
fn defaults_lists_as_hydra_composes_them() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    tree(d);
    let t = compose(d, "main", &[]).unwrap();
    assert_eq!(t["critic"]["kind"], Node::Str("dp".into()));
    assert_eq!(t["critic"]["optim"]["lr"], Node::Float(0.1));
    // `critic@critic` in the primary config is overridden as `critic`; `critic@critic` is not
    // its override key.
    let t = compose(d, "main", &["critic=mega"]).unwrap();
    assert_eq!(t["critic"]["kind"], Node::Str("mega".into()));
    let e = compose(d, "main", &["critic@critic=mega"]).unwrap_err();
    assert!(
        e.problems()[0].contains("did you mean to override critic?"),
        "{e}"
    );
    // Option lists merge in order.
    let t = compose(d, "main", &["engine=[fsdp,mega]"]).unwrap();
    assert_eq!(t["engine"]["name"], Node::Str("mega".into()));
    assert_eq!(t["engine"]["extra"], Node::Int(1));
    // null, ++, and a second choice of a chosen group are refused; deletion works.
    for ov in [
        "engine=null",
        "++engine=mega",
        "+engine=mega",
        "+engine=fsdp",
    ] {
        assert!(compose(d, "main", &[ov]).is_err(), "{ov}");
    }
    let t = compose(d, "main", &["~engine"]).unwrap();
    assert!(t.get("engine").is_none());
}

#[test]
fn a_group_member_as_the_config_name_composes_under_its_group() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    tree(d);
    let t = compose(d, "critic/dp", &[]).unwrap();
    assert_eq!(t["critic"]["kind"], Node::Str("dp".into()));
    assert_eq!(t["critic"]["optim"]["lr"], Node::Float(0.1));
    // From its own directory it is the root, and `../optim` is still found.
    let t = compose(&d.join("critic"), "dp", &[]).unwrap();
    assert_eq!(t["kind"], Node::Str("dp".into()));
    assert_eq!(t["optim"]["lr"], Node::Float(0.1));
}

#[test]
fn an_empty_interpolation_is_a_clear_error() {
    let e = load_document_str("a: ${}\nb: 1\n", "a.yaml", &[]).unwrap_err();
    let msg = e.problems().join("\n");
    assert!(
        msg.contains("empty interpolation") && !msg.contains("cycle"),
        "{msg}"
    );
    refused(&["+trainer.x=${}"]);
}
