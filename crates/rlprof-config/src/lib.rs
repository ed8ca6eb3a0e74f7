//! rlprof-config: verl-compatible configuration: YAML, Hydra-style composition and overrides,
//! OmegaConf interpolation, typed reading and validation -> [`ProfilePlan`].
//!
//! The profiler crate (`rlprof-profiler`) records; it parses no config. This crate turns the
//! user's YAML and overrides into the profiler's [`ProfilePlan`] and gives the trainer the same
//! composed tree and the same typed, error-collecting [`typed::Reader`].
//!
//! Flow: [`compose_tree`] reads the selected YAML ([`yaml`]), composes its Hydra defaults list,
//! applies Hydra's command-line overrides and resolves OmegaConf interpolations into one
//! [`Node`] tree; [`load_document`] / [`load_document_str`] give it to the validators;
//! [`build_plan`] validates the profiler sections (`global_profiler`,
//! `actor_rollout_ref.{actor,rollout,ref}.profiler`, `critic.profiler`,
//! `reward_model.profiler`) and resolves them into a [`ProfilePlan`]; [`plan_json`] and
//! [`describe`] render the plan. Every problem is reported at once, each message starting with
//! its YAML path. [`parse_yaml`] reads one YAML text into a [`Node`] with no composition (the one
//! reader the profiler, the trainer and the tests share); the validators read [`Node`] directly.
//!
//! Hostile input (alias and interpolation bombs, nesting deep enough to overflow a recursive
//! parser, exponential defaults lists) is refused with an error naming the file or override and
//! the limit passed: [`yaml::MAX_DEPTH`], [`yaml::MAX_NODES`], [`MAX_VALUE_DEPTH`],
//! [`MAX_KEY_SEGMENTS`], [`MAX_DEFAULTS_FILES`], [`MAX_COMPOSED_NODES`], [`MAX_PACKAGE_DEPTH`],
//! [`MAX_INTERPOLATION_DEPTH`], [`MAX_RESOLVED_DEPTH`], [`MAX_RESOLVED_NODES`],
//! [`MAX_INTERPOLATED_BYTES`]. Every step stays within a 2 MiB thread stack at these limits.

mod apply;
mod compose;
pub mod error;
mod grammar;
mod merge;
mod override_grammar;
mod profile_plan;
mod resolve;
mod strftime;
pub mod tree;
pub mod typed;
pub mod yaml;

use std::path::{Path, PathBuf};

use rlprof_profiler::plan::ProfilePlan;

pub use compose::{MAX_COMPOSED_NODES, MAX_DEFAULTS_FILES, MAX_PACKAGE_DEPTH, PKG_PATH_ENV};
pub use error::ConfigError;
pub use grammar::{MAX_KEY_SEGMENTS, MAX_VALUE_DEPTH};
pub use profile_plan::group_steps;
pub use resolve::{
    MAX_INTERPOLATED_BYTES, MAX_INTERPOLATION_DEPTH, MAX_RESOLVED_DEPTH, MAX_RESOLVED_NODES,
};
pub use tree::Node;
pub use typed::{Issue, Reader};
pub use yaml::{YamlError, parse as parse_yaml};

/// Which config to compose: a file, or Hydra's `--config-path DIR --config-name NAME`.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    /// A YAML file (its directory is the config directory of its defaults list).
    pub file: Option<PathBuf>,
    /// `--config-path` (default: the working directory when only a name is given).
    pub config_path: Option<PathBuf>,
    /// `--config-name` (with or without `.yaml`).
    pub config_name: Option<String>,
}

impl Selection {
    /// Whether nothing is selected (the built-in default applies).
    pub fn is_empty(&self) -> bool {
        self.file.is_none() && self.config_path.is_none() && self.config_name.is_none()
    }
}

/// Parses the value part of an override with Hydra's grammar (`[1,2,5]`, `True`, `null`,
/// `'quoted'`, `{a:1}`, `bare text`), as a [`Node`].
pub fn parse_override_value(text: &str) -> Result<Node, String> {
    grammar::parse_value(text)
}

/// Composes (Hydra), applies overrides and resolves (OmegaConf) the selected config; an empty
/// selection composes `builtin` (`(text, origin)`), or an empty document when that is `None`.
pub fn compose_tree(
    sel: &Selection,
    builtin: Option<(&str, &str)>,
    overrides: &[String],
) -> Result<Node, ConfigError> {
    compose_config(sel, builtin, overrides).map(|c| c.tree)
}

/// A composed config and what the user wrote in it.
#[derive(Debug, Clone)]
pub struct Composed {
    /// The composed, overridden and resolved tree.
    pub tree: Node,
    /// Dotted paths the user wrote: the primary config's own keys and the overridden keys (not
    /// what verl's group files supply). Rollout and ref follow the actor on the keys they do
    /// not write, and the tool is inferred from the `tool_config` block the user wrote.
    pub written: Written,
}

/// Dotted key paths written by the user.
#[derive(Debug, Clone, Default)]
pub struct Written(Option<Vec<String>>);

impl Written {
    /// Everything present counts as written (a document read without composition).
    pub fn everything() -> Written {
        Written(None)
    }

    /// Whether the user wrote `path`, a key below it, or a mapping above it.
    pub fn touches(&self, path: &str) -> bool {
        let Some(list) = &self.0 else { return true };
        list.iter().any(|w| {
            w == path
                || (w.starts_with(path) && w.as_bytes().get(path.len()) == Some(&b'.'))
                || (path.starts_with(w.as_str()) && path.as_bytes().get(w.len()) == Some(&b'.'))
        })
    }
}

/// Like [`compose_tree`], also recording what the user wrote.
pub fn compose_config(
    sel: &Selection,
    builtin: Option<(&str, &str)>,
    overrides: &[String],
) -> Result<Composed, ConfigError> {
    let (primary, origin, dir, group) =
        primary_of(sel, builtin).map_err(|e| ConfigError::Invalid(vec![e]))?;
    let mut errors = Vec::new();
    let mut parsed = Vec::new();
    for text in overrides {
        match grammar::parse(text) {
            Ok(o) => parsed.push(o),
            Err(e) => errors.push(format!("override '{}': {e}", shorten(text))),
        }
    }
    let mut searchpath = None;
    let mut groups = Vec::new();
    let mut values = Vec::new();
    for o in parsed {
        if o.key == "hydra.searchpath" {
            searchpath = match &o.value {
                Some(Node::List(l)) => Some(l.iter().map(Node::python_str).collect()),
                _ => Some(Vec::new()),
            };
        } else if o.key == "hydra" || o.key.starts_with("hydra.") || o.key.starts_with("hydra/") {
            // Hydra's own runtime settings (run dir, logging): nothing to compose, but a key
            // Hydra's config does not have is refused, as in struct mode.
            if let Some(e) = compose::unknown_hydra_key(&o) {
                errors.push(format!("override '{}': {e}", shorten(&o.text)));
            }
        } else if compose::is_group_override(&o, &primary, dir.as_deref()) {
            groups.push(o);
        } else if o.package.is_some() && !matches!(o.value, Some(Node::Map(_))) {
            errors.push(format!(
                "override '{}': it looks like a config group override (group@package), but config group '{}' does not exist",
                shorten(&o.text),
                o.key
            ));
        } else {
            values.push(o);
        }
    }
    // Syntax errors are reported together with the problems of the other overrides.
    let mut written = Vec::new();
    let mut root = match compose::compose(
        primary,
        &origin,
        dir.as_deref(),
        &group,
        &groups,
        searchpath,
        Some(&mut written),
    ) {
        Ok(r) => r,
        Err(mut e) => {
            errors.append(&mut e);
            return Err(ConfigError::Invalid(errors));
        }
    };
    for o in &values {
        match &o.value {
            Some(v @ Node::Map(_)) => compose::leaf_paths(
                v,
                &mut o.key.split('.').map(str::to_string).collect(),
                &mut written,
            ),
            _ => written.push(o.key.clone()),
        }
        if let Err(e) = apply::apply(&mut root, o) {
            errors.push(format!("override '{}': {e}", shorten(&o.text)));
        }
    }
    if !errors.is_empty() {
        return Err(ConfigError::Invalid(errors));
    }
    let tree = resolve::resolve_all(&root, &origin).map_err(ConfigError::Invalid)?;
    Ok(Composed {
        tree,
        written: Written(Some(written)),
    })
}

/// An override as error messages quote it: cut after [`SHOWN_OVERRIDE_CHARS`] characters, so
/// that a hostile 30,000-character override does not flood the terminal.
fn shorten(text: &str) -> String {
    match text.char_indices().nth(SHOWN_OVERRIDE_CHARS) {
        None => text.to_string(),
        Some((i, _)) => format!("{}... ({} characters)", &text[..i], text.chars().count()),
    }
}

/// Characters of an override quoted in an error message.
const SHOWN_OVERRIDE_CHARS: usize = 120;

/// The primary config: (loaded, origin, config directory, group path of the config name).
fn primary_of(
    sel: &Selection,
    builtin: Option<(&str, &str)>,
) -> Result<(compose::Loaded, String, Option<PathBuf>, String), String> {
    let file = match (&sel.file, &sel.config_path, &sel.config_name) {
        (Some(f), None, None) => f.clone(),
        (None, dir, Some(name)) => {
            let dir = match dir {
                // `--config-path pkg://verl.trainer.config`, as Hydra reads it.
                Some(d) if d.to_string_lossy().starts_with("pkg://") => {
                    compose::search_root(&d.to_string_lossy())?
                }
                Some(d) => d.clone(),
                None => PathBuf::from("."),
            };
            let name = name.strip_suffix(".yaml").unwrap_or(name);
            // `actor/dp_actor`: a group member as the primary config, composed under its
            // group's package with the config directory as the search path.
            if let Some((group, _)) = name.rsplit_once('/') {
                let file = dir.join(format!("{name}.yaml"));
                let (l, origin) = read_primary(&file)?;
                return Ok((l, origin, Some(dir), group.to_string()));
            }
            dir.join(format!("{name}.yaml"))
        }
        (None, Some(_), None) => {
            return Err(
                "--config-path needs --config-name (the primary config in that directory)".into(),
            );
        }
        (Some(_), _, _) => {
            return Err(
                "give either a config file or --config-path/--config-name, not both".into(),
            );
        }
        (None, None, None) => {
            let (text, origin) = builtin.unwrap_or(("", "<empty>"));
            let l = compose::load_text(text, origin)?;
            return Ok((l, origin.to_string(), None, String::new()));
        }
    };
    let (l, origin) = read_primary(&file)?;
    let dir = file.parent().map(|p| {
        if p.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            p.to_path_buf()
        }
    });
    Ok((l, origin, dir, String::new()))
}

fn read_primary(file: &Path) -> Result<(compose::Loaded, String), String> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| format!("{}: cannot read configuration file: {e}", file.display()))?;
    let origin = file.display().to_string();
    let l = compose::load_text(&text, &origin)?;
    Ok((l, origin))
}

/// Reads the YAML file (None = empty document), composes its defaults list, applies Hydra
/// overrides and resolves interpolations; returns the merged document.
pub fn load_document(path: Option<&Path>, overrides: &[String]) -> Result<Node, ConfigError> {
    let sel = Selection {
        file: path.map(Path::to_path_buf),
        ..Selection::default()
    };
    compose_tree(&sel, None, overrides)
}

/// Same as [`load_document`], but from YAML text (for built-in default configs); `origin` names
/// it in errors.
pub fn load_document_str(
    text: &str,
    origin: &str,
    overrides: &[String],
) -> Result<Node, ConfigError> {
    compose_tree(&Selection::default(), Some((text, origin)), overrides)
}

/// The composed config as one JSON object (Hydra's `--cfg job --resolve`, as JSON).
pub fn show_json(tree: &Node) -> String {
    serde_json::to_string_pretty(&tree.to_json()).unwrap_or_default()
}

/// The composed config as YAML.
pub fn show_yaml(tree: &Node) -> String {
    yaml::emit(tree)
}

/// Validates the profiler sections of a merged document and resolves them into a plan.
///
/// Rollout and ref follow the actor (keys they do not set take the actor's effective values);
/// critic and reward_model are in the plan only when their section has a `profiler` block.
/// All problems are returned together as [`ConfigError::Invalid`]; non-fatal findings go to
/// [`ProfilePlan::warnings`].
pub fn build_plan(doc: &Node) -> Result<ProfilePlan, ConfigError> {
    profile_plan::build_plan(doc, &Written::everything())
}

/// [`build_plan`] for a composed config: rollout and ref follow the actor on every key the user
/// did not write (verl's group files write them all), and the tool is inferred from the
/// `tool_config` block the user wrote.
pub fn build_plan_composed(doc: &Node, written: &Written) -> Result<ProfilePlan, ConfigError> {
    profile_plan::build_plan(doc, written)
}

/// The `rlprof config check --json` object.
pub fn plan_json(plan: &ProfilePlan) -> serde_json::Value {
    profile_plan::describe::plan_json(plan)
}

/// The plan in words, for `rlprof config check` and the start-up log (multi-line).
pub fn describe(plan: &ProfilePlan) -> String {
    profile_plan::describe::describe(plan)
}
