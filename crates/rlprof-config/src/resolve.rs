//! OmegaConf's interpolation, on the whole composed tree (what `to_container(resolve=True)`
//! does): `${a.b}`, relative `${.x}` / `${..x}`, string interpolation `"${a}/b"`, the resolvers
//! `oc.select`, `oc.env`, `oc.decode`, `oc.create`, `oc.dict.keys`, `oc.dict.values`,
//! `oc.deprecated` and Hydra's `now`, `\${` escapes. A value that refers to `???` or to a key
//! that does not exist, a cycle (shown as its chain of paths) and an unknown resolver are errors,
//! all reported together, each with the path of the value that holds the interpolation. `???`
//! itself stays in the tree: it is an error only where a reader needs the value.
//!
//! Hostile configs are refused, with the limit they pass, before they exhaust the stack or the
//! memory: interpolations evaluated inside one another ([`MAX_INTERPOLATION_DEPTH`]), the nesting
//! of the resolved tree ([`MAX_RESOLVED_DEPTH`]), the nodes ([`MAX_RESOLVED_NODES`]) and the bytes
//! of text ([`MAX_INTERPOLATED_BYTES`]) resolution produces. The first limit passed ends the
//! resolution; it is the one error reported.

use std::collections::HashMap;

use super::grammar;
use super::tree::{Extent, Map, Node};

/// Most interpolations evaluated one inside another: a chain `k0: ${k1}`, `k1: ${k2}`, ..., an
/// interpolation in a key (`${a.${b}}`) or in a resolver's argument, an `oc.decode` of text that
/// interpolates again. Each level is a handful of recursive calls, and a 2 MiB thread stack must
/// hold them with [`MAX_RESOLVED_DEPTH`] levels of tree besides. Real configs chain a handful of
/// references.
pub const MAX_INTERPOLATION_DEPTH: usize = 64;

/// Deepest nesting of lists and mappings in the resolved config. Interpolations can place a
/// container inside a copy of itself (`a: {x: ${b}}`, `b: {x: ${c}}`, ...), deeper than any one
/// file; every later step (output, validation, drop) walks the tree recursively. Above the YAML
/// reader's own limit (256) plus a Hydra package; verl's files nest seven levels.
pub const MAX_RESOLVED_DEPTH: usize = 512;

/// Most nodes the resolution may produce: the resolved tree plus the copies that references to
/// containers make (`[${a}, ${a}, ...]` with `a` holding `[${b}, ${b}, ...]` grows exponentially
/// with the number of lines). Twice the composition's own limit
/// ([`super::compose::MAX_COMPOSED_NODES`]); verl's composed config has a few thousand nodes.
pub const MAX_RESOLVED_NODES: usize = 2_000_000;

/// Most bytes of text the interpolations may produce in one config: string interpolation
/// results (`"${a}${a}..."` nested a few levels doubles or decuples per level) and the copies of
/// strings that references make. verl's interpolated strings are paths and names, a few kB in all.
pub const MAX_INTERPOLATED_BYTES: usize = 64 << 20;

/// Resolves every interpolation of `root`; `origin` (the primary config) names it when a limit
/// is passed.
pub(super) fn resolve_all(root: &Node, origin: &str) -> Result<Node, Vec<String>> {
    let mut r = Resolver {
        root,
        memo: HashMap::new(),
        stack: Vec::new(),
        errors: Vec::new(),
        evaluating: 0,
        depth: 0,
        nodes: 0,
        bytes: 0,
        fatal: None,
    };
    let out = r.deep(root, &mut Vec::new());
    if let Some(f) = r.fatal {
        return Err(vec![format!("{origin}: {f}")]);
    }
    if r.errors.is_empty() {
        Ok(out)
    } else {
        r.errors.dedup();
        Err(r.errors)
    }
}

/// Dotted rendering of a path (`a.b[0].c`).
pub(super) fn show_path(path: &[String]) -> String {
    let mut out = String::new();
    for seg in path {
        if seg.parse::<usize>().is_ok() && !out.is_empty() {
            out.push_str(&format!("[{seg}]"));
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(seg);
        }
    }
    if out.is_empty() { "<root>".into() } else { out }
}

struct Resolver<'a> {
    root: &'a Node,
    /// Resolved interpolation strings by path, with their size (what a reuse copies).
    memo: HashMap<Vec<String>, (Result<Node, String>, Extent)>,
    stack: Vec<Vec<String>>,
    errors: Vec<String>,
    /// Strings being evaluated, one inside another.
    evaluating: usize,
    /// Lists and mappings open around the value being built.
    depth: usize,
    /// Nodes produced so far.
    nodes: usize,
    /// Bytes of text produced by interpolations so far.
    bytes: usize,
    /// The limit passed (with the path where), which ends the resolution.
    fatal: Option<String>,
}

/// Stands for the result of anything cut short by a limit (only `fatal` is reported).
const STOPPED: &str = "resolution stopped at a limit";

impl<'a> Resolver<'a> {
    /// Records that a limit was passed at `path` (the first one is reported); returns the
    /// message for the callers to pass up.
    fn fail(&mut self, path: &[String], msg: String) -> String {
        if self.fatal.is_none() {
            self.fatal = Some(format!("{}: {msg}", show_path(path)));
        }
        STOPPED.into()
    }

    /// Counts what is about to be produced at `path`; an error past a limit.
    fn charge(&mut self, nodes: usize, bytes: usize, path: &[String]) -> Result<(), String> {
        self.nodes = self.nodes.saturating_add(nodes);
        self.bytes = self.bytes.saturating_add(bytes);
        if self.nodes > MAX_RESOLVED_NODES {
            return Err(self.fail(
                path,
                format!(
                    "resolving the interpolations would produce more than {MAX_RESOLVED_NODES} nodes (references to copies of containers?); refusing the config"
                ),
            ));
        }
        if self.bytes > MAX_INTERPOLATED_BYTES {
            return Err(self.fail(
                path,
                format!(
                    "the interpolations would produce more than {} MiB of text (strings interpolating strings?); refusing the config",
                    MAX_INTERPOLATED_BYTES >> 20
                ),
            ));
        }
        Ok(())
    }

    /// Whether a value `extent` deep fits below the containers open now.
    fn fits(&mut self, extent: &Extent, path: &[String]) -> Result<(), String> {
        if self.depth + extent.depth > MAX_RESOLVED_DEPTH {
            return Err(self.deeper(path));
        }
        Ok(())
    }

    fn deeper(&mut self, path: &[String]) -> String {
        self.fail(
            path,
            format!(
                "the resolved config nests lists and mappings deeper than {MAX_RESOLVED_DEPTH} levels (a container interpolated into itself?); refusing the config"
            ),
        )
    }

    /// The resolved copy of `node` (at `path`), recording errors and keeping going.
    fn deep(&mut self, node: &Node, path: &mut Vec<String>) -> Node {
        if self.fatal.is_some() {
            return Node::Null;
        }
        let text = match node {
            Node::Str(s) if self.evaluating > 0 => s.len(),
            _ => 0,
        };
        if self.charge(1, text, path).is_err() {
            return Node::Null;
        }
        match node {
            Node::Str(s) if s.contains("${") || s.contains("\\${") => match self.leaf(path) {
                Ok(v) => v,
                Err(_) if self.fatal.is_some() => Node::Null,
                Err(e) => {
                    self.errors.push(format!("{}: {e}", show_path(path)));
                    node.clone()
                }
            },
            Node::List(_) | Node::Map(_) if self.depth >= MAX_RESOLVED_DEPTH => {
                self.deeper(path);
                Node::Null
            }
            Node::List(l) => {
                self.depth += 1;
                let mut out = Vec::with_capacity(l.len());
                for (i, item) in l.iter().enumerate() {
                    path.push(i.to_string());
                    out.push(self.deep(item, path));
                    path.pop();
                }
                self.depth -= 1;
                Node::List(out)
            }
            Node::Map(m) => {
                self.depth += 1;
                let mut out = Map::with_capacity(m.len());
                for (k, v) in m {
                    if self.evaluating > 0 && self.charge(0, k.len(), path).is_err() {
                        break;
                    }
                    path.push(k.clone());
                    out.insert(k.clone(), self.deep(v, path));
                    path.pop();
                }
                self.depth -= 1;
                Node::Map(out)
            }
            other => other.clone(),
        }
    }

    /// The resolved value of the raw string at `path` (memoised, cycle-checked).
    fn leaf(&mut self, path: &[String]) -> Result<Node, String> {
        if self.fatal.is_some() {
            return Err(STOPPED.into());
        }
        if let Some((_, extent)) = self.memo.get(path) {
            // A reuse is a copy: counted before it is made.
            let extent = *extent;
            self.fits(&extent, path)?;
            self.charge(extent.nodes, extent.bytes, path)?;
            return self.memo[path].0.clone();
        }
        if let Some(i) = self.stack.iter().position(|p| p == path) {
            let mut chain: Vec<String> = self.stack[i..].iter().map(|p| show_path(p)).collect();
            chain.push(show_path(path));
            return Err(format!("interpolation cycle: {}", chain.join(" -> ")));
        }
        let root: &'a Node = self.root;
        let Some(Node::Str(s)) = root.get_path(path) else {
            return Err("not a string".into());
        };
        self.stack.push(path.to_vec());
        let r = self.string(s, path);
        self.stack.pop();
        let extent = match &r {
            Ok(v) => v.extent(),
            Err(_) => Extent::default(),
        };
        self.memo.insert(path.to_vec(), (r.clone(), extent));
        r
    }

    /// The resolved value of the node at `path` of the raw tree, for a reference.
    fn reference(&mut self, target: &[String], shown: &str) -> Result<Node, String> {
        let root: &'a Node = self.root;
        let Some(node) = root.get_path(target) else {
            return Err(format!("interpolation key '{shown}' not found"));
        };
        if node.is_missing() {
            return Err(format!(
                "refers to '{}', which is '???' (a mandatory value that is not set)",
                show_path(target)
            ));
        }
        match node {
            Node::Str(s) if s.contains("${") || s.contains("\\${") => self.leaf(target),
            Node::List(_) | Node::Map(_) => {
                let before = self.errors.len();
                let out = self.deep(node, &mut target.to_vec());
                if self.fatal.is_some() {
                    return Err(STOPPED.into());
                }
                if self.errors.len() > before {
                    let first = self.errors.split_off(before).remove(0);
                    return Err(first);
                }
                Ok(out)
            }
            other => {
                let text = other.as_str().map_or(0, str::len);
                self.charge(1, text, target)?;
                Ok(other.clone())
            }
        }
    }

    /// Evaluates a string with interpolations at `path` (the node holding it).
    fn string(&mut self, s: &str, path: &[String]) -> Result<Node, String> {
        if self.evaluating >= MAX_INTERPOLATION_DEPTH {
            let chain = chain_text(&self.stack);
            return Err(self.fail(
                path,
                format!(
                    "interpolations nested deeper than {MAX_INTERPOLATION_DEPTH} levels (through {chain}); refusing the config"
                ),
            ));
        }
        self.evaluating += 1;
        let r = self.pieces(s, path);
        self.evaluating -= 1;
        r
    }

    fn pieces(&mut self, s: &str, path: &[String]) -> Result<Node, String> {
        let pieces = split(s)?;
        if let [Piece::Interp(e)] = pieces.as_slice() {
            return self.expr(e, path);
        }
        let mut out = String::new();
        for p in pieces {
            let text = match p {
                Piece::Text(t) => t,
                Piece::Interp(e) => self.expr(&e, path)?.python_str(),
            };
            self.charge(0, text.len(), path)?;
            out.push_str(&text);
        }
        Ok(Node::Str(out))
    }

    /// One `${...}` body.
    fn expr(&mut self, e: &str, path: &[String]) -> Result<Node, String> {
        let e = e.trim();
        if e.is_empty() {
            return Err(
                "empty interpolation '${}' (OmegaConf's grammar needs a key or a resolver call: ${a.b}, ${oc.env:VAR}); write '\\${}' for the literal text".into(),
            );
        }
        if let Some((name, args)) = resolver_call(e) {
            let args = split_args(args)?
                .into_iter()
                .map(|a| self.arg(&a, path))
                .collect::<Result<Vec<_>, _>>()?;
            return self.call(name, args, path);
        }
        if e.contains("${") {
            // A key built from an interpolation: `${a.${b}}`.
            let key = self.string(e, path)?.python_str();
            return self.key(&key, path);
        }
        self.key(e, path)
    }

    fn key(&mut self, key: &str, path: &[String]) -> Result<Node, String> {
        let target = absolute(key, path)?;
        self.reference(&target, key)
    }

    /// A resolver argument: quoted string, interpolation, container or typed primitive.
    fn arg(&mut self, a: &str, path: &[String]) -> Result<Node, String> {
        let t = a.trim();
        if let Some(q) = t.chars().next().filter(|c| matches!(c, '\'' | '"'))
            && t.len() >= 2
            && t.ends_with(q)
        {
            let body = t[1..t.len() - 1].replace(&format!("\\{q}"), &q.to_string());
            return if body.contains("${") {
                Ok(Node::Str(self.string(&body, path)?.python_str()))
            } else {
                Ok(Node::Str(body))
            };
        }
        if t.contains("${") {
            return self.string(t, path);
        }
        // OmegaConf's grammar: an unquoted argument holds letters, digits, whitespace and
        // `_-/\\+.$%*@?|:` (and containers); anything else (`~`, `<`, non-ASCII, ...) must be
        // quoted.
        if let Some(c) = t.chars().find(|c| {
            !(c.is_ascii_alphanumeric()
                || c.is_ascii_whitespace()
                || "_-/\\+.$%*@?|:[]{},='\"".contains(*c))
        }) {
            return Err(format!(
                "'{c}' cannot appear in an unquoted resolver argument ('{t}'); quote the argument"
            ));
        }
        self.decode(t, "", path)
    }

    /// Reads `text` with the override grammar; a value nested past its limit ends the
    /// resolution (`what` starts the message).
    fn decode(&mut self, text: &str, what: &str, path: &[String]) -> Result<Node, String> {
        grammar::parse_value_checked(text).map_err(|e| {
            if e.too_deep {
                self.fail(path, format!("{what}{}", e.message))
            } else {
                format!("{what}{}", e.message)
            }
        })
    }

    fn call(&mut self, name: &str, args: Vec<Node>, path: &[String]) -> Result<Node, String> {
        match name {
            "oc.select" => {
                let (key, default) = match args.as_slice() {
                    [k] => (k, None),
                    [k, d] => (k, Some(d.clone())),
                    _ => return Err("oc.select takes a key and an optional default".into()),
                };
                let key = key.python_str();
                let target = absolute(&key, path)?;
                match self.root.get_path(&target) {
                    None => Ok(default.unwrap_or(Node::Null)),
                    Some(n) if n.is_missing() => Ok(default.unwrap_or(Node::Null)),
                    Some(_) => self.reference(&target, &key),
                }
            }
            "oc.env" => {
                let (var, default) = match args.as_slice() {
                    [v] => (v.python_str(), None),
                    [v, d] => (v.python_str(), Some(d.clone())),
                    _ => return Err("oc.env takes a variable and an optional default".into()),
                };
                match std::env::var(&var) {
                    Ok(v) => Ok(Node::Str(v)),
                    Err(_) => match default {
                        Some(Node::Null) => Ok(Node::Null),
                        Some(d) => Ok(Node::Str(d.python_str())),
                        None => Err(format!(
                            "environment variable '{var}' is not set (give a default: ${{oc.env:{var},default}})"
                        )),
                    },
                }
            }
            "oc.decode" => match args.as_slice() {
                [Node::Null] => Ok(Node::Null),
                [Node::Str(s)] => {
                    let v = self.decode(s, "oc.decode: ", path)?;
                    match v {
                        Node::Str(inner) if inner.contains("${") => self.string(&inner, path),
                        other => {
                            let extent = other.extent();
                            self.fits(&extent, path)?;
                            self.charge(extent.nodes, extent.bytes, path)?;
                            Ok(other)
                        }
                    }
                }
                [other] => Err(format!("oc.decode takes a string, got {}", other.kind())),
                _ => Err("oc.decode takes one argument".into()),
            },
            "oc.create" => match args.as_slice() {
                [Node::Str(text)] => match super::yaml::parse(text) {
                    Ok(v @ (Node::Map(_) | Node::List(_))) => {
                        let extent = v.extent();
                        self.fits(&extent, path)?;
                        self.charge(extent.nodes, extent.bytes, path)?;
                        Ok(v)
                    }
                    Ok(other) => Err(format!(
                        "oc.create: the text reads as {}, not a mapping or a list",
                        other.kind()
                    )),
                    Err(e) => Err(format!("oc.create: {}", e.render("its argument"))),
                },
                [v @ (Node::Map(_) | Node::List(_))] => Ok(v.clone()),
                [other] => Err(format!(
                    "oc.create takes a mapping, a list or their YAML text, got {}",
                    other.kind()
                )),
                _ => Err("oc.create takes one argument".into()),
            },
            "oc.dict.keys" | "oc.dict.values" => {
                let [Node::Str(key)] = args.as_slice() else {
                    return Err(format!("`{name}` requires a string (a key) as input"));
                };
                let target = segments(key);
                let Some(Node::Map(m)) = self.root.get_path(&target) else {
                    return match self.root.get_path(&target) {
                        None => Err(format!("{name}: key not found: '{key}'")),
                        Some(n) => Err(format!(
                            "`{name}` cannot be applied to objects of type {}",
                            n.kind()
                        )),
                    };
                };
                let keys: Vec<String> = m.keys().cloned().collect();
                if name == "oc.dict.keys" {
                    return Ok(Node::List(keys.into_iter().map(Node::Str).collect()));
                }
                let mut out = Vec::new();
                for k in keys {
                    let mut t = target.clone();
                    t.push(k.clone());
                    out.push(self.reference(&t, &format!("{key}.{k}"))?);
                }
                Ok(Node::List(out))
            }
            "oc.deprecated" => {
                let key = match args.as_slice() {
                    [k] | [k, _] => k.python_str(),
                    _ => return Err("oc.deprecated takes a key and an optional message".into()),
                };
                let target = segments(&key);
                self.reference(&target, &key)
            }
            "now" => match args.as_slice() {
                [fmt] => Ok(Node::Str(super::strftime::now(&fmt.python_str()))),
                _ => Err("now takes one argument, a strftime pattern".into()),
            },
            other => Err(format!(
                "unsupported interpolation type '{other}' (supported: oc.select, oc.env, oc.decode, oc.create, oc.dict.keys, oc.dict.values, oc.deprecated, now)"
            )),
        }
    }
}

/// The chain of interpolations being evaluated, shortened in the middle.
fn chain_text(stack: &[Vec<String>]) -> String {
    let shown: Vec<String> = if stack.len() <= 5 {
        stack.iter().map(|p| show_path(p)).collect()
    } else {
        let mut v: Vec<String> = stack[..3].iter().map(|p| show_path(p)).collect();
        v.push(format!("... {} more ...", stack.len() - 4));
        v.push(show_path(&stack[stack.len() - 1]));
        v
    };
    if shown.len() < 2 {
        "'${' inside '${' or inside resolver arguments".into()
    } else {
        shown.join(" -> ")
    }
}

/// `name:args` when `e` calls a resolver.
fn resolver_call(e: &str) -> Option<(&str, &str)> {
    let (name, args) = e.split_once(':')?;
    let ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == '.')
        && !name.starts_with('.');
    ok.then_some((name, args))
}

/// The absolute path of a key written at the node `path` (relative keys start with dots).
fn absolute(key: &str, path: &[String]) -> Result<Vec<String>, String> {
    let dots = key.chars().take_while(|c| *c == '.').count();
    let rest = &key[dots..];
    let mut base: Vec<String> = if dots == 0 {
        Vec::new()
    } else {
        // `.x` is a sibling: start from the container holding the node.
        let up = dots;
        if up > path.len() {
            return Err(format!("relative key '{key}' goes above the root"));
        }
        path[..path.len() - up].to_vec()
    };
    for seg in segments(rest) {
        base.push(seg);
    }
    Ok(base)
}

/// `a.b[0].c` -> `a`, `b`, `0`, `c`.
fn segments(key: &str) -> Vec<String> {
    let mut out = Vec::new();
    for part in key.split('.').filter(|p| !p.is_empty()) {
        let mut rest = part;
        if let Some(i) = rest.find('[') {
            if i > 0 {
                out.push(rest[..i].to_string());
            }
            rest = &rest[i..];
            while let Some(body) = rest.strip_prefix('[') {
                let Some(j) = body.find(']') else { break };
                out.push(body[..j].to_string());
                rest = &body[j + 1..];
            }
        } else {
            out.push(rest.to_string());
        }
    }
    out
}

enum Piece {
    Text(String),
    Interp(String),
}

/// Splits a string into text and `${...}` bodies (nested braces balanced, `\${` escaped).
fn split(s: &str) -> Result<Vec<Piece>, String> {
    let b: Vec<char> = s.chars().collect();
    let mut out = Vec::new();
    let mut text = String::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == '\\' && b.get(i + 1) == Some(&'$') && b.get(i + 2) == Some(&'{') {
            text.push_str("${");
            i += 3;
            continue;
        }
        if b[i] == '$' && b.get(i + 1) == Some(&'{') {
            let mut depth = 0;
            let mut j = i + 1;
            let mut quote: Option<char> = None;
            while j < b.len() {
                let c = b[j];
                match quote {
                    Some(q) if c == q => quote = None,
                    Some(_) => {}
                    None if c == '\'' || c == '"' => quote = Some(c),
                    None if c == '{' => depth += 1,
                    None if c == '}' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    None => {}
                }
                j += 1;
            }
            if j >= b.len() {
                return Err(format!("unclosed interpolation in '{s}'"));
            }
            if !text.is_empty() {
                out.push(Piece::Text(std::mem::take(&mut text)));
            }
            out.push(Piece::Interp(b[i + 2..j].iter().collect()));
            i = j + 1;
            continue;
        }
        text.push(b[i]);
        i += 1;
    }
    if !text.is_empty() || out.is_empty() {
        out.push(Piece::Text(text));
    }
    Ok(out)
}

/// Splits resolver arguments at top-level commas.
fn split_args(args: &str) -> Result<Vec<String>, String> {
    if args.trim().is_empty() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut depth = 0i32;
    let mut quote: Option<char> = None;
    for c in args.chars() {
        if let Some(q) = quote {
            if c == q {
                quote = None;
            }
            cur.push(c);
            continue;
        }
        match c {
            '\'' | '"' => {
                quote = Some(c);
                cur.push(c)
            }
            '{' | '[' => {
                depth += 1;
                cur.push(c)
            }
            '}' | ']' => {
                depth -= 1;
                cur.push(c)
            }
            ',' if depth == 0 => out.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    if quote.is_some() || depth != 0 {
        return Err(format!("unbalanced resolver arguments '{args}'"));
    }
    out.push(cur);
    Ok(out)
}
