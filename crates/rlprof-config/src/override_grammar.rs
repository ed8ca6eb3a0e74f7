//! Hydra 1.3's override grammar (`OverrideLexer.g4` / `OverrideParser.g4`), re-implemented:
//! a longest-match lexer with the grammar's token rules and a recursive-descent parser of
//! `override`, `key`, `value`, `element`, `function`, `listContainer`, `dictContainer` and
//! `primitive`, then Hydra's typing of primitives and its grammar functions (`int()`,
//! `float()`, `str()`, `bool()`, `sort()`, `shuffle()`). Sweeps (`a,b`, `range()`, `choice()`,
//! `glob()`, `interval()`, `tag()`) parse but cannot be composed: they need `--multirun`.
//!
//! What Hydra's lexer does not know is refused as it refuses it: `~` inside a value, non-ASCII
//! text, `<`, `>`, `#`, `;`, `!`, `&` and other characters outside the grammar, whitespace in a
//! key, and an interpolation nested in an unquoted interpolation (`${a.${b}}`: the lexer's
//! `${...}` token ends at the first `}`); all of them are accepted when the value is quoted.

use super::grammar::{Kind, MAX_KEY_SEGMENTS, MAX_VALUE_DEPTH, Override};
use super::tree::{Map, Node, python_float};

/// A token of the value mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum T {
    POpen,
    Comma,
    PClose,
    BOpen,
    BClose,
    COpen,
    CClose,
    Colon,
    Equal,
    Float,
    Int,
    Bool,
    Null,
    Unquoted,
    Id,
    Esc,
    Ws,
    Quoted,
    Interp,
}

#[derive(Debug, Clone)]
struct Tok {
    t: T,
    text: String,
    /// Column (from 1) in the whole override.
    col: usize,
}

fn is_ws(c: char) -> bool {
    c == ' ' || c == '\t'
}

/// Length of `[ \t]*` at `i`.
fn ws_len(s: &[char], i: usize) -> usize {
    s[i..].iter().take_while(|c| is_ws(**c)).count()
}

/// `'0' | [1-9] ('_'? DIGIT)*` at `i`.
fn int_unsigned(s: &[char], i: usize) -> usize {
    match s.get(i) {
        Some('0') => 1,
        Some(c) if c.is_ascii_digit() => i_digits_tail(s, i + 1) + 1,
        _ => 0,
    }
}

/// `('_'? DIGIT)*` at `i`.
fn i_digits_tail(s: &[char], mut i: usize) -> usize {
    let start = i;
    loop {
        match (s.get(i), s.get(i + 1)) {
            (Some(c), _) if c.is_ascii_digit() => i += 1,
            (Some('_'), Some(d)) if d.is_ascii_digit() => i += 2,
            _ => return i - start,
        }
    }
}

/// `DIGIT ('_'? DIGIT)*` at `i`.
fn digits(s: &[char], i: usize) -> usize {
    if s.get(i).is_some_and(char::is_ascii_digit) {
        1 + i_digits_tail(s, i + 1)
    } else {
        0
    }
}

/// POINT_FLOAT: `INT_UNSIGNED '.' | INT_UNSIGNED? '.' DIGIT ('_'? DIGIT)*` (longest).
fn point_float(s: &[char], i: usize) -> usize {
    let n = int_unsigned(s, i);
    if s.get(i + n) != Some(&'.') {
        return 0;
    }
    let d = digits(s, i + n + 1);
    if n == 0 && d == 0 {
        return 0;
    }
    n + 1 + d
}

fn float_len(s: &[char], i: usize) -> usize {
    let sign = usize::from(matches!(s.get(i), Some('+' | '-')));
    let j = i + sign;
    let word = |w: &str| word_len(s, j, w);
    let mut best = word("inf").max(word("nan"));
    let p = point_float(s, j);
    best = best.max(p);
    // EXPONENT_FLOAT: (INT_UNSIGNED | POINT_FLOAT) [eE] [+-]? DIGIT ('_'? DIGIT)*
    for m in [int_unsigned(s, j), p] {
        if m > 0 && matches!(s.get(j + m), Some('e' | 'E')) {
            let k = j + m + 1 + usize::from(matches!(s.get(j + m + 1), Some('+' | '-')));
            let d = digits(s, k);
            if d > 0 {
                best = best.max(k + d - j);
            }
        }
    }
    if best == 0 { 0 } else { sign + best }
}

fn int_len(s: &[char], i: usize) -> usize {
    let sign = usize::from(matches!(s.get(i), Some('+' | '-')));
    let n = int_unsigned(s, i + sign);
    if n == 0 { 0 } else { sign + n }
}

fn word_len(s: &[char], i: usize, w: &str) -> usize {
    let n = w.chars().count();
    if s.len() >= i + n
        && s[i..i + n]
            .iter()
            .collect::<String>()
            .eq_ignore_ascii_case(w)
    {
        n
    } else {
        0
    }
}

fn id_len(s: &[char], i: usize) -> usize {
    match s.get(i) {
        Some(c) if c.is_ascii_alphabetic() || *c == '_' => {
            1 + s[i + 1..]
                .iter()
                .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
                .count()
        }
        _ => 0,
    }
}

fn esc_len(s: &[char], i: usize) -> usize {
    let mut j = i;
    while s.get(j) == Some(&'\\')
        && s.get(j + 1).is_some_and(|c| {
            matches!(
                c,
                '\\' | '(' | ')' | '[' | ']' | '{' | '}' | ':' | '=' | ',' | ' ' | '\t'
            )
        })
    {
        j += 2;
    }
    j - i
}

/// QUOTED_VALUE: a quote, then the shortest text up to the same quote not preceded by an odd
/// number of backslashes.
fn quoted_len(s: &[char], i: usize) -> usize {
    let Some(q @ ('\'' | '"')) = s.get(i).copied() else {
        return 0;
    };
    let mut j = i + 1;
    let mut backslashes = 0;
    while let Some(&c) = s.get(j) {
        if c == q && backslashes % 2 == 0 {
            return j + 1 - i;
        }
        backslashes = if c == '\\' { backslashes + 1 } else { 0 };
        j += 1;
    }
    0
}

/// INTERPOLATION: `'${' ~('}')+ '}'`.
fn interp_len(s: &[char], i: usize) -> usize {
    if s.get(i) != Some(&'$') || s.get(i + 1) != Some(&'{') {
        return 0;
    }
    let mut j = i + 2;
    while let Some(&c) = s.get(j) {
        if c == '}' {
            return if j > i + 2 { j + 1 - i } else { 0 };
        }
        j += 1;
    }
    0
}

/// `WS? c WS?` (`lead`/`trail`: which sides take whitespace).
fn punct_len(s: &[char], i: usize, c: char, lead: bool, trail: bool) -> usize {
    let a = if lead { ws_len(s, i) } else { 0 };
    if s.get(i + a) != Some(&c) {
        return 0;
    }
    let b = if trail { ws_len(s, i + a + 1) } else { 0 };
    a + 1 + b
}

/// The value-mode tokens of `s` (columns offset by `base`).
fn lex(s: &[char], base: usize) -> Result<Vec<Tok>, String> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < s.len() {
        // In the grammar's order: on equal lengths the earlier rule wins.
        let cands = [
            (T::POpen, punct_len(s, i, '(', true, true)),
            (T::Comma, punct_len(s, i, ',', true, true)),
            (T::PClose, punct_len(s, i, ')', true, false)),
            (T::BOpen, punct_len(s, i, '[', false, true)),
            (T::BClose, punct_len(s, i, ']', true, false)),
            (T::COpen, punct_len(s, i, '{', false, true)),
            (T::CClose, punct_len(s, i, '}', true, false)),
            (T::Colon, punct_len(s, i, ':', true, true)),
            (T::Equal, punct_len(s, i, '=', true, true)),
            (T::Float, float_len(s, i)),
            (T::Int, int_len(s, i)),
            (T::Bool, word_len(s, i, "true").max(word_len(s, i, "false"))),
            (T::Null, word_len(s, i, "null")),
            (
                T::Unquoted,
                usize::from(matches!(
                    s[i],
                    '/' | '-' | '\\' | '+' | '.' | '$' | '%' | '*' | '@' | '?' | '|'
                )),
            ),
            (T::Id, id_len(s, i)),
            (T::Esc, esc_len(s, i)),
            (T::Ws, ws_len(s, i)),
            (T::Quoted, quoted_len(s, i)),
            (T::Interp, interp_len(s, i)),
        ];
        let (t, n) = cands
            .iter()
            .fold((T::Ws, 0), |best, c| if c.1 > best.1 { *c } else { best });
        if n == 0 {
            let c = s[i];
            let what = if c.is_ascii() {
                format!("'{c}'")
            } else {
                format!("'{c}' (non-ASCII text must be quoted)")
            };
            return Err(format!(
                "token recognition error at column {}: {what}; quote the value ('...') to use it",
                base + i + 1
            ));
        }
        out.push(Tok {
            t,
            text: s[i..i + n].iter().collect(),
            col: base + i + 1,
        });
        i += n;
    }
    Ok(out)
}

/// A parsed element, before it becomes a [`Node`].
#[derive(Debug, Clone)]
enum V {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Quoted(String),
    List(Vec<V>),
    Dict(Vec<(String, V)>),
    /// A sweep: what makes it one (needs `--multirun`).
    Sweep(String),
}

impl V {
    fn into_node(self) -> Node {
        match self {
            V::Null => Node::Null,
            V::Bool(b) => Node::Bool(b),
            V::Int(i) => Node::Int(i),
            V::Float(f) => Node::Float(f),
            V::Str(s) | V::Quoted(s) => Node::Str(s),
            V::List(l) => Node::List(l.into_iter().map(V::into_node).collect()),
            V::Dict(d) => {
                let mut m = Map::new();
                for (k, v) in d {
                    m.insert(k, v.into_node());
                }
                Node::Map(m)
            }
            V::Sweep(s) => Node::Str(s),
        }
    }

    /// Whether a sweep is nested in this list or dict.
    fn holds_sweep(&self) -> bool {
        match self {
            V::Sweep(_) => true,
            V::List(l) => l.iter().any(V::holds_sweep),
            V::Dict(d) => d.iter().any(|(_, v)| v.holds_sweep()),
            _ => false,
        }
    }

    fn type_name(&self) -> &'static str {
        match self {
            V::Null => "NoneType",
            V::Bool(_) => "bool",
            V::Int(_) => "int",
            V::Float(_) => "float",
            V::Str(_) | V::Quoted(_) => "str",
            V::List(_) => "list",
            V::Dict(_) => "dict",
            V::Sweep(_) => "sweep",
        }
    }

    /// Python's `str()` of a primitive.
    fn py_str(&self) -> String {
        match self {
            V::Null => "None".into(),
            V::Bool(b) => if *b { "True" } else { "False" }.into(),
            V::Int(i) => i.to_string(),
            V::Float(f) => python_float(*f),
            V::Str(s) | V::Quoted(s) => s.clone(),
            other => other.clone().into_node().python_repr(),
        }
    }
}

struct Parser {
    toks: Vec<Tok>,
    i: usize,
    depth: usize,
    end_col: usize,
}

impl Parser {
    fn peek(&self) -> Option<T> {
        self.toks.get(self.i).map(|t| t.t)
    }
    fn peek2(&self) -> Option<T> {
        self.toks.get(self.i + 1).map(|t| t.t)
    }
    fn col(&self) -> usize {
        self.toks.get(self.i).map_or(self.end_col, |t| t.col)
    }
    fn unexpected<X>(&self) -> Result<X, String> {
        match self.toks.get(self.i) {
            Some(t) => Err(format!(
                "mismatched input '{}' at column {}",
                t.text.trim(),
                t.col
            )),
            None => Err(format!(
                "unexpected end of the value at column {}",
                self.end_col
            )),
        }
    }

    /// value: element | element (COMMA element)+
    fn value(&mut self, text: &str) -> Result<V, String> {
        let first = self.element()?;
        if self.peek() == Some(T::Comma) {
            while self.peek() == Some(T::Comma) {
                self.i += 1;
                self.element()?;
            }
            if self.peek().is_some() {
                return self.unexpected();
            }
            return Ok(V::Sweep(format!(
                "ambiguous value '{text}': to use it as a list write [{text}], as a string quote it '{text}'; a sweep needs --multirun"
            )));
        }
        if self.peek().is_some() {
            return self.unexpected();
        }
        Ok(first)
    }

    fn element(&mut self) -> Result<V, String> {
        match self.peek() {
            Some(T::Id) if self.peek2() == Some(T::POpen) => self.function(),
            Some(T::BOpen | T::COpen) => {
                if self.depth >= MAX_VALUE_DEPTH {
                    return Err(format!(
                        "at column {}: lists and dicts nested deeper than {MAX_VALUE_DEPTH} levels; refusing the value",
                        self.col()
                    ));
                }
                self.depth += 1;
                let v = if self.peek() == Some(T::BOpen) {
                    self.list()
                } else {
                    self.dict()
                };
                self.depth -= 1;
                v
            }
            _ => self.primitive(false),
        }
    }

    fn list(&mut self) -> Result<V, String> {
        self.i += 1;
        let mut out = Vec::new();
        if self.peek() == Some(T::BClose) {
            self.i += 1;
            return Ok(V::List(out));
        }
        loop {
            out.push(self.element()?);
            match self.peek() {
                Some(T::Comma) => self.i += 1,
                Some(T::BClose) => {
                    self.i += 1;
                    return Ok(V::List(out));
                }
                _ => return self.unexpected(),
            }
        }
    }

    fn dict(&mut self) -> Result<V, String> {
        self.i += 1;
        let mut out: Vec<(String, V)> = Vec::new();
        if self.peek() == Some(T::CClose) {
            self.i += 1;
            return Ok(V::Dict(out));
        }
        loop {
            let key = match self.primitive(true)? {
                V::Str(s) => s,
                V::Null => {
                    return Err(format!(
                        "at column {}: a dict key cannot be null (OmegaConf refuses None keys); quote it",
                        self.col()
                    ));
                }
                V::Bool(b) => b.to_string(),
                other => other.py_str(),
            };
            if self.peek() != Some(T::Colon) {
                return self.unexpected();
            }
            self.i += 1;
            let v = self.element()?;
            match out.iter_mut().find(|(k, _)| *k == key) {
                Some(slot) => slot.1 = v,
                None => out.push((key, v)),
            }
            match self.peek() {
                Some(T::Comma) => self.i += 1,
                Some(T::CClose) => {
                    self.i += 1;
                    return Ok(V::Dict(out));
                }
                _ => return self.unexpected(),
            }
        }
    }

    /// primitive (or dictKey, which takes no quoted value, interpolation or colon).
    fn primitive(&mut self, dict_key: bool) -> Result<V, String> {
        let start = self.i;
        // QUOTED_VALUE is a primitive on its own, never part of a longer one.
        if !dict_key && self.peek() == Some(T::Quoted) {
            self.i += 1;
            return Ok(V::Quoted(unquote(&self.toks[start].text)));
        }
        while let Some(t) = self.peek() {
            let ok = match t {
                T::Id | T::Null | T::Int | T::Float | T::Bool | T::Unquoted | T::Esc | T::Ws => {
                    true
                }
                T::Interp | T::Colon => !dict_key,
                _ => false,
            };
            if !ok {
                break;
            }
            self.i += 1;
        }
        if self.i == start {
            return self.unexpected();
        }
        let mut toks = &self.toks[start..self.i];
        if toks[0].t == T::Ws {
            if toks.len() == 1 {
                return Err("trying to parse a primitive that is all whitespace".into());
            }
            toks = &toks[1..];
        }
        if toks.last().is_some_and(|t| t.t == T::Ws) {
            toks = &toks[..toks.len() - 1];
        }
        if toks.len() > 1 {
            let mut s = String::new();
            for t in toks {
                if t.t == T::Esc {
                    s.extend(t.text.chars().skip(1).step_by(2));
                } else {
                    s.push_str(&t.text);
                }
            }
            return Ok(V::Str(s));
        }
        let t = &toks[0];
        Ok(match t.t {
            T::Quoted => V::Quoted(unquote(&t.text)),
            T::Int => match t.text.replace('_', "").parse::<i64>() {
                Ok(i) => V::Int(i),
                Err(_) => V::Float(t.text.replace('_', "").parse::<f64>().unwrap_or(f64::NAN)),
            },
            T::Float => V::Float(parse_float(&t.text).unwrap_or(f64::NAN)),
            T::Null => V::Null,
            T::Bool => V::Bool(t.text.eq_ignore_ascii_case("true")),
            T::Esc => V::Str(t.text.chars().skip(1).step_by(2).collect()),
            _ => V::Str(t.text.clone()),
        })
    }

    /// function: ID POPEN (argName? element (COMMA argName? element)*)? PCLOSE
    fn function(&mut self) -> Result<V, String> {
        let name = self.toks[self.i].text.clone();
        let col = self.toks[self.i].col;
        self.i += 2;
        let mut args = Vec::new();
        let mut kwargs: Vec<(String, V)> = Vec::new();
        if self.peek() == Some(T::PClose) {
            self.i += 1;
        } else {
            loop {
                if self.peek() == Some(T::Id) && self.peek2() == Some(T::Equal) {
                    let k = self.toks[self.i].text.clone();
                    self.i += 2;
                    kwargs.push((k, self.element()?));
                } else {
                    let v = self.element()?;
                    if !kwargs.is_empty() {
                        return Err("positional argument follows keyword argument".into());
                    }
                    args.push(v);
                }
                match self.peek() {
                    Some(T::Comma) => self.i += 1,
                    Some(T::PClose) => {
                        self.i += 1;
                        break;
                    }
                    _ => return self.unexpected(),
                }
            }
        }
        call(&name, args, kwargs)
            .map_err(|e| format!("{e} while evaluating '{name}(...)' at column {col}"))
    }
}

/// Python's `float()` of a FLOAT token (`1_000.5`, `inf`, `-NaN`).
fn parse_float(t: &str) -> Option<f64> {
    let s = t.replace('_', "");
    let l = s.to_ascii_lowercase();
    let body = l.trim_start_matches(['+', '-']);
    let neg = l.starts_with('-');
    let v = match body {
        "inf" | "infinity" => f64::INFINITY,
        "nan" => f64::NAN,
        _ => body.parse::<f64>().ok()?,
    };
    Some(if neg { -v } else { v })
}

/// The text of a QUOTED_VALUE: backslashes before a quote halved (an odd run escapes it).
fn unquote(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let q = chars[0];
    let body = &chars[1..];
    let mut out = String::new();
    let mut i = 0;
    while i < body.len() {
        let c = body[i];
        if c == '\\' {
            let n = body[i..].iter().take_while(|c| **c == '\\').count();
            if body.get(i + n) == Some(&q) {
                out.extend(std::iter::repeat_n('\\', n / 2));
                let closing = i + n == body.len() - 1;
                if !closing {
                    out.push(q);
                }
                i += n + 1;
            } else {
                out.extend(std::iter::repeat_n('\\', n));
                i += n;
            }
        } else if c == q && i == body.len() - 1 {
            i += 1;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

const FUNCTIONS: &[&str] = &[
    "bool", "choice", "float", "glob", "int", "interval", "range", "shuffle", "sort", "str", "tag",
];

/// Hydra's grammar functions.
fn call(name: &str, args: Vec<V>, kwargs: Vec<(String, V)>) -> Result<V, String> {
    let multirun = |what: &str| {
        Ok(V::Sweep(format!(
            "{what}() is a sweep; it needs --multirun"
        )))
    };
    match name {
        "int" | "float" | "str" | "bool" => {
            let value = match (args.len(), kwargs.as_slice()) {
                (0, [(k, v)]) if k == "value" => v.clone(),
                (_, [(k, _), ..]) if k != "value" => {
                    return Err(format!(
                        "TypeError: got an unexpected keyword argument '{k}'"
                    ));
                }
                (0, []) => return Err("TypeError: No positional args or value specified".into()),
                (_, [_, ..]) => {
                    return Err("TypeError: cannot use both position and named arguments".into());
                }
                (1, []) => args.into_iter().next().expect("one"),
                _ => return multirun(name),
            };
            cast(name, value)
        }
        "sort" | "shuffle" => {
            let mut args = args;
            let mut reverse = false;
            for (k, v) in kwargs {
                match (k.as_str(), v) {
                    ("list", l @ (V::List(_) | V::Null)) => {
                        if !matches!(l, V::Null) {
                            args = vec![l];
                        }
                    }
                    ("reverse", V::Bool(b)) if name == "sort" => reverse = b,
                    ("sweep", _) => return multirun(name),
                    (k @ ("list" | "reverse"), v) => {
                        return Err(format!(
                            "TypeError: mismatch type argument {k}: {} is incompatible with the expected type",
                            v.type_name()
                        ));
                    }
                    (k, _) => {
                        return Err(format!(
                            "TypeError: got an unexpected keyword argument '{k}'"
                        ));
                    }
                }
            }
            if args.iter().any(|a| matches!(a, V::Sweep(_))) {
                return multirun(name);
            }
            match args.len() {
                0 if name == "sort" => Err("ValueError: empty sort input".into()),
                1 => match args.into_iter().next().expect("one") {
                    V::List(mut l) => {
                        if name == "sort" {
                            sort_list(&mut l)?;
                            if reverse {
                                l.reverse();
                            }
                        } else {
                            shuffle_list(&mut l);
                        }
                        Ok(V::List(l))
                    }
                    other if name == "shuffle" => Ok(V::List(vec![other])),
                    other => Ok(other),
                },
                _ => multirun(name),
            }
        }
        "range" | "choice" | "glob" | "interval" | "tag" => multirun(name),
        other => Err(format!(
            "unknown function '{other}'; available: {}",
            FUNCTIONS.join(",")
        )),
    }
}

fn cast(name: &str, v: V) -> Result<V, String> {
    match v {
        V::List(l) => Ok(V::List(
            l.into_iter()
                .map(|x| cast(name, x))
                .collect::<Result<_, _>>()?,
        )),
        V::Dict(d) => Ok(V::Dict(
            d.into_iter()
                .map(|(k, x)| cast(name, x).map(|x| (k, x)))
                .collect::<Result<_, _>>()?,
        )),
        V::Sweep(s) => Ok(V::Sweep(s)),
        V::Null => match name {
            "bool" => Ok(V::Bool(false)),
            _ => Err(format!("AssertionError: cannot cast None with {name}()")),
        },
        prim => match name {
            "int" => to_int(&prim).map(V::Int),
            "float" => to_float(&prim).map(V::Float),
            "str" => Ok(V::Str(match prim {
                V::Bool(b) => b.to_string(),
                p => p.py_str(),
            })),
            _ => match prim {
                V::Str(s) | V::Quoted(s) => match s.to_lowercase().as_str() {
                    "true" => Ok(V::Bool(true)),
                    "false" => Ok(V::Bool(false)),
                    _ => Err(format!("ValueError: Cannot cast '{s}' to bool")),
                },
                V::Bool(b) => Ok(V::Bool(b)),
                V::Int(i) => Ok(V::Bool(i != 0)),
                V::Float(f) => Ok(V::Bool(f != 0.0)),
                _ => unreachable!("containers handled above"),
            },
        },
    }
}

fn to_int(v: &V) -> Result<i64, String> {
    match v {
        V::Bool(b) => Ok(i64::from(*b)),
        V::Int(i) => Ok(*i),
        V::Float(f) if f.is_finite() => Ok(f.trunc() as i64),
        V::Float(f) => Err(format!(
            "cannot convert float {} to integer",
            python_float(*f)
        )),
        V::Str(s) | V::Quoted(s) => {
            let t = s.trim();
            let ok = !t.is_empty()
                && !t.starts_with('_')
                && !t.ends_with('_')
                && !t.contains("__")
                && t.trim_start_matches(['+', '-'])
                    .chars()
                    .all(|c| c.is_ascii_digit() || c == '_');
            ok.then(|| t.replace('_', "").parse::<i64>().ok())
                .flatten()
                .ok_or_else(|| format!("ValueError: invalid literal for int() with base 10: '{s}'"))
        }
        other => Err(format!("cannot cast {} to int", other.type_name())),
    }
}

fn to_float(v: &V) -> Result<f64, String> {
    match v {
        V::Bool(b) => Ok(f64::from(u8::from(*b))),
        V::Int(i) => Ok(*i as f64),
        V::Float(f) => Ok(*f),
        V::Str(s) | V::Quoted(s) => {
            let t = s.trim();
            let plain = t
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '+' | '-' | '_'));
            plain
                .then(|| parse_float(t))
                .flatten()
                .filter(|_| !t.contains("__"))
                .ok_or_else(|| format!("ValueError: could not convert string to float: '{s}'"))
        }
        other => Err(format!("cannot cast {} to float", other.type_name())),
    }
}

/// Python's `sorted()` of primitives: numbers (and bools) with numbers, strings with strings.
fn sort_list(l: &mut [V]) -> Result<(), String> {
    let num = |v: &V| match v {
        V::Bool(b) => Some(f64::from(u8::from(*b))),
        V::Int(i) => Some(*i as f64),
        V::Float(f) => Some(*f),
        _ => None,
    };
    let all_num = l.iter().all(|v| num(v).is_some());
    let all_str = l.iter().all(|v| matches!(v, V::Str(_) | V::Quoted(_)));
    if all_num {
        l.sort_by(|a, b| {
            num(a)
                .partial_cmp(&num(b))
                .unwrap_or(std::cmp::Ordering::Equal)
        });
        Ok(())
    } else if all_str {
        l.sort_by_key(V::py_str);
        Ok(())
    } else {
        Err("TypeError: '<' not supported between the list's element types".into())
    }
}

fn shuffle_list(l: &mut [V]) {
    use std::hash::{BuildHasher, Hasher};
    let mut seed = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    for i in (1..l.len()).rev() {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let j = (seed % (i as u64 + 1)) as usize;
        l.swap(i, j);
    }
}

/// Key mode: `KEY_SPECIAL` (`[a-zA-Z_$][a-zA-Z0-9_$-]*`), `DOT_PATH` (segments of those or of
/// unsigned integers joined by `.`), or `ID (/ ID)+` for a group.
fn valid_key_path(k: &str) -> bool {
    if k.contains('/') {
        return k.split('/').all(|p| {
            let s: Vec<char> = p.chars().collect();
            !s.is_empty() && id_len(&s, 0) == s.len()
        });
    }
    let segs: Vec<&str> = k.split('.').collect();
    let special = |p: &str| {
        let mut cs = p.chars();
        cs.next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
            && cs.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '$' | '-'))
    };
    let int = |p: &str| {
        let s: Vec<char> = p.chars().collect();
        !s.is_empty() && int_unsigned(&s, 0) == s.len()
    };
    if segs.len() == 1 {
        return special(k);
    }
    segs.iter().all(|p| special(p) || int(p))
}

/// Parses one override with Hydra's grammar.
pub(super) fn parse(text: &str) -> Result<Override, String> {
    let (kind, rest, offset) = if let Some(r) = text.strip_prefix("++") {
        (Kind::ForceAdd, r, 2)
    } else if let Some(r) = text.strip_prefix('+') {
        (Kind::Add, r, 1)
    } else if let Some(r) = text.strip_prefix('~') {
        (Kind::Delete, r, 1)
    } else {
        (Kind::Change, text, 0)
    };
    let (key_text, value_text) = match rest.split_once('=') {
        Some((k, v)) => (k, Some(v)),
        None if kind == Kind::Delete => (rest, None),
        None => {
            let k = rest.trim();
            return Err(format!(
                "missing '='; write key=value, e.g. '{k}=value' (or '+{k}=value' to add a new key)"
            ));
        }
    };
    let (key, package) = match key_text.split_once('@') {
        Some((g, p)) => (g, Some(p)),
        None => (key_text, None),
    };
    if let Some(i) = key_text.find(|c: char| {
        !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '$' | '.' | '/' | '@'))
    }) {
        let c = key_text[i..].chars().next().unwrap_or(' ');
        return Err(format!(
            "at column {}: '{c}' cannot appear in a key (keys are a.b.c or group@package)",
            offset + i + 1
        ));
    }
    if key.is_empty() || !valid_key_path(key) {
        return Err(format!(
            "'{key_text}' is not a valid key (expected a.b.c or group/sub)"
        ));
    }
    if let Some(p) = package
        && !p.is_empty()
        && (p.contains('/') || !valid_key_path(p))
    {
        return Err(format!("'{key_text}' has an invalid package after '@'"));
    }
    for part in std::iter::once(key).chain(package) {
        let n = part.split(['.', '/']).count();
        if n > MAX_KEY_SEGMENTS {
            return Err(format!(
                "the key has {n} parts; at most {MAX_KEY_SEGMENTS} are accepted"
            ));
        }
    }
    let value = match value_text {
        None => None,
        Some(v) => {
            let chars: Vec<char> = v.chars().collect();
            // EQUAL takes the whitespace after it.
            let skip = ws_len(&chars, 0);
            let base = offset + key_text.chars().count() + 1 + skip;
            let toks = lex(&chars[skip..], base)?;
            if toks.is_empty() {
                Some(Node::Str(String::new()))
            } else {
                let mut p = Parser {
                    toks,
                    i: 0,
                    depth: 0,
                    end_col: base + chars.len() - skip + 1,
                };
                match p.value(&v[v.len() - chars[skip..].iter().collect::<String>().len()..])? {
                    V::Sweep(why) => return Err(why),
                    other if other.holds_sweep() => {
                        return Err(
                            "a sweep (range(), choice(), ...) inside a list or dict cannot be merged; sweeps need --multirun at the top of the value".into(),
                        );
                    }
                    other => Some(other.into_node()),
                }
            }
        }
    };
    Ok(Override {
        kind,
        key: key.to_string(),
        package: package.map(str::to_string),
        value,
        text: text.to_string(),
    })
}
