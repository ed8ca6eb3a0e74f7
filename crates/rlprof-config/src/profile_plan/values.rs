//! The profiler's value kinds read through the shared [`Reader`]: tool and level names, npu
//! export types and `contents` lists (each naming the valid values when wrong).

use crate::tree::{Map, Node};
use crate::typed::Reader;
use rlprof_profiler::plan::{Content, ExportType, Level, Tool};

fn names<T: Copy>(all: &[T], f: fn(T) -> &'static str) -> Vec<&'static str> {
    all.iter().map(|t| f(*t)).collect()
}

impl Reader<'_> {
    /// Reads a tool name.
    pub(crate) fn tool(&mut self, m: &Map, key: &str, path: &str) -> Option<Tool> {
        let s = self.str_in(m, key, path)?;
        let valid = names(&Tool::ALL, Tool::as_str);
        match Tool::parse(&s) {
            Some(t) => Some(t),
            None => {
                self.not_one_of(&format!("{path}.{key}"), &s, &valid);
                None
            }
        }
    }

    /// Reads an npu level name.
    pub(crate) fn level(&mut self, m: &Map, key: &str, path: &str) -> Option<Level> {
        let s = self.str_in(m, key, path)?;
        let valid = names(&Level::ALL, Level::as_str);
        match Level::parse(&s) {
            Some(l) => Some(l),
            None => {
                self.not_one_of(&format!("{path}.{key}"), &s, &valid);
                None
            }
        }
    }

    /// Reads an npu export type (`db` or `text`).
    pub(crate) fn export_type(&mut self, m: &Map, key: &str, path: &str) -> Option<ExportType> {
        let s = self.str_in(m, key, path)?;
        let valid = names(&ExportType::ALL, ExportType::as_str);
        let parsed = ExportType::parse(&s);
        if parsed.is_none() {
            self.not_one_of(&format!("{path}.{key}"), &s, &valid);
        }
        parsed
    }

    /// Reads a `contents` list valid for `tool`.
    pub(crate) fn contents(
        &mut self,
        m: &Map,
        key: &str,
        path: &str,
        tool: Tool,
    ) -> Option<Vec<Content>> {
        let v = Self::entry(m, key)?;
        let path = format!("{path}.{key}");
        let valid = names(Content::valid_for(tool), Content::as_str);
        let Node::List(seq) = v else {
            self.wrong(
                &path,
                v,
                &format!("a list drawn from {}, e.g. [npu, cpu]", valid.join(", ")),
            );
            return None;
        };
        let mut out = Vec::new();
        let mut ok = true;
        for (i, item) in seq.iter().enumerate() {
            let ipath = format!("{path}[{i}]");
            let Some(s) = item.as_str() else {
                self.wrong(
                    &ipath,
                    item,
                    &format!("a content name, one of {}", valid.join(", ")),
                );
                ok = false;
                continue;
            };
            match Content::parse(s) {
                Some(c) if Content::valid_for(tool).contains(&c) => out.push(c),
                Some(_) => {
                    self.err(
                        &ipath,
                        format!(
                            "'{s}' is not valid for the {} tool; valid contents: {}",
                            tool.as_str(),
                            valid.join(", ")
                        ),
                    );
                    ok = false;
                }
                None => {
                    self.not_one_of(&ipath, s, &valid);
                    ok = false;
                }
            }
        }
        ok.then_some(out)
    }
}
