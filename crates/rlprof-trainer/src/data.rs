//! Prompts: built-in task generators (multi-digit arithmetic, countdown) and verl-style JSONL
//! datasets (`prompt`, `reward_model.ground_truth`, `data_source`).

use crate::config::{DataConfig, TaskKind};
use crate::error::{Result, TrainerError};
use rand::{Rng, SeedableRng, rngs::StdRng};
use serde_json::Value;
use std::path::Path;

/// `data_source` of the built-in arithmetic task.
pub const ARITHMETIC: &str = "rlprof/arithmetic";
/// `data_source` of the built-in countdown task.
pub const COUNTDOWN: &str = "rlprof/countdown";

/// One prompt with what its reward needs.
#[derive(Debug, Clone, PartialEq)]
pub struct Prompt {
    /// The prompt text.
    pub text: String,
    /// The reference answer (`reward_model.ground_truth`).
    pub ground_truth: String,
    /// Selects the reward function.
    pub data_source: String,
    /// A full reference response for the supervised warm-up (built-in tasks), when known.
    pub solution: Option<String>,
}

/// Where prompts come from.
pub enum Source {
    /// A built-in generator (endless, seeded).
    Task {
        /// Which task.
        kind: TaskKind,
        /// Operand digits.
        digits: u32,
        /// Generator state.
        rng: StdRng,
    },
    /// Rows of a dataset file, cycled in a seeded shuffled order.
    Rows {
        /// The rows.
        rows: Vec<Prompt>,
        /// Next index.
        next: usize,
        /// Shuffle state.
        rng: StdRng,
    },
}

impl Source {
    /// The training prompts of `cfg` (built-in task when no files are given).
    pub fn train(cfg: &DataConfig, seed: u64) -> Result<Source> {
        Source::new(&cfg.train_files, cfg, seed)
    }

    /// The validation prompts (a different seed of the built-in task).
    pub fn val(cfg: &DataConfig, seed: u64) -> Result<Source> {
        Source::new(&cfg.val_files, cfg, seed ^ 0x005e_ed0f_7e57)
    }

    fn new(files: &[std::path::PathBuf], cfg: &DataConfig, seed: u64) -> Result<Source> {
        let rng = StdRng::seed_from_u64(seed);
        if files.is_empty() {
            return Ok(Source::Task {
                kind: cfg.task,
                digits: cfg.digits,
                rng,
            });
        }
        let mut rows = Vec::new();
        for f in files {
            rows.extend(load_rows(f)?);
        }
        if rows.is_empty() {
            return Err(TrainerError::Data {
                path: files[0].clone(),
                message: "dataset has no rows".into(),
            });
        }
        Ok(Source::Rows { rows, next: 0, rng })
    }

    /// The next `n` prompts.
    pub fn next_batch(&mut self, n: usize) -> Vec<Prompt> {
        (0..n).map(|_| self.next_prompt()).collect()
    }

    fn next_prompt(&mut self) -> Prompt {
        match self {
            Source::Task { kind, digits, rng } => match kind {
                TaskKind::Arithmetic => arithmetic(rng, *digits),
                TaskKind::Countdown => countdown(rng),
            },
            Source::Rows { rows, next, rng } => {
                if *next == 0 {
                    shuffle(rows, rng);
                }
                let p = rows[*next].clone();
                *next = (*next + 1) % rows.len();
                p
            }
        }
    }
}

fn shuffle(rows: &mut [Prompt], rng: &mut StdRng) {
    for i in (1..rows.len()).rev() {
        let j = rng.random_range(0..=i);
        rows.swap(i, j);
    }
}

/// `a+b=` with `digits`-digit operands; the answer is the sum.
pub fn arithmetic(rng: &mut StdRng, digits: u32) -> Prompt {
    let hi = 10u64.pow(digits);
    let (a, b) = (rng.random_range(0..hi), rng.random_range(0..hi));
    Prompt {
        text: format!("{a}+{b}="),
        ground_truth: (a + b).to_string(),
        data_source: ARITHMETIC.into(),
        solution: Some((a + b).to_string()),
    }
}

/// Three numbers and a target reachable with `+ - *` using each number once: `3,5,7:22=`.
pub fn countdown(rng: &mut StdRng) -> Prompt {
    let nums: Vec<i64> = (0..3).map(|_| rng.random_range(1..10)).collect();
    let ops = ['+', '-', '*'];
    let expr = format!(
        "{}{}{}{}{}",
        nums[0],
        ops[rng.random_range(0..3)],
        nums[1],
        ops[rng.random_range(0..3)],
        nums[2]
    );
    let target = eval_expr(&expr).unwrap_or(0);
    Prompt {
        text: format!("{},{},{}:{}=", nums[0], nums[1], nums[2], target),
        ground_truth: target.to_string(),
        data_source: COUNTDOWN.into(),
        solution: Some(expr),
    }
}

/// Evaluates `+ - *` over non-negative integers with the usual precedence (no parentheses).
pub fn eval_expr(expr: &str) -> Option<i64> {
    let mut terms: Vec<i64> = Vec::new();
    let mut signs: Vec<i64> = vec![1];
    let mut cur: Option<i64> = None;
    let mut product: Option<i64> = None;
    let flush = |cur: &mut Option<i64>, product: &mut Option<i64>| -> Option<()> {
        let v = cur.take()?;
        *product = Some(product.map_or(Some(v), |p| p.checked_mul(v))?);
        Some(())
    };
    for c in expr.chars() {
        match c {
            '0'..='9' => {
                let d = c as i64 - '0' as i64;
                cur = Some(cur.unwrap_or(0).checked_mul(10)?.checked_add(d)?);
            }
            '*' => flush(&mut cur, &mut product)?,
            '+' | '-' => {
                flush(&mut cur, &mut product)?;
                terms.push(product.take()?);
                signs.push(if c == '+' { 1 } else { -1 });
            }
            _ => return None,
        }
    }
    flush(&mut cur, &mut product)?;
    terms.push(product?);
    terms
        .iter()
        .zip(&signs)
        .try_fold(0i64, |acc, (t, s)| acc.checked_add(t * s))
}

/// Reads a verl-style dataset: JSONL (one object per line) or parquet (verl's own preprocessing
/// output, e.g. `examples/data_preprocess/gsm8k.py`), by extension.
pub fn load_rows(path: &Path) -> Result<Vec<Prompt>> {
    if path.extension().is_some_and(|e| e == "parquet") {
        load_parquet(path)
    } else {
        load_jsonl(path)
    }
}

/// Reads a verl-style JSONL file. `prompt` may be a string or a list of chat messages (their
/// `content`s are joined); errors name the file and line.
pub fn load_jsonl(path: &Path) -> Result<Vec<Prompt>> {
    let text = std::fs::read_to_string(path).map_err(|e| TrainerError::io(path, e))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let err = |m: String| TrainerError::Data {
            path: path.into(),
            message: format!("line {}: {m}", i + 1),
        };
        let v: Value = serde_json::from_str(line).map_err(|e| err(e.to_string()))?;
        out.push(row_to_prompt(&v).map_err(err)?);
    }
    Ok(out)
}

/// Reads a verl-style parquet file through the `parquet` crate's row reader; errors name the
/// file and row.
pub fn load_parquet(path: &Path) -> Result<Vec<Prompt>> {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let err = |m: String| TrainerError::Data {
        path: path.into(),
        message: m,
    };
    let file = std::fs::File::open(path).map_err(|e| TrainerError::io(path, e))?;
    let reader =
        SerializedFileReader::new(file).map_err(|e| err(format!("not a parquet file: {e}")))?;
    let rows = reader
        .get_row_iter(None)
        .map_err(|e| err(format!("unreadable rows: {e}")))?;
    let mut out = Vec::new();
    for (i, row) in rows.enumerate() {
        let row = row.map_err(|e| err(format!("row {i}: {e}")))?;
        let v = row.to_json_value();
        out.push(row_to_prompt(&v).map_err(|m| err(format!("row {i}: {m}")))?);
    }
    Ok(out)
}

/// One dataset row (as JSON) to a prompt.
fn row_to_prompt(v: &Value) -> std::result::Result<Prompt, String> {
    let text = match v.get("prompt") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(msgs)) => msgs
            .iter()
            .filter_map(|m| m.get("content").and_then(|c| c.as_str()))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => return Err("missing 'prompt' (string or list of messages)".into()),
    };
    let gt = match v.pointer("/reward_model/ground_truth") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => return Err("missing 'reward_model.ground_truth'".into()),
    };
    let source = v
        .get("data_source")
        .and_then(|s| s.as_str())
        .unwrap_or("unknown")
        .to_string();
    Ok(Prompt {
        text,
        ground_truth: gt,
        data_source: source,
        solution: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expressions_follow_precedence() {
        assert_eq!(eval_expr("3+5*7"), Some(38));
        assert_eq!(eval_expr("3*5-7"), Some(8));
        assert_eq!(eval_expr("9-2-3"), Some(4));
        assert_eq!(eval_expr("3+"), None);
        assert_eq!(eval_expr("a"), None);
    }

    #[test]
    fn countdown_targets_are_reachable() {
        let mut rng = StdRng::seed_from_u64(3);
        for _ in 0..50 {
            let p = countdown(&mut rng);
            let (nums, target) = p.text.trim_end_matches('=').split_once(':').unwrap();
            assert_eq!(target, p.ground_truth);
            assert_eq!(nums.split(',').count(), 3);
        }
    }

    #[test]
    fn jsonl_rows_load_and_errors_name_the_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("d.jsonl");
        std::fs::write(
            &p,
            r#"{"prompt":[{"role":"user","content":"1+1="}],"reward_model":{"ground_truth":"2"},"data_source":"x"}
{"prompt":"2+2=","reward_model":{"ground_truth":4}}
"#,
        )
        .unwrap();
        let rows = load_jsonl(&p).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].text, "1+1=");
        assert_eq!(rows[1].ground_truth, "4");
        std::fs::write(&p, "{\"prompt\":\"x\"}\n").unwrap();
        let e = load_jsonl(&p).unwrap_err().to_string();
        assert!(e.contains("line 1") && e.contains("ground_truth"), "{e}");
    }
}

#[cfg(test)]
mod parquet_tests {
    use super::*;

    /// `tests/data/gsm8k_sample.parquet` was written by pyarrow in the layout of verl's
    /// `examples/data_preprocess/gsm8k.py` (prompt = list of {content, role} structs,
    /// reward_model = {ground_truth, style}, plus ability / extra_info columns).
    #[test]
    fn verl_parquet_rows_load() {
        let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/gsm8k_sample.parquet");
        let rows = load_rows(&p).unwrap();
        assert_eq!(rows.len(), 3);
        assert!(
            rows[0].text.starts_with("Natalia sold 48 clips"),
            "{:?}",
            rows[0]
        );
        assert_eq!(rows[0].ground_truth, "72");
        assert_eq!(rows[0].data_source, "openai/gsm8k");
        assert_eq!(rows[2].data_source, "rlprof/arithmetic");
        let e = load_rows(Path::new("Cargo.toml.parquet"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("Cargo.toml.parquet"), "{e}");
        let bad = std::env::temp_dir().join(format!("rlprof-bad-{}.parquet", std::process::id()));
        std::fs::write(&bad, b"not parquet").unwrap();
        let e = load_rows(&bad).unwrap_err().to_string();
        assert!(e.contains("not a parquet file"), "{e}");
        let _ = std::fs::remove_file(bad);
    }
}
