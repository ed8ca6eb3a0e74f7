//! Hydra's composition: a primary config and its defaults list, expanded depth-first and merged
//! in Hydra's order.
//!
//! Supported: `group: option`, `group@package: option`, `/absolute` and `../relative` groups,
//! plain config entries (`- ppo_trainer`), `_self_` and its position (implicitly last),
//! `optional`, `override group: option`, `null` options, option names interpolated from other
//! groups' choices (`${model_engine}_actor`), `# @package` headers (`_global_`, `_group_`,
//! `_name_`), `hydra.searchpath` (`file://` relative to the working directory, `pkg://a.b.c`
//! looked up under the directories of `RLPROF_PKG_PATH`), and command-line group overrides
//! (`group=option`, `+group=option`, `~group`).
//!
//! A defaults list is a DAG that may include the same file many times over; its expansion is
//! refused past [`MAX_NESTING`] levels, [`MAX_DEFAULTS_FILES`] files or [`MAX_COMPOSED_NODES`]
//! nodes, and packages deeper than [`MAX_PACKAGE_DEPTH`], with the file where it happened.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::grammar::{Kind, Override};
use super::merge::{at_package, merge};
use super::tree::Node;
use super::yaml;

/// Environment variable: directories under which `pkg://a.b.c` search paths are looked up as
/// `DIR/a/b/c` (`:`-separated, like `PYTHONPATH`).
pub const PKG_PATH_ENV: &str = "RLPROF_PKG_PATH";

/// A loaded config file.
#[derive(Debug, Clone)]
pub(super) struct Loaded {
    /// Its content without the `defaults` key.
    pub content: Node,
    /// Its defaults list (raw).
    pub defaults: Option<Node>,
    /// `# @package` header.
    pub header: Option<String>,
    /// Nodes of its content (what including it adds to the composed config).
    pub nodes: usize,
}

/// Reads YAML text as a config file; `origin` names it in errors.
pub(super) fn load_text(text: &str, origin: &str) -> Result<Loaded, String> {
    let mut node = yaml::parse(text).map_err(|e| e.render(origin))?;
    if matches!(node, Node::Null) {
        node = Node::map();
    }
    let Node::Map(m) = &mut node else {
        return Err(format!(
            "{origin}: the document is {}, expected a mapping of sections (global_profiler, actor_rollout_ref, ...)",
            node.kind()
        ));
    };
    let defaults = m.shift_remove("defaults");
    Ok(Loaded {
        nodes: node.extent().nodes,
        content: node,
        defaults,
        header: yaml::package_header(text),
    })
}

fn read_file(path: &Path) -> Result<Loaded, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("{}: cannot read configuration file: {e}", path.display()))?;
    load_text(&text, &path.display().to_string())
}

/// `a/../b` -> `b` (a leading `..` stays): Hydra's group paths are written unnormalized
/// (`actor/../optim`); the file they name is read and cached once.
fn lexical(rel: &str) -> String {
    if !rel.contains("..") {
        return rel.to_string();
    }
    let mut parts: Vec<&str> = Vec::new();
    for seg in rel.split('/') {
        match seg {
            ".." if parts.last().is_some_and(|p| *p != "..") => {
                parts.pop();
            }
            "." | "" => {}
            s => parts.push(s),
        }
    }
    parts.join("/")
}

/// The config search path.
struct Repo {
    roots: Vec<PathBuf>,
    cache: HashMap<PathBuf, Loaded>,
}

impl Repo {
    fn file(&self, rel: &str) -> Option<PathBuf> {
        let rel = lexical(rel);
        self.roots
            .iter()
            .map(|r| r.join(format!("{rel}.yaml")))
            .find(|p| p.is_file())
    }

    fn load(&mut self, rel: &str) -> Result<Option<Loaded>, String> {
        let Some(p) = self.file(rel) else {
            return Ok(None);
        };
        if let Some(l) = self.cache.get(&p) {
            return Ok(Some(l.clone()));
        }
        let l = read_file(&p)?;
        self.cache.insert(p, l.clone());
        Ok(Some(l))
    }

    fn group_exists(&self, group: &str) -> bool {
        !group.is_empty() && self.roots.iter().any(|r| r.join(group).is_dir())
    }

    fn options(&self, group: &str) -> Vec<String> {
        let mut out: Vec<String> = self
            .roots
            .iter()
            .filter_map(|r| std::fs::read_dir(r.join(group)).ok())
            .flatten()
            .filter_map(Result::ok)
            .filter_map(|e| {
                let n = e.file_name().to_string_lossy().to_string();
                n.strip_suffix(".yaml").map(str::to_string)
            })
            .collect();
        out.sort();
        out.dedup();
        out
    }
}

/// One entry of a defaults list.
#[derive(Debug, Clone)]
enum Entry {
    SelfRef,
    Config {
        path: String,
        package: Option<String>,
        optional: bool,
    },
    Group {
        group: String,
        package: Option<String>,
        option: Option<Opt>,
        optional: bool,
        is_override: bool,
    },
}

/// The option(s) of a group entry: `group: name` or `group: [a, b]` (merged in order).
#[derive(Debug, Clone, PartialEq)]
enum Opt {
    One(String),
    Many(Vec<String>),
}

impl Opt {
    fn show(&self) -> String {
        match self {
            Opt::One(n) => n.clone(),
            Opt::Many(l) => format!("[{}]", l.join(",")),
        }
    }
}

fn parse_entries(defaults: &Node, origin: &str) -> Result<Vec<Entry>, String> {
    let Node::List(items) = defaults else {
        return Err(format!(
            "{origin}: defaults is {}, expected a list",
            defaults.kind()
        ));
    };
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let at = format!("{origin}: defaults[{i}]");
        match item {
            Node::Str(s) if s == "_self_" => out.push(Entry::SelfRef),
            Node::Str(s) => {
                let (optional, name) = keywords(s, &at)?;
                let (path, package) = split_package(name);
                out.push(Entry::Config {
                    path,
                    package,
                    optional: optional.0,
                });
            }
            Node::Map(m) if m.len() == 1 => {
                let (k, v) = m.iter().next().expect("one entry");
                let ((optional, is_override), name) = keywords(k, &at)?;
                let (group, package) = split_package(name);
                let option = match v {
                    Node::Null => None,
                    Node::Str(s) if s == super::tree::MISSING => {
                        return Err(format!(
                            "{at}: you must choose an option for '{group}' (it is '???'); add {group}=OPTION to the overrides"
                        ));
                    }
                    Node::Str(s) => Some(Opt::One(s.clone())),
                    Node::Int(_) | Node::Float(_) | Node::Bool(_) => Some(Opt::One(v.python_str())),
                    Node::List(l) => Some(Opt::Many(l.iter().map(Node::python_str).collect())),
                    other => {
                        return Err(format!(
                            "{at}: the option of '{group}' is {}; write a name or a list of names",
                            other.kind()
                        ));
                    }
                };
                out.push(Entry::Group {
                    group,
                    package,
                    option,
                    optional,
                    is_override,
                });
            }
            other => {
                return Err(format!(
                    "{at}: {} is not a defaults entry (write `- group: option`, `- config` or `- _self_`)",
                    other.python_repr()
                ));
            }
        }
    }
    Ok(out)
}

/// `optional override group@pkg` -> ((optional, override), `group@pkg`).
fn keywords<'a>(k: &'a str, at: &str) -> Result<((bool, bool), &'a str), String> {
    let words: Vec<&str> = k.split_whitespace().collect();
    let Some((name, kws)) = words.split_last() else {
        return Err(format!("{at}: empty entry"));
    };
    let mut flags = (false, false);
    for w in kws {
        match *w {
            "optional" => flags.0 = true,
            "override" => flags.1 = true,
            other => return Err(format!("{at}: unknown keyword '{other}' in '{k}'")),
        }
    }
    Ok((flags, name))
}

fn split_package(s: &str) -> (String, Option<String>) {
    match s.split_once('@') {
        Some((g, p)) => (g.to_string(), Some(p.to_string())),
        None => (s.to_string(), None),
    }
}

/// Hydra's group path of `rel` written in a config of group `base`: `/abs` is absolute,
/// anything else is appended to `base` as written (`actor/../optim`, looked up on the file
/// system as Hydra does).
fn join_group(base: &str, rel: &str) -> String {
    if let Some(abs) = rel.strip_prefix('/') {
        abs.to_string()
    } else if base.is_empty() {
        rel.to_string()
    } else {
        format!("{base}/{rel}")
    }
}

/// Hydra's override key of a group entry (`get_override_key`): the group path, with
/// `@final_package` when the package is not the group path's default (`critic@critic` in the
/// primary config is `critic`; `actor@actor_rollout_ref.actor` keeps its package).
fn entry_key(group_path: &str, written: &str, package: Option<&str>, parent: &str) -> String {
    let default_pkg = group_path.replace('/', ".");
    let rel = package
        .map(str::to_string)
        .unwrap_or_else(|| written.trim_start_matches('/').replace('/', "."));
    let fin = final_package(parent, &rel, "", "");
    if fin == default_pkg {
        group_path.to_string()
    } else if fin.is_empty() {
        format!("{group_path}@_global_")
    } else {
        format!("{group_path}@{fin}")
    }
}

/// Hydra's final package: `package` relative to `parent`, `_global_` resets to the root.
fn final_package(parent: &str, package: &str, group: &str, name: &str) -> String {
    let package = package
        .replace("_group_", &group.replace('/', "."))
        .replace("_name_", name);
    let joined = match (parent.is_empty(), package.is_empty()) {
        (true, _) => package,
        (false, true) => parent.to_string(),
        (false, false) => format!("{parent}.{package}"),
    };
    match joined.rfind("_global_") {
        None => joined,
        Some(i) => joined[i + "_global_".len()..]
            .trim_start_matches('.')
            .to_string(),
    }
}

/// A command-line or defaults-list choice of a config group.
struct Choice {
    option: Option<Opt>,
    from_cli: bool,
    used: bool,
    text: String,
}

/// Expands and merges a primary config.
struct Composer {
    repo: Repo,
    /// Override key -> chosen name (Hydra's `known_choices`).
    choices: HashMap<String, String>,
    /// Override keys of the group entries loaded (each may appear once).
    loaded_keys: std::collections::HashSet<String>,
    /// Group path -> the override keys seen for it (for "Did you mean ...?").
    keys_per_group: HashMap<String, Vec<String>>,
    overrides: HashMap<String, Choice>,
    deletions: HashMap<String, (Option<String>, bool, String)>,
    parts: Vec<(String, Node)>,
    /// Config files expanded so far (a file included twice counts twice).
    files: usize,
    /// Nodes of their contents.
    nodes: usize,
}

/// Deepest chain of defaults lists (a config that includes one that includes ...); past it, a
/// config most likely includes itself.
const MAX_NESTING: usize = 64;

/// Most config files one composition expands (each inclusion counts, so a file included from two
/// places counts twice). The nesting limit does not bound breadth: 24 levels of files that each
/// include the next level twice expand 2^24 files. verl's `ppo_trainer.yaml` expands a few dozen.
pub const MAX_DEFAULTS_FILES: usize = 10_000;

/// Most nodes the expanded files may hold together (their contents are copied into the composed
/// config once per inclusion). Twice the YAML reader's limit for one document
/// ([`yaml::MAX_NODES`]); verl's composed config has a few thousand nodes.
pub const MAX_COMPOSED_NODES: usize = 1_000_000;

/// Most parts of a Hydra package (`a.b.c` has three): the content is placed that many mappings
/// deep, on top of the file's own nesting. verl's packages have a few parts.
pub const MAX_PACKAGE_DEPTH: usize = 64;

/// `package` when it is not deeper than [`MAX_PACKAGE_DEPTH`].
fn checked_package(package: String, origin: &str) -> Result<String, String> {
    let n = package.split('.').filter(|s| !s.is_empty()).count();
    if n > MAX_PACKAGE_DEPTH {
        return Err(format!(
            "{origin}: a package of {n} parts; at most {MAX_PACKAGE_DEPTH} are accepted"
        ));
    }
    Ok(package)
}

impl Composer {
    fn expand(
        &mut self,
        loaded: Loaded,
        origin: &str,
        group_dir: &str,
        package: &str,
        depth: usize,
    ) -> Result<(), String> {
        if depth > MAX_NESTING {
            return Err(format!(
                "{origin}: defaults nested deeper than {MAX_NESTING} levels (does a config include itself?)"
            ));
        }
        self.files += 1;
        if self.files > MAX_DEFAULTS_FILES {
            return Err(format!(
                "{origin}: the defaults lists include more than {MAX_DEFAULTS_FILES} config files in all (configs that include the same configs many times over?); refusing the composition"
            ));
        }
        self.nodes = self.nodes.saturating_add(loaded.nodes);
        if self.nodes > MAX_COMPOSED_NODES {
            return Err(format!(
                "{origin}: the config files included hold more than {MAX_COMPOSED_NODES} nodes in all; refusing the composition"
            ));
        }
        let mut entries = match &loaded.defaults {
            Some(d) => parse_entries(d, origin)?,
            None => Vec::new(),
        };
        if !entries.iter().any(|e| matches!(e, Entry::SelfRef)) {
            entries.push(Entry::SelfRef);
        }
        // `override` entries first: they change choices made anywhere below this config.
        for e in &entries {
            if let Entry::Group {
                group,
                package: pkg,
                option,
                is_override: true,
                ..
            } = e
            {
                let key = entry_key(
                    &join_group(group_dir, group),
                    group,
                    pkg.as_deref(),
                    package,
                );
                self.overrides.entry(key).or_insert(Choice {
                    option: option.clone(),
                    from_cli: false,
                    used: false,
                    text: format!("{origin}: override {group}"),
                });
            }
        }
        for e in entries {
            match e {
                Entry::SelfRef => self
                    .parts
                    .push((package.to_string(), loaded.content.clone())),
                Entry::Config {
                    path,
                    package: pkg,
                    optional,
                } => {
                    let abs = join_group(group_dir, &path);
                    let Some(child) = self.repo.load(&abs)? else {
                        if optional {
                            continue;
                        }
                        return Err(format!(
                            "{origin}: cannot find config '{abs}' in the search path ({})",
                            self.roots()
                        ));
                    };
                    let written_dir = path.trim_start_matches('/').rsplit_once('/');
                    let default_pkg =
                        written_dir.map_or(String::new(), |(d, _)| d.replace('/', "."));
                    let rel = pkg
                        .or_else(|| child.header.as_deref().map(header_package))
                        .unwrap_or(default_pkg);
                    let (dir, name) = abs.rsplit_once('/').unwrap_or(("", abs.as_str()));
                    let fin = checked_package(final_package(package, &rel, dir, name), origin)?;
                    let dir = dir.to_string();
                    self.expand(child, &format!("{abs}.yaml"), &dir, &fin, depth + 1)?;
                }
                Entry::Group {
                    group,
                    package: pkg,
                    option,
                    optional,
                    is_override,
                } => {
                    if is_override {
                        continue;
                    }
                    let abs = join_group(group_dir, &group);
                    let key = entry_key(&abs, &group, pkg.as_deref(), package);
                    let seen = self.keys_per_group.entry(abs.clone()).or_default();
                    if !seen.contains(&key) {
                        seen.push(key.clone());
                    }
                    let option = match self.overrides.get_mut(&key) {
                        Some(c) => {
                            c.used = true;
                            c.option.clone()
                        }
                        None => option,
                    };
                    // `~group=name` deletes the entry only when it chooses that name (after
                    // interpolation: `${model_engine}_critic` is `dp_critic`).
                    let shown = match &option {
                        Some(Opt::One(n)) => Some(
                            self.interpolate_choice(n, origin)
                                .unwrap_or_else(|_| n.clone()),
                        ),
                        Some(o) => Some(o.show()),
                        None => None,
                    };
                    if let Some((opt, used, _)) = self.deletions.get_mut(&key)
                        && (opt.is_none() || *opt == shown)
                    {
                        *used = true;
                        continue;
                    }
                    let Some(option) = option else {
                        continue;
                    };
                    let names = match &option {
                        Opt::One(n) => {
                            let n = self.interpolate_choice(n, origin)?;

                            match self.choices.get(&key) {
                                Some(prev) if *prev != n => {
                                    return Err(format!(
                                        "{origin}: multiple values for {key} ({prev} and {n}); to override a value use 'override {key}: {n}' (on the command line: {key}={n}, not +{key}={n})"
                                    ));
                                }
                                _ => {
                                    self.choices.insert(key.clone(), n.clone());
                                }
                            }
                            vec![n]
                        }
                        Opt::Many(l) => l
                            .iter()
                            .map(|n| self.interpolate_choice(n, origin))
                            .collect::<Result<_, _>>()?,
                    };
                    let single = matches!(option, Opt::One(_));
                    for option in names {
                        let rel_path = format!("{abs}/{option}");
                        let Some(child) = self.repo.load(&rel_path)? else {
                            if optional {
                                continue;
                            }
                            return Err(format!(
                                "{origin}: could not find '{rel_path}'; available options in '{abs}': {}",
                                self.repo.options(&abs).join(", ")
                            ));
                        };
                        // Hydra's final defaults list holds a config without a defaults list
                        // under its override key, once (a config with one is its `_self_`).
                        if single
                            && child.defaults.is_none()
                            && !self.loaded_keys.insert(key.clone())
                        {
                            return Err(format!(
                                "{origin}: {key} appears more than once in the final defaults list"
                            ));
                        }
                        let default_pkg = group.trim_start_matches('/').replace('/', ".");
                        let rel = pkg
                            .clone()
                            .or_else(|| child.header.as_deref().map(header_package))
                            .unwrap_or(default_pkg);
                        let fin =
                            checked_package(final_package(package, &rel, &abs, &option), origin)?;
                        self.expand(child, &format!("{rel_path}.yaml"), &abs, &fin, depth + 1)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// `${group}` in an option name -> that group's choice.
    fn interpolate_choice(&self, option: &str, origin: &str) -> Result<String, String> {
        let mut out = String::new();
        let mut rest = option;
        while let Some(i) = rest.find("${") {
            out.push_str(&rest[..i]);
            let Some(j) = rest[i..].find('}') else {
                return Err(format!(
                    "{origin}: unclosed interpolation in option '{option}'"
                ));
            };
            let name = rest[i + 2..i + j].trim();
            let Some(c) = self.choices.get(name) else {
                return Err(format!(
                    "{origin}: option '{option}' refers to the choice of '{name}', which is not chosen earlier in the defaults list"
                ));
            };
            out.push_str(c);
            rest = &rest[i + j + 1..];
        }
        out.push_str(rest);
        Ok(out)
    }

    fn roots(&self) -> String {
        let r: Vec<String> = self
            .repo
            .roots
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        r.join(", ")
    }
}

/// A `# @package` header as Hydra reads it: absolute (`_global_.` prefixed).
fn header_package(h: &str) -> String {
    if h.is_empty() {
        "_global_".to_string()
    } else if h == "_global_" || h.starts_with("_global_.") {
        h.to_string()
    } else {
        format!("_global_.{h}")
    }
}

/// Where a search path entry points.
pub(super) fn search_root(entry: &str) -> Result<PathBuf, String> {
    if let Some(p) = entry.strip_prefix("file://") {
        return Ok(PathBuf::from(p));
    }
    if let Some(pkg) = entry.strip_prefix("pkg://") {
        let rel: PathBuf = pkg.split('.').collect();
        let dirs = std::env::var(PKG_PATH_ENV).unwrap_or_default();
        for d in dirs.split(':').filter(|d| !d.is_empty()) {
            let p = Path::new(d).join(&rel);
            if p.is_dir() {
                return Ok(p);
            }
        }
        return Err(format!(
            "hydra.searchpath: {entry}: package not found; name the directory that holds it in {PKG_PATH_ENV} (e.g. {PKG_PATH_ENV}=/path/to/site-packages)"
        ));
    }
    Ok(PathBuf::from(entry))
}

fn searchpath_of(content: &Node) -> Vec<String> {
    let sp = content.child("hydra").and_then(|h| h.child("searchpath"));
    match sp {
        Some(Node::List(l)) => l
            .iter()
            .filter_map(|n| n.as_str().map(str::to_string))
            .collect(),
        _ => Vec::new(),
    }
}

/// Composes a primary config. `dir` is its config directory (`None` for built-in text, which
/// then may not have a defaults list). `overrides` are the group overrides and additions of the
/// command line (value overrides are applied by the caller). Returns the merged tree without
/// the `hydra` key.
pub(super) fn compose(
    primary: Loaded,
    origin: &str,
    dir: Option<&Path>,
    primary_group: &str,
    group_overrides: &[Override],
    searchpath_override: Option<Vec<String>>,
    written: Option<&mut Vec<String>>,
) -> Result<Node, Vec<String>> {
    let mut roots = Vec::new();
    if let Some(d) = dir {
        roots.push(d.to_path_buf());
    }
    let mut errors = Vec::new();
    for e in searchpath_override.unwrap_or_else(|| searchpath_of(&primary.content)) {
        match search_root(&e) {
            Ok(r) => roots.push(r),
            Err(m) => errors.push(m),
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    if dir.is_none() && primary.defaults.is_some() {
        return Err(vec![format!(
            "{origin}: a defaults list needs a config directory (--config-path)"
        )]);
    }
    let mut c = Composer {
        repo: Repo {
            roots,
            cache: HashMap::new(),
        },
        choices: HashMap::new(),
        keys_per_group: HashMap::new(),
        loaded_keys: std::collections::HashSet::new(),
        overrides: HashMap::new(),
        deletions: HashMap::new(),
        parts: Vec::new(),
        files: 0,
        nodes: 0,
    };
    let mut appended = Vec::new();
    for ov in group_overrides {
        let key = ov.group_key();
        let option = match &ov.value {
            None => None,
            Some(Node::List(l)) if ov.kind != Kind::Delete => {
                Some(Opt::Many(l.iter().map(Node::python_str).collect()))
            }
            Some(Node::Null) if ov.kind == Kind::Delete => None,
            Some(Node::Null) => {
                errors.push(format!(
                    "override '{}': a config group override must be an option name or a list of names, not null (to remove the group write '~{key}')",
                    ov.text
                ));
                continue;
            }
            Some(v @ (Node::Map(_) | Node::List(_))) => {
                errors.push(format!(
                    "override '{}': a config group deletion value must be a name, not {}",
                    ov.text,
                    v.kind()
                ));
                continue;
            }
            Some(v) => Some(Opt::One(v.python_str())),
        };
        match ov.kind {
            Kind::Delete => {
                let name = option.map(|o| o.show());
                c.deletions.insert(key, (name, false, ov.text.clone()));
            }
            Kind::ForceAdd => errors.push(format!(
                "override '{}': force-add (++) of config groups is not supported, as in Hydra; write '{}' to change the choice or '+{}' to add the group",
                ov.text,
                &ov.text[2..],
                &ov.text[2..]
            )),
            Kind::Add => appended.push(ov.clone()),
            Kind::Change => {
                c.overrides.insert(
                    key,
                    Choice {
                        option,
                        from_cli: true,
                        used: false,
                        text: ov.text.clone(),
                    },
                );
            }
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    // The primary config's package: its header (absolute), else its group path
    // (`actor/dp_actor` composes under `actor`).
    let rel = match &primary.header {
        Some(h) => header_package(h),
        None => primary_group.replace('/', "."),
    };
    let root_pkg = checked_package(final_package("", &rel, "", ""), origin).map_err(|e| vec![e])?;
    if let Some(w) = written {
        let base: Vec<String> = root_pkg
            .split('.')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect();
        leaf_paths(&primary.content, &mut base.clone(), w);
    }
    if let Err(e) = c.expand(primary, origin, primary_group, &root_pkg, 0) {
        return Err(vec![e]);
    }
    for ov in appended {
        let option = match &ov.value {
            Some(Node::List(l)) => {
                Node::List(l.iter().map(|n| Node::Str(n.python_str())).collect())
            }
            other => Node::Str(other.as_ref().map(Node::python_str).unwrap_or_default()),
        };
        let entry = Loaded {
            content: Node::map(),
            defaults: Some(Node::List(vec![Node::Map(
                [(ov.group_key(), option)].into_iter().collect(),
            )])),
            header: None,
            nodes: 1,
        };
        // Added after the primary config, as Hydra appends it to the root defaults list.
        if let Err(e) = c.expand(entry, &format!("override '{}'", ov.text), "", "", 0) {
            return Err(vec![e]);
        }
        if !c.repo.group_exists(&ov.key) {
            errors.push(format!(
                "override '{}': no config group '{}'",
                ov.text, ov.key
            ));
        }
    }
    let mut unused: Vec<(&String, &Choice)> =
        c.overrides.iter().filter(|(_, ch)| !ch.used).collect();
    unused.sort_by_key(|(k, _)| k.as_str());
    for (key, ch) in unused {
        let group = key.split('@').next().unwrap_or(key);
        let hint = match c.keys_per_group.get(group).map(Vec::as_slice) {
            Some([one]) => format!("did you mean to override {one}?"),
            Some(many) if !many.is_empty() => {
                let mut m = many.to_vec();
                m.sort();
                format!("did you mean to override one of {}?", m.join(", "))
            }
            _ => "no match in the defaults list;".to_string(),
        };
        if ch.from_cli {
            errors.push(format!(
                "override '{}': could not override '{key}': {hint} to append to the defaults list write '+{}'",
                ch.text, ch.text
            ));
        } else {
            errors.push(format!(
                "{}: no '{key}' in the defaults list to override",
                ch.text
            ));
        }
    }
    for (key, (_, used, text)) in &c.deletions {
        if !used {
            errors.push(format!(
                "override '{text}': no '{key}' in the defaults list to delete"
            ));
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let mut root = Node::map();
    for (pkg, content) in c.parts {
        merge(&mut root, at_package(&pkg, content));
    }
    if let Node::Map(m) = &mut root {
        m.shift_remove("hydra");
    }
    Ok(root)
}

/// Whether an override names a config group of the search path (`model_engine=megatron`).
pub(super) fn is_group_override(ov: &Override, primary: &Loaded, dir: Option<&Path>) -> bool {
    let Some(d) = dir else { return false };
    // A dict value is a config override even on a group's name (`data={train_batch_size:3}`).
    if (ov.key.contains('.') && !ov.key.contains('/')) || matches!(ov.value, Some(Node::Map(_))) {
        return false;
    }
    let mut roots = vec![d.to_path_buf()];
    for e in searchpath_of(&primary.content) {
        if let Ok(r) = search_root(&e) {
            roots.push(r);
        }
    }
    Repo {
        roots,
        cache: HashMap::new(),
    }
    .group_exists(&ov.key)
}

/// The dotted paths of every leaf (and empty container) of `node` under `prefix`.
pub(super) fn leaf_paths(node: &Node, prefix: &mut Vec<String>, out: &mut Vec<String>) {
    match node {
        Node::Map(m) if !m.is_empty() => {
            for (k, v) in m {
                prefix.push(k.clone());
                leaf_paths(v, prefix, out);
                prefix.pop();
            }
        }
        _ => out.push(prefix.join(".")),
    }
}

/// The keys of Hydra 1.3's own `hydra` node (`HydraConf`) two levels deep; `None` below a key
/// means any key (logging, launcher and sweeper configs, callbacks, dictionaries).
const HYDRA_KEYS: &[(&str, Option<&[&str]>)] = &[
    ("mode", Some(&[])),
    ("searchpath", Some(&[])),
    ("run", Some(&["dir"])),
    ("sweep", Some(&["dir", "subdir"])),
    ("hydra_logging", None),
    ("job_logging", None),
    ("sweeper", Some(&["_target_", "max_batch_size", "params"])),
    ("launcher", Some(&["_target_"])),
    ("callbacks", Some(&[])),
    ("help", Some(&["app_name", "header", "footer", "template"])),
    ("hydra_help", Some(&["hydra_help", "template"])),
    ("output_subdir", Some(&[])),
    ("overrides", Some(&["hydra", "task"])),
    (
        "job",
        Some(&[
            "name",
            "chdir",
            "override_dirname",
            "id",
            "num",
            "config_name",
            "env_set",
            "env_copy",
            "config",
        ]),
    ),
    (
        "runtime",
        Some(&[
            "version",
            "version_base",
            "cwd",
            "config_sources",
            "output_dir",
            "choices",
        ]),
    ),
    ("verbose", Some(&[])),
];

/// Why a value override of `hydra.*` without `+` names a key Hydra's own config does not have
/// (Hydra's config is in struct mode too), or `None`.
/// Hydra 1.3's own config groups and their options (`hydra/job_logging=disabled`).
const HYDRA_GROUPS: &[(&str, &[&str])] = &[
    ("env", &["default"]),
    ("help", &["default"]),
    ("hydra_help", &["default"]),
    (
        "hydra_logging",
        &["default", "disabled", "hydra_debug", "none"],
    ),
    ("job_logging", &["default", "disabled", "none", "stdout"]),
    ("output", &["default"]),
    ("launcher", &["basic"]),
    ("sweeper", &["basic"]),
];

pub(super) fn unknown_hydra_key(ov: &Override) -> Option<String> {
    if let Some(group) = ov.key.strip_prefix("hydra/") {
        if ov.kind != Kind::Change {
            return None;
        }
        let option = ov.value.as_ref().map(Node::python_str).unwrap_or_default();
        return match HYDRA_GROUPS.iter().find(|(g, _)| *g == group) {
            None => Some(format!(
                "could not override '{}': no such group in Hydra's defaults list",
                ov.key
            )),
            Some((_, options)) if !options.contains(&option.as_str()) => Some(format!(
                "could not find '{}/{option}'; available options in '{}': {}",
                ov.key,
                ov.key,
                options.join(", ")
            )),
            Some(_) => None,
        };
    }
    if !matches!(ov.kind, Kind::Change) {
        return None;
    }
    let segs: Vec<&str> = ov.key.split('.').collect();
    let first = segs.get(1)?;
    let known = match HYDRA_KEYS.iter().find(|(k, _)| k == first) {
        None => false,
        Some((_, None)) => true,
        Some((_, Some(sub))) => match segs.get(2) {
            None => true,
            // `env_set` and `env_copy` start empty: their items need `+`.
            Some(s) => sub.contains(s) && !(matches!(*s, "env_set" | "env_copy") && segs.len() > 3),
        },
    };
    (!known).then(|| {
        format!(
            "could not override '{}': Hydra's config has no such key; to append to it write '+{}'",
            ov.key, ov.text
        )
    })
}
