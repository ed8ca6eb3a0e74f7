//! Hydra's command-line override grammar: `key=value`, `+key=value`, `++key=value`, `~key`,
//! `~key=value`, `group@package=option`, and values (`null`, booleans, ints, floats, quoted
//! strings, `[lists]`, `{dicts}`, `${interpolations}`, `\`-escapes). Errors name the column.
//! Lists and dicts nested deeper than [`MAX_VALUE_DEPTH`] and keys of more than
//! [`MAX_KEY_SEGMENTS`] parts are refused, so that a hostile override fails in time linear in its
//! length instead of overflowing the stack.

use super::tree::{Map, Node};

/// Deepest nesting of `[lists]` and `{dicts}` in one override value (or one `oc.decode` string,
/// which is read with this grammar). The parser recurses once per level, and the value is
/// merged into a tree that every later step walks recursively; a 2 MiB thread stack must hold
/// all of it. Overrides in practice nest a handful of levels.
pub const MAX_VALUE_DEPTH: usize = 64;

/// Most parts (`a.b.c` has three) of an override key. `+a.a.a...=1` creates one mapping per
/// part, as deep as the key is long; verl's profiler keys have at most seven parts.
pub const MAX_KEY_SEGMENTS: usize = 64;

/// What an override does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// `key=value`: the key must exist.
    Change,
    /// `+key=value`: the key must not exist (or be null).
    Add,
    /// `++key=value`: set either way.
    ForceAdd,
    /// `~key` or `~key=value`.
    Delete,
}

/// One parsed override.
#[derive(Debug, Clone)]
pub(super) struct Override {
    /// Its kind.
    pub kind: Kind,
    /// The key or config group (`a.b.c`, `actor`, `hydra/launcher`).
    pub key: String,
    /// The `@package` part, if written.
    pub package: Option<String>,
    /// The value (`None` for `~key`).
    pub value: Option<Node>,
    /// The text as written.
    pub text: String,
}

impl Override {
    /// `group@package` or `group` (Hydra's override key of a defaults-list entry).
    pub(super) fn group_key(&self) -> String {
        match &self.package {
            Some(p) => format!("{}@{p}", self.key),
            None => self.key.clone(),
        }
    }
}

/// Parses one override with Hydra's grammar ([`super::override_grammar`]).
pub(super) fn parse(text: &str) -> Result<Override, String> {
    super::override_grammar::parse(text)
}

/// Parses a value as written after `=` (columns counted from 1 in `text`).
pub(super) fn parse_value(text: &str) -> Result<Node, String> {
    parse_value_at(text, 0)
}

/// A value that could not be read.
pub(super) struct ValueError {
    /// Why, with the column.
    pub message: String,
    /// Whether it nests deeper than [`MAX_VALUE_DEPTH`] (a hostile value, not a typo).
    pub too_deep: bool,
}

/// [`parse_value`], telling a value refused for its depth from an invalid one.
pub(super) fn parse_value_checked(text: &str) -> Result<Node, ValueError> {
    let mut p = P {
        s: text.chars().collect(),
        i: 0,
        base: 0,
        depth: 0,
        too_deep: false,
    };
    p.value(text).map_err(|message| ValueError {
        message,
        too_deep: p.too_deep,
    })
}

fn parse_value_at(text: &str, start: usize) -> Result<Node, String> {
    P {
        s: text.chars().collect(),
        i: 0,
        base: start,
        depth: 0,
        too_deep: false,
    }
    .value(text)
}

struct P {
    s: Vec<char>,
    i: usize,
    base: usize,
    /// Lists and dicts open around the current position.
    depth: usize,
    /// Whether the value was refused for nesting deeper than [`MAX_VALUE_DEPTH`].
    too_deep: bool,
}

impl P {
    /// The whole text as one value.
    fn value(&mut self, text: &str) -> Result<Node, String> {
        if self.s.iter().all(|c| c.is_whitespace()) {
            return Ok(Node::Str(String::new()));
        }
        let v = self.element(false)?;
        self.ws();
        if self.peek() == Some(',') {
            return Err(format!(
                "at column {}: ambiguous value '{text}': a sweep (a,b) cannot be composed; write a list [a,b] or quote the text 'a,b'",
                self.col()
            ));
        }
        if let Some(c) = self.peek() {
            return Err(format!(
                "at column {}: unexpected '{c}' in value '{text}'",
                self.col()
            ));
        }
        Ok(v)
    }

    fn peek(&self) -> Option<char> {
        self.s.get(self.i).copied()
    }
    fn col(&self) -> usize {
        self.base + self.i + 1
    }
    fn ws(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.i += 1;
        }
    }
    fn err<T>(&self, msg: &str) -> Result<T, String> {
        Err(format!("at column {}: {msg}", self.col()))
    }

    /// One element: list, dict, quoted string or primitive. `nested`: inside `[]`/`{}`.
    fn element(&mut self, nested: bool) -> Result<Node, String> {
        self.ws();
        let v = match self.peek() {
            Some(open @ ('[' | '{')) => {
                if self.depth >= MAX_VALUE_DEPTH {
                    self.too_deep = true;
                    return self.err(&format!(
                        "lists and dicts nested deeper than {MAX_VALUE_DEPTH} levels; refusing the value"
                    ));
                }
                self.depth += 1;
                let v = if open == '[' {
                    self.list()?
                } else {
                    self.dict()?
                };
                self.depth -= 1;
                v
            }
            Some(q @ ('\'' | '"')) => {
                let s = self.quoted(q)?;
                self.ws();
                if let Some(c) = self.peek().filter(|c| !matches!(c, ',' | ']' | '}')) {
                    return self.err(&format!(
                        "unexpected '{c}' after a quoted string; quote the whole value"
                    ));
                }
                Node::Str(s)
            }
            _ => self.primitive(nested, false)?,
        };
        self.ws();
        Ok(v)
    }

    fn list(&mut self) -> Result<Node, String> {
        self.i += 1;
        let mut out = Vec::new();
        self.ws();
        if self.peek() == Some(']') {
            self.i += 1;
            return Ok(Node::List(out));
        }
        loop {
            out.push(self.element(true)?);
            match self.peek() {
                Some(',') => self.i += 1,
                Some(']') => {
                    self.i += 1;
                    return Ok(Node::List(out));
                }
                None => return self.err("unclosed list: missing ']'"),
                Some(c) => return self.err(&format!("unexpected '{c}' in a list")),
            }
        }
    }

    fn dict(&mut self) -> Result<Node, String> {
        self.i += 1;
        let mut out = Map::new();
        self.ws();
        if self.peek() == Some('}') {
            self.i += 1;
            return Ok(Node::Map(out));
        }
        loop {
            self.ws();
            let key = match self.primitive(true, true)? {
                Node::Str(s) => s,
                other => other.python_str().to_lowercase(),
            };
            if key.is_empty() {
                return self.err("empty key in a dict");
            }
            if self.peek() != Some(':') {
                return self.err("expected ':' after a dict key");
            }
            self.i += 1;
            let v = self.element(true)?;
            out.insert(key, v);
            match self.peek() {
                Some(',') => self.i += 1,
                Some('}') => {
                    self.i += 1;
                    return Ok(Node::Map(out));
                }
                None => return self.err("unclosed dict: missing '}'"),
                Some(c) => return self.err(&format!("unexpected '{c}' in a dict")),
            }
        }
    }

    fn quoted(&mut self, q: char) -> Result<String, String> {
        let open = self.col();
        self.i += 1;
        let mut out = String::new();
        while let Some(c) = self.peek() {
            self.i += 1;
            if c == '\\' && matches!(self.peek(), Some(n) if n == q || n == '\\') {
                out.push(self.peek().expect("peeked"));
                self.i += 1;
            } else if c == q {
                return Ok(out);
            } else {
                out.push(c);
            }
        }
        Err(format!("at column {open}: unclosed quote {q}"))
    }

    /// Unquoted text up to a delimiter; typed when it is one int/float/bool/null token.
    fn primitive(&mut self, nested: bool, key: bool) -> Result<Node, String> {
        let mut out = String::new();
        let mut escaped = false;
        while let Some(c) = self.peek() {
            match c {
                '\\' => {
                    let Some(n) = self.s.get(self.i + 1).copied() else {
                        return self.err("'\\' at the end of the value");
                    };
                    out.push(n);
                    escaped = true;
                    self.i += 2;
                }
                '$' if self.s.get(self.i + 1) == Some(&'{') => {
                    let end = self.interpolation_end()?;
                    out.extend(&self.s[self.i..end]);
                    self.i = end;
                }
                ',' => break,
                ']' | '}' if nested => break,
                ':' if key => break,
                '[' | ']' | '{' | '}' | '(' | ')' | '=' | '\'' | '"' => {
                    return self.err(&format!(
                        "'{c}' must be escaped as '\\{c}' or the value quoted"
                    ));
                }
                _ => {
                    out.push(c);
                    self.i += 1;
                }
            }
        }
        let t = out.trim();
        Ok(if escaped {
            Node::Str(t.to_string())
        } else {
            typed(t)
        })
    }

    /// The index after the `}` that closes the `${` at `self.i`.
    fn interpolation_end(&self) -> Result<usize, String> {
        let mut depth = 0usize;
        let mut j = self.i;
        while j < self.s.len() {
            match self.s[j] {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        return Ok(j + 1);
                    }
                }
                _ => {}
            }
            j += 1;
        }
        self.err("unclosed interpolation: missing '}'")
    }
}

/// Hydra's typing of an unquoted primitive.
fn typed(t: &str) -> Node {
    let lower = t.to_ascii_lowercase();
    match lower.as_str() {
        "null" => return Node::Null,
        "true" => return Node::Bool(true),
        "false" => return Node::Bool(false),
        _ => {}
    }
    let body = lower.trim_start_matches(['+', '-']);
    if lower.len() - body.len() <= 1 {
        if matches!(body, "inf" | "nan") {
            let v = if body == "inf" {
                f64::INFINITY
            } else {
                f64::NAN
            };
            return Node::Float(if lower.starts_with('-') { -v } else { v });
        }
        if is_int(body)
            && let Ok(i) = t.replace('_', "").parse::<i64>()
        {
            return Node::Int(i);
        }
        if is_float(body)
            && let Ok(f) = t.replace('_', "").parse::<f64>()
        {
            return Node::Float(f);
        }
    }
    Node::Str(t.to_string())
}

fn digits(s: &str) -> bool {
    !s.is_empty()
        && s.starts_with(|c: char| c.is_ascii_digit())
        && s.ends_with(|c: char| c.is_ascii_digit())
        && s.chars().all(|c| c.is_ascii_digit() || c == '_')
        && !s.contains("__")
}

fn is_int(s: &str) -> bool {
    s == "0" || (digits(s) && !s.starts_with('0'))
}

fn is_float(s: &str) -> bool {
    let (mant, exp) = match s.split_once('e') {
        Some((m, e)) => (m, Some(e)),
        None => (s, None),
    };
    if let Some(e) = exp {
        let e = e.strip_prefix(['+', '-']).unwrap_or(e);
        if !digits(e) {
            return false;
        }
    }
    match mant.split_once('.') {
        Some((a, b)) => {
            (a.is_empty() || digits(a))
                && (b.is_empty() || digits(b))
                && !(a.is_empty() && b.is_empty())
        }
        None => exp.is_some() && digits(mant),
    }
}
