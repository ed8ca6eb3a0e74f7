//! Typed reading of a composed config with error collection: one [`Reader`] for every section
//! (the profiler's plan and the trainer's job config), recording each problem as an [`Issue`]
//! (`path`, `found`, `expected`, `hint`) instead of stopping at the first.
//!
//! Two ways of reading share the reader and its issues:
//! - by dotted path from the document root with a default and a range
//!   ([`Reader::uint`], [`Reader::float`], [`Reader::choice`], ...): the value is used when it
//!   is valid, the default otherwise; an absent key or `null` is the default;
//! - by key in a mapping the caller walks ([`Reader::int_in`], [`Reader::str_in`],
//!   [`Reader::map`], [`Reader::check_keys`], ...): these treat an absent key, `null` and an
//!   interpolation string (`${oc.select:...}`, `${...}`) as "not set" (`None`).
//!
//! Every issue renders as one line starting with its full YAML path, showing the bad value and
//! naming the valid values.

use std::fmt::{self, Display};
use std::path::PathBuf;

use crate::tree::{Map, Node};

/// The closest candidate to `word`, if one is close enough to be a likely typo.
pub(crate) fn suggest<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let mut best: Option<(&str, f64)> = None;
    for c in candidates {
        let score = strsim::jaro_winkler(word, c);
        let dist = strsim::damerau_levenshtein(word, c);
        let close = dist <= 2.max(word.len() / 3) || score >= 0.85;
        if close && best.is_none_or(|(_, s)| score > s) {
            best = Some((c, score));
        }
    }
    best.map(|(c, _)| c)
}

/// Whether `v` is an OmegaConf interpolation (treated as "not set / inherit").
pub(crate) fn is_interp(v: &Node) -> bool {
    v.is_interpolation()
}

/// The integer value of `v`. Besides YAML integers this accepts a string spelling of one with
/// digit separators (`'100_000'`; the reader types the plain `100_000` of verl's own
/// `ppo_trainer.yaml` as an integer already, as OmegaConf does).
pub(crate) fn as_int(v: &Node) -> Option<i64> {
    match v {
        Node::Int(i) => Some(*i),
        Node::Str(s) => {
            let body = s.strip_prefix(['+', '-']).unwrap_or(s);
            let ok = body.starts_with(|c: char| c.is_ascii_digit())
                && body.chars().all(|c| c.is_ascii_digit() || c == '_')
                && body.contains('_');
            if ok {
                s.replace('_', "").parse().ok()
            } else {
                None
            }
        }
        _ => None,
    }
}

/// The kind of a YAML value, with article (`a string`, `an integer`).
pub(crate) fn kind(v: &Node) -> &'static str {
    v.kind()
}

/// One configuration problem, found at a YAML path.
///
/// `Display` renders the one-line message users see, starting with `path`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issue {
    /// The full dotted YAML path (`actor_rollout_ref.actor.profiler.ranks[2]`).
    pub path: String,
    /// The value found, as the config shows it (`'abc'`, `[1, 2]`), or the unknown key's name;
    /// `None` for a problem not about one value.
    pub found: Option<String>,
    /// What is valid there (`an integer > 0`, a list of valid keys or values).
    pub expected: Option<String>,
    /// The likely intended spelling, for a near miss (`did you mean 'steps'?`).
    pub hint: Option<String>,
    shape: Shape,
}

/// How an [`Issue`] reads (each shape is one wording users already know).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Shape {
    /// `{found} is {kind}, expected {expected}`.
    WrongKind(&'static str),
    /// `{found} is not valid; expected {expected}`.
    NotValid,
    /// `unknown key; [did you mean '{hint}'? ]valid keys: {expected}`.
    UnknownKey,
    /// `'{found}' is not one of {expected}[; did you mean '{hint}'?]`.
    NotOneOf,
    /// `expected {expected}, got {found}`.
    Got,
    /// `unknown value '{found}'; valid values: {expected}`.
    UnknownValue,
    /// Free text (cross-field checks).
    Message(String),
}

impl Issue {
    fn new(path: &str, found: Option<String>, expected: Option<String>, shape: Shape) -> Issue {
        Issue {
            path: path.to_string(),
            found,
            expected,
            hint: None,
            shape,
        }
    }

    /// `path: message`, for a problem that is not about the type or range of one value.
    pub fn message(path: &str, message: impl Display) -> Issue {
        Issue::new(path, None, None, Shape::Message(message.to_string()))
    }

    /// `path: expected {expected}, got {found}` (the value is used unchanged in the message).
    pub fn expected(path: &str, expected: impl Display, found: &Node) -> Issue {
        Issue::new(
            path,
            Some(found.show()),
            Some(expected.to_string()),
            Shape::Got,
        )
    }

    /// `path: {value} is {kind}, expected {expected}`: a value of the wrong type.
    pub fn wrong_kind(path: &str, found: &Node, expected: impl Display) -> Issue {
        Issue::new(
            path,
            Some(found.show()),
            Some(expected.to_string()),
            Shape::WrongKind(kind(found)),
        )
    }

    /// `path: {value} is not valid; expected {expected}`: a value out of range.
    pub fn not_valid(path: &str, found: &Node, expected: impl Display) -> Issue {
        Issue::new(
            path,
            Some(found.show()),
            Some(expected.to_string()),
            Shape::NotValid,
        )
    }

    /// `path: '{word}' is not one of {valid}`, with a did-you-mean when one is close.
    pub fn not_one_of(path: &str, word: &str, valid: &[&str]) -> Issue {
        let mut i = Issue::new(
            path,
            Some(word.to_string()),
            Some(valid.join(", ")),
            Shape::NotOneOf,
        );
        i.hint = suggest(word, valid).map(str::to_string);
        i
    }

    /// `path: unknown value '{word}'; valid values: {valid}`.
    pub fn unknown_value(path: &str, word: &str, valid: &[&str]) -> Issue {
        Issue::new(
            path,
            Some(word.to_string()),
            Some(valid.join(", ")),
            Shape::UnknownValue,
        )
    }

    /// `{parent}.{key}: unknown key; valid keys: {valid}`, with a did-you-mean.
    pub fn unknown_key(parent: &str, key: &str, valid: &[&str]) -> Issue {
        let mut i = Issue::new(
            &format!("{parent}.{key}"),
            Some(key.to_string()),
            Some(valid.join(", ")),
            Shape::UnknownKey,
        );
        i.hint = suggest(key, valid).map(str::to_string);
        i
    }
}

impl Display for Issue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let found = self.found.as_deref().unwrap_or_default();
        let expected = self.expected.as_deref().unwrap_or_default();
        write!(f, "{}: ", self.path)?;
        match &self.shape {
            Shape::WrongKind(kind) => write!(f, "{found} is {kind}, expected {expected}"),
            Shape::NotValid => write!(f, "{found} is not valid; expected {expected}"),
            Shape::UnknownKey => {
                f.write_str("unknown key; ")?;
                if let Some(h) = &self.hint {
                    write!(f, "did you mean '{h}'? ")?;
                }
                write!(f, "valid keys: {expected}")
            }
            Shape::NotOneOf => {
                write!(f, "'{found}' is not one of {expected}")?;
                match &self.hint {
                    Some(h) => write!(f, "; did you mean '{h}'?"),
                    None => Ok(()),
                }
            }
            Shape::Got => write!(f, "expected {expected}, got {found}"),
            Shape::UnknownValue => write!(f, "unknown value '{found}'; valid values: {expected}"),
            Shape::Message(m) => f.write_str(m),
        }
    }
}

/// Reads typed values from a composed document, collecting every problem as an [`Issue`].
#[derive(Debug)]
pub struct Reader<'a> {
    doc: &'a Node,
    issues: Vec<Issue>,
}

impl<'a> Reader<'a> {
    /// A reader over `doc` with no issues yet.
    pub fn new(doc: &'a Node) -> Reader<'a> {
        Reader {
            doc,
            issues: Vec::new(),
        }
    }

    /// The document read.
    pub fn doc(&self) -> &'a Node {
        self.doc
    }

    /// The issues found so far, in the order found.
    pub fn issues(&self) -> &[Issue] {
        &self.issues
    }

    /// Whether no issue was found.
    pub fn is_clean(&self) -> bool {
        self.issues.is_empty()
    }

    /// The issues found.
    pub fn into_issues(self) -> Vec<Issue> {
        self.issues
    }

    /// The issues found, each rendered as the line users see.
    pub fn into_messages(self) -> Vec<String> {
        self.issues.iter().map(Issue::to_string).collect()
    }

    /// Records `issue`.
    pub fn push(&mut self, issue: Issue) {
        self.issues.push(issue);
    }

    /// Records `path: msg`.
    pub fn err(&mut self, path: &str, msg: impl Display) {
        self.push(Issue::message(path, msg));
    }

    /// Records `path: expected {expected}, got {found}`.
    pub fn expected(&mut self, path: &str, expected: impl Display, found: &Node) {
        self.push(Issue::expected(path, expected, found));
    }

    /// Records `path: {value} is {kind}, expected {expected}`.
    pub fn wrong(&mut self, path: &str, v: &Node, expected: &str) {
        self.push(Issue::wrong_kind(path, v, expected));
    }

    /// Records `path: '{s}' is not one of {valid}` with a did-you-mean.
    pub fn not_one_of(&mut self, path: &str, s: &str, valid: &[&str]) {
        self.push(Issue::not_one_of(path, s, valid));
    }

    // ---- By dotted path from the root, with defaults. ----

    /// The value at the dotted `path`, unless absent or `null`.
    pub fn get(&self, path: &str) -> Option<&'a Node> {
        let mut v = self.doc;
        for k in path.split('.') {
            v = v.get(k)?;
        }
        (!v.is_null()).then_some(v)
    }

    /// An integer >= `min` at `path` (`default` when unset or invalid).
    pub fn uint(&mut self, path: &str, default: u64, min: u64) -> u64 {
        match self.get(path) {
            None => default,
            Some(v) => match v.as_u64() {
                Some(n) if n >= min => n,
                _ => {
                    self.expected(path, format!("an integer >= {min}"), v);
                    default
                }
            },
        }
    }

    /// An integer >= 0 where verl writes -1 (any negative) for "off / not set": returns `None`
    /// for the sentinel.
    pub fn uint_or_sentinel(&mut self, path: &str, default: u64) -> Option<u64> {
        match self.get(path) {
            None => Some(default),
            Some(v) => match v.as_i64() {
                Some(n) if n >= 0 => Some(n as u64),
                Some(_) => None,
                None => {
                    self.expected(path, "an integer (-1 = off, as in verl)", v);
                    Some(default)
                }
            },
        }
    }

    /// A count >= 1 at `path`.
    pub fn size(&mut self, path: &str, default: usize) -> usize {
        self.uint(path, default as u64, 1) as usize
    }

    /// A finite number in `[lo, hi]` at `path`.
    pub fn float(&mut self, path: &str, default: f64, lo: f64, hi: f64) -> f64 {
        match self.get(path) {
            None => default,
            Some(v) => match v.as_f64() {
                Some(x) if x.is_finite() && x >= lo && x <= hi => x,
                _ => {
                    self.expected(path, format!("a number in [{lo}, {hi}]"), v);
                    default
                }
            },
        }
    }

    /// A boolean at `path`.
    pub fn boolean(&mut self, path: &str, default: bool) -> bool {
        match self.get(path) {
            None => default,
            Some(Node::Bool(b)) => *b,
            Some(v) => {
                self.expected(path, "true or false", v);
                default
            }
        }
    }

    /// A string at `path`.
    pub fn string(&mut self, path: &str, default: &str) -> String {
        match self.get(path) {
            None => default.to_string(),
            Some(Node::Str(s)) => s.clone(),
            Some(v) => {
                self.expected(path, "a string", v);
                default.to_string()
            }
        }
    }

    /// One of `valid` at `path`.
    pub fn choice(&mut self, path: &str, default: &str, valid: &[&str]) -> String {
        let s = self.string(path, default);
        if valid.contains(&s.as_str()) {
            s
        } else {
            self.push(Issue::unknown_value(path, &s, valid));
            default.to_string()
        }
    }

    /// A file path or a list of them at `path` (none when unset or empty).
    pub fn paths(&mut self, path: &str) -> Vec<PathBuf> {
        match self.get(path) {
            None => Vec::new(),
            Some(Node::Str(s)) if s.is_empty() => Vec::new(),
            Some(Node::Str(s)) => vec![PathBuf::from(s)],
            Some(Node::List(items)) => items
                .iter()
                .filter_map(|i| match i {
                    Node::Str(s) => Some(PathBuf::from(s)),
                    other => {
                        self.expected(path, "file paths", other);
                        None
                    }
                })
                .collect(),
            Some(v) => {
                self.expected(path, "a file path or a list of them", v);
                Vec::new()
            }
        }
    }

    // ---- By key in a mapping; absent, null and interpolations are "not set". ----

    /// The value at `m[key]` unless absent, null or an interpolation.
    pub fn entry<'m>(m: &'m Map, key: &str) -> Option<&'m Node> {
        m.get(key).filter(|v| !v.is_null() && !is_interp(v))
    }

    /// Reads an optional mapping; absent, null or interpolation -> `None`.
    pub fn map<'m>(&mut self, v: Option<&'m Node>, path: &str) -> Option<&'m Map> {
        match v {
            None | Some(Node::Null) => None,
            Some(v) if is_interp(v) => None,
            Some(Node::Map(m)) => Some(m),
            Some(v) => {
                self.wrong(path, v, "a mapping of keys");
                None
            }
        }
    }

    /// Reports every key of `m` not in `valid`, with a did-you-mean.
    pub fn check_keys(&mut self, m: &Map, path: &str, valid: &[&str]) {
        for s in m.keys().filter(|k| !valid.contains(&k.as_str())) {
            self.push(Issue::unknown_key(path, s, valid));
        }
    }

    /// Reads the boolean `m[key]`.
    pub fn bool_in(&mut self, m: &Map, key: &str, path: &str) -> Option<bool> {
        let v = Self::entry(m, key)?;
        match v {
            Node::Bool(b) => Some(*b),
            _ => {
                self.wrong(&format!("{path}.{key}"), v, "a boolean (true or false)");
                None
            }
        }
    }

    /// Reads the integer `m[key]`.
    pub fn int_in(&mut self, m: &Map, key: &str, path: &str) -> Option<i64> {
        let v = Self::entry(m, key)?;
        match as_int(v) {
            Some(i) => Some(i),
            None => {
                self.wrong(&format!("{path}.{key}"), v, "an integer");
                None
            }
        }
    }

    /// Reads the integer `m[key]`, which must be > 0.
    pub fn pos_int_in(&mut self, m: &Map, key: &str, path: &str) -> Option<u64> {
        let v = Self::entry(m, key)?;
        match as_int(v) {
            Some(i) if i > 0 => Some(i as u64),
            _ => {
                self.push(Issue::not_valid(
                    &format!("{path}.{key}"),
                    v,
                    "an integer > 0",
                ));
                None
            }
        }
    }

    /// Reads the size cap `m[key]`: absent/interpolation -> `None` (inherit), `null` ->
    /// `Some(None)` (unlimited), integer > 0 -> `Some(Some(n))`.
    pub fn cap_in(&mut self, m: &Map, key: &str, path: &str) -> Option<Option<u64>> {
        let v = m.get(key)?;
        if is_interp(v) {
            return None;
        }
        match v {
            Node::Null => Some(None),
            _ => match as_int(v) {
                Some(i) if i > 0 => Some(Some(i as u64)),
                _ => {
                    self.push(Issue::not_valid(
                        &format!("{path}.{key}"),
                        v,
                        "an integer > 0, or null for no limit",
                    ));
                    None
                }
            },
        }
    }

    /// Reads the string `m[key]`.
    pub fn str_in(&mut self, m: &Map, key: &str, path: &str) -> Option<String> {
        let v = Self::entry(m, key)?;
        match v {
            Node::Str(s) => Some(s.clone()),
            _ => {
                self.wrong(&format!("{path}.{key}"), v, "a string");
                None
            }
        }
    }
}
